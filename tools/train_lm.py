#!/usr/bin/env python3
"""Trains the embedded default LM from scratch: a byte-level BPE tokenizer (HF `tokenizers`, Qwen-style
pre-tokenizer, no normalizer so a build without ICU serves it) and a small Qwen3 (plain torch, HF
Qwen3ForCausalLM layout, tied embeddings, BF16 on disk) on the Python standard library's source, split into
train and held-out files by a seeded shuffle. Training runs for a wall-clock budget (BF16 autocast, TF32),
logs loss every N steps and held-out loss every eval interval, and keeps the weights of the best held-out
loss. Writes models/pylm (config.json, generation_config.json, model.safetensors, tokenizer.json,
tokenizer_config.json with a ChatML chat_template, corpus.json: Python version, file-list hash, the held-out
files) and WORK/corpus.pt (token ids for the drafter scripts).
    python3 tools/train_lm.py --root . --work /tmp/work --seconds 230 [--smoke]
With --corpus-only it trains nothing: it encodes the corpus with the shipped models/pylm/tokenizer.json into
WORK/corpus.pt (the drafters' input), after checking that this machine's corpus and split are the ones
models/pylm/corpus.json records (same file-list hash, same held-out files), so drafters can be retrained
for the shipped LM alone.
    python3 tools/train_lm.py --root . --work /tmp/work --corpus-only"""
import argparse
import copy
import math
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from tools.train import common  # noqa: E402
from tools.train.qwen3 import Qwen3LM, Qwen3Shape, hf_config  # noqa: E402

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|mask|>"]  # ids 0..3
CHAT_TEMPLATE = ("{%- for message in messages %}{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
                 "'<|im_end|>' + '\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
                 "{%- endif %}")
FULL = dict(vocab=6144, hidden=384, inter=768, layers=6, heads=6, kv_heads=2, seq=1024, batch=32)
SMOKE = dict(vocab=400, hidden=128, inter=256, layers=4, heads=2, kv_heads=1, seq=64, batch=4)


def train_tokenizer(texts, vocab):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = common.qwen_pre_tokenizer()
    tok.decoder = decoders.ByteLevel()
    specials = [AddedToken(s, special=True, normalized=False) for s in SPECIALS]
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    for i, s in enumerate(SPECIALS):
        assert tok.token_to_id(s) == i, (s, tok.token_to_id(s))
    return tok


def write_tokenizer_files(tok, out):
    tok.save(os.path.join(out, "tokenizer.json"))
    added = {str(i): {"content": s, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
                      "special": True} for i, s in enumerate(SPECIALS)}
    common.write_json(os.path.join(out, "tokenizer_config.json"), {
        "added_tokens_decoder": added, "additional_special_tokens": ["<|im_start|>", "<|im_end|>", "<|mask|>"],
        "bos_token": None, "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>", "unk_token": None,
        "mask_token": "<|mask|>", "chat_template": CHAT_TEMPLATE, "clean_up_tokenization_spaces": False,
        "model_max_length": 1024, "tokenizer_class": "Qwen2Tokenizer", "errors": "replace",
        "split_special_tokens": False})


def param_groups(model, wd):
    decay, plain = [], []
    for n, p in model.named_parameters():
        (decay if p.dim() == 2 and "embed_tokens" not in n else plain).append(p)
    return [{"params": decay, "weight_decay": wd}, {"params": plain, "weight_decay": 0.0}]


@torch.no_grad()
def heldout_loss(model, batches, dev):
    model.eval()
    tot, n = 0.0, 0
    for x in batches:
        x = x.to(dev)
        with common.autocast(dev):
            logits, _ = model(x[:, :-1])
        tot += F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1),
                               reduction="sum").item()
        n += x[:, 1:].numel()
    model.train()
    return tot / max(n, 1)


def windows(stream, seq, count, gen):
    hi = stream.numel() - seq - 1
    starts = torch.randint(0, max(hi, 1), (count,), generator=gen)
    return torch.stack([stream[s:s + seq + 1] for s in starts.tolist()])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--work", required=True)
    ap.add_argument("--seconds", type=float, default=230)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--corpus", default=None, help="source folder (default: this interpreter's stdlib)")
    ap.add_argument("--corpus-only", action="store_true",
                    help="write WORK/corpus.pt with the shipped tokenizer and stop (no training)")
    ap.add_argument("--log", default=None)
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--eval-every", type=float, default=25.0, help="seconds between held-out evaluations")
    args = ap.parse_args()
    log = common.setup_logging(args.log, "lm")
    cfg = SMOKE if args.smoke else FULL
    common.seed_all(args.seed)
    dev = common.device()
    out = os.path.join(os.path.abspath(args.root), "models/pylm")
    os.makedirs(out, exist_ok=True)
    os.makedirs(args.work, exist_ok=True)

    root = args.corpus or common.stdlib_root()
    rels = common.stdlib_files(root)
    if args.smoke:
        rels = rels[:60]
    rels, texts = common.read_sources(root, rels)
    info = common.corpus_info(root, rels, texts)
    train_files, held_files = common.split_files(rels, args.seed, 0.05)
    by_name = dict(zip(rels, texts))
    log.info("corpus %s: %d files (%d train, %d held-out), %d chars, list sha256 %s", root, len(rels),
             len(train_files), len(held_files), info["chars"], info["file_list_sha256"][:16])

    t0 = time.time()
    if args.corpus_only:
        from tokenizers import Tokenizer
        shipped = common.read_json(os.path.join(out, "corpus.json"))
        if shipped["corpus"]["file_list_sha256"] != info["file_list_sha256"] or \
                shipped["heldout_files"] != held_files:
            raise SystemExit(f"--corpus-only: {root} is not the corpus models/pylm was trained on (file list "
                             f"{info['file_list_sha256'][:16]} vs {shipped['corpus']['file_list_sha256'][:16]}, or "
                             "another held-out split)")
        tok = Tokenizer.from_file(os.path.join(out, "tokenizer.json"))
    else:
        tok = train_tokenizer([by_name[r] for r in train_files], cfg["vocab"])
        write_tokenizer_files(tok, out)
    vocab = tok.get_vocab_size()
    eot = tok.token_to_id("<|endoftext|>")
    enc = lambda names: [e.ids for e in tok.encode_batch([by_name[r] for r in names], add_special_tokens=False)]
    train_docs, held_docs = enc(train_files), enc(held_files)
    stream = torch.tensor([t for d in train_docs for t in d + [eot]], dtype=torch.long)
    held_stream = torch.tensor([t for d in held_docs for t in d + [eot]], dtype=torch.long)
    log.info("tokenizer: vocab %d in %.1f s; %d train tokens (%.2f chars/token), %d held-out tokens", vocab,
             time.time() - t0, stream.numel(), info["chars"] / max(1, stream.numel() + held_stream.numel()),
             held_stream.numel())
    torch.save({"train": stream, "held_docs": [torch.tensor(d, dtype=torch.long) for d in held_docs],
                "held_files": held_files, "vocab": vocab, "eot": eot, "mask": tok.token_to_id("<|mask|>")},
               os.path.join(args.work, "corpus.pt"))
    if args.corpus_only:
        log.info("wrote %s (the shipped tokenizer; no training)", os.path.join(args.work, "corpus.pt"))
        return

    s = Qwen3Shape(vocab=vocab, hidden=cfg["hidden"], inter=cfg["inter"], layers=cfg["layers"], heads=cfg["heads"],
                   kv_heads=cfg["kv_heads"], max_positions=1024)
    model = Qwen3LM(s, dropout=0.1).to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    log.info("model: %s, %.2fM parameters (tied), device %s", s, n_params / 1e6, dev)
    opt = torch.optim.AdamW(param_groups(model, 0.1), lr=1.5e-3, betas=(0.9, 0.95), eps=1e-8,
                            **({"fused": True} if dev.type == "cuda" else {}))
    gen = torch.Generator().manual_seed(args.seed)
    held_gen = torch.Generator().manual_seed(args.seed + 1)
    n_eval = 2 if args.smoke else 16
    held_batches = [windows(held_stream, cfg["seq"], cfg["batch"], held_gen) for _ in range(n_eval)]
    budget = common.Budget(args.seconds if not args.smoke else min(args.seconds, 8))
    best, best_state, step, tokens, last_eval, t_log = float("inf"), None, 0, 0, 0.0, time.time()
    max_steps = 6 if args.smoke else 10 ** 9
    model.train()
    while (step == 0 or not budget.spent()) and step < max_steps:  # at least one step and evaluation
        lr = common.lr_at(budget.fraction(), step, 1.5e-3, 200 if not args.smoke else 2)
        for g in opt.param_groups:
            g["lr"] = lr
        x = windows(stream, cfg["seq"], cfg["batch"], gen).to(dev, non_blocking=True)
        with common.autocast(dev):
            logits, _ = model(x[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, vocab), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        tokens += x[:, 1:].numel()
        if step % args.log_every == 0 or args.smoke:
            dt = time.time() - t_log
            log.info("step %d  loss %.4f  lr %.2e  %.0f tokens/s  elapsed %.0f s", step, loss.item(), lr,
                     args.log_every * x[:, 1:].numel() / max(dt, 1e-9) if not args.smoke else 0, budget.elapsed())
            t_log = time.time()
        if budget.elapsed() - last_eval >= args.eval_every or budget.spent() or step >= max_steps:
            last_eval = budget.elapsed()
            hl = heldout_loss(model, held_batches, dev)
            log.info("held-out loss %.4f (ppl %.2f) at step %d%s", hl, math.exp(hl), step,
                     "  best" if hl < best else "")
            if hl < best:
                best, best_state = hl, {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
    model.load_state_dict(best_state)
    model.eval()
    sd = {k: v.to(torch.bfloat16) for k, v in model.hf_state_dict().items()}
    common.save_safetensors(sd, os.path.join(out, "model.safetensors"))
    common.write_json(os.path.join(out, "config.json"), hf_config(s, eos_id=eot, bos_id=None, pad_id=eot))
    common.write_json(os.path.join(out, "generation_config.json"),
                      {"bos_token_id": None, "eos_token_id": eot, "pad_token_id": eot, "do_sample": False,
                       "max_new_tokens": 256})
    # The figures of what ships: held-out loss with the BF16 weights as saved.
    rounded = copy.deepcopy(model)
    rounded.load_state_dict({k: v.to(torch.bfloat16).float() for k, v in model.state_dict().items()})
    final = heldout_loss(rounded.float(), held_batches, dev)
    figures = {"parameters": n_params, "steps": step, "train_tokens_seen": tokens,
               "epochs": tokens / max(1, stream.numel()), "heldout_loss": final, "heldout_ppl": math.exp(final),
               "best_heldout_loss_training": best, "seconds": budget.elapsed(), "vocab": vocab,
               "seq": cfg["seq"], "batch": cfg["batch"]}
    common.write_json(os.path.join(out, "corpus.json"), {
        "about": "pylm: trained from scratch by tools/train_lm.py on the Python standard library source",
        "seed": args.seed, "corpus": info, "train_files": len(train_files), "heldout_files": held_files,
        "figures": figures})
    log.info("figures %s", figures)
    # A completion to read in the log (greedy, held-out file start).
    from tools.train.qwen3 import greedy
    prompt = held_docs[0][:48] if held_docs and len(held_docs[0]) >= 48 else train_docs[0][:48]
    cont = greedy(rounded.to(dev), torch.tensor([prompt], device=dev), 64)[0].tolist()
    log.info("sample prompt: %r", tok.decode(prompt))
    log.info("sample greedy: %r", tok.decode(cont))
    log.info("wrote %s (%.1f MB)", out, common.dir_bytes(out) / 1e6)


if __name__ == "__main__":
    main()
