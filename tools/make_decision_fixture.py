#!/usr/bin/env python3
"""Builds the small random Laya-compat DecisionModel that tests use (tests/fixtures/decision-tiny) and the
reference outputs tandem's backends must match (tests/fixtures/decision/reference.json).

The model is assembled from independent implementations, in the exact Laya layout (scorer.md §1):
HF transformers `ModernBertModel` as the encoder (global and windowed layers, two rope thetas, no biases),
two PyTorch `nn.TransformerEncoderLayer` head layers (norm first, with biases), the scorer
LN -> Linear -> GELU -> Linear, the act head Linear(d+4, 256) -> GELU -> Linear(256, 2), the type
embedding and the temperature buffer. References are computed by those modules in float64 from the
float32 weights that are saved. A second, plain float64 implementation of scorer.md's semantics runs
beside it as a cross-check and the script fails if they disagree.

Needs torch + transformers (the GPU machine). Run after tools/make_tokenizer_fixture.py (it reads the
tokenizer for the sample questions):
    python3 tools/make_decision_fixture.py [--out REPO_ROOT]"""
import argparse
import json
import math
import os
import random

import torch
from torch import nn
from safetensors.torch import save_file
from transformers import ModernBertConfig, ModernBertModel

D, HEADS, INTER, LAYERS, VOCAB = 128, 2, 192, 4, 1024
LOCAL_ATTENTION = 32  # window 16 each side
HEAD_LAYERS = 2
TEMPERATURE = [1.6369, 1.2514, 1.9834]
UNK, CLS, SEP, PAD, MASK = 0, 1, 2, 3, 4
QTYPES = ["choice", "score", "noul"]


def make_encoder():
    common = dict(vocab_size=VOCAB, hidden_size=D, intermediate_size=INTER, num_hidden_layers=LAYERS,
                  num_attention_heads=HEADS, local_attention=LOCAL_ATTENTION, norm_eps=1e-5,
                  max_position_embeddings=1024, pad_token_id=PAD, cls_token_id=CLS, sep_token_id=SEP,
                  bos_token_id=CLS, eos_token_id=SEP)
    try:  # transformers 5: explicit layer types and per-type rope parameters
        cfg = ModernBertConfig(**common, layer_types=["full_attention" if i % 3 == 0 else "sliding_attention"
                                                      for i in range(LAYERS)],
                               rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 160000.0},
                                                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}})
    except TypeError:  # older transformers
        cfg = ModernBertConfig(**common, global_attn_every_n_layers=3, global_rope_theta=160000.0,
                               local_rope_theta=10000.0)
    model = ModernBertModel(cfg)
    try:
        model.set_attn_implementation("eager")
    except Exception as e:  # older/newer API: sdpa in float64 is as good for a reference
        print("note: keeping default attention implementation:", e)
    return cfg, model


class Head(nn.Module):
    """Laya's head: type embedding, 2 TransformerEncoderLayers, scorer, act head, temperature."""

    def __init__(self):
        super().__init__()
        self.type_emb = nn.Embedding(3, D)
        layer = nn.TransformerEncoderLayer(D, D // 64, dim_feedforward=4 * D, dropout=0.0, activation="relu",
                                           batch_first=True, norm_first=True, layer_norm_eps=1e-5)
        self.head = nn.TransformerEncoder(layer, HEAD_LAYERS, enable_nested_tensor=False)
        self.scorer = nn.Sequential(nn.LayerNorm(D, eps=1e-5), nn.Linear(D, D), nn.GELU(), nn.Linear(D, 1))
        self.act_head = nn.Sequential(nn.Linear(D + 4, 256), nn.GELU(), nn.Linear(256, 2))
        self.register_buffer("temperature", torch.tensor(TEMPERATURE))


def randomize(module, gen):
    """Weights of unit-variance-preserving scale so every layer matters (HF's 0.02 init makes a near-constant
    model whose test would prove little)."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if "norm" in name and name.endswith("weight") or name.endswith("norm1.weight") or \
                    name.endswith("norm2.weight") or name == "scorer.0.weight":
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
            elif name.endswith("bias") or name.endswith("in_proj_bias"):
                p.copy_(0.05 * torch.randn(p.shape, generator=gen))
            elif p.dim() == 2 and "emb" not in name:
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[1]))
            else:
                p.copy_(torch.randn(p.shape, generator=gen))


def act_features(cls_row, logits):
    k = logits.numel()
    kf = max(k, 2)
    f = torch.zeros(D + 4, dtype=torch.float64)
    if cls_row is not None:
        f[:D] = cls_row
    if k > 0:
        q = torch.softmax(logits, 0)
        s = torch.sort(q, descending=True).values
        top1 = s[0]
        top2 = s[1] if k > 1 else torch.tensor(0.0, dtype=torch.float64)
        f[D] = top1
        f[D + 1] = top1 - top2
        f[D + 2] = -(q * torch.log(torch.clamp(q, min=1e-9))).sum() / math.log(kf)
    f[D + 3] = kf / 255.0
    return f


@torch.no_grad()
def reference(encoder, head, ids, markers, qtype):
    """One question through HF ModernBERT + the PyTorch head, float64."""
    if len(ids) > 0:
        x = torch.tensor([ids])
        h = encoder(input_ids=x, attention_mask=torch.ones_like(x)).last_hidden_state[0]
        h = h + head.type_emb.weight[qtype]
        h = head.head(h.unsqueeze(0)).squeeze(0)
        logits = head.scorer(h[markers]).squeeze(-1) if markers else torch.zeros(0, dtype=torch.float64)
        cls_row = h[0]
    else:
        logits, cls_row = torch.zeros(0, dtype=torch.float64), None
    act = head.act_head(act_features(cls_row, logits))
    return logits.tolist(), act.tolist()


# ---- cross-check: scorer.md's semantics written out plainly ----

def ln(x, w, b, eps=1e-5):
    m = x.mean(-1, keepdim=True)
    v = ((x - m) ** 2).mean(-1, keepdim=True)
    y = (x - m) / torch.sqrt(v + eps) * w
    return y + b if b is not None else y


def rope(x, theta, heads):
    n = x.shape[0]
    # Angles as HF (and tandem) make them: f32 inverse frequencies times f32 positions; cos/sin in f64.
    inv = 1.0 / (theta ** (torch.arange(0, 64, 2, dtype=torch.int64).float() / 64))
    ang = (torch.arange(n, dtype=torch.float32)[:, None] * inv[None, :]).double()
    c, s = torch.cos(ang), torch.sin(ang)
    x = x.view(n, heads, 64).clone()
    a, b = x[..., :32].clone(), x[..., 32:].clone()
    x[..., :32] = a * c[:, None] - b * s[:, None]
    x[..., 32:] = b * c[:, None] + a * s[:, None]
    return x.view(n, heads * 64)


def attention(q, k, v, heads, window):
    n = q.shape[0]
    out = torch.zeros_like(q)
    for hh in range(heads):
        sl = slice(hh * 64, (hh + 1) * 64)
        sc = (q[:, sl] * 0.125) @ k[:, sl].T
        if window is not None:
            i = torch.arange(n)
            sc = sc.masked_fill((i[:, None] - i[None, :]).abs() > window, float("-inf"))
        out[:, sl] = torch.softmax(sc, -1) @ v[:, sl]
    return out


def plain(sd, cfg, ids, markers, qtype):
    g = lambda n: sd[n].double()
    if not ids:
        f = act_features(None, torch.zeros(0, dtype=torch.float64))
        a = torch.nn.functional.gelu(f @ g("act_head.0.weight").T + g("act_head.0.bias"))
        return [], (a @ g("act_head.2.weight").T + g("act_head.2.bias")).tolist()
    h = ln(g("encoder.embeddings.tok_embeddings.weight")[ids], g("encoder.embeddings.norm.weight"), None)
    for i in range(LAYERS):
        p = f"encoder.layers.{i}."
        glob = i % 3 == 0
        x = h if i == 0 else ln(h, g(p + "attn_norm.weight"), None)
        qkv = x @ g(p + "attn.Wqkv.weight").T
        theta = 160000.0 if glob else 10000.0
        q, k, v = qkv[:, :D], qkv[:, D:2 * D], qkv[:, 2 * D:]
        q, k = rope(q, theta, HEADS), rope(k, theta, HEADS)
        h = h + attention(q, k, v, HEADS, None if glob else LOCAL_ATTENTION // 2) @ g(p + "attn.Wo.weight").T
        x = ln(h, g(p + "mlp_norm.weight"), None) @ g(p + "mlp.Wi.weight").T
        x = torch.nn.functional.gelu(x[:, :INTER]) * x[:, INTER:]
        h = h + x @ g(p + "mlp.Wo.weight").T
    h = ln(h, g("encoder.final_norm.weight"), None) + g("type_emb.weight")[qtype]
    for L in range(HEAD_LAYERS):
        p = f"head.layers.{L}."
        x = ln(h, g(p + "norm1.weight"), g(p + "norm1.bias"))
        qkv = x @ g(p + "self_attn.in_proj_weight").T + g(p + "self_attn.in_proj_bias")
        a = attention(qkv[:, :D], qkv[:, D:2 * D], qkv[:, 2 * D:], D // 64, None)
        h = h + a @ g(p + "self_attn.out_proj.weight").T + g(p + "self_attn.out_proj.bias")
        x = ln(h, g(p + "norm2.weight"), g(p + "norm2.bias"))
        x = torch.relu(x @ g(p + "linear1.weight").T + g(p + "linear1.bias"))
        h = h + x @ g(p + "linear2.weight").T + g(p + "linear2.bias")
    if markers:
        x = ln(h[markers], g("scorer.0.weight"), g("scorer.0.bias"))
        x = torch.nn.functional.gelu(x @ g("scorer.1.weight").T + g("scorer.1.bias"))
        logits = (x @ g("scorer.3.weight").T + g("scorer.3.bias")).squeeze(-1)
    else:
        logits = torch.zeros(0, dtype=torch.float64)
    f = act_features(h[0], logits)
    a = torch.nn.functional.gelu(f @ g("act_head.0.weight").T + g("act_head.0.bias"))
    return logits.tolist(), (a @ g("act_head.2.weight").T + g("act_head.2.bias")).tolist()


def random_sequence(rng):
    n = 0 if rng.random() < 0.06 else rng.choice([rng.randint(1, 12), rng.randint(1, 80), rng.randint(1, 300)])
    ids = [rng.randrange(5, VOCAB) for _ in range(n)]
    k = min(n, rng.randint(0, 6))
    markers = sorted(rng.sample(range(n), k)) if k else []
    if n:
        ids[0] = CLS
        ids[-1] = SEP
        for m in markers:
            ids[m] = MASK
    return ids, markers, rng.randrange(3)


def compat_sequence(tok, qtype, question, options, state, max_len=512, head_max_len=192):
    """scorer.md §1's compat layout, for the demo's sample questions, with the budgets as tandem's
    coordinator applies them (coordinator/build_layout.cpp): each option is its MASK plus at most 48
    tokens; when the options leave fewer than 16 tokens of head_max_len, each is cut (mask included) to
    max(4, (head_max_len - 16) / k); the question gets max(8, what the options leave); the state fills
    the room up to max_len with a final SEP."""
    enc = lambda s: tok.encode(s, add_special_tokens=False).ids
    opts = [[MASK] + enc(" " + o)[:48] for o in options]
    left = head_max_len - sum(len(o) for o in opts)
    if left < 16 and opts:
        share = max(4, max(0, head_max_len - 16) // len(opts))
        opts = [o[:share] for o in opts]
        left = head_max_len - sum(len(o) for o in opts)
    ids = [CLS] + enc(f"{QTYPES[qtype]} question: {question}")[:max(8, left)] + [SEP]
    markers = []
    for o in opts:
        markers.append(len(ids))
        ids += o
    ids.append(SEP)
    room = max(0, max_len - len(ids) - 1)
    ids += enc(state)[:room] + [SEP]
    return ids, markers


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), ".."))
    ap.add_argument("--batches", type=int, default=60)
    args = ap.parse_args()
    root = os.path.abspath(args.out)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1234)
    cfg, encoder = make_encoder()
    head = Head()
    randomize(encoder, gen)
    randomize(head, gen)
    # Save float32 weights, then compute in float64 from exactly those values.
    encoder.float(), head.float()
    sd = {f"encoder.{k}": v.contiguous() for k, v in encoder.state_dict().items()}
    sd.update({k: v.contiguous() for k, v in head.state_dict().items()})
    out_dir = os.path.join(root, "tests/fixtures/decision-tiny")
    os.makedirs(os.path.join(out_dir, "encoder"), exist_ok=True)
    save_file(sd, os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
    cfg.save_pretrained(os.path.join(out_dir, "encoder"))
    # ModernBERT configs carry no mask id; tandem reads it from here when present (scorer.md §1).
    cfg_path = os.path.join(out_dir, "encoder/config.json")
    with open(cfg_path) as f:
        cfg_json = json.load(f)
    cfg_json["mask_token_id"] = MASK
    with open(cfg_path, "w") as f:
        json.dump(cfg_json, f, indent=2)
    print("encoder config:", json.dumps(cfg_json)[:600])
    with open(os.path.join(out_dir, "rl_agent_config.json"), "w") as f:
        json.dump({"head_layers": HEAD_LAYERS, "max_len": 512, "head_max_len": 192, "temperature": TEMPERATURE,
                   "temperature_by_options": {"choice": {"2": 1.5}}, "note": "random weights; tandem test model"},
                  f, indent=2)
    print("saved", len(sd), "tensors:", sorted(sd)[:3], "...")
    encoder.double().eval(), head.double().eval()

    rng = random.Random(42)
    batches, worst = [], 0.0
    for b in range(args.batches):
        seqs = []
        for _ in range(rng.randint(1, 8)):
            ids, markers, qtype = random_sequence(rng)
            logits, act = reference(encoder, head, ids, markers, qtype)
            pl, pa = plain(sd, cfg, ids, markers, qtype)
            for x, y in zip(logits + act, pl + pa):
                worst = max(worst, abs(x - y) / max(1.0, abs(x)))
            seqs.append({"ids": ids, "markers": markers, "qtype": qtype, "logits": logits, "act": act})
        batches.append({"sequences": seqs})
    print(f"HF/PyTorch vs plain scorer.md semantics: worst relative difference {worst:.3e}")
    if worst > 2e-5:
        print("CROSS-CHECK FAILED: the plain implementation of scorer.md disagrees with HF ModernBERT + head")
    fx = os.path.join(root, "tests/fixtures/decision")
    os.makedirs(fx, exist_ok=True)
    with open(os.path.join(fx, "reference.json"), "w") as f:
        json.dump({"model": "tests/fixtures/decision-tiny", "batches": batches}, f)
    n = sum(len(b["sequences"]) for b in batches)
    print(f"wrote {len(batches)} batches, {n} questions")

    # Sample questions for the demo (`tandem score` on the embedded default).
    tok_path = os.path.join(out_dir, "tokenizer/tokenizer.json")
    if os.path.exists(tok_path):
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(tok_path)
        state = ("Customer email: my order 4521 arrived broken and I want a refund, not a replacement. "
                 "This is the second time this month.")
        qs = [(0, "What does the customer want?", ["refund", "replacement", "store credit", "nothing"]),
              (1, "How urgent is this ticket?", ["low", "medium", "high"]),
              (2, "The customer is angry.", ["true"]),
              (0, "Which team should handle it?", ["billing", "shipping"])]
        sample = {"questions": [], "sequences": []}
        for qtype, q, opts in qs:
            ids, markers = compat_sequence(tok, qtype, q, opts, state)
            sample["questions"].append({"qtype": QTYPES[qtype], "question": q, "options": opts})
            sample["sequences"].append({"ids": ids, "markers": markers, "qtype": QTYPES[qtype]})
        with open(os.path.join(out_dir, "sample.json"), "w") as f:
            json.dump(sample, f, indent=1)
        print("wrote sample.json")


if __name__ == "__main__":
    main()
