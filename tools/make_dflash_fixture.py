#!/usr/bin/env python3
"""A PyTorch reference for DFlash drafters, written from ../shared/design/dflash.md (§1.3-1.5 v1, §3.2
convolution, §3.3 selector), small random drafters in the public z-lab layouts (DFlashDraftModel and
DFlash2DraftModel: the selector under candidate_selector., its codebooks without .weight), and the
references tandem must match: tests/fixtures/dflash/{v1,v2}/ (config.json, model.safetensors) and
tests/fixtures/dflash/reference.json (block logits given context tap rows; v2 selector candidates and the
greedy path). Each drafter has a full-attention and a sliding layer and no is_causal, so z-lab's default
(a sliding_attention layer is causal) is exercised next to a non-causal layer. The target is
tests/fixtures/qwen3/tiny (run tools/make_qwen3_fixture.py first); its tap rows come from HF
Qwen3ForCausalLM in float64. Everything is float64 from the saved float32 weights.
    python3 tools/make_dflash_fixture.py [--out REPO_ROOT]"""
import argparse
import json
import math
import os
import random

import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM

H, LAYERS, HEADS, KV_HEADS, HD, INTER = 128, 2, 4, 2, 32, 256
ROPE_THETA, EPS = 100000.0, 1e-6


# ---------------------------------------------------------------- reference math (float64)

def rmsnorm(x, w):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + EPS) * w


def rope(x, pos, heads):
    """Rotate-half RoPE at absolute positions; angles as HF makes them (f32 inverse frequency times f32
    position), cos/sin in f64. x: [n, heads*HD]."""
    inv = 1.0 / (ROPE_THETA ** (torch.arange(0, HD, 2, dtype=torch.int64).float() / HD))
    ang = (torch.tensor(pos, dtype=torch.float32)[:, None] * inv[None, :]).double()
    c, s = torch.cos(ang)[:, None, :], torch.sin(ang)[:, None, :]
    x = x.view(len(pos), heads, HD)
    a, b = x[..., :HD // 2], x[..., HD // 2:]
    return torch.cat([a * c - b * s, b * c + a * s], -1).reshape(len(pos), heads * HD)


def head_norm(x, w, heads):
    n = x.shape[0]
    return rmsnorm(x.view(n, heads, HD), w).reshape(n, heads * HD)


def conv(x, d, base, stage, taps, group):
    """dflash.md §3.2: y[t, c] = sum_tau (base[stage, tau, c] + d[t, stage, tau, c // group]) * x[t - tau, c]."""
    b, width = x.shape
    g = width // group
    dd = d.view(b, 2, taps, g)
    y = torch.zeros_like(x)
    for t in range(b):
        for tau in range(taps):
            if t - tau < 0:
                continue
            coef = base[stage, tau] + dd[t, stage, tau].repeat_interleave(group)
            y[t] += coef * x[t - tau]
    return y


class Drafter:
    def __init__(self, w, cfg, embed, lm_head):
        self.w, self.cfg, self.embed, self.lm_head = w, cfg, embed, lm_head
        dc = cfg["dflash_config"]
        self.v2 = "conv_kernel_size" in dc
        types = cfg.get("layer_types", ["full_attention"] * LAYERS)
        self.window = [cfg.get("sliding_window") if t == "sliding_attention" else None for t in types]
        # z-lab dflash/model.py, Qwen3DFlashAttention.__init__: the top-level is_causal for every layer,
        # else a sliding_attention layer is causal and a full_attention layer is not.
        is_causal = cfg.get("is_causal")
        self.causal = [t == "sliding_attention" if is_causal is None else bool(is_causal) for t in types]

    def context(self, taps):
        """Settle: tap rows of positions 0..a-1 -> per layer K, V."""
        t = rmsnorm(taps @ self.w["fc.weight"].T, self.w["hidden_norm.weight"])
        pos = list(range(taps.shape[0]))
        kv = []
        for l in range(LAYERS):
            p = f"layers.{l}.self_attn."
            k = rope(head_norm(t @ self.w[p + "k_proj.weight"].T, self.w[p + "k_norm.weight"], KV_HEADS), pos, KV_HEADS)
            v = t @ self.w[p + "v_proj.weight"].T
            kv.append((k, v))
        return kv

    def attend(self, q, k, v, qpos, kpos, window, causal):
        """The mask of z-lab's _attention_mask: causal keeps keys at or before the query; a window keeps
        q - k < window, and without causality also k - q < window."""
        out = torch.zeros(q.shape[0], HEADS * HD, dtype=torch.float64)
        qp, kp = torch.tensor(qpos)[:, None], torch.tensor(kpos)[None, :]
        visible = torch.ones(len(qpos), len(kpos), dtype=torch.bool)
        if causal:
            visible &= kp <= qp
        if window is not None:
            visible &= qp - kp < window
            if not causal:
                visible &= kp - qp < window
        for h in range(HEADS):
            g = h // (HEADS // KV_HEADS)
            sc = q[:, h * HD:(h + 1) * HD] @ k[:, g * HD:(g + 1) * HD].T * HD ** -0.5
            sc = sc.masked_fill(~visible, float("-inf"))
            out[:, h * HD:(h + 1) * HD] = torch.softmax(sc, -1) @ v[:, g * HD:(g + 1) * HD]
        return out

    def block(self, ctx, anchor, a, b):
        dc = self.cfg["dflash_config"]
        ids = [anchor] + [dc["mask_token_id"]] * (b - 1)
        x = self.embed[ids].clone()
        pos = list(range(a, a + b))
        taps, group = dc.get("conv_kernel_size", 0), dc.get("conv_group_size", 1)
        for l in range(LAYERS):
            p = f"layers.{l}."
            u = rmsnorm(x, self.w[p + "input_layernorm.weight"])
            if self.v2:
                d = u @ self.w[p + "attention_conv.kernel_projection.weight"].T
                u = conv(u, d, self.w[p + "attention_conv.base_kernel"], 0, taps, group)
            s = p + "self_attn."
            q = rope(head_norm(u @ self.w[s + "q_proj.weight"].T, self.w[s + "q_norm.weight"], HEADS), pos, HEADS)
            k = rope(head_norm(u @ self.w[s + "k_proj.weight"].T, self.w[s + "k_norm.weight"], KV_HEADS), pos, KV_HEADS)
            v = u @ self.w[s + "v_proj.weight"].T
            ck, cv = ctx[l]
            y = self.attend(q, torch.cat([ck, k]), torch.cat([cv, v]), pos, list(range(a)) + pos, self.window[l],
                            self.causal[l])
            o = y @ self.w[s + "o_proj.weight"].T
            x = x + (conv(o, d, self.w[p + "attention_conv.base_kernel"], 1, taps, group) if self.v2 else o)
            u = rmsnorm(x, self.w[p + "post_attention_layernorm.weight"])
            if self.v2:
                d = u @ self.w[p + "mlp_conv.kernel_projection.weight"].T
                u = conv(u, d, self.w[p + "mlp_conv.base_kernel"], 0, taps, group)
            m = p + "mlp."
            o = (torch.nn.functional.silu(u @ self.w[m + "gate_proj.weight"].T) * (u @ self.w[m + "up_proj.weight"].T)) \
                @ self.w[m + "down_proj.weight"].T
            x = x + (conv(o, d, self.w[p + "mlp_conv.base_kernel"], 1, taps, group) if self.v2 else o)
        return rmsnorm(x, self.w["norm.weight"])[1:]  # rows 1..B-1 draft

    def select(self, hidden, logits, anchor):
        """dflash.md §3.3: top-K candidates per row (value desc, ties to the lower id), soft-capped values plus
        the bilinear predecessor/successor term, greedy walk (ties to the lower k)."""
        dc = self.cfg["dflash_config"]
        k_top, cap, mult = dc["selector_top_k"], dc["final_logit_softcapping"], dc["output_multiplier"]
        S = self.w["candidate_selector.hidden_projection.weight"]
        P, C = self.w["candidate_selector.predecessor_codebook"], self.w["candidate_selector.successor_codebook"]
        cands, vals, path, prev = [], [], [], anchor
        for row in range(logits.shape[0]):
            order = torch.sort(-logits[row], stable=True).indices[:k_top]
            v = logits[row][order]
            u = cap * torch.tanh(mult * v / cap) if cap > 0 else mult * v
            s = S @ hidden[row]
            e = u + (C[order] * (P[prev] * s)[None, :]).sum(-1)
            k = int(torch.argmax(e))
            cands.append(order.tolist())
            vals.append(v.tolist())
            prev = int(order[k])
            path.append(prev)
        return {"candidates": cands, "values": vals, "path": path}


# ---------------------------------------------------------------- random drafters in the public layout

def weights(v2, n_taps, vocab, gen, cfg):
    r = lambda *shape: torch.randn(*shape, generator=gen, dtype=torch.float64)
    w = {"fc.weight": r(H, n_taps * H) / math.sqrt(n_taps * H), "hidden_norm.weight": 1 + 0.1 * r(H),
         "norm.weight": 1 + 0.1 * r(H)}
    for l in range(LAYERS):
        p = f"layers.{l}."
        w[p + "input_layernorm.weight"] = 1 + 0.1 * r(H)
        w[p + "post_attention_layernorm.weight"] = 1 + 0.1 * r(H)
        for name, rows in [("q_proj", HEADS * HD), ("k_proj", KV_HEADS * HD), ("v_proj", KV_HEADS * HD)]:
            w[p + f"self_attn.{name}.weight"] = r(rows, H) / math.sqrt(H)
        w[p + "self_attn.o_proj.weight"] = r(H, HEADS * HD) / math.sqrt(HEADS * HD)
        w[p + "self_attn.q_norm.weight"] = 1 + 0.1 * r(HD)
        w[p + "self_attn.k_norm.weight"] = 1 + 0.1 * r(HD)
        w[p + "mlp.gate_proj.weight"] = r(INTER, H) / math.sqrt(H)
        w[p + "mlp.up_proj.weight"] = r(INTER, H) / math.sqrt(H)
        w[p + "mlp.down_proj.weight"] = r(H, INTER) / math.sqrt(INTER)
        if v2:
            dc = cfg["dflash_config"]
            taps, g = dc["conv_kernel_size"], H // dc["conv_group_size"]
            for c in ["attention_conv", "mlp_conv"]:
                base = 0.2 * r(2, taps, H)
                base[:, 0] += 1.0
                w[p + f"{c}.base_kernel"] = base
                w[p + f"{c}.kernel_projection.weight"] = 0.3 * r(2 * taps * g, H) / math.sqrt(H)
    if v2:  # the public names: z-lab's tests/fixtures/dflash2-safetensors-header.json
        rank = cfg["dflash_config"]["selector_rank"]
        w["candidate_selector.hidden_projection.weight"] = r(rank, H) / math.sqrt(H)
        w["candidate_selector.predecessor_codebook"] = r(vocab, rank) * rank ** -0.25
        w["candidate_selector.successor_codebook"] = r(vocab, rank) * rank ** -0.25
    # Round to the float32 that is saved, compute from exactly that.
    return {k: v.float().double() for k, v in w.items()}


def config(v2, vocab, target_layers):
    cfg = {"architectures": ["DFlash2DraftModel" if v2 else "DFlashDraftModel"], "model_type": "qwen3",
           "hidden_size": H, "intermediate_size": INTER, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
           "num_key_value_heads": KV_HEADS, "head_dim": HD, "rms_norm_eps": EPS, "rope_theta": ROPE_THETA,
           "vocab_size": vocab, "attention_bias": False, "tie_word_embeddings": False, "torch_dtype": "float32"}
    # A sliding (causal: no is_causal) and a full-attention (non-causal) layer in each drafter.
    cfg.update({"sliding_window": 6, "use_sliding_window": True})
    if v2:  # DFlash 2: everything in dflash_config, explicit taps
        cfg["layer_types"] = ["sliding_attention", "full_attention"]
        cfg["dflash_config"] = {"block_size": 8, "num_target_layers": target_layers, "target_layer_ids": [0, 2, 4],
                                "mask_token_id": vocab - 1, "conv_kernel_size": 2, "conv_group_size": 16,
                                "selector_rank": 16, "selector_top_k": 8, "final_logit_softcapping": 20.0,
                                "output_multiplier": 0.5}
    else:  # v1 as z-lab ships it: block_size and num_target_layers at the top level, taps by the rule
        cfg.update({"layer_types": ["full_attention", "sliding_attention"], "block_size": 8,
                    "num_target_layers": target_layers})
        cfg["dflash_config"] = {"mask_token_id": vocab - 1}
    return cfg


def tap_ids(cfg):
    dc = cfg["dflash_config"]
    if "target_layer_ids" in dc:
        return dc["target_layer_ids"]
    n, L = cfg["num_target_layers"], LAYERS
    return [n // 2] if L == 1 else [round(1 + i * (n - 4) / (L - 1)) for i in range(L)]


@torch.no_grad()
def target_taps(target, ids, layers):
    got = {}
    hooks = [target.model.layers[i].register_forward_hook(
        lambda _m, _i, out, i=i: got.__setitem__(i, (out[0] if isinstance(out, tuple) else out)[0].clone()))
        for i in layers]
    target(torch.tensor([ids]))
    for h in hooks:
        h.remove()
    return torch.cat([got[i] for i in layers], -1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), ".."))
    root = os.path.abspath(ap.parse_args().out)
    target_dir = os.path.join(root, "tests/fixtures/qwen3/tiny")
    try:
        target = AutoModelForCausalLM.from_pretrained(target_dir, dtype=torch.float32)
    except TypeError:
        target = AutoModelForCausalLM.from_pretrained(target_dir, torch_dtype=torch.float32)
    target = target.double().eval()
    vocab, n_target = target.config.vocab_size, target.config.num_hidden_layers
    embed = target.model.embed_tokens.weight.detach()
    lm_head = target.lm_head.weight.detach()
    gen = torch.Generator().manual_seed(77)
    rng = random.Random(5)
    drafters = []
    for v2 in (False, True):
        name = "v2" if v2 else "v1"
        cfg = config(v2, vocab, n_target)
        layers = tap_ids(cfg)
        w = weights(v2, len(layers), vocab, gen, cfg)
        d = os.path.join(root, "tests/fixtures/dflash", name)
        os.makedirs(d, exist_ok=True)
        save_file({k: v.float().contiguous() for k, v in w.items()}, os.path.join(d, "model.safetensors"),
                  metadata={"format": "pt"})
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
        ref = Drafter(w, cfg, embed, lm_head)
        cases = []
        for a, b, width in [(1, 8, None), (3, 8, 300), (7, 4, None), (12, 2, None), (18, 8, None), (24, 8, 300),
                            (5, 5, None), (10, 8, None)]:
            prompt = [rng.randrange(3, vocab - 1) for _ in range(a)]
            taps = target_taps(target, prompt, layers)
            anchor = rng.randrange(3, vocab - 1)
            hidden = ref.block(ref.context(taps), anchor, a, b)
            head = lm_head[:width] if (width and v2) else lm_head
            logits = hidden @ head.T
            case = {"taps": taps.tolist(), "context_len": a, "anchor": anchor, "block_size": b,
                    "logits": logits.tolist()}
            if v2:
                case["draft_vocab"] = width
                case["selector"] = ref.select(hidden, logits, anchor)
            cases.append(case)
        drafters.append({"dir": f"tests/fixtures/dflash/{name}", "version": 2 if v2 else 1, "tap_layers": layers,
                         "cases": cases})
        print(f"{name}: taps {layers}, {len(cases)} cases")
    with open(os.path.join(root, "tests/fixtures/dflash/reference.json"), "w") as f:
        json.dump({"target": "tests/fixtures/qwen3/tiny", "drafters": drafters}, f)
    print("wrote tests/fixtures/dflash/reference.json")


if __name__ == "__main__":
    main()
