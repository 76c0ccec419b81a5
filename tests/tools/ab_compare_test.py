#!/usr/bin/env python3
"""tools/ab_compare.py on the outputs of a three-sided tools/gpu-ab-kernel.sh run: JSON documents found between log
lines, sides ordered new, candidates, old, each figure against old's, kernel rows filtered, a side that printed
nothing shown as '-'. Run by ctest (ab_compare_test), so the script is right before GPU time is spent on it."""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def kernels(us16, us1):
    return {"kernels": [{"cols": 4096, "k": 4096, "rows": 16, "shape": "q",
                         "kernels": [{"kernel": "qgemm int4 tensor cores packed", "median_us": us16},
                                     {"kernel": "dense bf16 decode GEMM", "median_us": 30.0}]},
                        {"cols": 4096, "k": 4096, "rows": 1, "shape": "q",
                         "kernels": [{"kernel": "qgemm int4 tensor cores packed", "median_us": us1}]}]}


def spec(draft):
    run = {"draft_ms": draft, "settle_ms": 0.1, "verify_ms": 6.0, "tokens_per_s": 800.0}
    return {"plain_decode": {}, "drafters": {"v1-int4": {"batches": {"1": {"6.5": run}}}}}


def main():
    with tempfile.TemporaryDirectory() as out:
        sides = {"new": (kernels(11.0, 10.0), spec(1.0)), "lean": (kernels(13.2, 10.0), None),
                 "old": (kernels(12.0, 10.0), spec(1.25))}
        for side, (k, s) in sides.items():
            with open(os.path.join(out, f"ab-{side}.out"), "w") as f:
                f.write("lowering 12 ops took 0.1 s\n" + json.dumps(k, indent=2) + "\n")
                if s is not None:
                    f.write("a log line {not json}\n" + json.dumps(s, indent=2) + "\n")
        text = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "ab_compare.py"), out, "packed$"],
                              check=True, capture_output=True, text=True).stdout
    lines = text.splitlines()
    want = [
        "| matrix | rows | kernel | old us | new | lean |",
        "| 4096x4096 | 16 | qgemm int4 tensor cores packed | 12.000 | 11.000 (-8.3%) | 13.200 (+10.0%) |",
        "| 4096x4096 | 1 | qgemm int4 tensor cores packed | 10.000 | 10.000 (+0.0%) | 10.000 (+0.0%) |",
        "| v1-int4 | 1 | 6.5 | draft_ms | 1.250 | 1.000 (-20.0%) | - |",
    ]
    missing = [w for w in want if w not in lines]
    unwanted = [line for line in lines if "dense bf16" in line]
    if missing or unwanted:
        print("ab_compare_test: the tables lack\n  " + "\n  ".join(missing) + "\nor have\n  " + "\n  ".join(unwanted)
              + "\nin:\n" + text)
        return 1
    print("ab_compare_test: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
