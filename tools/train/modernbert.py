"""A plain-torch Laya-compat DecisionModel (scorer.md §1): a ModernBERT encoder in HF `ModernBertModel`'s
parameter layout (no biases, LayerNorm without bias, GeGLU with exact GELU, global layers every third with
their own RoPE theta, local layers seeing |i - j| <= local_attention / 2, layer 0 without attn_norm), the type
embedding, two PyTorch `nn.TransformerEncoderLayer` head layers (norm first, biases, ReLU FFN of 4d), the
scorer LN -> Linear -> GELU -> Linear, the act head Linear(d+4, 256) -> GELU -> Linear(256, 2) over
ActFeatures, and the temperature buffer. Batches are padded; pads are masked out of attention.
tools/verify_default_models.py compares this encoder with transformers' ModernBertModel."""
import dataclasses
import math

import torch
from torch import nn
import torch.nn.functional as F

from tools.train.qwen3 import apply_rope, rope_tables


@dataclasses.dataclass
class DecisionShape:
    vocab: int
    hidden: int = 192
    inter: int = 384
    layers: int = 4
    head_layers: int = 2
    local_attention: int = 64
    global_every: int = 3
    global_theta: float = 160000.0
    local_theta: float = 10000.0
    eps: float = 1e-5
    max_positions: int = 512

    @property
    def heads(self):
        return self.hidden // 64


class NoBiasLayerNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        return F.layer_norm(x, (x.shape[-1],), self.weight, None, self.eps)


class EncoderLayer(nn.Module):
    def __init__(self, s, index):
        super().__init__()
        self.attn_norm = nn.Identity() if index == 0 else NoBiasLayerNorm(s.hidden, s.eps)
        self.attn = nn.Module()
        self.attn.Wqkv = nn.Linear(s.hidden, 3 * s.hidden, bias=False)
        self.attn.Wo = nn.Linear(s.hidden, s.hidden, bias=False)
        self.mlp_norm = NoBiasLayerNorm(s.hidden, s.eps)
        self.mlp = nn.Module()
        self.mlp.Wi = nn.Linear(s.hidden, 2 * s.inter, bias=False)
        self.mlp.Wo = nn.Linear(s.inter, s.hidden, bias=False)
        self.is_global = index % s.global_every == 0


class Encoder(nn.Module):
    def __init__(self, s, dropout=0.0):
        super().__init__()
        self.s = s
        self.dropout = dropout  # training only (F.dropout is the identity in eval mode)
        self.embeddings = nn.Module()
        self.embeddings.tok_embeddings = nn.Embedding(s.vocab, s.hidden)
        self.embeddings.norm = NoBiasLayerNorm(s.hidden, s.eps)
        self.layers = nn.ModuleList([EncoderLayer(s, i) for i in range(s.layers)])
        self.final_norm = NoBiasLayerNorm(s.hidden, s.eps)

    def forward(self, ids, valid):
        """ids [N, T], valid bool [N, T] (False on pads) -> hidden [N, T, d]."""
        n, t = ids.shape
        s = self.s
        pos = torch.arange(t, device=ids.device)
        tables = {theta: rope_tables(64, theta, pos) for theta in (s.global_theta, s.local_theta)}
        keys = valid[:, None, None, :]
        dist = (pos[:, None] - pos[None, :]).abs()
        # A pad row far past the end would see no key in its window (NaN rows poison later layers through
        # V); pads may see every key in their window, real rows only real keys.
        pad_rows = ~valid[:, None, :, None]
        local = (keys | pad_rows) & (dist <= s.local_attention // 2)[None, None]
        x = self.embeddings.norm(self.embeddings.tok_embeddings(ids))
        for layer in self.layers:
            cos, sin = tables[s.global_theta if layer.is_global else s.local_theta]
            qkv = layer.attn.Wqkv(layer.attn_norm(x)).view(n, t, 3, s.heads, 64)
            q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
            mask = keys.expand(n, 1, t, t) if layer.is_global else local
            if hasattr(F, "scaled_dot_product_attention"):
                y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            else:
                sc = (q @ k.transpose(-1, -2)).float() * 0.125
                y = torch.softmax(sc.masked_fill(~mask, float("-inf")), -1).to(v.dtype) @ v
            drop = lambda v: F.dropout(v, self.dropout, self.training) if self.dropout > 0 else v
            x = x + drop(layer.attn.Wo(y.transpose(1, 2).reshape(n, t, s.hidden)))
            a, g = layer.mlp.Wi(layer.mlp_norm(x)).chunk(2, -1)
            x = x + drop(layer.mlp.Wo(F.gelu(a) * g))
        return self.final_norm(x)


def act_features(cls_rows, logits, kmask):
    """ActFeatures (scorer.md §2) for padded option logits [N, K] with kmask bool [N, K] (True = an option)."""
    dt = torch.promote_types(cls_rows.dtype, torch.float32)  # F32 at least (F64 in the reference checks)
    k = kmask.sum(-1)
    kf = k.clamp(min=2).to(dt)
    z = logits.to(dt).masked_fill(~kmask, float("-inf"))
    q = torch.softmax(z, -1).masked_fill(~kmask, 0.0)
    top = torch.topk(q, min(2, q.shape[-1]), -1).values
    top1 = top[:, 0]
    top2 = top[:, 1] if top.shape[-1] > 1 else torch.zeros_like(top1)
    top2 = torch.where(k > 1, top2, torch.zeros_like(top2))
    ent = -(q * torch.log(q.clamp(min=1e-9))).sum(-1) / torch.log(kf)
    has = (k > 0).float()
    f = torch.stack([top1 * has, (top1 - top2) * has, ent * has, kf / 255.0], -1)
    return torch.cat([cls_rows.to(dt), f], -1)


class DecisionModel(nn.Module):
    def __init__(self, s, temperature=(1.0, 1.0, 1.0), dropout=0.0):
        super().__init__()
        self.s = s
        d = s.hidden
        self.encoder = Encoder(s, dropout)
        self.type_emb = nn.Embedding(3, d)
        layer = nn.TransformerEncoderLayer(d, d // 64, dim_feedforward=4 * d, dropout=dropout, activation="relu",
                                           batch_first=True, norm_first=True, layer_norm_eps=1e-5)
        self.head = nn.TransformerEncoder(layer, s.head_layers, enable_nested_tensor=False)
        self.scorer = nn.Sequential(nn.LayerNorm(d, eps=1e-5), nn.Linear(d, d), nn.GELU(), nn.Linear(d, 1))
        self.act_head = nn.Sequential(nn.Linear(d + 4, 256), nn.GELU(), nn.Linear(256, 2))
        self.register_buffer("temperature", torch.tensor(list(temperature), dtype=torch.float32))
        for name, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02 if "emb" in name else 1.0 / math.sqrt(p.shape[1]) * 0.5)

    def forward(self, ids, valid, qtype, marker_pos, kmask):
        """ids/valid [N, T], qtype [N], marker_pos [N, K] (positions, 0 where kmask is False) ->
        option logits [N, K] (garbage where kmask is False) and act [N, 2]."""
        h = self.encoder(ids, valid) + self.type_emb(qtype)[:, None, :]
        h = self.head(h, src_key_padding_mask=~valid)
        rows = torch.gather(h, 1, marker_pos[..., None].expand(-1, -1, h.shape[-1]))
        logits = self.scorer(rows).squeeze(-1)
        feats = act_features(h[:, 0].detach(), logits.detach(), kmask)
        return logits, self.act_head(feats)


def encoder_config(s, ids, dtype="bfloat16"):
    """encoder/config.json in transformers 5's ModernBERT key layout (as tests/fixtures/decision-tiny's)."""
    cls, sep, pad, mask = ids
    return {"architectures": ["ModernBertModel"], "model_type": "modernbert", "vocab_size": s.vocab,
            "hidden_size": s.hidden, "intermediate_size": s.inter, "num_hidden_layers": s.layers,
            "num_attention_heads": s.heads, "hidden_activation": "gelu", "max_position_embeddings": s.max_positions,
            "norm_eps": s.eps, "norm_bias": False, "attention_bias": False, "mlp_bias": False,
            "attention_dropout": 0.0, "embedding_dropout": 0.0, "mlp_dropout": 0.0,
            "local_attention": s.local_attention,
            "layer_types": ["full_attention" if i % s.global_every == 0 else "sliding_attention"
                            for i in range(s.layers)],
            "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": s.global_theta},
                                "sliding_attention": {"rope_type": "default", "rope_theta": s.local_theta}},
            "pad_token_id": pad, "cls_token_id": cls, "sep_token_id": sep, "bos_token_id": cls,
            "eos_token_id": sep, "mask_token_id": mask, "tie_word_embeddings": True, "dtype": dtype}


def load_decision(dir_, dev):
    """The saved Laya checkpoint as this module (F32 from the stored dtypes), eval mode."""
    import os
    from tools.train.common import load_safetensors, read_json
    enc = read_json(os.path.join(dir_, "encoder/config.json"))
    laya = read_json(os.path.join(dir_, "rl_agent_config.json"))
    types = enc["layer_types"]
    rope = enc["rope_parameters"]
    fulls = [i for i, t in enumerate(types) if t == "full_attention"]
    every = fulls[1] if len(fulls) > 1 else len(types)
    assert types == ["full_attention" if i % every == 0 else "sliding_attention" for i in range(len(types))], types
    s = DecisionShape(vocab=enc["vocab_size"], hidden=enc["hidden_size"], inter=enc["intermediate_size"],
                      layers=enc["num_hidden_layers"], head_layers=laya["head_layers"],
                      local_attention=enc["local_attention"],
                      global_every=every,
                      global_theta=rope["full_attention"]["rope_theta"],
                      local_theta=rope["sliding_attention"]["rope_theta"], eps=enc["norm_eps"],
                      max_positions=enc["max_position_embeddings"])
    m = DecisionModel(s)
    m.load_state_dict({k: v.float() for k, v in load_safetensors(os.path.join(dir_, "model.safetensors")).items()},
                      strict=True)
    return m.to(dev).eval()
