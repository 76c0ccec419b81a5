#!/usr/bin/env python3
"""Quantizes a z-lab DFlash v1/v2 drafter directory into tandem's group-wise int8/int4 layout
(docs/quantization.md): each of the drafter's own GEMM weights (fc, the layers' q/k/v/o and gate/up/down
projections, v2's kernel projections and the selector's hidden projection) becomes <module>.qweight (I8
[out, in], or U8 [out, in/2] with two int4 codes per byte, column 2j in the low nibble, stored q + 8) and
<module>.scales ([out, in/group], F16 or BF16); config.json gains a quantization_config. Norms, base
kernels, codebooks and everything else are copied unchanged; the target's LM head and embedding are never
part of a drafter's quantized modules. The algorithm is the one engine/models/dflash/dflash_quant.cpp
runs at load (quantize_matrix), bit for bit:
    amax = max |w| over the group (f32); s = to_scale_dtype(amax / qmax)   (qmax 127 or 7)
    q = 0 if s == 0 else clamp(round_half_even(w / s), -qmax, qmax)       (f32 division)
Needs torch only (safetensors files are read and written here, without the safetensors package):
    python3 tools/quantize_drafter.py IN_DIR OUT_DIR --bits 4 [--group-size 64] [--scale-dtype float16]"""
import argparse
import json
import os
import re
import shutil
import struct

import torch

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "I8": torch.int8,
          "U8": torch.uint8, "I32": torch.int32, "I64": torch.int64}
NAMES = {v: k for k, v in DTYPES.items()}
# The drafter's own GEMM modules (tandem's quantizable_modules derives the same set from its graphs).
QUANTIZABLE = re.compile(r"^(fc|layers\.\d+\.self_attn\.[qkvo]_proj|layers\.\d+\.mlp\.(gate|up|down)_proj|"
                         r"layers\.\d+\.(attention|mlp)_conv\.kernel_projection|"
                         r"candidate_selector\.hidden_projection)$")


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        begin, end = e["data_offsets"]
        buf = bytearray(data[base + begin:base + end])
        t = torch.frombuffer(buf, dtype=DTYPES[e["dtype"]]) if buf else torch.empty(0, dtype=DTYPES[e["dtype"]])
        out[name] = t.reshape(e["shape"]).clone()
    return out


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        raw = (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def read_dir(d):
    index = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(os.path.join(d, "model.safetensors")):
        return read_safetensors(os.path.join(d, "model.safetensors"))
    with open(index) as f:
        shards = sorted(set(json.load(f)["weight_map"].values()))
    out = {}
    for s in shards:
        out.update(read_safetensors(os.path.join(d, s)))
    return out


def quantize(w, bits, group, scale_dtype):
    """w [n, k] -> (codes, scales) as tandem stores them."""
    qmax = 127 if bits == 8 else 7
    n, k = w.shape
    if k % group:
        raise SystemExit(f"group size {group} does not divide the {k} in-features of a [{n}, {k}] weight")
    g = w.float().reshape(n, k // group, group)
    amax = g.abs().amax(-1)
    scales = (amax / qmax).to(scale_dtype)
    s = scales.float()[..., None]
    q = torch.round(g / torch.where(s == 0, torch.ones_like(s), s))
    q = torch.where(s == 0, torch.zeros_like(q), q).clamp(-qmax, qmax).to(torch.int32).reshape(n, k)
    if bits == 8:
        return q.to(torch.int8), scales
    u = (q + 8).to(torch.uint8)
    return (u[:, 0::2] | (u[:, 1::2] << 4)).to(torch.uint8), scales


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--bits", type=int, choices=[4, 8], required=True)
    ap.add_argument("--group-size", type=int, choices=[32, 64, 128], default=64)
    ap.add_argument("--scale-dtype", choices=["float16", "bfloat16"], default="float16")
    a = ap.parse_args()
    scale_dtype = torch.float16 if a.scale_dtype == "float16" else torch.bfloat16
    with open(os.path.join(a.src, "config.json")) as f:
        cfg = json.load(f)
    if "quantization_config" in cfg:
        raise SystemExit(f"{a.src}/config.json already has a quantization_config")
    tensors = read_dir(a.src)
    out, modules = {}, []
    for name, t in sorted(tensors.items()):
        module = name[:-len(".weight")] if name.endswith(".weight") else None
        if module is not None and QUANTIZABLE.match(module) and t.dim() == 2:
            codes, scales = quantize(t, a.bits, a.group_size, scale_dtype)
            out[module + ".qweight"] = codes
            out[module + ".scales"] = scales
            modules.append(module)
        else:
            out[name] = t
    if not modules:
        raise SystemExit(f"{a.src}: no quantizable module found")
    cfg["quantization_config"] = {"quant_method": "tandem-groupwise", "bits": a.bits, "group_size": a.group_size,
                                  "scale_dtype": a.scale_dtype, "modules": modules}
    os.makedirs(a.dst, exist_ok=True)
    with open(os.path.join(a.dst, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    write_safetensors(os.path.join(a.dst, "model.safetensors"), out)
    for extra in ("eval.json", "training.json", "generation_config.json"):
        if os.path.exists(os.path.join(a.src, extra)):
            shutil.copy(os.path.join(a.src, extra), os.path.join(a.dst, extra))
    print(json.dumps({"modules": len(modules), "bits": a.bits, "group_size": a.group_size,
                      "scale_dtype": a.scale_dtype, "out": a.dst}))


if __name__ == "__main__":
    main()
