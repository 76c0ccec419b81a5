"""A plain-torch Qwen3 decoder in HF `Qwen3ForCausalLM`'s parameter layout (model.embed_tokens,
model.layers.N.{self_attn.{q,k,v,o}_proj, q_norm, k_norm, mlp.{gate,up,down}_proj, input_layernorm,
post_attention_layernorm}, model.norm, lm_head): training, KV-cached greedy decoding and the tap rows a DFlash
drafter reads (the residual stream after listed layers, dflash.md §1.2). Written from the architecture, not
from transformers' code; tools/verify_default_models.py compares its logits with Qwen3ForCausalLM's."""
import dataclasses
import os

import torch
from torch import nn
import torch.nn.functional as F

from tools.train.common import load_safetensors, read_json


@dataclasses.dataclass
class Qwen3Shape:
    vocab: int
    hidden: int
    inter: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int = 64
    eps: float = 1e-6
    theta: float = 10000.0
    max_positions: int = 1024
    tied: bool = True


class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        # HF's weight * h.to(input dtype), kept in the input dtype so BF16 autocast feeds attention one dtype.
        return (self.weight * h.to(x.dtype)).to(x.dtype)


def rope_tables(head_dim, theta, positions):
    """cos, sin [len(positions), head_dim] in float32 (rotate-half layout, HF's default RoPE)."""
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64, device=positions.device).float()
                           / head_dim))
    freqs = positions.float()[:, None] * inv[None, :]
    emb = torch.cat([freqs, freqs], -1)
    return emb.cos(), emb.sin()


def apply_rope(x, cos, sin):
    """x [..., T, head_dim]; cos/sin [T, head_dim] (or broadcastable)."""
    half = x.shape[-1] // 2
    rot = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos.to(x.dtype) + rot * sin.to(x.dtype)


def attend(q, k, v, mask=None, causal=False):
    """q [B, H, Tq, D], k/v [B, KV, Tk, D] (GQA: KV divides H); mask bool, True = visible, broadcastable to
    [B, H, Tq, Tk]; causal aligns query i with key i (Tq == Tk)."""
    rep = q.shape[1] // k.shape[1]
    if rep > 1:
        k = k.repeat_interleave(rep, 1)
        v = v.repeat_interleave(rep, 1)
    if hasattr(F, "scaled_dot_product_attention"):  # torch >= 2.0; Debian's 1.13 takes the plain path
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal and mask is None)
    s = (q @ k.transpose(-1, -2)).float() * q.shape[-1] ** -0.5
    if causal and mask is None:
        t = s.shape[-1]
        mask = torch.ones(t, t, dtype=torch.bool, device=s.device).tril()
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, -1).to(v.dtype) @ v


class Attention(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.s = s
        self.q_proj = nn.Linear(s.hidden, s.heads * s.head_dim, bias=False)
        self.k_proj = nn.Linear(s.hidden, s.kv_heads * s.head_dim, bias=False)
        self.v_proj = nn.Linear(s.hidden, s.kv_heads * s.head_dim, bias=False)
        self.o_proj = nn.Linear(s.heads * s.head_dim, s.hidden, bias=False)
        self.q_norm = RMSNorm(s.head_dim, s.eps)
        self.k_norm = RMSNorm(s.head_dim, s.eps)

    def query(self, x, cos, sin):
        b, t, _ = x.shape
        q = self.q_norm(self.q_proj(x).view(b, t, self.s.heads, self.s.head_dim)).transpose(1, 2)
        return apply_rope(q, cos, sin)

    def key_value(self, x, cos, sin):
        b, t, _ = x.shape
        k = self.k_norm(self.k_proj(x).view(b, t, self.s.kv_heads, self.s.head_dim)).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.s.kv_heads, self.s.head_dim).transpose(1, 2)
        return apply_rope(k, cos, sin), v

    def out(self, y):
        b, h, t, d = y.shape
        return self.o_proj(y.transpose(1, 2).reshape(b, t, h * d))


class Mlp(nn.Module):
    def __init__(self, hidden, inter):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, inter, bias=False)
        self.up_proj = nn.Linear(hidden, inter, bias=False)
        self.down_proj = nn.Linear(inter, hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.input_layernorm = RMSNorm(s.hidden, s.eps)
        self.self_attn = Attention(s)
        self.post_attention_layernorm = RMSNorm(s.hidden, s.eps)
        self.mlp = Mlp(s.hidden, s.inter)


class KVCache:
    """Per layer k/v [B, KV, capacity, D]; positions [0, length) are filled."""

    def __init__(self, s, batch, capacity, dtype, device):
        shape = (batch, s.kv_heads, capacity, s.head_dim)
        self.k = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(s.layers)]
        self.v = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(s.layers)]


class Qwen3LM(nn.Module):
    def __init__(self, s, dropout=0.0):
        super().__init__()
        self.s = s
        self.model = nn.Module()
        self.model.embed_tokens = nn.Embedding(s.vocab, s.hidden)
        self.model.layers = nn.ModuleList([Layer(s) for _ in range(s.layers)])
        self.model.norm = RMSNorm(s.hidden, s.eps)
        self.lm_head = nn.Linear(s.hidden, s.vocab, bias=False)
        if s.tied:
            self.lm_head.weight = self.model.embed_tokens.weight
        self.dropout = dropout  # training only (residual branches); inference is plain Qwen3
        self.apply(self._init)

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)

    def forward(self, ids, start=0, cache=None, taps=(), final=True):
        """Logits [B, T, V] (None with final=False) and the tap rows [B, T, len(taps)·H] (None without taps)
        of ids at positions start..start+T-1. With a cache, keys are the cache's [0, start) plus these rows
        (written into it); without, start must be 0 and attention is causal over ids."""
        b, t = ids.shape
        pos = torch.arange(start, start + t, device=ids.device)
        cos, sin = rope_tables(self.s.head_dim, self.s.theta, pos)
        mask = None
        if cache is not None and t > 1:
            qp = pos[:, None]
            kp = torch.arange(start + t, device=ids.device)[None, :]
            mask = kp <= qp
        x = self.model.embed_tokens(ids)
        got = {}
        for i, layer in enumerate(self.model.layers):
            a = layer.self_attn
            u = layer.input_layernorm(x)
            q = a.query(u, cos, sin)
            k, v = a.key_value(u, cos, sin)
            if cache is not None:
                cache.k[i][:, :, start:start + t] = k.to(cache.k[i].dtype)
                cache.v[i][:, :, start:start + t] = v.to(cache.v[i].dtype)
                k = cache.k[i][:, :, :start + t].to(q.dtype)
                v = cache.v[i][:, :, :start + t].to(q.dtype)
                y = attend(q, k, v, mask=mask)
            else:
                assert start == 0, "without a cache the rows start at position 0"
                y = attend(q, k, v, causal=True)
            h = a.out(y)
            if self.training and self.dropout:
                h = F.dropout(h, self.dropout)
            x = x + h
            h = layer.mlp(layer.post_attention_layernorm(x))
            if self.training and self.dropout:
                h = F.dropout(h, self.dropout)
            x = x + h
            if i in taps:
                got[i] = x
        tap_rows = torch.cat([got[i] for i in taps], -1) if taps else None
        logits = self.lm_head(self.model.norm(x)) if final else None
        return logits, tap_rows

    def hf_state_dict(self):
        """The tensors HF saves: lm_head.weight only when untied."""
        sd = {k: v for k, v in self.state_dict().items()}
        if self.s.tied:
            sd.pop("lm_head.weight", None)
        return sd

    def load_hf_state_dict(self, sd):
        missing, unexpected = self.load_state_dict(sd, strict=False)
        allowed = {"lm_head.weight"} if self.s.tied else set()
        if set(missing) - allowed or unexpected:
            raise ValueError(f"checkpoint mismatch: missing {sorted(set(missing) - allowed)}, "
                             f"unexpected {sorted(unexpected)}")
        if self.s.tied:
            self.lm_head.weight = self.model.embed_tokens.weight


@torch.no_grad()
def greedy(model, prompts, new_tokens, cache_dtype=torch.float32):
    """Greedy continuations [B, new_tokens] of equal-length prompts [B, P] with a KV cache (ties: lowest id,
    as torch.argmax picks the first maximum)."""
    b, p = prompts.shape
    cache = KVCache(model.s, b, p + new_tokens, cache_dtype, prompts.device)
    logits, _ = model(prompts, 0, cache)
    tok = logits[:, -1].float().argmax(-1)
    out = [tok]
    for i in range(new_tokens - 1):
        logits, _ = model(tok[:, None], p + i, cache)
        tok = logits[:, -1].float().argmax(-1)
        out.append(tok)
    return torch.stack(out, 1)


def hf_config(s, eos_id, bos_id=None, pad_id=None, dtype="bfloat16"):
    """config.json with the keys of tests/fixtures/qwen3/tiny (what save_pretrained writes for Qwen3)."""
    return {"architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
            "bos_token_id": bos_id, "dtype": dtype, "eos_token_id": eos_id, "head_dim": s.head_dim,
            "hidden_act": "silu", "hidden_size": s.hidden, "initializer_range": 0.02,
            "intermediate_size": s.inter, "layer_types": ["full_attention"] * s.layers,
            "max_position_embeddings": s.max_positions, "max_window_layers": s.layers, "model_type": "qwen3",
            "num_attention_heads": s.heads, "num_hidden_layers": s.layers, "num_key_value_heads": s.kv_heads,
            "pad_token_id": pad_id, "rms_norm_eps": s.eps,
            "rope_parameters": {"rope_theta": s.theta, "rope_type": "default"}, "sliding_window": None,
            "tie_word_embeddings": s.tied, "use_cache": True, "use_sliding_window": False,
            "vocab_size": s.vocab}


def shape_from_config(c):
    rope = c.get("rope_parameters") or {}
    return Qwen3Shape(vocab=c["vocab_size"], hidden=c["hidden_size"], inter=c["intermediate_size"],
                      layers=c["num_hidden_layers"], heads=c["num_attention_heads"],
                      kv_heads=c["num_key_value_heads"], head_dim=c["head_dim"], eps=c["rms_norm_eps"],
                      theta=rope.get("rope_theta", c.get("rope_theta", 10000.0)),
                      max_positions=c["max_position_embeddings"], tied=c["tie_word_embeddings"])


def load_target(dir_, dev, dtype=torch.float32):
    """The saved LM as this module (weights as stored, then cast to dtype), eval mode."""
    s = shape_from_config(read_json(os.path.join(dir_, "config.json")))
    m = Qwen3LM(s)
    m.load_hf_state_dict(load_safetensors(os.path.join(dir_, "model.safetensors")))
    return m.to(dev, dtype).eval()
