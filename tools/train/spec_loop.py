"""The reference DFlash loop of ../shared/design/dflash.md §1.6 at batch 1, greedy, written plainly: prefill,
then rounds of block draft (v1: argmax per row; v2: the §3.3 selector walk), one causal target forward over
[tok[start], d_1..d_{B-1}], acceptance of the leading matches plus the bonus token. Every target forward
recomputes the committed prefix (no cache), so the loop has no cache state to get wrong. Each round's
acceptance length is accepted + 1, as tandem counts it (engine/spec/verify.cpp)."""
import torch

from tools.train.dflash import unary


def _argmax(row):
    return int(torch.argmax(row))  # the first maximum: ties go to the lower id, as in tandem


@torch.no_grad()
def plain_greedy(target, prompt, max_tokens):
    dev = target.model.embed_tokens.weight.device
    tokens = list(prompt)
    for _ in range(max_tokens):
        logits, _ = target(torch.tensor([tokens], device=dev))
        tokens.append(_argmax(logits[0, -1].float()))
    return tokens[len(prompt):]


@torch.no_grad()
def walk(drafter, logits, hidden, anchor):
    """§3.3's greedy walk over the top-K candidates of each row (value desc, ties to the lower id)."""
    d, sel = drafter.d, drafter.candidate_selector
    s = hidden.double() @ sel.hidden_projection.weight.double().T
    pred = sel.predecessor_codebook.weight.double()
    succ = sel.successor_codebook.weight.double()
    prev, path = anchor, []
    for r in range(logits.shape[0]):
        order = torch.sort(-logits[r].float(), stable=True).indices[:d.sel_top_k]
        e = unary(logits[r].float()[order].double(), d.softcap, d.out_mult) + (succ[order] * (pred[prev] * s[r])).sum(-1)
        prev = int(order[_argmax(e)])
        path.append(prev)
    return path


@torch.no_grad()
def draft_block(target, drafter, ctx_taps, tokens, start, block):
    d = drafter.d
    dev = ctx_taps.device
    ctx = drafter.context(ctx_taps[None, :start].to(drafter.fc.weight.dtype))
    ids = torch.tensor([[[tokens[start]] + [d.mask_id] * (block - 1)]], device=dev)
    h = drafter.blocks(target.model.embed_tokens.weight, ids, torch.tensor([[start]], device=dev), ctx)[0]
    logits = h[1:].float() @ target.lm_head.weight.float().T
    if d.version == 1:
        return [_argmax(row) for row in logits]
    return walk(drafter, logits, h[1:], tokens[start])


@torch.no_grad()
def speculative(target, drafter, prompt, max_tokens, block):
    """(generated tokens, acceptance length of every round)."""
    dev = target.model.embed_tokens.weight.device
    taps = tuple(drafter.d.taps)
    p = len(prompt)
    tokens = list(prompt)
    logits, tap_rows = target(torch.tensor([tokens], device=dev), taps=taps)
    ctx_taps = tap_rows[0]
    tokens.append(_argmax(logits[0, -1].float()))
    start, lengths = p, []
    while len(tokens) - p < max_tokens:
        drafts = draft_block(target, drafter, ctx_taps, tokens, start, block)
        seq = tokens[:start + 1] + drafts
        logits, tap_rows = target(torch.tensor([seq], device=dev), taps=taps)
        want = [_argmax(row) for row in logits[0, start:start + block].float()]
        acc = 0
        while acc < block - 1 and drafts[acc] == want[acc]:
            acc += 1
        lengths.append(acc + 1)
        ctx_taps = tap_rows[0, :start + acc + 1]
        start += acc + 1
        for t in drafts[:acc] + [want[acc]]:
            tokens.append(t)
            if len(tokens) - p >= max_tokens:
                break
    return tokens[p:], lengths
