#!/usr/bin/env python3
"""Each side of tools/gpu-ab-kernel.sh against "old", as two Markdown tables.

  ab_compare.py OUT [REGEX]

Reads OUT/ab-SIDE.out (a side's stdout) and every JSON document in it that starts a line: cuda_drafter_quant_bench --kernels ({"kernels": [...]}: median us a launch per matrix, rows and kernel;
REGEX keeps the kernels whose name matches) and cuda_spec_bench ({"drafters": ...}: draft, settle and verify
ms and tokens/s per drafter, batch and acceptance). Sides: new first, old last, the candidates between.
"""
import glob
import json
import os
import re
import sys


def documents(text):
    """Every JSON object that starts at the beginning of a line of text."""
    decoder = json.JSONDecoder()
    for m in re.finditer(r"^\{", text, re.M):
        try:
            doc, _ = decoder.raw_decode(text[m.start():])
        except ValueError:
            continue
        if isinstance(doc, dict):
            yield doc


def read_side(out, side):
    kernels, rounds = {}, {}
    path = os.path.join(out, f"ab-{side}.out")
    if os.path.exists(path):
        with open(path, errors="replace") as f:
            text = f.read()
        for doc in documents(text):
            shapes = doc.get("kernels")
            for shape in shapes if isinstance(shapes, list) else []:
                for k in shape.get("kernels", []):
                    key = (f"{shape.get('cols')}x{shape.get('k')}", shape.get("rows"), k.get("kernel"))
                    kernels[key] = k.get("median_us")
            for name, d in (doc.get("drafters") or {}).items():
                for batch, runs in d.get("batches", {}).items():
                    for acc, r in runs.items():
                        if "draft_ms" in r:
                            rounds[(name, batch, acc)] = r
    return kernels, rounds


def main():
    out = sys.argv[1]
    keep = re.compile(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2] else None
    names = sorted(re.sub(r"^ab-|\.out$", "", os.path.basename(p)) for p in glob.glob(os.path.join(out, "ab-*.out")))
    names = [n for n in names if n not in ("new", "old")]
    sides = ["new"] + names + ["old"]
    data = {s: read_side(out, s) for s in sides}
    others = [s for s in sides if s != "old"]
    old_k, old_r = data["old"]

    def cell(v, base):
        if v is None:
            return "-"
        text = f"{v:.3f}" if abs(v) < 100 else f"{v:.1f}"
        return f"{text} ({v / base - 1:+.1%})" if base else text

    keys = [k for k in old_k if keep is None or keep.search(k[2] or "")]
    if keys:
        print("| matrix | rows | kernel | old us | " + " | ".join(others) + " |")
        print("|---|---|---|---|" + "---|" * len(others))
        for key in keys:
            base = old_k[key]
            row = [cell(data[s][0].get(key), base) for s in others]
            print(f"| {key[0]} | {key[1]} | {key[2]} | {base:.3f} | " + " | ".join(row) + " |")
    if old_r:
        print()
        print("| drafter | batch | acceptance | what | old | " + " | ".join(others) + " |")
        print("|---|---|---|---|---|" + "---|" * len(others))
        for key, r in old_r.items():
            for what in ("draft_ms", "settle_ms", "verify_ms", "tokens_per_s"):
                base = r.get(what)
                row = [cell(data[s][1].get(key, {}).get(what), base) for s in others]
                print(f"| {key[0]} | {key[1]} | {key[2]} | {what} | {base:.3f} | " + " | ".join(row) + " |")
    if not keys and not old_r:
        print("ab_compare: no kernel or round figures in the old side's output")


if __name__ == "__main__":
    main()
