#!/usr/bin/env python3
"""Checks of the pure-torch training code at toy sizes, no tokenizers or transformers needed (runs on Debian's
CPU torch too; tools/train_default_models.sh runs it first): the Qwen3 module's KV-cached decoding equals its
full forward, the reference speculative loop (v1 and v2 drafters, blocks 2-16) equals plain greedy decoding, a
drafter's blocks see only context before their anchor, the dynamic convolution starts as the identity, the
decision model ignores pads and lays out the ticket task, safetensors round trips, and the tensor names are those
tandem loads (tests/fixtures/decision-tiny's list)."""
import os
import random
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import torch  # noqa: E402

from tools.train import common, tickets  # noqa: E402
from tools.train.dflash import Drafter, DrafterShape  # noqa: E402
from tools.train.laya_layout import compat_sequence  # noqa: E402
from tools.train.modernbert import DecisionModel, DecisionShape  # noqa: E402
from tools.train.qwen3 import KVCache, Qwen3LM, Qwen3Shape, greedy  # noqa: E402
from tools.train.spec_loop import plain_greedy, speculative  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def scramble(m, gen, scale=1.0):
    with torch.no_grad():
        for n, p in m.named_parameters():
            if "norm" in n:
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=gen))
            elif p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=gen) * scale / p.shape[-1] ** 0.5)


def check_lm():
    torch.manual_seed(0)
    s = Qwen3Shape(vocab=97, hidden=128, inter=192, layers=4, heads=2, kv_heads=1, max_positions=256)
    m = Qwen3LM(s).double().eval()
    scramble(m, torch.Generator().manual_seed(1))
    ids = torch.randint(0, 97, (2, 20))
    full, taps = m(ids, taps=(1, 3))
    assert taps.shape == (2, 20, 256)
    cache = KVCache(s, 2, 32, torch.float64, "cpu")
    a, _ = m(ids[:, :12], 0, cache)
    b, _ = m(ids[:, 12:], 12, cache)
    assert torch.allclose(torch.cat([a, b], 1), full, atol=1e-9), "KV-cached forward differs from the full one"
    g = greedy(m, ids[:, :5], 8, cache_dtype=torch.float64)
    for r in range(2):
        assert g[r].tolist() == plain_greedy(m, ids[r, :5].tolist(), 8), "cached greedy differs"
    return m


def check_spec(target):
    gen = torch.Generator().manual_seed(2)
    total = {1: [], 2: []}
    for version in (1, 2):
        d = DrafterShape(version=version, vocab=97, hidden=128, inter=128, layers=2, heads=2, kv_heads=1,
                         taps=[1, 3], num_target_layers=4, mask_id=96, block_size=16, sel_rank=8, sel_top_k=4)
        dr = Drafter(d).double().eval()
        scramble(dr, gen, 0.5)
        # Context before the anchor only: changing later taps leaves the block unchanged.
        taps = torch.randn(1, 10, 256, generator=gen, dtype=torch.float64)
        ids = torch.tensor([[[5] + [96] * 3]])
        h1 = dr.blocks(target.model.embed_tokens.weight, ids, torch.tensor([[6]]), dr.context(taps))
        taps2 = taps.clone()
        taps2[:, 6:] += 1.0
        h2 = dr.blocks(target.model.embed_tokens.weight, ids, torch.tensor([[6]]), dr.context(taps2))
        assert torch.allclose(h1, h2), "a block saw context at or after its anchor"
        for block in (2, 4, 8, 16):
            for trial in range(3):
                prompt = torch.randint(0, 96, (3 + 4 * trial,), generator=gen).tolist()
                want = plain_greedy(target, prompt, 13)
                got, lengths = speculative(target, dr, prompt, 13, block)
                assert got == want, f"v{version} block {block}: speculative output differs from greedy"
                assert all(1 <= x <= block for x in lengths)
                total[version] += lengths
    return total


def check_conv_identity():
    d = DrafterShape(version=2, vocab=50, hidden=64, inter=64, layers=1, heads=1, kv_heads=1, taps=[0],
                     num_target_layers=2, mask_id=49)
    conv = Drafter(d).layers[0].attention_conv
    z = torch.randn(3, 5, 64)
    with torch.no_grad():
        conv.kernel_projection.weight.zero_()
    assert torch.allclose(conv(z, conv.deltas(z), 0), z), "the convolution does not start as the identity"


def check_decision():
    s = DecisionShape(vocab=300, hidden=64, inter=96, layers=3, head_layers=2, local_attention=8)
    m = DecisionModel(s).eval()
    ids = torch.randint(5, 300, (2, 30))
    valid = torch.ones(2, 30, dtype=torch.bool)
    valid[1, 20:] = False
    pos = torch.tensor([[3, 9], [4, 0]])
    km = torch.tensor([[True, True], [True, False]])
    qt = torch.tensor([0, 2])
    z, act = m(ids, valid, qt, pos, km)
    z1, act1 = m(ids[1:, :20], valid[1:, :20], qt[1:], pos[1:, :1], km[1:, :1])
    assert torch.allclose(z[1, :1], z1[0], atol=1e-5) and torch.allclose(act[1], act1[0], atol=1e-5), "pads leak"
    names = set(m.state_dict())
    tiny = set(common.load_safetensors(os.path.join(ROOT, "tests/fixtures/decision-tiny/model.safetensors")))
    norm = lambda n: n.replace("layers.1.", "layers.N.").replace("layers.2.", "layers.N.").replace("layers.3.", "layers.N.")
    assert {norm(n) for n in names} == {norm(n) for n in tiny}, sorted({norm(n) for n in names} ^ {norm(n) for n in tiny})


def check_tickets():
    split = tickets.split_frames(3)
    for k, (tr, he) in split.items():
        assert tr and he and not set(tr) & set(he), k
    rng = random.Random(0)
    enc = lambda text: [min(ord(c), 299) for c in text]  # a stand-in tokenizer: one id per character
    for frames in ({k: v[0] for k, v in split.items()}, {k: v[1] for k, v in split.items()}):
        for _ in range(50):
            t = tickets.make_ticket(rng, frames)
            for q in tickets.questions_for(rng, t):
                ids, markers = compat_sequence(enc, (1, 2, 4), tickets.QTYPE_INDEX[q["qtype"]], q["question"],
                                               q["options"], enc(t["state"]))
                assert len(markers) == len(q["options"]) and all(ids[m] == 4 for m in markers)
                assert 0 <= q["answer"] < max(2, len(q["options"]))


def check_safetensors():
    t = {"a": torch.randn(3, 4).to(torch.bfloat16), "b": torch.arange(5, dtype=torch.float32), "c": torch.zeros(0)}
    with tempfile.TemporaryDirectory() as d:
        common.save_safetensors(t, os.path.join(d, "x.safetensors"))
        back = common.load_safetensors(os.path.join(d, "x.safetensors"))
    assert set(back) == set(t) and all(torch.equal(back[k], t[k]) and back[k].dtype == t[k].dtype for k in t)


def main():
    target = check_lm()
    lengths = check_spec(target)
    check_conv_identity()
    check_decision()
    check_tickets()
    check_safetensors()
    print("selftest ok; random drafters' acceptance lengths:",
          {v: sum(x) / len(x) for v, x in lengths.items()}, file=sys.stderr)


if __name__ == "__main__":
    main()
