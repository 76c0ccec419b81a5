#!/usr/bin/env python3
"""PyTorch baseline for bench/cuda_scorer/ (cuda_scorer_bench): what a user would run instead of tandem.

The Laya compat DecisionModel (scorer.md §1) on the ModernBERT-large shape with random weights: the HF
`ModernBertModel` encoder (28 layers, d 1024, 16 heads, GeGLU 2624, vocab 50,368, global attention every
third layer, local window 128, sdpa attention) and the PyTorch head (type embedding, two norm-first
`nn.TransformerEncoderLayer`s, the scorer LN -> Linear -> GELU -> Linear on the [MASK] rows, the act
head on the CLS row and the softmax statistics), fp16, eager, one GPU. Same workloads and JSON schema
as the C++ benchmark: W1 (one question of 4 options over a 96-token state, 136 tokens), W3 (ten
512-token questions in one batch), throughput at 512..16,384 tokens of 128-token questions. Each call
copies the inputs to the GPU and the outputs back, as tandem's runs do.

Needs torch and transformers (the GPU machine):
    python3 bench/pytorch_scorer_baseline.py [--json FILE] [--quick]
"""
import argparse
import json
import sys
import time

import torch
from torch import nn

D, HEADS, INTER, LAYERS, VOCAB = 1024, 16, 2624, 28, 50368
CLS, MASK = 50281, 50284


def make_encoder():
    from transformers import ModernBertConfig, ModernBertModel

    base = dict(vocab_size=VOCAB, hidden_size=D, intermediate_size=INTER, num_hidden_layers=LAYERS,
                num_attention_heads=HEADS, local_attention=128, norm_eps=1e-5, max_position_embeddings=8192,
                pad_token_id=50283, cls_token_id=CLS, sep_token_id=50282, bos_token_id=CLS, eos_token_id=50282)
    thetas = {"full_attention": 160000.0, "sliding_attention": 10000.0}
    # Global attention on every third layer, local (window 128) elsewhere: transformers 5 names each
    # layer's type and gives rope parameters per type; older releases take the period and two thetas.
    layouts = [
        dict(layer_types=["full_attention" if i % 3 == 0 else "sliding_attention" for i in range(LAYERS)],
             rope_parameters={k: {"rope_type": "default", "rope_theta": v} for k, v in thetas.items()}),
        dict(global_attn_every_n_layers=3, global_rope_theta=thetas["full_attention"],
             local_rope_theta=thetas["sliding_attention"]),
    ]
    errors = []
    for layout in layouts:
        try:
            cfg = ModernBertConfig(**base, **layout)
            break
        except TypeError as e:
            errors.append(str(e))
    else:
        raise RuntimeError("no ModernBertConfig layout fits this transformers: " + "; ".join(errors))
    with torch.device("cuda"):  # initialise on the GPU: a CPU init of 400M weights takes long
        model = ModernBertModel(cfg)
    try:
        model.set_attn_implementation("sdpa")
    except Exception as e:  # older/newer API: keep its default attention
        print("note: keeping the default attention implementation:", e)
    return model.half()


class Head(nn.Module):
    """Laya's head over the encoder output (scorer.md §1)."""

    def __init__(self):
        super().__init__()
        self.type_emb = nn.Embedding(3, D)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(D, D // 64, 4 * D, dropout=0.0, activation="relu", batch_first=True,
                                       norm_first=True) for _ in range(2))
        self.scorer = nn.Sequential(nn.LayerNorm(D), nn.Linear(D, D), nn.GELU(), nn.Linear(D, 1))
        self.act_head = nn.Sequential(nn.Linear(D + 4, 256), nn.GELU(), nn.Linear(256, 2))

    def forward(self, h, mask, qtype, markers, marker_mask):
        h = h + self.type_emb(qtype)[:, None, :]
        for layer in self.layers:
            h = layer(h, src_key_padding_mask=~mask)
        b = torch.arange(h.shape[0], device=h.device)[:, None].expand_as(markers)
        logits = self.scorer(h[b, markers]).squeeze(-1).float()           # [B, K]
        logits = logits.masked_fill(~marker_mask, float("-inf"))
        k = marker_mask.sum(-1)
        q = torch.softmax(logits, -1).nan_to_num(0.0)
        top = q.topk(min(2, q.shape[-1]), -1).values
        top1 = top[:, 0]
        top2 = torch.where(k > 1, top[:, -1], torch.zeros_like(top1))
        kf = k.clamp(min=2).float()
        entropy = -(q * q.clamp(min=1e-9).log()).sum(-1) / kf.log()
        feats = torch.stack([top1, top1 - top2, entropy, kf / 255.0], -1)
        act = self.act_head(torch.cat([h[:, 0].float(), feats], -1).to(h.dtype))
        return logits, act


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = make_encoder()
        with torch.device("cuda"):
            self.head = Head()

    def forward(self, ids, mask, qtype, markers, marker_mask):
        h = self.encoder(input_ids=ids, attention_mask=mask.long()).last_hidden_state
        return self.head(h, mask, qtype, markers, marker_mask)


def questions(n, length, gen):
    """n compat-shaped questions of `length` tokens with 4 [MASK] markers (as the C++ benchmark)."""
    ids = torch.randint(0, 50000, (n, length), generator=gen)
    ids[:, 0] = CLS
    markers = torch.tensor([[22 + 4 * o for o in range(4)]] * n)
    ids.scatter_(1, markers, MASK)
    mask = torch.ones(n, length, dtype=torch.bool)
    qtype = torch.zeros(n, dtype=torch.long)
    return ids, mask, qtype, markers, torch.ones(n, 4, dtype=torch.bool)


def time_calls(model, batch, warmup, calls):
    dev = torch.device("cuda")

    def call():
        args = [t.to(dev, non_blocking=True) for t in batch]
        logits, act = model(*args)
        return logits.cpu(), act.cpu()

    for _ in range(warmup):
        call()
    torch.cuda.synchronize()
    ms = []
    for _ in range(calls):
        t0 = time.perf_counter()
        call()
        ms.append((time.perf_counter() - t0) * 1e3)
    ms.sort()
    pick = lambda p: ms[min(len(ms) - 1, int(p / 100 * len(ms)))]
    return {"p50_ms": pick(50), "p95_ms": pick(95), "p99_ms": pick(99), "calls": calls}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", default="")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("pytorch_scorer_baseline: no CUDA device", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    t0 = time.perf_counter()
    model = Model().half().cuda().eval()
    weights = torch.cuda.memory_allocated()
    setup = time.perf_counter() - t0
    name = torch.cuda.get_device_name()
    print(f"PyTorch {torch.__version__} eager fp16 (sdpa), ModernBERT-large compat shape, on {name} "
          f"(setup {setup:.1f} s)")
    out = {"engine": "pytorch", "precision": "f16", "device": name, "setup_s": setup}
    gen = torch.Generator().manual_seed(7)
    with torch.inference_mode():
        w1 = time_calls(model, questions(1, 136, gen), 20 if a.quick else 200, 200 if a.quick else 2000)
        out["w1"] = w1
        print(f"W1 (1 question, 4 options, 136 tokens): p50 {w1['p50_ms']:.3f} ms, p95 {w1['p95_ms']:.3f} ms, "
              f"p99 {w1['p99_ms']:.3f} ms")
        w3 = time_calls(model, questions(10, 512, gen), 5 if a.quick else 50, 50 if a.quick else 500)
        out["w3"] = w3
        print(f"W3 (10 questions x 512 tokens, one batch): p50 {w3['p50_ms']:.3f} ms, p95 {w3['p95_ms']:.3f} ms, "
              f"p99 {w3['p99_ms']:.3f} ms")
        out["throughput"] = []
        for tokens in (512, 1024, 2048, 4096, 8192, 16384):
            n = tokens // 128
            t = time_calls(model, questions(n, 128, gen), 3 if a.quick else 10, 10 if a.quick else 50)
            ms = t["p50_ms"]
            out["throughput"].append({"tokens": tokens, "questions": n, "p50_ms": ms,
                                      "tokens_per_s": tokens / ms * 1e3, "questions_per_s": n / ms * 1e3})
            print(f"throughput {tokens:5d} tokens ({n:3d} x 128): {ms:8.3f} ms  {tokens / ms * 1e3:9.0f} tokens/s  "
                  f"{n / ms * 1e3:7.0f} questions/s")
    out["memory"] = {"weights_bytes": weights, "device_peak_bytes": torch.cuda.max_memory_allocated()}
    print(f"memory: weights {weights / 2**20:.1f} MiB, peak {torch.cuda.max_memory_allocated() / 2**20:.1f} MiB")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
