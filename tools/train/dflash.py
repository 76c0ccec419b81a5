"""Plain-torch DFlash v1 and DFlash 2 drafters (../shared/design/dflash.md §1.3-1.5, §3.2, §3.3) in the z-lab
public layouts (DFlashDraftModel, DFlash2DraftModel), for training many blocks at once and for the reference
loop of tools/train/spec_loop.py. The embedding and LM head are the target's (frozen, passed in); the
drafter owns fc, hidden_norm, its layers, the final norm and (v2) the convolutions and candidate selector."""
import dataclasses
import os

import torch
from torch import nn
import torch.nn.functional as F

from tools.train.common import load_safetensors, read_json
from tools.train.qwen3 import Attention, Mlp, Qwen3Shape, RMSNorm, apply_rope, attend, rope_tables


@dataclasses.dataclass
class DrafterShape:
    version: int
    vocab: int
    hidden: int
    inter: int
    layers: int
    heads: int
    kv_heads: int
    taps: list
    num_target_layers: int
    mask_id: int
    head_dim: int = 64
    eps: float = 1e-6
    theta: float = 10000.0
    max_positions: int = 1024
    block_size: int = 16
    conv_taps: int = 2
    conv_group: int = 16
    sel_rank: int = 32
    sel_top_k: int = 8
    softcap: float = 30.0
    out_mult: float = 1.0
    windows: tuple = None  # per layer: a sliding window (|q_pos - k_pos| < w) or None; the shipped drafters: None
    causal: tuple = None   # per layer: block rows see only the block rows up to themselves (z-lab's rule below)

    def qwen3(self):
        return Qwen3Shape(vocab=self.vocab, hidden=self.hidden, inter=self.inter, layers=self.layers,
                          heads=self.heads, kv_heads=self.kv_heads, head_dim=self.head_dim, eps=self.eps,
                          theta=self.theta, max_positions=self.max_positions, tied=False)


class DynConv(nn.Module):
    """Grouped dynamic causal convolution over a block's rows (§3.2): per row t and stage s,
    coef[t, τ, c] = base[s, τ, c] + D[t, s, τ, c // group]; y[t] = Σ_τ coef[t, τ] ⊙ z[t − τ] inside the block."""

    def __init__(self, hidden, taps, group):
        super().__init__()
        self.taps, self.group, self.groups = taps, group, hidden // group
        base = torch.zeros(2, taps, hidden)
        base[:, 0] = 1.0  # identity at init
        self.base_kernel = nn.Parameter(base)
        self.kernel_projection = nn.Linear(hidden, 2 * taps * self.groups, bias=False)
        nn.init.normal_(self.kernel_projection.weight, std=0.01)

    def deltas(self, u):
        """u [N, B, H] -> D [N, B, 2, taps, G]."""
        n, b, _ = u.shape
        return self.kernel_projection(u).view(n, b, 2, self.taps, self.groups)

    def forward(self, z, d, stage):
        coef = self.base_kernel[stage].to(z.dtype)[None, None] + \
            d[:, :, stage].to(z.dtype).repeat_interleave(self.group, -1)  # [N, B, taps, H]
        out = coef[:, :, 0] * z
        for tau in range(1, self.taps):
            shifted = torch.cat([torch.zeros_like(z[:, :tau]), z[:, :-tau]], 1)
            out = out + coef[:, :, tau] * shifted
        return out


class Selector(nn.Module):
    """The candidate selector (§3.3): E[k] = u_k + (P[prev] ⊙ S·h) · C[c_k] over the top-K candidates."""

    def __init__(self, hidden, vocab, rank):
        super().__init__()
        self.hidden_projection = nn.Linear(hidden, rank, bias=False)
        self.predecessor_codebook = nn.Embedding(vocab, rank)
        self.successor_codebook = nn.Embedding(vocab, rank)
        nn.init.normal_(self.hidden_projection.weight, std=0.02)
        nn.init.normal_(self.predecessor_codebook.weight, std=rank ** -0.25)
        nn.init.normal_(self.successor_codebook.weight, std=rank ** -0.25)


def unary(values, softcap, mult):
    v = mult * values
    return softcap * torch.tanh(v / softcap) if softcap > 0 else v


def energies(sel, h, cand, values, prev, softcap, mult):
    """h [M, H], cand/values [M, K], prev [M] -> E [M, K]."""
    s = sel.hidden_projection(h)
    bonus = sel.predecessor_codebook(prev) * s
    return unary(values, softcap, mult) + (bonus[:, None, :] * sel.successor_codebook(cand)).sum(-1)


class DrafterLayer(nn.Module):
    def __init__(self, d):
        super().__init__()
        s = d.qwen3()
        self.input_layernorm = RMSNorm(d.hidden, d.eps)
        self.self_attn = Attention(s)
        self.post_attention_layernorm = RMSNorm(d.hidden, d.eps)
        self.mlp = Mlp(d.hidden, d.inter)
        if d.version == 2:
            self.attention_conv = DynConv(d.hidden, d.conv_taps, d.conv_group)
            self.mlp_conv = DynConv(d.hidden, d.conv_taps, d.conv_group)


class Drafter(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.d = d
        self.fc = nn.Linear(len(d.taps) * d.hidden, d.hidden, bias=False)
        self.hidden_norm = RMSNorm(d.hidden, d.eps)
        self.layers = nn.ModuleList([DrafterLayer(d) for _ in range(d.layers)])
        self.norm = RMSNorm(d.hidden, d.eps)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, std=0.02)
        if d.version == 2:
            self.candidate_selector = Selector(d.hidden, d.vocab, d.sel_rank)
            for layer in self.layers:
                nn.init.normal_(layer.attention_conv.kernel_projection.weight, std=0.01)
                nn.init.normal_(layer.mlp_conv.kernel_projection.weight, std=0.01)

    def context(self, tap_rows):
        """Settle (§1.3-1.4): tap rows [S, T, n_t·H] of positions 0..T-1 -> per layer (K, V) [S, KV, T, D]."""
        t = self.hidden_norm(self.fc(tap_rows))
        cos, sin = rope_tables(self.d.head_dim, self.d.theta, torch.arange(t.shape[1], device=t.device))
        return [layer.self_attn.key_value(t, cos, sin) for layer in self.layers]

    def blocks(self, embed, block_ids, anchors, ctx):
        """Block forward (§1.5, §3.2) of A blocks per sequence: block_ids [S, A, B] ([anchor, MASK...]) at
        positions anchors[s, a] + 0..B-1; block n sees context rows j < its anchor and its own rows.
        Returns the final-normed rows [S·A, B, H]."""
        sq, a, b = block_ids.shape
        h = self.d.hidden
        t = ctx[0][0].shape[2]
        x = F.embedding(block_ids, embed).reshape(sq * a, b, h)
        pos = (anchors[..., None] + torch.arange(b, device=anchors.device)).reshape(sq, a * b)
        cos, sin = rope_tables(self.d.head_dim, self.d.theta, pos.reshape(-1))
        cos, sin = cos.view(sq, 1, a * b, -1), sin.view(sq, 1, a * b, -1)
        row_anchor = anchors.repeat_interleave(b, 1)  # [S, A·B]
        see_ctx = torch.arange(t, device=x.device)[None, None, :] < row_anchor[..., None]
        blk = torch.arange(a * b, device=x.device) // b
        see_blk = (blk[:, None] == blk[None, :])[None].expand(sq, -1, -1)
        mask = torch.cat([see_ctx, see_blk], -1)[:, None]  # [S, 1, A·B, T + A·B]
        key_pos = torch.cat([torch.arange(t, device=x.device)[None].expand(sq, -1), pos], 1)  # [S, T + A·B]
        near = (pos[:, :, None] - key_pos[:, None, :]).abs()[:, None]
        causal_blk = see_blk & (torch.arange(a * b, device=x.device)[None, :, None] >=
                                torch.arange(a * b, device=x.device)[None, None, :])
        causal_mask = torch.cat([see_ctx, causal_blk], -1)[:, None]
        masks = []
        for i, w in enumerate(self.d.windows or [None] * self.d.layers):
            m = causal_mask if self.d.causal and self.d.causal[i] else mask
            masks.append(m if not w else m & (near < w))
        for layer, (ck, cv), mask in zip(self.layers, ctx, masks):
            at = layer.self_attn
            u = layer.input_layernorm(x)
            if self.d.version == 2:
                dd = layer.attention_conv.deltas(u)
                u = layer.attention_conv(u, dd, 0)
            z = u.reshape(sq, a * b, h)
            q = at.query(z, cos, sin)
            k, v = at.key_value(z, cos, sin)
            y = attend(q, torch.cat([ck.to(k.dtype), k], 2), torch.cat([cv.to(v.dtype), v], 2), mask=mask)
            o = at.out(y).reshape(sq * a, b, h)
            x = x + (layer.attention_conv(o, dd, 1) if self.d.version == 2 else o)
            u = layer.post_attention_layernorm(x)
            if self.d.version == 2:
                dd = layer.mlp_conv.deltas(u)
                u = layer.mlp_conv(u, dd, 0)
            m = layer.mlp(u)
            x = x + (layer.mlp_conv(m, dd, 1) if self.d.version == 2 else m)
        return self.norm(x)

    # ---- the public layout ----

    def public_state_dict(self):
        out = {}
        for k, v in self.state_dict().items():
            if k.endswith("_codebook.weight"):
                k = k[:-len(".weight")]  # z-lab stores the codebooks without .weight (dflash.md §3.1)
            out[k] = v
        return out

    def load_public_state_dict(self, sd):
        fixed = {(k + ".weight" if k.endswith("_codebook") else k): v for k, v in sd.items()}
        self.load_state_dict(fixed, strict=True)


def loss_weights(rows, gamma, device):
    """w_k = exp(-(k-1)/γ) for draft rows k = 1..rows (dflash.md §1.9)."""
    return torch.exp(-torch.arange(rows, device=device, dtype=torch.float32) / gamma)


def hf_config(d, dtype="bfloat16"):
    """config.json in the z-lab layout: v1 keeps block_size and num_target_layers at the top level and the mask
    and taps in dflash_config; v2 keeps every DFlash key in dflash_config. is_causal is explicit (false)."""
    c = {"architectures": ["DFlash2DraftModel" if d.version == 2 else "DFlashDraftModel"], "model_type": "qwen3",
         "hidden_size": d.hidden, "intermediate_size": d.inter, "num_hidden_layers": d.layers,
         "num_attention_heads": d.heads, "num_key_value_heads": d.kv_heads, "head_dim": d.head_dim,
         "hidden_act": "silu", "rms_norm_eps": d.eps, "rope_theta": d.theta,
         "max_position_embeddings": d.max_positions, "vocab_size": d.vocab, "attention_bias": False,
         "tie_word_embeddings": False, "torch_dtype": dtype, "layer_types": ["full_attention"] * d.layers,
         "use_sliding_window": False, "sliding_window": None, "is_causal": False}
    dc = {"mask_token_id": d.mask_id, "target_layer_ids": list(d.taps)}
    if d.version == 2:
        dc.update({"block_size": d.block_size, "num_target_layers": d.num_target_layers,
                   "conv_kernel_size": d.conv_taps, "conv_group_size": d.conv_group, "selector_rank": d.sel_rank,
                   "selector_top_k": d.sel_top_k, "final_logit_softcapping": d.softcap,
                   "output_multiplier": d.out_mult})
    else:
        c.update({"block_size": d.block_size, "num_target_layers": d.num_target_layers})
    c["dflash_config"] = dc
    return c


def shape_from_config(c):
    dc = c["dflash_config"]
    v2 = "conv_kernel_size" in dc
    get = lambda k, default=None: dc.get(k, c.get(k, default))
    n, layers = get("num_target_layers"), c["num_hidden_layers"]
    default_taps = [n // 2] if layers == 1 else [round(1 + i * (n - 4) / (layers - 1)) for i in range(layers)]
    return DrafterShape(version=2 if v2 else 1, vocab=c["vocab_size"], hidden=c["hidden_size"],
                        inter=c["intermediate_size"], layers=c["num_hidden_layers"],
                        heads=c["num_attention_heads"], kv_heads=c["num_key_value_heads"],
                        taps=list(dc.get("target_layer_ids", default_taps)), num_target_layers=get("num_target_layers"),
                        mask_id=dc["mask_token_id"], head_dim=c["head_dim"], eps=c["rms_norm_eps"],
                        theta=c["rope_theta"], max_positions=c.get("max_position_embeddings", 32768),
                        block_size=get("block_size"), conv_taps=get("conv_kernel_size", 2),
                        conv_group=get("conv_group_size", 16), sel_rank=get("selector_rank", 32),
                        sel_top_k=get("selector_top_k", 8), softcap=get("final_logit_softcapping", 0.0),
                        out_mult=get("output_multiplier", 1.0),
                        windows=tuple(c.get("sliding_window") if t == "sliding_attention" else None
                                      for t in c.get("layer_types", ["full_attention"] * c["num_hidden_layers"])),
                        causal=layer_causality(c, dc))


def layer_causality(c, dc):
    """z-lab's rule (as tandem's engine/io/hf_config.cpp reads it): a top-level is_causal (or
    dflash_config.causal) sets every layer; without one a sliding_attention layer is causal, a full one not."""
    types = c.get("layer_types", ["full_attention"] * c["num_hidden_layers"])
    given = c.get("is_causal", dc.get("causal"))
    return tuple(bool(given) if given is not None else t == "sliding_attention" for t in types)


def load_drafter(dir_, dev, dtype=torch.float32):
    d = shape_from_config(read_json(os.path.join(dir_, "config.json")))
    m = Drafter(d)
    m.load_public_state_dict(load_safetensors(os.path.join(dir_, "model.safetensors")))
    return m.to(dev, dtype).eval()


def param_count(module):
    return sum(p.numel() for p in module.parameters())

