#!/usr/bin/env python3
"""The demo's client (launch/demo.sh), standard library only: asks the running job as a user would.
  demo_client.py PORT decide|complete|compare
decide: /v1/decide on models/decision-tickets/sample.json's state and questions (each pick and its
probability); complete: a streamed /v1/completions for a Python prompt, printed as the text arrives;
compare: the same greedy completion with and without speculation (tokens/s, acceptance, equal text)."""
import http.client
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "import os\nimport sys\n\n\ndef main(argv):\n    \"\"\"Parse the command line and"


def post(port, path, body, stream=False):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise SystemExit(f"{path}: HTTP {r.status}: {r.read().decode()}")
    return r if stream else json.loads(r.read())


def decide(port):
    sample = json.loads((ROOT / "models/decision-tickets/sample.json").read_text())
    print(f"ticket: {sample['state']}")
    answer = post(port, "/v1/decide", {"state": sample["state"], "questions": sample["questions"]})
    for q, a in zip(sample["questions"], answer["answers"]):
        if q["qtype"] == "noul":  # one statement: its probability of being true
            p = a["probabilities"][0]
            print(f"  [noul  ] {q['question']:45} -> {'true' if p >= 0.5 else 'false'} (P(true) = {p:.2f})")
        else:
            p = a["probabilities"][a["pick"]]
            print(f"  [{q['qtype']:6}] {q['question']:45} -> {a['option']!r} (p = {p:.2f})")


def complete(port):
    print(f"prompt:\n{PROMPT}", end="", flush=True)
    r = post(port, "/v1/completions", {"prompt": PROMPT, "max_tokens": 96, "temperature": 0, "stream": True,
                                       "stream_options": {"include_usage": True}}, stream=True)
    usage = None
    for raw in r:
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        if chunk.get("usage"):
            usage = chunk["usage"]
        for c in chunk["choices"]:
            print(c["text"], end="", flush=True)
    print()
    if usage:
        s = usage["speculative"]
        print(f"({usage['completion_tokens']} tokens in {s['rounds']} rounds: {s['accepted_tokens']} of "
              f"{s['drafted_tokens']} drafts accepted, {s['mean_acceptance_length']:.2f} tokens per round)")


def timed(port, speculative):
    body = {"prompt": PROMPT, "max_tokens": 128, "temperature": 0, "speculative": speculative}
    post(port, "/v1/completions", dict(body, max_tokens=8))  # warm
    start = time.monotonic()
    a = post(port, "/v1/completions", body)
    return a, time.monotonic() - start


def compare(port):
    spec, t_spec = timed(port, True)
    plain, t_plain = timed(port, False)
    n_spec, n_plain = spec["usage"]["completion_tokens"], plain["usage"]["completion_tokens"]
    s = spec["usage"]["speculative"]
    print(f"  speculative: {n_spec / t_spec:7.1f} tokens/s, {s['mean_acceptance_length']:.2f} tokens per round")
    print(f"  plain:       {n_plain / t_plain:7.1f} tokens/s")
    same = spec["choices"][0]["text"] == plain["choices"][0]["text"]
    print(f"  same text with and without speculation: {'yes' if same else 'NO'}")
    if not same:
        raise SystemExit("speculative decoding changed the output")


if __name__ == "__main__":
    port, what = int(sys.argv[1]), sys.argv[2]
    {"decide": decide, "complete": complete, "compare": compare}[what](port)
