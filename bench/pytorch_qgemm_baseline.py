#!/usr/bin/env python3
"""What a PyTorch user would run instead of tandem's quantized GEMM (issue 14), on the matrices of
cuda_drafter_quant_bench --kernels (a Qwen3-8B-shaped drafter: q/o 4096x4096, k/v 1024x4096, gate_up
24576x4096, down 4096x12288) at 1, 16, 128 and 512 rows, BF16 rows:
  - dense: torch.matmul on the BF16 weight (cuBLAS);
  - int4: torch._weight_int4pack_mm (tinygemm), group-wise 4-bit with BF16 scales (group --group), the kernel
    torchao's int4 weight-only path runs;
  - int8: torch._weight_int8pack_mm, 8-bit with one scale per output column (PyTorch has no group-wise int8
    matmul, so it reads fewer scale bytes than tandem's int8).
Each launch reads its weight from HBM: the weights rotate through copies past 320 MB, as the study's do. Device
time per launch: CUDA events around each launch, median of --reps after warm-up. Each quantized result is checked
against the dense GEMM on the dequantized weight (max difference relative to the largest output), so a wrong
packing convention shows as a large error, not a fast time.
    python3 bench/pytorch_qgemm_baseline.py [--json FILE] [--rows 1,16,128,512] [--reps 30] [--group 64]"""
import argparse
import json
import statistics

import torch

SHAPES = [("q/o 4096x4096", 4096, 4096), ("k/v 1024x4096", 4096, 1024), ("gate_up 24576x4096", 4096, 24576),
          ("down 4096x12288", 12288, 4096)]
ROTATE_BYTES = 320 << 20


def copies(nbytes):
    return max(2, -(-ROTATE_BYTES // max(nbytes, 1)))


def median_us(fns, reps, warm=3):
    """Median device time of one launch, the launches cycling through fns (one per weight copy)."""
    for i in range(warm):
        fns[i % len(fns)]()
    torch.cuda.synchronize()
    us = []
    for i in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fns[i % len(fns)]()
        b.record()
        b.synchronize()
        us.append(a.elapsed_time(b) * 1e3)
    return statistics.median(us)


def rel_diff(got, want):
    big = want.float().abs().max().item()
    d = (got.float() - want.float()).abs().max().item()
    return d / big if big > 0 else d


def int4_pack(q_u4, inner_k_tiles=8):
    """tinygemm's packing of [n, k] codes 0..15; the argument's form changed in PyTorch 2.5 (uint8, two codes a
    byte) from int32 (one code an element)."""
    try:
        packed_u8 = (q_u4[:, ::2] << 4 | q_u4[:, 1::2]).to(torch.uint8)
        return torch._convert_weight_to_int4pack(packed_u8, inner_k_tiles)
    except (RuntimeError, TypeError):
        return torch._convert_weight_to_int4pack(q_u4.to(torch.int32), inner_k_tiles)


def study(name, k, cols, rows_list, reps, group, gen):
    out = []
    w = (torch.randn(cols, k, device="cuda", generator=gen) * 0.02).to(torch.bfloat16)
    # Group-wise symmetric int4 as tandem quantizes (tools/quantize_drafter.py): scale = max|w| / 7, q in -7..7.
    wg = w.float().reshape(cols, k // group, group)
    s4 = (wg.abs().amax(-1, keepdim=True) / 7).clamp_min(1e-8)
    q4 = torch.clamp(torch.round(wg / s4), -7, 7)
    s4 = s4.to(torch.bfloat16).float()
    w4 = (q4 * s4).reshape(cols, k).to(torch.bfloat16)  # the dequantized weight
    u4 = (q4 + 8).to(torch.int32).reshape(cols, k)
    # tinygemm: w = (u - 8) * scale + zero, per (group, column): zero 0 for a symmetric code.
    sz = torch.stack([s4.reshape(cols, k // group).t(), torch.zeros(k // group, cols, device="cuda")], -1)
    sz = sz.to(torch.bfloat16).contiguous()
    # Per-column int8 (PyTorch's only int8 weight matmul).
    s8 = (w.float().abs().amax(-1) / 127).clamp_min(1e-8)
    q8 = torch.clamp(torch.round(w.float() / s8[:, None]), -127, 127).to(torch.int8)
    s8 = s8.to(torch.bfloat16)
    w8 = (q8.float() * s8.float()[:, None]).to(torch.bfloat16)

    dense = [w] + [w.clone() for _ in range(copies(w.numel() * 2) - 1)]
    try:
        p4 = int4_pack(u4)
        int4 = [p4] + [p4.clone() for _ in range(copies(p4.numel() * p4.element_size()) - 1)]
        int4_error = None
    except Exception as e:  # noqa: BLE001 - an unsupported build is a result, not a crash
        int4, int4_error = [], f"{type(e).__name__}: {e}"[:300]
    int8 = [q8] + [q8.clone() for _ in range(copies(q8.numel()) - 1)]
    for rows in rows_list:
        x = (torch.randn(rows, k, device="cuda", generator=gen)).to(torch.bfloat16)
        e = {"shape": name, "k": k, "cols": cols, "rows": rows, "kernels": []}
        ref = torch.matmul(x, w4.t())
        us = median_us([lambda d=d: torch.matmul(x, d.t()) for d in dense], reps)
        e["kernels"].append({"kernel": "torch bf16 matmul", "median_us": us, "weight_bytes": w.numel() * 2})
        if int4:
            try:
                got = torch._weight_int4pack_mm(x, int4[0], group, sz)
                us = median_us([lambda p=p: torch._weight_int4pack_mm(x, p, group, sz) for p in int4], reps)
                e["kernels"].append({"kernel": "torch int4 tinygemm", "median_us": us,
                                     "weight_bytes": int4[0].numel() * int4[0].element_size() + sz.numel() * 2,
                                     "max_rel_diff": rel_diff(got, ref)})
            except Exception as ex:  # noqa: BLE001
                e["kernels"].append({"kernel": "torch int4 tinygemm", "error": f"{type(ex).__name__}: {ex}"[:300]})
        else:
            e["kernels"].append({"kernel": "torch int4 tinygemm", "error": int4_error})
        try:
            got = torch._weight_int8pack_mm(x, q8, s8)
            us = median_us([lambda q=q: torch._weight_int8pack_mm(x, q, s8) for q in int8], reps)
            e["kernels"].append({"kernel": "torch int8 per-column", "median_us": us,
                                 "weight_bytes": q8.numel() + s8.numel() * 2,
                                 "max_rel_diff": rel_diff(got, torch.matmul(x, w8.t()))})
        except Exception as ex:  # noqa: BLE001
            e["kernels"].append({"kernel": "torch int8 per-column", "error": f"{type(ex).__name__}: {ex}"[:300]})
        out.append(e)
        line = f"{name:20} {rows:4} rows:" + "".join(
            f"  {q['kernel']} {q['median_us']:.1f} us" if "median_us" in q else f"  {q['kernel']} failed"
            for q in e["kernels"])
        print(line, flush=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json")
    ap.add_argument("--rows", default="1,16,128,512")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--group", type=int, default=64)
    a = ap.parse_args()
    gen = torch.Generator(device="cuda").manual_seed(7)
    rows = [int(r) for r in a.rows.split(",")]
    result = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(), "group": a.group, "kernels": []}
    for name, k, cols in SHAPES:
        result["kernels"] += study(name, k, cols, rows, a.reps, a.group, gen)
        torch.cuda.empty_cache()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
