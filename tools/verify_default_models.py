#!/usr/bin/env python3
"""Verifies the trained default models with the independent libraries and measures them (run by
tools/train_default_models.sh on the GPU machine, one --part per process):
  lm        tokenizers.Tokenizer reloads tokenizer.json and reproduces the training ids of every held-out file
            (and decodes them back to the text); safetensors reads model.safetensors as common.py wrote it;
            transformers.Qwen3ForCausalLM loads models/pylm and its logits match tools/train/qwen3.py's on held-out
            prompts (F32, TF32 off); HF generate's greedy tokens are compared with the plain loop's.
  dflash1,  the drafter's safetensors read back by the safetensors package; acceptance lengths of the reference loop
  dflash2   of dflash.md §1.6 (tools/train/spec_loop.py, greedy, F32 from the BF16 weights) at blocks 4, 8 and 16 on
            held-out-file prompts, each run checked equal to plain greedy decoding; the first prompts again with 64
            new tokens for the regression test's eval.json (written into the drafter's folder).
  decision  tokenizers.Tokenizer reloads tokenizer/tokenizer.json and lays eval.json's questions out to the same ids;
            transformers.ModernBertModel with the checkpoint's encoder matches tools/train/modernbert.py's encoder;
            accuracy per question type recomputed from the saved weights.
Writes the part's figures as JSON to --figures. Fails (non-zero) when a check fails.
    python3 tools/verify_default_models.py --part lm --root . --work /tmp/work --figures /tmp/f-lm.json"""
import argparse
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402

from tools.train import common  # noqa: E402

LOGIT_TOLERANCE = 2e-3  # F32 against F32, TF32 off; logits of order 10
ENCODER_TOLERANCE = 2e-3


def check(ok, what):
    if not ok:
        raise SystemExit(f"CHECK FAILED: {what}")
    common.log.info("ok: %s", what)


def check_safetensors_file(path):
    from safetensors.torch import load_file
    theirs, mine = load_file(path), common.load_safetensors(path)
    check(set(theirs) == set(mine) and all(theirs[k].dtype == mine[k].dtype and torch.equal(theirs[k], mine[k])
                                           for k in mine), f"safetensors reads {path} as written ({len(mine)} tensors)")


def held_prompts(corpus, n, lo, hi, seed):
    rng = random.Random(seed)
    docs = [d.tolist() for d in corpus["held_docs"] if len(d) > hi + 1]
    out = []
    while len(out) < n and docs:
        d = rng.choice(docs)
        p = rng.randint(lo, hi)
        s = rng.randint(0, len(d) - p - 1)
        out.append(d[s:s + p])
    return out


def part_lm(a, dev):
    from tokenizers import Tokenizer
    from transformers import Qwen3ForCausalLM
    from tools.train.qwen3 import load_target
    from tools.train.spec_loop import plain_greedy
    d = os.path.join(a.root, "models/pylm")
    corpus = torch.load(os.path.join(a.work, "corpus.pt"))
    info = common.read_json(os.path.join(d, "corpus.json"))
    root = info["corpus"]["root"]
    tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    same = 0
    for name, ids in zip(corpus["held_files"], corpus["held_docs"]):
        with open(os.path.join(root, name), encoding="utf-8") as f:
            text = f.read()
        got = tok.encode(text, add_special_tokens=False).ids
        same += got == ids.tolist() and tok.decode(got, skip_special_tokens=False) == text
    check(same == len(corpus["held_files"]), f"tokenizer.json reloads and round-trips {same}/{len(corpus['held_files'])} held-out files")
    check([tok.token_to_id(s) for s in ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|mask|>"]] == [0, 1, 2, 3],
          "special token ids")
    check_safetensors_file(os.path.join(d, "model.safetensors"))
    hf = Qwen3ForCausalLM.from_pretrained(d, dtype=torch.float32).to(dev).eval()
    hf.generation_config.eos_token_id = None  # compare full-length greedy runs
    hf.generation_config.pad_token_id = 0
    mine = load_target(d, dev)
    worst, agree, total = 0.0, 0, 0
    prompts = held_prompts(corpus, 2 if a.smoke else 6, 16, 24 if a.smoke else 200, 11)
    with torch.no_grad():
        for p in prompts:
            x = torch.tensor([p], device=dev)
            worst = max(worst, (hf(x).logits[0] - mine(x)[0][0]).abs().max().item())
            n = 8 if a.smoke else 32
            g = hf.generate(x, max_new_tokens=n, do_sample=False)[0, len(p):]
            ours = plain_greedy(mine, p, n)
            agree += sum(int(u == v) for u, v in zip(g.tolist(), ours))
            total += n
    check(worst < LOGIT_TOLERANCE, f"Qwen3ForCausalLM logits match tools/train/qwen3.py within {worst:.2e}")
    samples = [{"prompt": tok.decode(p), "greedy": tok.decode(plain_greedy(mine, p, 48))} for p in prompts[:2]]
    return {"pylm": {"samples": samples, "corpus": info["corpus"], "training": info["figures"], "hf_logit_max_diff": worst,
                     "hf_greedy_token_agreement": agree / max(1, total),
                     "bytes": common.dir_bytes(d)}}


def part_dflash(a, dev, version):
    from tools.train.dflash import load_drafter
    from tools.train.qwen3 import load_target
    from tools.train.spec_loop import plain_greedy, speculative
    name = "pylm-dflash" if version == 1 else "pylm-dflash2"
    d = os.path.join(a.root, "models", name)
    check_safetensors_file(os.path.join(d, "model.safetensors"))
    corpus = torch.load(os.path.join(a.work, "corpus.pt"))
    target = load_target(os.path.join(a.root, "models/pylm"), dev)
    drafter = load_drafter(d, dev)
    n, new = (2, 12) if a.smoke else (24, 128)
    prompts = held_prompts(corpus, n, 16 if a.smoke else 64, 24 if a.smoke else 192, 21)
    t0 = time.time()
    plain = [plain_greedy(target, p, new) for p in prompts]
    out = {"prompts": len(prompts), "new_tokens": new, "mean_acceptance": {}, "per_prompt_mean": {},
           "lossless_mismatches": {}}
    blocks = [4, 8, 16]
    for b in blocks:
        lengths, mism, per = [], 0, []
        for p, want in zip(prompts, plain):
            got, ls = speculative(target, drafter, p, new, b)
            mism += got != want
            lengths += ls
            per.append(sum(ls) / len(ls))
        out["mean_acceptance"][str(b)] = sum(lengths) / len(lengths)
        out["per_prompt_mean"][str(b)] = [round(x, 3) for x in per]
        out["lossless_mismatches"][str(b)] = mism
        common.log.info("v%d block %d: mean acceptance length %.3f over %d rounds, %d/%d outputs differ from greedy",
                        version, b, out["mean_acceptance"][str(b)], len(lengths), mism, len(prompts))
    check(sum(out["lossless_mismatches"].values()) <= max(1, len(prompts) * len(blocks) // 20),
          f"speculative output equals plain greedy (mismatches {out['lossless_mismatches']}, F32 near-ties allowed "
          "in 5%)")
    # The regression test's set (tests/engine/spec/shipped_models_test.cpp): 8 prompts, 64 new tokens.
    sub_prompts, sub_new = prompts[:8], (8 if a.smoke else 64)
    sub = {"target": "models/pylm", "max_tokens": sub_new, "prompts": sub_prompts, "mean_acceptance": {},
           "greedy": [plain_greedy(target, p, sub_new) for p in sub_prompts],
           "about": "held-out-file prompts (models/pylm/corpus.json); mean_acceptance = total committed tokens per "
                    "round over all rounds of all prompts, measured by tools/train/spec_loop.py (F32 from the BF16 "
                    "weights, greedy)"}
    for b in blocks:
        ls = []
        for p in sub_prompts:
            ls += speculative(target, drafter, p, sub_new, b)[1]
        sub["mean_acceptance"][str(b)] = sum(ls) / len(ls)
    common.write_json(os.path.join(d, "eval.json"), sub, compact=True)
    out["eval_json_mean_acceptance"] = sub["mean_acceptance"]
    out["training"] = common.read_json(os.path.join(d, "training.json"))
    out["bytes"] = common.dir_bytes(d)
    out["seconds"] = time.time() - t0
    return {name: out}


def part_decision(a, dev):
    from tokenizers import Tokenizer
    from transformers import ModernBertConfig, ModernBertModel
    from tools.train.laya_layout import compat_sequence
    from tools.train.modernbert import load_decision
    from tools.train.tickets import QTYPE_INDEX
    d = os.path.join(a.root, "models/decision-tickets")
    check_safetensors_file(os.path.join(d, "model.safetensors"))
    ev = common.read_json(os.path.join(d, "eval.json"))
    tok = Tokenizer.from_file(os.path.join(d, "tokenizer/tokenizer.json"))
    enc = lambda t: tok.encode(t, add_special_tokens=False).ids
    same = 0
    for q in ev["questions"]:
        ids, markers = compat_sequence(enc, (1, 2, 4), QTYPE_INDEX[q["qtype"]], q["question"], q["options"],
                                       enc(q["state"]), ev["max_len"], ev["head_max_len"])
        same += ids == q["ids"] and markers == q["markers"]
    check(same == len(ev["questions"]), f"tokenizer.json reloads and lays out {same}/{len(ev['questions'])} questions")
    model = load_decision(d, dev)
    cfg = ModernBertConfig.from_pretrained(os.path.join(d, "encoder"))
    hf = ModernBertModel(cfg)
    sd = {k[len("encoder."):]: v.float() for k, v in common.load_safetensors(os.path.join(d, "model.safetensors")).items()
          if k.startswith("encoder.")}
    hf.load_state_dict(sd, strict=True)
    hf = hf.to(dev).eval()
    worst = 0.0
    with torch.no_grad():
        for q in ev["questions"][:6]:
            x = torch.tensor([q["ids"]], device=dev)
            ones = torch.ones_like(x, dtype=torch.bool)
            theirs = hf(input_ids=x, attention_mask=ones.long()).last_hidden_state[0]
            worst = max(worst, (theirs - model.encoder(x, ones)[0]).abs().max().item())
    check(worst < ENCODER_TOLERANCE, f"ModernBertModel matches tools/train/modernbert.py's encoder within {worst:.2e}")
    from tools.train.decision_metrics import accuracy
    from tools.train_decision import predict
    items = [dict(q, qi=QTYPE_INDEX[q["qtype"]]) for q in ev["questions"]]
    acc = accuracy(items, predict(model, items, dev))
    per_type = {k: sum(q["qtype"] == k for q in items) for k in acc}  # one question is 1/n of its type's figure
    check(all(abs(acc[k] - ev["measured"][k]) <= 1.01 / max(1, per_type[k]) for k in acc),
          f"eval.json's measured accuracy reproduces within one question: {acc} vs {ev['measured']}")
    tr = common.read_json(os.path.join(d, "training.json"))
    return {"decision-tickets": {"encoder_max_diff": worst, "eval_json_accuracy": acc,
                                 "training": tr["figures"], "bytes": common.dir_bytes(d)}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", choices=["lm", "dflash1", "dflash2", "decision"], required=True)
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--work", required=True)
    ap.add_argument("--figures", required=True)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--log", default=None)
    a = ap.parse_args()
    a.root = os.path.abspath(a.root)
    common.setup_logging(a.log, f"verify-{a.part}")
    if torch.cuda.is_available():  # comparisons in true F32
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    if a.part == "lm":
        fig = part_lm(a, dev)
    elif a.part == "decision":
        fig = part_decision(a, dev)
    else:
        fig = part_dflash(a, dev, 1 if a.part == "dflash1" else 2)
    common.write_json(a.figures, fig)
    common.log.info("figures %s", fig)


if __name__ == "__main__":
    main()
