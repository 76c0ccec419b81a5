#!/usr/bin/env python3
"""A random Qwen3-8B-shaped target and a random z-lab Qwen3-8B-DFlash-b16-shaped drafter on disk, in the
public HF layouts, for the served generation benchmark (tools/gpu-gen-serve-bench.sh). Random weights
accept nothing, so the figures say what the service costs, not what a trained drafter gains.

Target: Qwen3ForCausalLM, 36 layers, hidden 4096, 32/8 heads of 128, SwiGLU 12,288, vocab 151,936,
untied, BF16, sharded safetensors with model.safetensors.index.json. Drafter: DFlashDraftModel, 5
layers of the target's width, taps [1, 9, 17, 25, 33], block 16. Tokenizer: models/pylm's byte-level
BPE grown to the target's vocabulary by merges of its own tokens (a valid BPE: every merge's result is
in the vocabulary), so every id the target can emit detokenizes; the benchmark sends token-id prompts.

    python3 tools/make_large_qwen3_checkpoint.py --target /tmp/qwen3-8b --drafter /tmp/qwen3-8b-dflash
    (--layers / --drafter-layers shrink it for a dry run on a CPU machine)
"""
import argparse
import json
import math
import os
import shutil

import torch
from safetensors.torch import save_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
H, INTER, HEADS, KV, HD, VOCAB = 4096, 12288, 32, 8, 128, 151936


def grow_tokenizer(out, vocab_size):
    src = os.path.join(ROOT, "models/pylm")
    with open(os.path.join(src, "tokenizer.json")) as f:
        tok = json.load(f)
    vocab, merges = tok["model"]["vocab"], tok["model"]["merges"]
    specials = {t["content"] for t in tok["added_tokens"]}
    base = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1]) if t not in specials]
    side = int(math.sqrt(vocab_size)) + 64
    for a in base[:side]:
        for b in base[:side]:
            if len(vocab) >= vocab_size:
                break
            if a + b not in vocab:
                vocab[a + b] = len(vocab)
                merges.append([a, b])
    if len(vocab) != vocab_size:
        raise SystemExit(f"grew the tokenizer to {len(vocab)} tokens, not {vocab_size}")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "tokenizer.json"), "w") as f:
        json.dump(tok, f, ensure_ascii=False)
    shutil.copy(os.path.join(src, "tokenizer_config.json"), out)


def save_sharded(tensors, out, shard_bytes=4 << 30):
    index, shard, size, n = {}, {}, 0, 0
    names = list(tensors)

    def flush():
        nonlocal shard, size, n
        if shard:
            n += 1
            name = f"model-{n:05d}.safetensors"
            save_file(shard, os.path.join(out, name), metadata={"format": "pt"})
            for k in shard:
                index[k] = name
            shard, size = {}, 0

    for k in names:
        t = tensors[k]
        if size + t.numel() * t.element_size() > shard_bytes:
            flush()
        shard[k] = t.contiguous().cpu()
        size += t.numel() * t.element_size()
    flush()
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": index}, f, indent=1)


def layer(w, p, gen, dev):
    def r(*shape):
        return (torch.randn(*shape, generator=gen, device=dev) / math.sqrt(shape[-1])).to(torch.bfloat16)

    def norm(n):
        return (1 + 0.1 * torch.randn(n, generator=gen, device=dev)).to(torch.bfloat16)

    w[p + "input_layernorm.weight"] = norm(H)
    w[p + "post_attention_layernorm.weight"] = norm(H)
    w[p + "self_attn.q_proj.weight"] = r(HEADS * HD, H)
    w[p + "self_attn.k_proj.weight"] = r(KV * HD, H)
    w[p + "self_attn.v_proj.weight"] = r(KV * HD, H)
    w[p + "self_attn.o_proj.weight"] = r(H, HEADS * HD)
    w[p + "self_attn.q_norm.weight"] = norm(HD)
    w[p + "self_attn.k_norm.weight"] = norm(HD)
    w[p + "mlp.gate_proj.weight"] = r(INTER, H)
    w[p + "mlp.up_proj.weight"] = r(INTER, H)
    w[p + "mlp.down_proj.weight"] = r(H, INTER)


def common_config(layers):
    return {"hidden_size": H, "intermediate_size": INTER, "num_hidden_layers": layers, "num_attention_heads": HEADS,
            "num_key_value_heads": KV, "head_dim": HD, "hidden_act": "silu", "rms_norm_eps": 1e-6,
            "rope_theta": 1000000.0, "max_position_embeddings": 40960, "vocab_size": VOCAB, "attention_bias": False,
            "tie_word_embeddings": False, "torch_dtype": "bfloat16", "model_type": "qwen3",
            "use_sliding_window": False, "sliding_window": None}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", required=True)
    ap.add_argument("--drafter")
    ap.add_argument("--layers", type=int, default=36)
    ap.add_argument("--drafter-layers", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    gen = torch.Generator(device=dev).manual_seed(a.seed)
    os.makedirs(a.target, exist_ok=True)
    grow_tokenizer(a.target, VOCAB)
    w = {"model.embed_tokens.weight": torch.randn(VOCAB, H, generator=gen, device=dev).to(torch.bfloat16),
         "model.norm.weight": torch.ones(H, device=dev, dtype=torch.bfloat16),
         "lm_head.weight": (torch.randn(VOCAB, H, generator=gen, device=dev) / math.sqrt(H)).to(torch.bfloat16)}
    for i in range(a.layers):
        layer(w, f"model.layers.{i}.", gen, dev)
    save_sharded(w, a.target)
    cfg = common_config(a.layers)
    cfg.update({"architectures": ["Qwen3ForCausalLM"], "eos_token_id": 0, "bos_token_id": None,
                "layer_types": ["full_attention"] * a.layers, "max_window_layers": a.layers})
    with open(os.path.join(a.target, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    del w
    if not a.drafter:
        return
    os.makedirs(a.drafter, exist_ok=True)
    d = {"fc.weight": (torch.randn(H, 5 * H, generator=gen, device=dev) / math.sqrt(5 * H)).to(torch.bfloat16),
         "hidden_norm.weight": torch.ones(H, device=dev, dtype=torch.bfloat16),
         "norm.weight": torch.ones(H, device=dev, dtype=torch.bfloat16)}
    for i in range(a.drafter_layers):
        layer(d, f"layers.{i}.", gen, dev)
    taps = [round(1 + i * (a.layers - 4) / (a.drafter_layers - 1)) for i in range(a.drafter_layers)]
    save_sharded(d, a.drafter)
    dcfg = common_config(a.drafter_layers)
    dcfg.update({"architectures": ["DFlashDraftModel"], "layer_types": ["full_attention"] * a.drafter_layers,
                 "block_size": 16, "num_target_layers": a.layers, "is_causal": False,
                 "dflash_config": {"mask_token_id": 3, "target_layer_ids": taps}})
    with open(os.path.join(a.drafter, "config.json"), "w") as f:
        json.dump(dcfg, f, indent=2)
    print(json.dumps({"target": a.target, "drafter": a.drafter, "taps": taps, "vocab": VOCAB}))


if __name__ == "__main__":
    main()
