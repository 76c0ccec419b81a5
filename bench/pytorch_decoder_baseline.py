#!/usr/bin/env python3
"""What a user would run instead of tandem's CUDA target (issue 9): HF transformers Qwen3ForCausalLM with
random BF16 weights in the Qwen3-8B shape on one GPU. Greedy decoding at batch 1 and 8 (eager, DynamicCache:
a prefill of 512 tokens then one token per step, CUDA-event timed, median step), the same at batch 1 with a
static cache and torch.compile (mode reduce-overhead; skipped when --no-compile or past --compile-budget),
a verify-like step of 16 new rows against 1, and prefill of 1k / 8k tokens with sdpa attention.
    python3 bench/pytorch_decoder_baseline.py [--json FILE] [--tiny] [--no-compile]"""
import argparse
import json
import statistics
import time

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM
from transformers.cache_utils import DynamicCache, StaticCache


def config(tiny):
    if tiny:
        return Qwen3Config(vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=4096)
    return Qwen3Config(vocab_size=151936, hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
                       num_attention_heads=32, num_key_value_heads=8, head_dim=128, max_position_embeddings=40960,
                       rope_theta=1e6, tie_word_embeddings=False)


def timed(fn, reps, warm=2):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ms = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ms.append(a.elapsed_time(b))
    return statistics.median(ms)


@torch.no_grad()
def decode_eager(model, batch, context, steps, vocab):
    ids = torch.randint(0, vocab, (batch, context), device="cuda")
    cache = DynamicCache()
    out = model(ids, past_key_values=cache, use_cache=True)
    nxt = out.logits[:, -1:].argmax(-1)
    ms = []
    for i in range(steps + 2):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        out = model(nxt, past_key_values=out.past_key_values, use_cache=True)
        nxt = out.logits[:, -1:].argmax(-1)
        b.record()
        b.synchronize()
        if i >= 2:
            ms.append(a.elapsed_time(b))
    return 1e3 * batch / statistics.median(ms)


@torch.no_grad()
def verify_eager(model, rows, context, vocab):
    ids = torch.randint(0, vocab, (1, context), device="cuda")
    cache = DynamicCache()
    model(ids, past_key_values=cache, use_cache=True)
    new = torch.randint(0, vocab, (1, rows), device="cuda")

    def step():
        model(new, past_key_values=cache, use_cache=True)
        cache.crop(context)
    return timed(step, 10)


@torch.no_grad()
def decode_compiled(model, context, steps, vocab, budget):
    t0 = time.time()
    cache = StaticCache(config=model.config, max_batch_size=1, max_cache_len=context + steps + 16, device="cuda",
                        dtype=torch.bfloat16)
    fwd = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
    ids = torch.randint(0, model.config.vocab_size, (1, context), device="cuda")
    pos = torch.arange(context, device="cuda")
    out = model(ids, past_key_values=cache, cache_position=pos, use_cache=True)
    nxt = out.logits[:, -1:].argmax(-1)
    ms = []
    for i in range(steps + 4):
        if time.time() - t0 > budget:
            return None, time.time() - t0
        p = torch.tensor([context + i], device="cuda")
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        out = fwd(nxt, past_key_values=cache, cache_position=p, use_cache=True)
        nxt = out.logits[:, -1:].argmax(-1).clone()
        b.record()
        b.synchronize()
        if i >= 4:
            ms.append(a.elapsed_time(b))
    return 1e3 / statistics.median(ms), time.time() - t0


@torch.no_grad()
def prefill(model, n, vocab):
    ids = torch.randint(0, vocab, (1, n), device="cuda")
    return 1e3 * n / timed(lambda: model(ids, use_cache=False, logits_to_keep=1), 3, warm=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--compile-budget", type=float, default=200.0)
    a = ap.parse_args()
    torch.manual_seed(0)
    cfg = config(a.tiny)
    cfg._attn_implementation = "sdpa"
    t0 = time.time()
    with torch.device("cuda"):
        model = Qwen3ForCausalLM(cfg).to(torch.bfloat16).eval()
    r = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "init_seconds": time.time() - t0}
    v = cfg.vocab_size
    r["eager_decode_batch1_tokens_per_s"] = decode_eager(model, 1, 512, 32, v)
    r["eager_decode_batch8_tokens_per_s"] = decode_eager(model, 8, 512, 16, v)
    v1, v16 = verify_eager(model, 1, 512, v), verify_eager(model, 16, 512, v)
    r["eager_verify_ms_batch1"] = {"1": v1, "16": v16}
    r["prefill_1024_tokens_per_s"] = prefill(model, 1024, v)
    if not a.tiny:
        r["prefill_8192_tokens_per_s"] = prefill(model, 8192, v)
    print(json.dumps(r, indent=1), flush=True)
    if not a.no_compile:
        try:
            tps, secs = decode_compiled(model, 512, 32, v, a.compile_budget)
            r["static_compile_decode_batch1_tokens_per_s"] = tps
            r["static_compile_seconds"] = secs
        except Exception as e:  # reported, not hidden: the figure is then missing from the table
            r["static_compile_error"] = repr(e)[:500]
    print(json.dumps(r, indent=1))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(r, f, indent=1)


if __name__ == "__main__":
    main()
