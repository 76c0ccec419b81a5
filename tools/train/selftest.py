#!/usr/bin/env python3
"""Checks of the pure-torch training code, no tokenizers or transformers needed (runs on Debian's CPU torch too;
tools/train_default_models.sh runs it first). Against the float64 references of tools/make_*_fixture.py that
tandem's C++ is tested against (tests/fixtures): the Qwen3 module's logits, taps and greedy tokens (HF
Qwen3ForCausalLM), the v1/v2 drafters' block logits and selector walk, the decision module's logits and act
values (HF ModernBertModel + PyTorch head). At toy sizes: the Qwen3 module's KV-cached decoding equals its
full forward, the reference speculative loop (v1 and v2 drafters, blocks 2-16) equals plain greedy decoding, a
drafter's blocks see only context before their anchor, the dynamic convolution starts as the identity, the
decision model ignores pads and lays out the ticket task (the training-only variations keep every answer true),
the decision figures' calibration recovers a known temperature, safetensors round trips, and the tensor names are
those tandem loads (tests/fixtures/decision-tiny's list)."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import torch  # noqa: E402

from tools.train import common, selftest_pure  # noqa: E402
from tools.train.dflash import Drafter, DrafterShape  # noqa: E402
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


def check_dflash_reference():
    """The drafter module against tools/make_dflash_fixture.py's float64 reference (tests/fixtures/dflash, the
    reference tandem's C++ drafters are tested against): block logits and, for v2, the selector walk."""
    from tools.train.dflash import shape_from_config
    from tools.train.qwen3 import load_target
    from tools.train.spec_loop import walk
    ref = common.read_json(os.path.join(ROOT, "tests/fixtures/dflash/reference.json"))
    target = load_target(os.path.join(ROOT, ref["target"]), "cpu", torch.float64)
    worst = 0.0
    for dr in ref["drafters"]:
        d = os.path.join(ROOT, dr["dir"])
        m = Drafter(shape_from_config(common.read_json(os.path.join(d, "config.json"))))
        sd = common.load_safetensors(os.path.join(d, "model.safetensors"))
        # The fixture is in the public layout: candidate_selector.* with the codebooks stored without .weight.
        sd = {(k + ".weight" if k.endswith("_codebook") else k): v for k, v in sd.items()}
        m.load_state_dict(sd, strict=True)
        m = m.double().eval()
        for case in dr["cases"]:
            taps = torch.tensor(case["taps"], dtype=torch.float64)[None]
            a, b = case["context_len"], case["block_size"]
            ids = torch.tensor([[[case["anchor"]] + [m.d.mask_id] * (b - 1)]])
            with torch.no_grad():
                h = m.blocks(target.model.embed_tokens.weight, ids, torch.tensor([[a]]), m.context(taps))[0, 1:]
                width = case.get("draft_vocab") or target.s.vocab
                logits = h @ target.lm_head.weight[:width].T
            want = torch.tensor(case["logits"], dtype=torch.float64)
            worst = max(worst, ((logits - want).abs() / want.abs().clamp(min=1)).max().item())
            if dr["version"] == 2:
                assert walk(m, logits, h, case["anchor"]) == case["selector"]["path"], "selector walk differs"
    # RoPE tables are float32 here (the reference takes cos/sin in float64): float32-level differences only.
    assert worst < 1e-5, f"drafter block logits differ from the reference by {worst:.2e}"


def check_qwen3_reference():
    """The Qwen3 module against HF Qwen3ForCausalLM's float64 logits and tap rows (tests/fixtures/qwen3, untied)."""
    from tools.train.qwen3 import load_target
    ref = common.read_json(os.path.join(ROOT, "tests/fixtures/qwen3/reference.json"))
    m = ref["models"][0]
    target = load_target(os.path.join(ROOT, m["dir"]), "cpu", torch.float64)
    worst = 0.0
    for case in m["cases"]:
        with torch.no_grad():
            logits, taps = target(torch.tensor([case["prompt"]]), taps=tuple(m["tap_layers"]))
        want = torch.tensor(case["logits"], dtype=torch.float64)
        worst = max(worst, ((logits[0] - want).abs() / want.abs().clamp(min=1)).max().item())
        hid = torch.cat([torch.tensor(case["hidden"][str(i)], dtype=torch.float64) for i in m["tap_layers"]], -1)
        worst = max(worst, ((taps[0] - hid).abs() / hid.abs().clamp(min=1)).max().item())
        assert plain_greedy(target, case["prompt"], case["max_new_tokens"]) == case["greedy"], "greedy differs from HF"
    assert worst < 1e-5, f"Qwen3 logits/taps differ from HF's by {worst:.2e}"


def check_decision_reference():
    """The decision module against HF ModernBertModel + the PyTorch head in float64 (tests/fixtures/decision)."""
    from tools.train.modernbert import load_decision
    ref = common.read_json(os.path.join(ROOT, "tests/fixtures/decision/reference.json"))
    m = load_decision(os.path.join(ROOT, ref["model"]), "cpu").double()
    worst, n = 0.0, 0
    for batch in ref["batches"][:12]:
        for q in batch["sequences"]:
            if not q["ids"] or not q["markers"]:
                continue
            ids = torch.tensor([q["ids"]])
            k = len(q["markers"])
            with torch.no_grad():
                z, act = m(ids, torch.ones_like(ids, dtype=torch.bool), torch.tensor([q["qtype"]]),
                           torch.tensor([q["markers"]]), torch.ones(1, k, dtype=torch.bool))
            for got, want in ((z[0], q["logits"]), (act[0], q["act"])):
                want = torch.tensor(want, dtype=torch.float64)
                worst = max(worst, ((got.double() - want).abs() / want.abs().clamp(min=1)).max().item())
            n += 1
    assert n > 20 and worst < 1e-5, f"decision logits/act differ from HF + PyTorch by {worst:.2e} ({n} questions)"


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


def check_safetensors():
    t = {"a": torch.randn(3, 4).to(torch.bfloat16), "b": torch.arange(5, dtype=torch.float32), "c": torch.zeros(0)}
    with tempfile.TemporaryDirectory() as d:
        common.save_safetensors(t, os.path.join(d, "x.safetensors"))
        back = common.load_safetensors(os.path.join(d, "x.safetensors"))
    assert set(back) == set(t) and all(torch.equal(back[k], t[k]) and back[k].dtype == t[k].dtype for k in t)


def main():
    target = check_lm()
    lengths = check_spec(target)
    check_qwen3_reference()
    check_dflash_reference()
    check_decision_reference()
    check_conv_identity()
    check_decision()
    selftest_pure.main()
    check_safetensors()
    print("selftest ok; random drafters' acceptance lengths:",
          {v: sum(x) / len(x) for v, x in lengths.items()}, file=sys.stderr)


if __name__ == "__main__":
    main()
