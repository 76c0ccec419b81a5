"""scorer.md §1's compat layout in Python, exactly as coordinator/build_layout.cpp builds it (the same rules as
tools/make_decision_fixture.py's compat_sequence, which tests/coordinator/build_layout_test.cpp checks):
[CLS] tok("<qtype> question: <question>")[:budget] [SEP] ([MASK] tok(" " + option)[:48])... [SEP]
tok(state)[:room] [SEP]. `enc` maps text to ids without special tokens; the state's ids are passed in."""
QTYPES = ["choice", "score", "noul"]
OPTION_TOKENS = 48


def compat_sequence(enc, specials, qtype, question, options, state_ids, max_len=512, head_max_len=192):
    cls, sep, mask = specials
    opts = [[mask] + enc(" " + o)[:OPTION_TOKENS] for o in options]
    left = head_max_len - sum(len(o) for o in opts)
    if left < 16 and opts:
        share = max(4, max(0, head_max_len - 16) // len(opts))
        opts = [o[:share] for o in opts]
        left = head_max_len - sum(len(o) for o in opts)
    ids = [cls] + enc(f"{QTYPES[qtype]} question: {question}")[:max(8, left)] + [sep]
    markers = []
    for o in opts:
        markers.append(len(ids))
        ids += o
    ids.append(sep)
    room = max(0, max_len - len(ids) - 1)
    ids += list(state_ids[:room]) + [sep]
    if len(ids) > max_len:
        ids = ids[:max_len]
    if any(m >= max_len for m in markers):
        raise ValueError(f"the question's options exceed head_max_len={head_max_len}")
    return ids, markers
