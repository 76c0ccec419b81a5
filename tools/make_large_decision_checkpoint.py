#!/usr/bin/env python3
"""A random Laya-compat DecisionModel with the real ModernBERT-large compat shape (28 layers, d 1024, 16
heads, GeGLU 2624, vocab 50,368, 2 head layers), F16, in the Laya checkpoint layout, for serving
benchmarks (tools/gpu-serve-bench.sh). Special ids are those of the decision-tiny fixture's tokenizer,
which is copied alongside, so the service starts with it (benchmarks send pre-tokenized /v1/score requests).
Also writes a pool of W1-shaped questions: 136 tokens, one `choice` question with 4 options.
    python3 tools/make_large_decision_checkpoint.py --out DIR [--pool FILE --questions N]"""
import argparse
import json
import os
import random

import torch
from safetensors.torch import save_file

D, HEADS, INTER, LAYERS, VOCAB, HEAD_LAYERS = 1024, 16, 2624, 28, 50368, 2
CLS, SEP, PAD, MASK = 1, 2, 3, 4


def tensors(gen):
    r = lambda *s, scale=1.0: (torch.randn(*s, generator=gen) * scale).half()
    t = {"encoder.embeddings.tok_embeddings.weight": r(VOCAB, D), "encoder.embeddings.norm.weight": r(D, scale=0.1) + 1,
         "encoder.final_norm.weight": r(D, scale=0.1) + 1, "type_emb.weight": r(3, D),
         "temperature": torch.tensor([1.6369, 1.2514, 1.9834])}
    for i in range(LAYERS):
        p = f"encoder.layers.{i}."
        if i > 0:
            t[p + "attn_norm.weight"] = r(D, scale=0.1) + 1
        t[p + "attn.Wqkv.weight"] = r(3 * D, D, scale=D ** -0.5)
        t[p + "attn.Wo.weight"] = r(D, D, scale=D ** -0.5)
        t[p + "mlp_norm.weight"] = r(D, scale=0.1) + 1
        t[p + "mlp.Wi.weight"] = r(2 * INTER, D, scale=D ** -0.5)
        t[p + "mlp.Wo.weight"] = r(D, INTER, scale=INTER ** -0.5)
    for l in range(HEAD_LAYERS):
        p = f"head.layers.{l}."
        t[p + "self_attn.in_proj_weight"] = r(3 * D, D, scale=D ** -0.5)
        t[p + "self_attn.in_proj_bias"] = r(3 * D, scale=0.02)
        t[p + "self_attn.out_proj.weight"] = r(D, D, scale=D ** -0.5)
        t[p + "self_attn.out_proj.bias"] = r(D, scale=0.02)
        t[p + "linear1.weight"] = r(4 * D, D, scale=D ** -0.5)
        t[p + "linear1.bias"] = r(4 * D, scale=0.02)
        t[p + "linear2.weight"] = r(D, 4 * D, scale=(4 * D) ** -0.5)
        t[p + "linear2.bias"] = r(D, scale=0.02)
        for n in ("norm1", "norm2"):
            t[p + n + ".weight"] = r(D, scale=0.1) + 1
            t[p + n + ".bias"] = r(D, scale=0.02)
    t["scorer.0.weight"], t["scorer.0.bias"] = r(D, scale=0.1) + 1, r(D, scale=0.02)
    t["scorer.1.weight"], t["scorer.1.bias"] = r(D, D, scale=D ** -0.5), r(D, scale=0.02)
    t["scorer.3.weight"], t["scorer.3.bias"] = r(1, D, scale=D ** -0.5), r(1, scale=0.02)
    t["act_head.0.weight"], t["act_head.0.bias"] = r(256, D + 4, scale=(D + 4) ** -0.5), r(256, scale=0.02)
    t["act_head.2.weight"], t["act_head.2.bias"] = r(2, 256, scale=256 ** -0.5), r(2, scale=0.02)
    return {k: v.contiguous() for k, v in t.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--pool")
    ap.add_argument("--questions", type=int, default=1024)
    args = ap.parse_args()
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    os.makedirs(os.path.join(args.out, "encoder"), exist_ok=True)
    save_file(tensors(torch.Generator().manual_seed(3)), os.path.join(args.out, "model.safetensors"))
    enc = {"architectures": ["ModernBertModel"], "model_type": "modernbert", "vocab_size": VOCAB, "hidden_size": D,
           "intermediate_size": INTER, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
           "global_attn_every_n_layers": 3, "local_attention": 128, "global_rope_theta": 160000.0,
           "local_rope_theta": 10000.0, "norm_eps": 1e-5, "norm_bias": False, "attention_bias": False,
           "mlp_bias": False, "hidden_activation": "gelu", "max_position_embeddings": 8192,
           "pad_token_id": PAD, "cls_token_id": CLS, "sep_token_id": SEP, "bos_token_id": CLS, "eos_token_id": SEP,
           "mask_token_id": MASK}
    with open(os.path.join(args.out, "encoder/config.json"), "w") as f:
        json.dump(enc, f, indent=2)
    with open(os.path.join(args.out, "rl_agent_config.json"), "w") as f:
        json.dump({"head_layers": HEAD_LAYERS, "max_len": 512, "head_max_len": 192,
                   "temperature": [1.6369, 1.2514, 1.9834]}, f)
    os.makedirs(os.path.join(args.out, "tokenizer"), exist_ok=True)
    # the decision-tiny fixture's tokenizer without its NFC normalizer: the GPU machine has no ICU headers, so a build
    # there cannot normalize, and the benchmark's requests are pre-tokenized anyway.
    with open(os.path.join(root, "tests/fixtures/decision-tiny/tokenizer/tokenizer.json")) as f:
        tokenizer = json.load(f)
    tokenizer["normalizer"] = None
    with open(os.path.join(args.out, "tokenizer/tokenizer.json"), "w") as f:
        json.dump(tokenizer, f)
    if args.pool:
        rng = random.Random(9)
        seqs = []
        for _ in range(args.questions):  # CLS question SEP (MASK option)x4 SEP state SEP = 136 tokens
            ids = [CLS] + [rng.randrange(5, VOCAB) for _ in range(12)] + [SEP]
            markers = []
            for _ in range(4):
                markers.append(len(ids))
                ids += [MASK] + [rng.randrange(5, VOCAB) for _ in range(3)]
            ids.append(SEP)
            ids += [rng.randrange(5, VOCAB) for _ in range(136 - len(ids) - 1)] + [SEP]
            assert len(ids) == 136
            seqs.append({"ids": ids, "markers": markers, "qtype": "choice"})
        with open(args.pool, "w") as f:
            json.dump({"sequences": seqs}, f)


if __name__ == "__main__":
    main()
