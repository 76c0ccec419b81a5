#!/usr/bin/env python3
"""Trains the embedded default DecisionModel (models/decision-tickets) on the synthetic support-ticket task of
tools/train/tickets.py, in the Laya layout tandem loads (scorer.md §1): its own byte-level BPE tokenizer (HF
`tokenizers`, ModernBERT specials [UNK] [CLS] [SEP] [PAD] [MASK], no normalizer), sequences laid out exactly as
coordinator/build_layout.cpp does (tools/train/laya_layout.py), a plain-torch ModernBERT encoder + Laya head.
Losses: choice and score, cross-entropy over the options' logits; noul (one option, the statement), binary
cross-entropy on its logit, so P(true) = sigmoid(z / T); the act head, a 2-way "the pick is right" classifier on
detached ActFeatures (weight 0.1). Splits: train tickets from training frames; calib and test tickets from
held-out frames (disjoint tickets). The best calib accuracy is kept; temperatures (per question type and option
count; noul's the sigmoid's) are fitted on calib by NLL; accuracy, NLL and ECE are measured on test with the
BF16 weights as saved. Writes model.safetensors, encoder/config.json, rl_agent_config.json,
tokenizer/tokenizer.json, sample.json (the demo's questions), eval.json (300 test questions with their laid-out
ids, answers and the measured accuracy, for tests/coordinator/shipped_decision_test.cpp), training.json.
    python3 tools/train_decision.py --root . --seconds 230 [--smoke]"""
import argparse
import copy
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from tools.train import common, tickets  # noqa: E402
from tools.train.decision_metrics import (accuracy, by_key, calibrate, correct, ece, nll, said_against_accuracy,  # noqa: E402
                                          temp_of)
from tools.train.laya_layout import compat_sequence  # noqa: E402
from tools.train.modernbert import DecisionModel, DecisionShape, encoder_config  # noqa: E402

UNK, CLS, SEP, PAD, MASK = 0, 1, 2, 3, 4
MAX_LEN, HEAD_MAX_LEN = 512, 192
TRAIN_QUESTIONS = {"choice": 4, "score": 2, "noul": 3}
TRAIN_EXTRA_PRODUCT = 2  # product questions beyond the one of TRAIN_QUESTIONS, each with other options
DROPOUT = 0.1  # training only: on the encoder's and the head's attention and MLP outputs
FULL = dict(vocab=2048, train_tickets=60000, calib_tickets=1500, test_tickets=3000, batch=256, tok_tickets=20000)
SMOKE = dict(vocab=300, train_tickets=60, calib_tickets=40, test_tickets=80, batch=16, tok_tickets=200)
SAMPLE_STATE = ("Customer email: my order 4521 arrived broken and I want a refund, not a replacement. "
                "This is the second time this month and I am furious!")
SAMPLE_QUESTIONS = [("choice", "What does the customer want?", ["refund", "replacement", "store credit", "repair"]),
                    ("score", "How urgent is this ticket?", ["low", "medium", "high"]),
                    ("noul", "The customer is angry.", ["true"]),
                    ("choice", "Which team should handle it?", ["billing", "shipping", "returns"]),
                    ("noul", "The customer has contacted support before.", ["true"])]


def train_tokenizer(texts, vocab):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE())
    # Qwen's split: digits one by one, so "a number is given" is ten tokens to learn, not hundreds of merged
    # numbers (with GPT-2's split, has_order reached 0.56-0.69 on held-out frames).
    tok.pre_tokenizer = common.qwen_pre_tokenizer()
    tok.decoder = decoders.ByteLevel()
    sp = lambda c, **kw: AddedToken(c, special=True, normalized=False, **kw)
    specials = [sp("[UNK]"), sp("[CLS]"), sp("[SEP]"), sp("[PAD]"), sp("[MASK]", lstrip=True)]
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    for i, name in enumerate(["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]):
        assert tok.token_to_id(name) == i, (name, tok.token_to_id(name))
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
                                                       special_tokens=[("[CLS]", CLS), ("[SEP]", SEP)])
    return tok


class Encoder:
    """Text -> ids without special tokens, memoized (questions and options repeat)."""

    def __init__(self, tok):
        self.tok, self.memo = tok, {}

    def __call__(self, text):
        if text not in self.memo:
            self.memo[text] = self.tok.encode(text, add_special_tokens=False).ids
        return self.memo[text]

    def states(self, texts):
        return [e.ids for e in self.tok.encode_batch(texts, add_special_tokens=False)]


def build(enc, tix, rng, per_type=2, extra_product=0):
    """Laid-out questions of tickets: dicts with ids, markers, qtype index, answer, and the raw question;
    extra_product more product questions per ticket that names one."""
    state_ids = enc.states([t["state"] for t in tix])
    out = []
    for t, sids in zip(tix, state_ids):
        for q in tickets.questions_for(rng, t, per_type) + tickets.more_questions(rng, t, "product", extra_product):
            qi = tickets.QTYPE_INDEX[q["qtype"]]
            ids, markers = compat_sequence(enc, (CLS, SEP, MASK), qi, q["question"], q["options"], sids,
                                           MAX_LEN, HEAD_MAX_LEN)
            out.append(dict(q, ids=ids, markers=markers, qi=qi, state=t["state"],
                            said_against=t["facts"]["said_against"]))
    return out


class Packed:
    """A question set as padded tensors on the device: a training step gathers its batch there, with no Python
    loop over questions (building each batch item by item on the host held the GPU to a fraction of its speed);
    evaluation packs each chunk it scores."""

    def __init__(self, items, dev):
        n, t = len(items), max(len(x["ids"]) for x in items)
        k = max(len(x["markers"]) for x in items)
        ids = torch.full((n, t), PAD, dtype=torch.int32)
        pos = torch.zeros((n, k), dtype=torch.int32)
        for i, x in enumerate(items):
            ids[i, :len(x["ids"])] = torch.tensor(x["ids"], dtype=torch.int32)
            pos[i, :len(x["markers"])] = torch.tensor(x["markers"], dtype=torch.int32)
        self.ids, self.pos = ids.to(dev), pos.to(dev)
        self.lens = torch.tensor([len(x["ids"]) for x in items], device=dev)
        self.nopt = torch.tensor([len(x["markers"]) for x in items], device=dev)
        self.qt = torch.tensor([x["qi"] for x in items], device=dev)
        self.ans = torch.tensor([x["answer"] for x in items], device=dev)

    def __len__(self):
        return self.ids.shape[0]

    def batch(self, idx):
        """The questions idx (a device tensor) as the model takes them, cut to their longest sequence and option
        count: ids, valid (False on pads), qtype index, marker positions, option mask, answers."""
        lens, nopt = self.lens[idx], self.nopt[idx]
        t, k = (int(v) for v in torch.stack([lens.max(), nopt.max()]).tolist())
        ids = self.ids[idx, :t].long()
        valid = torch.arange(t, device=ids.device)[None, :] < lens[:, None]
        kmask = torch.arange(k, device=ids.device)[None, :] < nopt[:, None]
        return [ids, valid, self.qt[idx], self.pos[idx, :k].long(), kmask, self.ans[idx]]


def losses(model, batch):
    ids, valid, qt, pos, kmask, ans = batch
    logits, act = model(ids, valid, qt, pos, kmask)
    logits = logits.float()
    noul = qt == 2
    z = logits.masked_fill(~kmask, float("-inf"))
    loss, parts = 0.0, {}
    if (~noul).any():
        parts["ce"] = F.cross_entropy(z[~noul], ans[~noul])
        loss = loss + parts["ce"]
    if noul.any():
        parts["bce"] = F.binary_cross_entropy_with_logits(logits[noul, 0], ans[noul].float())
        loss = loss + parts["bce"]
    right = torch.where(noul, (logits[:, 0] > 0).long() == ans, z.argmax(-1) == ans)
    parts["act"] = F.cross_entropy(act.float(), right.long())
    return loss + 0.1 * parts["act"], parts


@torch.no_grad()
def predict(model, items, dev, batch=512):
    """Per question: its option logits (list) and whether the pick is right."""
    model.eval()
    out = []
    for i in range(0, len(items), batch):
        chunk = items[i:i + batch]
        ids, valid, qt, pos, kmask, _ = Packed(chunk, dev).batch(torch.arange(len(chunk), device=dev))
        logits, _ = model(ids, valid, qt, pos, kmask)
        for j, x in enumerate(chunk):
            out.append(logits[j, :len(x["markers"])].float().tolist())
    model.train()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--seconds", type=float, default=230)
    ap.add_argument("--seed", type=int, default=3, help="the frame split, tokenizer and tickets")
    ap.add_argument("--init-seed", type=int, default=None,
                    help="the weights' initialization and the batches' order (default: --seed); variants with the "
                         "same --seed and another --init-seed share the held-out frames, so their figures compare")
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--layers", type=int, default=None, help="encoder layers (default: DecisionShape's)")
    ap.add_argument("--local-attention", type=int, default=None, help="local attention window (default: DecisionShape's)")
    ap.add_argument("--global-every", type=int, default=None,
                    help="every Nth encoder layer attends globally, the others locally (1: all global; default: "
                         "DecisionShape's)")
    ap.add_argument("--batch", type=int, default=None, help="questions per step (default: the recipe's)")
    ap.add_argument("--lr", type=float, default=1e-3, help="peak learning rate")
    ap.add_argument("--cross-frames", type=float, default=0.0,
                    help="training tickets: the chance that a product's problem is written in an account problem's "
                         "frame (tickets.make_ticket; 0, the default, draws nothing, as the shipped model trained)")
    ap.add_argument("--want-not", type=float, default=None,
                    help="training tickets: the share of wants said against another option (\"a refund, not a "
                         "replacement\"; default tickets.WANT_NOT_P_AUGMENTED): cross frames cost the negation "
                         "(x13 of 2026-12-06), so a run with both may need more of it")
    ap.add_argument("--ema", type=float, default=0.0,
                    help="evaluate and ship an exponential moving average of the weights with this decay (e.g. "
                         "0.999; 0: the weights as trained): held-out accuracy swings by points between nearby "
                         "steps, and the average damps the swing the selection would otherwise pick a peak of")
    ap.add_argument("--log", default=None)
    ap.add_argument("--log-every", type=int, default=100)
    ap.add_argument("--eval-every", type=float, default=30.0)
    args = ap.parse_args()
    log = common.setup_logging(args.log, "decision")
    cfg = SMOKE if args.smoke else FULL
    init_seed = args.seed if args.init_seed is None else args.init_seed
    common.seed_all(init_seed)
    dev = common.device()
    out = os.path.join(os.path.abspath(args.root), "models/decision-tickets")
    os.makedirs(os.path.join(out, "tokenizer"), exist_ok=True)
    os.makedirs(os.path.join(out, "encoder"), exist_ok=True)

    t0 = time.time()
    split = tickets.split_frames(args.seed)
    train_frames = {k: v[0] for k, v in split.items()}
    held_frames = {k: v[1] for k, v in split.items()}
    tok = train_tokenizer(tickets.all_texts(train_frames, random.Random(args.seed + 1), cfg["tok_tickets"]),
                          cfg["vocab"])
    tok.save(os.path.join(out, "tokenizer/tokenizer.json"))
    enc = Encoder(tok)
    rng = random.Random(args.seed + 2)
    make = lambda n, frames, augment=False: [tickets.make_ticket(rng, frames, augment, args.cross_frames,
                                                                    args.want_not)
                                             for _ in range(n)]
    # Training asks every choice key of a ticket (the product question needs matching an option to the text,
    # which a small model learns late) and half the noul statements; calib and test ask the default mix.
    # Training tickets carry tickets.py's training-only variations (frames' words are no evidence); calib and
    # test are written as a user would, with the held-out frames.
    train = build(enc, make(cfg["train_tickets"], train_frames, True), rng, TRAIN_QUESTIONS, TRAIN_EXTRA_PRODUCT)
    calib = build(enc, make(cfg["calib_tickets"], held_frames), rng)
    test = build(enc, make(cfg["test_tickets"], held_frames), rng)
    lens = sorted(len(x["ids"]) for x in train)
    log.info("data: %d train / %d calib / %d test questions in %.1f s; vocab %d; tokens per question p50 %d, max %d",
             len(train), len(calib), len(test), time.time() - t0, tok.get_vocab_size(), lens[len(lens) // 2], lens[-1])
    log.info("held-out frames: %s", {k: len(v) for k, v in held_frames.items()})

    over = {k: v for k, v in (("layers", args.layers), ("local_attention", args.local_attention),
                              ("global_every", args.global_every)) if v is not None}
    if args.batch:
        cfg = dict(cfg, batch=args.batch)
    s = DecisionShape(vocab=tok.get_vocab_size(), **over) if not args.smoke else \
        DecisionShape(vocab=tok.get_vocab_size(), hidden=64, inter=96, layers=3, head_layers=2, local_attention=16)
    model = DecisionModel(s, dropout=DROPOUT).to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    log.info("model: %s, %.2fM parameters", s, n_params / 1e6)
    decay = [p for n, p in model.named_parameters() if p.dim() == 2 and "emb" not in n]
    plain = [p for n, p in model.named_parameters() if not (p.dim() == 2 and "emb" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": plain, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.98), **({"fused": True} if dev.type == "cuda" else {}))
    budget = common.Budget(min(args.seconds, 8) if args.smoke else args.seconds)
    packed = Packed(train, dev)
    log.info("training set on the device: %s ids", tuple(packed.ids.shape))
    cursor, step, best, best_state, last_eval, t_log = len(packed), 0, -1.0, None, 0.0, time.time()
    best_acc, best_against = {}, None
    # The averaged copy (--ema): never trained, updated after every step with a decay that ramps up from 0.9
    # so early steps are not averaged with the initialization for long.
    ema = copy.deepcopy(model).requires_grad_(False) if args.ema > 0 else None
    judged = ema if ema is not None else model
    shuffle = torch.Generator().manual_seed(init_seed + 4)
    calib_eval = calib[:3000]
    train_probe = train[:3000]  # seen in training: a gap to calib is what the held-out frames cost
    max_steps = 6 if args.smoke else 10 ** 9
    model.train()
    while (step == 0 or not budget.spent()) and step < max_steps:  # at least one step and evaluation
        if cursor + cfg["batch"] > len(packed):
            order = torch.randperm(len(packed), generator=shuffle).to(dev)
            cursor = 0
        batch = packed.batch(order[cursor:cursor + cfg["batch"]])
        cursor += cfg["batch"]
        for g in opt.param_groups:
            g["lr"] = common.lr_at(budget.fraction(), step, args.lr, 200 if not args.smoke else 2)
        with common.autocast(dev):
            loss, parts = losses(model, batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if ema is not None:
            with torch.no_grad():
                keep = min(args.ema, (1 + step) / (10 + step))
                torch._foreach_lerp_(list(ema.parameters()), list(model.parameters()), 1.0 - keep)
                for b_ema, b in zip(ema.buffers(), model.buffers()):
                    b_ema.copy_(b)
        if step % args.log_every == 0 or args.smoke:
            log.info("step %d  loss %.4f  %s  %.1f steps/s  elapsed %.0f s", step, loss.item(),
                     " ".join(f"{k} {v.item():.4f}" for k, v in parts.items()),
                     (args.log_every if not args.smoke else 1) / max(time.time() - t_log, 1e-9), budget.elapsed())
            t_log = time.time()
        if budget.elapsed() - last_eval >= args.eval_every or budget.spent() or step >= max_steps:
            last_eval = budget.elapsed()
            with common.autocast(dev):
                calib_logits = predict(judged, calib_eval, dev)
            acc = accuracy(calib_eval, calib_logits)
            against = said_against_accuracy(calib_eval, calib_logits)
            mean = sum(acc.values()) / 3
            log.info("calib accuracy (held-out frames) %s, wants said against another %s, at step %d%s",
                     {k: round(v, 4) for k, v in acc.items()}, None if against is None else round(against, 3), step,
                     "  best" if mean > best else "")
            with common.autocast(dev):
                keys_train = by_key(train_probe, predict(judged, train_probe, dev))
            log.info("  by question, calib %s; train %s", by_key(calib_eval, calib_logits), keys_train)
            if mean > best:
                best, best_acc, best_against = mean, acc, against
                best_state = {k: v.detach().to("cpu", copy=True) for k, v in judged.state_dict().items()}

    # What ships: BF16 weights (the temperature buffer F32), evaluated in F32 as tandem runs them.
    model.load_state_dict(best_state)
    shipped = copy.deepcopy(model).float()
    shipped.load_state_dict({k: (v.to(torch.bfloat16).float() if k != "temperature" else v)
                             for k, v in model.state_dict().items()})
    calib_logits = predict(shipped, calib, dev)
    test_logits = predict(shipped, test, dev)
    temps, by_options = calibrate(calib, calib_logits)
    acc = accuracy(test, test_logits)
    figures = {"parameters": n_params, "steps": step, "ema": args.ema, "seconds": budget.elapsed(),
               "test_questions": len(test),
               "test_accuracy": acc, "calib_accuracy_at_best": best_acc,
               "test_accuracy_want_said_against": said_against_accuracy(test, test_logits),
               "calib_want_said_against_at_best": best_against, "temperature": temps,
               "temperature_by_options": by_options}
    for qi, q in enumerate(("choice", "score", "noul")):
        pairs = [(x, z) for x, z in zip(test, test_logits) if x["qi"] == qi]
        cal = [(x, z, temp_of(temps, by_options, x, z)) for x, z in pairs]
        figures[f"{q}_nll_raw"] = nll(pairs, 1.0)
        figures[f"{q}_nll_calibrated"] = sum(nll([(x, z)], t) for x, z, t in cal) / max(1, len(cal))
        figures[f"{q}_ece_raw"] = ece(pairs, 1.0)
        figures[f"{q}_ece_calibrated"] = ece(pairs, temps[qi])
    per_key = {}
    for x, z in zip(test, test_logits):
        per_key.setdefault(x["key"], []).append(correct(x, z))
    figures["test_accuracy_by_question"] = {k: sum(v) / len(v) for k, v in sorted(per_key.items())}
    log.info("figures %s", figures)

    sd = {f"encoder.{k}": v.to(torch.bfloat16) for k, v in model.encoder.state_dict().items()}
    for k, v in model.state_dict().items():
        if not k.startswith("encoder."):
            sd[k] = v.to(torch.bfloat16) if k != "temperature" else torch.tensor(temps, dtype=torch.float32)
    common.save_safetensors(sd, os.path.join(out, "model.safetensors"))
    common.write_json(os.path.join(out, "encoder/config.json"), encoder_config(s, (CLS, SEP, PAD, MASK)))
    common.write_json(os.path.join(out, "rl_agent_config.json"), {
        "head_layers": s.head_layers, "max_len": MAX_LEN, "head_max_len": HEAD_MAX_LEN, "temperature": temps,
        "temperature_by_options": by_options,
        "note": "decision-tickets, trained by tools/train_decision.py on synthetic support tickets; a noul question "
                "with one option answers P(true) = sigmoid(z / T) with T = temperature_by_options.noul.1 (else "
                "temperature[2])"})
    sample = {"state": SAMPLE_STATE, "questions": [], "sequences": []}
    sids = enc(SAMPLE_STATE)
    for q, text, opts in SAMPLE_QUESTIONS:
        ids, markers = compat_sequence(enc, (CLS, SEP, MASK), tickets.QTYPE_INDEX[q], text, opts, sids,
                                       MAX_LEN, HEAD_MAX_LEN)
        sample["questions"].append({"qtype": q, "question": text, "options": opts})
        sample["sequences"].append({"ids": ids, "markers": markers, "qtype": q})
    common.write_json(os.path.join(out, "sample.json"), sample)
    # The regression test's set: the first 100 test questions of each type, with what this model scored.
    chosen = []
    for q in ("choice", "score", "noul"):
        chosen += [i for i, x in enumerate(test) if x["qtype"] == q][:100]
    sub = [test[i] for i in chosen]
    sub_acc = accuracy(sub, predict(shipped, sub, dev))  # batched as the verify script and the C++ test run it
    common.write_json(os.path.join(out, "eval.json"), compact=True, obj={
        "about": "held-out-frame tickets (tools/train/tickets.py); answer = index of the right option, for noul 1 "
                 "when the statement is true; measured = this model's accuracy on these questions (PyTorch, F32 "
                 "from the saved BF16 weights)",
        "measured": sub_acc, "max_len": MAX_LEN, "head_max_len": HEAD_MAX_LEN,
        "questions": [{"state": x["state"], "qtype": x["qtype"], "question": x["question"], "options": x["options"],
                       "answer": x["answer"], "ids": x["ids"], "markers": x["markers"]} for x in sub]})
    common.write_json(os.path.join(out, "training.json"), {
        "about": "tools/train_decision.py", "seed": args.seed, "init_seed": init_seed,
        "frames_heldout": {k: v for k, v in held_frames.items()},
        "shape": vars(s), "figures": figures, "eval_subset_accuracy": sub_acc})
    log.info("wrote %s (%.1f MB)", out, common.dir_bytes(out) / 1e6)


if __name__ == "__main__":
    main()
