#!/usr/bin/env python3
"""Trains a DFlash drafter for models/pylm, the z-lab way (../shared/design/dflash.md §1.9):
- data: prompts are windows of the training files, of lengths 8..320 (one length per group of sequences); the
  target continues each greedily for GEN tokens (the drafter learns the target's own outputs, as z-lab trains on
  target-regenerated responses); the target's tap rows (residual stream after layers target_layer_ids) of every
  position are kept on the GPU. The continuations are short on purpose: anchors then sit where a served request's
  rounds sit (its first ~150 generated tokens after a real prompt), not deep in a long greedy continuation, whose
  loops are easy to predict (an earlier recipe of 512-token sequences estimated 2.97 at block 8 on its own data and
  measured 1.77 on held-out prompts);
- each step takes sequences, picks random anchors a in the generated part, builds blocks [x_a, MASK x (B-1)] at
  positions a..a+B-1 that see the context features of positions < a and their own rows both ways (one masked
  attention over all blocks of a sequence), and trains rows k = 1..B-1 to predict x_{a+k} through the target's
  frozen LM head, with cross-entropy weighted w_k = exp(-(k-1)/γ), γ = 7; the block size is drawn per step from
  {16, 8, 4} (weights .5/.3/.2) so blocks 4, 8 and 16 all serve; with --distill the cross-entropy is against the
  target's own next-token distribution at positions a+k-1 instead of its greedy token (self logit distillation, as
  NVIDIA Model Optimizer's DFlash recipe does by default): the last tap is the target's last layer, so its final
  norm and head over the stored tap rows give that distribution without another target pass;
- v2 adds the grouped dynamic convolutions (trained with the rest) and trains the candidate selector with
  cross-entropy over the top-K candidates of each row's logits (candidates and their values detached), the true
  predecessor (the anchor for row 1), rows whose true token is not among the candidates skipped, same w_k.
The embedding and LM head are the target's; the drafter keeps fc, hidden_norm, its layers and final norm.
Runs for a wall-clock budget, logs loss every N steps and held-out per-row accuracy every eval interval, keeps
the best held-out estimate of the acceptance length at block 8 (held-out files' prompts, continued like the
training data; rows taken as independent), and logs beside it the acceptance the held-out blocks had (leading rows
right), to tell how far the independence estimate and the served figure (eval.json) are apart, and why. Writes
models/pylm-dflash (v1) or models/pylm-dflash2 (v2): config.json (z-lab layout), model.safetensors (BF16),
training.json.
    python3 tools/train_drafter.py --root . --work /tmp/work --version 1 --seconds 170 [--smoke]
    [--layers N] [--inter N] (the drafter's shape; defaults below) [--batch N] (sequences per step)
    [--sequences N] (training sequences; the recipe's 12,288 are each seen ~100 times in 330 s)
    [--distill] (soft targets: the target's distribution, not its greedy token)"""
import argparse
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from tools.train import common  # noqa: E402
from tools.train.dflash import Drafter, DrafterShape, energies, hf_config, loss_weights, param_count  # noqa: E402
from tools.train.qwen3 import greedy, load_target  # noqa: E402

FULL = dict(inter=512, layers=2, gen=160, prompts=[8, 16, 32, 64, 96, 128, 160, 192, 256, 320], sequences=12288,
            gen_batch=1024, held_batch=64, batch=64, rows=256, blocks=[16, 8, 4], held=640)
SMOKE = dict(inter=128, layers=1, gen=24, prompts=[8, 16], sequences=16, gen_batch=8, held_batch=4, batch=4, rows=32,
             blocks=[8, 4], held=8)
GAMMA = 7.0
BLOCK_WEIGHTS = {16: 0.5, 8: 0.3, 4: 0.2}


@torch.no_grad()
def make_data(target, docs_stream, cfg, n, batch, taps, dev, gen, log):
    """n sequences in groups of `batch`, each group one prompt length p (cycling through cfg.prompts): a corpus
    window of p tokens, then the target's greedy continuation of cfg.gen tokens. A list of groups
    {"x": ids [b, p + gen], "p": p, "taps": tap rows [b, p + gen, n_t·H] (BF16 on the GPU)}."""
    groups = []
    t0 = time.time()
    done = 0
    while done < n:
        b = min(batch, n - done)
        p = cfg["prompts"][len(groups) % len(cfg["prompts"])]
        starts = torch.randint(0, docs_stream.numel() - p - 1, (b,), generator=gen).tolist()
        prompts = torch.stack([docs_stream[s:s + p] for s in starts]).to(dev)
        with common.autocast(dev):
            cont = greedy(target, prompts, cfg["gen"], cache_dtype=torch.bfloat16 if dev.type == "cuda"
                          else torch.float32)
            x = torch.cat([prompts, cont], 1)
            _, tr = target(x, taps=taps, final=False)
        groups.append({"x": x, "p": p, "taps": tr.to(torch.bfloat16 if dev.type == "cuda" else torch.float32)})
        done += b
    log.info("data: %d sequences (%d groups, prompts %s, %d generated tokens each) in %.1f s", n, len(groups),
             sorted({g["p"] for g in groups}), cfg["gen"], time.time() - t0)
    return groups


def sample_blocks(group, idx, block, per_seq, mask_id, gen):
    """Anchors uniformly in [p, p + gen - block] (the generated part) for each chosen sequence of a group: block
    ids, anchors, labels."""
    x, p = group["x"][idx], group["p"]
    t = x.shape[1]
    r = torch.rand(len(idx), per_seq, generator=gen).to(x.device)
    anchors = p + (r * (t - block + 1 - p)).long()
    anchors = torch.clamp(anchors, max=t - block)
    offs = torch.arange(block, device=x.device)
    rows = torch.gather(x, 1, (anchors[..., None] + offs).reshape(len(idx), -1)).view(len(idx), per_seq, block)
    ids = rows.clone()
    ids[..., 1:] = mask_id
    return ids, anchors, rows[..., 1:]


@torch.no_grad()
def teacher_probs(target, taps_rows, anchors, b):
    """The target's next-token distribution at positions a..a+b-2 of every block (what rows 1..b-1 predict)
    [S·A, b-1, V]: its final norm and head over the last tap row, the last layer's residual stream (the taps end at
    layer layers-1)."""
    s, a = anchors.shape
    hidden = target.s.hidden
    pos = (anchors[..., None] + torch.arange(b - 1, device=anchors.device)).reshape(s, a * (b - 1))
    last = taps_rows[..., -hidden:]
    rows = torch.gather(last, 1, pos[..., None].expand(-1, -1, hidden))  # [S, A·(b-1), H]
    logits = target.model.norm(rows) @ target.lm_head.weight.T
    return torch.softmax(logits.float(), -1).reshape(s * a, b - 1, -1)


def step_loss(drafter, target, taps_rows, ids, anchors, labels, selector, distill=False):
    embed, head = target.model.embed_tokens.weight, target.lm_head.weight
    ctx = drafter.context(taps_rows)
    h = drafter.blocks(embed, ids, anchors, ctx)  # [S·A, B, H]
    b = ids.shape[-1]
    lab = labels.reshape(-1, b - 1)
    logits = h[:, 1:] @ head.T
    w = loss_weights(b - 1, GAMMA, h.device)
    flat = logits.float().reshape(-1, logits.shape[-1])
    if distill:  # cross-entropy against the target's distribution (class probabilities as the target)
        soft = teacher_probs(target, taps_rows, anchors, b)
        ce = F.cross_entropy(flat, soft.reshape(-1, soft.shape[-1]), reduction="none")
    else:
        ce = F.cross_entropy(flat, lab.reshape(-1), reduction="none")
    loss = (ce.view(-1, b - 1) * w).sum() / (w.sum() * lab.shape[0])
    parts = {"kd" if distill else "ce": loss.detach()}
    if selector:
        d = drafter.d
        vals, cand = torch.topk(logits.detach().float(), d.sel_top_k, -1)  # [N, B-1, K]
        hit = cand == lab[..., None]
        ok = hit.any(-1)
        prev = torch.cat([ids[..., :1].reshape(-1, 1), lab[:, :-1]], 1)
        e = energies(drafter.candidate_selector, h[:, 1:].reshape(-1, h.shape[-1]).float(),
                     cand.reshape(-1, d.sel_top_k), vals.reshape(-1, d.sel_top_k), prev.reshape(-1),
                     d.softcap, d.out_mult)
        target_k = hit.float().argmax(-1).reshape(-1)
        sel = F.cross_entropy(e, target_k, reduction="none").view(-1, b - 1)
        wk = w[None, :] * ok.float()
        parts["sel"] = (sel * wk).sum() / wk.sum().clamp(min=1.0)
        parts["sel_hit"] = ok.float().mean()
        loss = loss + parts["sel"]
    return loss, parts, logits


@torch.no_grad()
def heldout(drafter, target, groups, block, mask_id, dev):
    """Per-row greedy accuracy on held-out blocks, the acceptance length it implies if rows were independent
    (1 + Σ_k Π_{j≤k} acc_j), and the one the blocks had: the mean of 1 + the leading rows right (what a greedy round
    commits when its verify sees the target's own continuation)."""
    gen = torch.Generator().manual_seed(0)
    hits = torch.zeros(block - 1, device=dev)
    committed = torch.zeros((), device=dev)
    n = 0
    for g in groups:
        for i in range(0, g["x"].shape[0], 16):
            idx = torch.arange(i, min(i + 16, g["x"].shape[0]), device=dev)
            ids, anchors, labels = sample_blocks(g, idx, block, 8, mask_id, gen)
            with common.autocast(dev):
                _, _, logits = step_loss(drafter, target, g["taps"][idx], ids, anchors, labels, False)
            pred = logits.float().argmax(-1)
            right = (pred == labels.reshape(-1, block - 1)).float()  # [blocks, block - 1]
            hits += right.sum(0)
            committed += (1.0 + right.cumprod(1).sum(1)).sum()
            n += pred.shape[0]
    acc = (hits / n).tolist()
    est, run = 1.0, 1.0
    for a in acc:
        run *= a
        est += run
    return acc, est, (committed / n).item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--work", required=True)
    ap.add_argument("--version", type=int, choices=(1, 2), required=True)
    ap.add_argument("--seconds", type=float, default=170)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--layers", type=int, default=None, help="drafter layers (default: the recipe's)")
    ap.add_argument("--inter", type=int, default=None, help="drafter MLP width (default: the recipe's)")
    ap.add_argument("--batch", type=int, default=None, help="sequences per step (default: the recipe's)")
    ap.add_argument("--sequences", type=int, default=None,
                    help="training sequences generated before the steps (default: the recipe's; their tap rows stay on "
                         "the GPU, ~0.7 MB each for models/pylm)")
    ap.add_argument("--distill", action="store_true",
                    help="train against the target's next-token distribution, not its greedy token")
    ap.add_argument("--log", default=None)
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--eval-every", type=float, default=25.0)
    args = ap.parse_args()
    log = common.setup_logging(args.log, f"dflash{args.version}")
    cfg = dict(SMOKE if args.smoke else FULL)
    overrides = (("layers", args.layers), ("inter", args.inter), ("batch", args.batch), ("sequences", args.sequences))
    cfg.update({k: v for k, v in overrides if v is not None})
    common.seed_all(args.seed)
    dev = common.device()
    budget = common.Budget(min(args.seconds, 10) if args.smoke else args.seconds)
    root = os.path.abspath(args.root)
    name = "pylm-dflash" if args.version == 1 else "pylm-dflash2"
    out = os.path.join(root, "models", name)
    os.makedirs(out, exist_ok=True)
    corpus = torch.load(os.path.join(args.work, "corpus.pt"))
    target = load_target(os.path.join(root, "models/pylm"), dev)
    for p in target.parameters():
        p.requires_grad_(False)
    ts = target.s
    taps = sorted({1, ts.layers // 2, ts.layers - 1})  # the last is the last layer: --distill reads the head from it
    d = DrafterShape(version=args.version, vocab=ts.vocab, hidden=ts.hidden, inter=cfg["inter"], layers=cfg["layers"],
                     heads=ts.heads, kv_heads=ts.kv_heads, taps=taps, num_target_layers=ts.layers,
                     mask_id=corpus["mask"], head_dim=ts.head_dim, eps=ts.eps, theta=ts.theta,
                     max_positions=ts.max_positions, block_size=16)
    drafter = Drafter(d).to(dev)
    log.info("drafter v%d: %s, %.2fM parameters; target %s", args.version, d, param_count(drafter) / 1e6, ts)

    gen = torch.Generator().manual_seed(args.seed)
    held_stream = torch.cat([torch.cat([x, torch.tensor([corpus["eot"]])]) for x in corpus["held_docs"]])
    data = make_data(target, corpus["train"], cfg, cfg["sequences"], cfg["gen_batch"], taps, dev, gen, log)
    held = make_data(target, held_stream, cfg, cfg["held"], cfg["held_batch"], taps, dev, gen, log)
    opt = torch.optim.AdamW(drafter.parameters(), lr=2e-3, betas=(0.9, 0.95), weight_decay=0.01,
                            **({"fused": True} if dev.type == "cuda" else {}))
    pick = random.Random(args.seed)
    sizes = [g["x"].shape[0] for g in data]
    step, best, best_blocks, best_state, last_eval, t_log = 0, -1.0, -1.0, None, 0.0, time.time()
    max_steps = 6 if args.smoke else 10 ** 9
    drafter.train()
    while (step == 0 or not budget.spent()) and step < max_steps:  # at least one step and evaluation
        block = pick.choices(cfg["blocks"], [BLOCK_WEIGHTS[b] for b in cfg["blocks"]])[0]
        per_seq = max(1, cfg["rows"] // block)
        group = data[pick.choices(range(len(data)), sizes)[0]]
        idx = torch.randint(0, group["x"].shape[0], (min(cfg["batch"], group["x"].shape[0]),), generator=gen).to(dev)
        ids, anchors, labels = sample_blocks(group, idx, block, per_seq, d.mask_id, gen)
        for g in opt.param_groups:
            g["lr"] = common.lr_at(budget.fraction(), step, 2e-3, 100 if not args.smoke else 2)
        with common.autocast(dev):
            loss, parts, _ = step_loss(drafter, target, group["taps"][idx], ids, anchors, labels, args.version == 2,
                                       args.distill)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(drafter.parameters(), 1.0)
        opt.step()
        step += 1
        if step % args.log_every == 0 or args.smoke:
            log.info("step %d  block %d  loss %.4f  %s  %.1f steps/s  elapsed %.0f s", step, block, loss.item(),
                     " ".join(f"{k} {v.item():.4f}" for k, v in parts.items()),
                     (args.log_every if not args.smoke else 1) / max(time.time() - t_log, 1e-9), budget.elapsed())
            t_log = time.time()
        if budget.elapsed() - last_eval >= args.eval_every or budget.spent() or step >= max_steps:
            last_eval = budget.elapsed()
            drafter.eval()
            acc8, est8, blocks8 = heldout(drafter, target, held, 8 if not args.smoke else 4, d.mask_id, dev)
            drafter.train()
            log.info("held-out step %d: row accuracy %s, independent-rows acceptance estimate %.3f, the blocks' "
                     "acceptance %.3f%s", step, [round(a, 3) for a in acc8], est8, blocks8,
                     "  best" if est8 > best else "")
            if est8 > best:
                best, best_blocks = est8, blocks8
                best_state = {k: v.detach().to("cpu", copy=True) for k, v in drafter.state_dict().items()}
    drafter.load_state_dict(best_state)
    sd = {k: v.to(torch.bfloat16) for k, v in drafter.public_state_dict().items()}
    common.save_safetensors(sd, os.path.join(out, "model.safetensors"))
    common.write_json(os.path.join(out, "config.json"), hf_config(d))
    common.write_json(os.path.join(out, "training.json"), {
        "about": f"tools/train_drafter.py --version {args.version} (recipe in its top comment)", "seed": args.seed,
        "target": "models/pylm", "parameters": param_count(drafter), "steps": step, "seconds": budget.elapsed(),
        "layers": cfg["layers"], "inter": cfg["inter"], "batch": cfg["batch"], "sequences": cfg["sequences"],
        "prompts": cfg["prompts"],
        "generated": cfg["gen"], "gamma": GAMMA, "block_weights": BLOCK_WEIGHTS, "distill": args.distill,
        "best_heldout_estimate_block8": best, "heldout_blocks_acceptance_block8_at_best": best_blocks})
    log.info("wrote %s (%.1f MB) after %d steps", out, common.dir_bytes(out) / 1e6, step)


if __name__ == "__main__":
    main()
