#!/usr/bin/env python3
"""The acceptance length of the shipped drafters at each weight format (issue 14), with tandem's own engine.

For each drafter (default: models/pylm-dflash and models/pylm-dflash2), its eval.json's held-out prompts run
through `tandem generate` (CPU backend, FP32, greedy, EOS ignored, eval.json's max_tokens) as plain decoding
and then speculatively at each block size and drafter format (none: the float checkpoint; int8 / int4: quantized
at load, docs/quantization.md). Every speculative output must equal plain greedy decoding token for token
(lossless; exit status 1 otherwise). The mean acceptance length is eval.json's: committed tokens per round
over all rounds of all prompts. Prints a JSON summary on stdout and, with --markdown, the BENCHMARKS.md table.

    python3 bench/drafter_acceptance.py [--tandem build/launch/tandem] [--blocks 4,8,16] \\
        [--formats none,int8,int4] [--threads 2] [--markdown] [DRAFTER_DIR ...]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def generate(tandem, target, prompt_file, max_tokens, threads, extra):
    cmd = [tandem, "generate", "--target", target, "--prompt-file", prompt_file, "--max-tokens", str(max_tokens),
           "--ignore-eos", "--backend", "cpu", "--threads", str(threads)] + extra
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"drafter_acceptance: {' '.join(cmd)} failed ({run.returncode}):\n{run.stderr}{run.stdout}")
    return json.loads(run.stdout[run.stdout.index("{"):])


def measure(args, drafter):
    with open(os.path.join(drafter, "eval.json")) as f:
        ev = json.load(f)
    target = os.path.join(ROOT, ev["target"])
    out = {"drafter": os.path.relpath(drafter, ROOT), "prompts": len(ev["prompts"]), "max_tokens": ev["max_tokens"],
           "reference_loop": ev["mean_acceptance"], "formats": {}}
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("".join(",".join(map(str, p)) + "\n" for p in ev["prompts"]))
        prompt_file = f.name
    try:
        plain = generate(args.tandem, target, prompt_file, ev["max_tokens"], args.threads, [])
        want = [r["tokens"] for r in plain["requests"]]
        for fmt in args.formats:
            rows = {}
            for block in args.blocks:
                t0 = time.monotonic()
                got = generate(args.tandem, target, prompt_file, ev["max_tokens"], args.threads,
                               ["--drafter", drafter, "--drafter-quantization", fmt, "--block", str(block)])
                lossless = [r["tokens"] for r in got["requests"]] == want
                lengths = [n for r in got["requests"] for n in r["accept_lengths"]]
                rows[str(block)] = {"mean_acceptance": sum(lengths) / len(lengths), "rounds": len(lengths),
                                    "committed": sum(lengths), "lossless": lossless,
                                    "seconds": round(time.monotonic() - t0, 1)}
                print(f"{out['drafter']} {fmt} block {block}: {rows[str(block)]}", file=sys.stderr)
            out["formats"][fmt] = rows
    finally:
        os.unlink(prompt_file)
    return out


def markdown(results, blocks):
    lines = ["| drafter | format | " + " | ".join(f"block {b}" for b in blocks) + " | lossless |",
             "|---|---|" + "---|" * len(blocks) + "---|"]
    for r in results:
        base = r["formats"].get("none")
        for fmt, rows in r["formats"].items():
            cells = []
            for b in blocks:
                m = rows[str(b)]["mean_acceptance"]
                rel = f" ({100 * (m / base[str(b)]['mean_acceptance'] - 1):+.1f}%)" if base and fmt != "none" else ""
                cells.append(f"{m:.3f}{rel}")
            ok = all(rows[str(b)]["lossless"] for b in blocks)
            lines.append(f"| {os.path.basename(r['drafter'])} | {fmt} | " + " | ".join(cells) +
                         f" | {'yes' if ok else 'NO'} |")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("drafters", nargs="*",
                   default=[os.path.join(ROOT, "models", d) for d in ("pylm-dflash", "pylm-dflash2")])
    p.add_argument("--tandem", default=os.path.join(ROOT, "build", "launch", "tandem"))
    p.add_argument("--blocks", default="4,8,16")
    p.add_argument("--formats", default="none,int8,int4")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--markdown", action="store_true", help="also print the BENCHMARKS.md table on stderr")
    args = p.parse_args()
    args.blocks = [int(b) for b in args.blocks.split(",")]
    args.formats = args.formats.split(",")
    results = [measure(args, os.path.abspath(d)) for d in args.drafters]
    print(json.dumps(results, indent=2))
    if args.markdown:
        print(markdown(results, args.blocks), file=sys.stderr)
    lossy = [(r["drafter"], f, b) for r in results for f, rows in r["formats"].items() for b, row in rows.items()
             if not row["lossless"]]
    if lossy:
        sys.exit(f"drafter_acceptance: output differs from plain greedy decoding: {lossy}")


if __name__ == "__main__":
    main()
