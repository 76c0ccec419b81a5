#!/usr/bin/env python3
"""Builds small random Qwen3 targets with HF transformers' Qwen3ForCausalLM and the references tandem's
target must match (tests/fixtures/qwen3/reference.json): logits for prompts, greedy continuations from
`generate`, and the residual stream after the tapped layers (what a DFlash drafter reads).

  tests/fixtures/qwen3/tiny       F32, untied LM head, GQA 4/2, head_dim 32, one safetensors file
  tests/fixtures/qwen3/tiny-tied  BF16, tied embeddings, attention biases, sliding-window layers,
                                  sharded with model.safetensors.index.json
References are computed in float64 from the saved (rounded) weights. Prompts whose greedy path has a
top-2 logit margin under 1e-3 are redrawn, so float32 engines can agree token for token.
Needs torch + transformers (the GPU machine):  python3 tools/make_qwen3_fixture.py [--out REPO_ROOT]"""
import argparse
import json
import math
import os
import random

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

VOCAB, HIDDEN, INTER, LAYERS, HEADS, KV_HEADS, HEAD_DIM = 512, 128, 256, 6, 4, 2, 32
TAP_LAYERS = [1, 3]  # dflash.md §1.2's rule for a 6-layer target and a 2-layer drafter
NEW_TOKENS = 24


def randomize(model, gen):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or "layernorm" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            elif "embed_tokens" in name:
                p.copy_(torch.randn(p.shape, generator=gen))
            else:
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[1]))


def make(tied, sliding, bias):
    kw = dict(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTER, num_hidden_layers=LAYERS,
              num_attention_heads=HEADS, num_key_value_heads=KV_HEADS, head_dim=HEAD_DIM, rms_norm_eps=1e-6,
              max_position_embeddings=256, tie_word_embeddings=tied, attention_bias=bias,
              rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, bos_token_id=1, eos_token_id=2,
              pad_token_id=0)
    if sliding:
        kw.update(use_sliding_window=True, sliding_window=8, max_window_layers=3)
    cfg = Qwen3Config(**kw)
    model = Qwen3ForCausalLM(cfg)
    try:
        model.set_attn_implementation("eager")
    except Exception as e:  # sdpa in float64 is as good for a reference
        print("note: keeping default attention implementation:", e)
    return model


def layer_outputs(model, ids, layers):
    """Residual stream after each listed decoder layer, via forward hooks (unambiguous whatever
    hidden_states convention the installed transformers uses)."""
    got = {}
    hooks = []
    for i in layers:
        def hook(_m, _inp, out, i=i):
            got[i] = (out[0] if isinstance(out, tuple) else out)[0].detach().clone()
        hooks.append(model.model.layers[i].register_forward_hook(hook))
    out = model(torch.tensor([ids]), output_hidden_states=True)
    for h in hooks:
        h.remove()
    for i in layers:  # cross-check against HF's own hidden_states (index 0 is the embedding)
        hs = out.hidden_states[i + 1][0]
        if not torch.allclose(hs, got[i], rtol=0, atol=1e-12):
            print(f"  note: HF hidden_states[{i + 1}] differs from layer {i}'s output hook; using the hook")
    return out.logits[0], got


@torch.no_grad()
def greedy(model, ids):
    """HF generate, cross-checked against recomputing the whole sequence each step; also the smallest top-2
    margin along the path."""
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    gen = model.generate(torch.tensor([ids]), max_new_tokens=NEW_TOKENS, do_sample=False)
    new = gen[0, len(ids):].tolist()
    seq, margin = list(ids), float("inf")
    for t in range(NEW_TOKENS):
        logits = model(torch.tensor([seq])).logits[0, -1]
        top = torch.topk(logits, 2).values
        margin = min(margin, float(top[0] - top[1]))
        seq.append(int(torch.argmax(logits)))
    assert seq[len(ids):] == new, "generate() disagrees with step-by-step greedy decoding"
    return new, margin


def build(root, name, tied, sliding, bias, dtype, shard, seed):
    torch.manual_seed(seed)
    model = make(tied, sliding, bias)
    randomize(model, torch.Generator().manual_seed(seed))
    model = model.to(dtype)
    d = os.path.join(root, "tests/fixtures/qwen3", name)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        os.remove(os.path.join(d, f))
    model.save_pretrained(d, safe_serialization=True, max_shard_size=shard)
    # Reload what was saved: casting the live model to bf16 would also round its (unsaved) rotary
    # frequencies, which no loader of the checkpoint ever sees.
    model = Qwen3ForCausalLM.from_pretrained(d, dtype=torch.float32)
    try:
        model.set_attn_implementation("eager")
    except Exception as e:
        print("note: keeping default attention implementation:", e)
    model = model.double().eval()
    print(name, "layer types:", model.config.layer_types, "files:", sorted(os.listdir(d)))
    rng = random.Random(seed)
    cases = []
    with torch.no_grad():
        while len(cases) < 5:
            ids = [rng.randrange(3, VOCAB) for _ in range(rng.randint(3, 18))]
            new, margin = greedy(model, ids)
            if margin < 1e-3:
                print(f"  redraw: greedy margin {margin:.2e}")
                continue
            logits, hidden = layer_outputs(model, ids, TAP_LAYERS)
            cases.append({"prompt": ids, "logits": logits.tolist(),
                          "hidden": {str(i): hidden[i].tolist() for i in TAP_LAYERS},
                          "greedy": new, "max_new_tokens": NEW_TOKENS, "min_margin": margin})
    return {"dir": f"tests/fixtures/qwen3/{name}", "tap_layers": TAP_LAYERS, "cases": cases}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), ".."))
    root = os.path.abspath(ap.parse_args().out)
    models = [build(root, "tiny", tied=False, sliding=False, bias=False, dtype=torch.float32, shard="50MB", seed=11),
              build(root, "tiny-tied", tied=True, sliding=True, bias=True, dtype=torch.bfloat16, shard="150KB",
                    seed=12)]
    with open(os.path.join(root, "tests/fixtures/qwen3/reference.json"), "w") as f:
        json.dump({"models": models}, f)
    print("wrote tests/fixtures/qwen3/reference.json")


if __name__ == "__main__":
    main()
