"""The decision model's figures from its option logits, pure Python (no torch, so they are checked where torch is
missing): whether a pick is right (a noul question's one logit > 0 says true; else the first largest logit),
accuracy per question type and per question key, and the calibration of rl_agent_config.json: temperatures
fitted by NLL on a grid (per question type, then per option count with enough questions), NLL and ECE.
A question is a dict with qtype, qi (0 choice, 1 score, 2 noul), key and answer (the right option's index; for
noul 1 when the statement is true); its logits a list, one per option."""
import math


def correct(x, z):
    return (z[0] > 0) == bool(x["answer"]) if x["qi"] == 2 else max(range(len(z)), key=lambda i: (z[i], -i)) == x["answer"]


def by_key(items, logits):
    """Accuracy per question key (want, product, mood, ...), rounded, for the training log."""
    per = {}
    for x, z in zip(items, logits):
        per.setdefault(x["key"], []).append(correct(x, z))
    return {k: round(sum(v) / len(v), 3) for k, v in sorted(per.items())}


def accuracy(items, logits):
    acc = {}
    for q in ("choice", "score", "noul"):
        sel = [(x, z) for x, z in zip(items, logits) if x["qtype"] == q]
        acc[q] = sum(correct(x, z) for x, z in sel) / max(1, len(sel))
    return acc


def said_against_accuracy(items, logits):
    """Accuracy on the want questions of tickets that also name a resolution they do not want ("a refund, not a
    replacement"): a model can score well per type while reading the other option as the wish (the candidate of
    2026-12-06: 0.83 there, 0.95 on choice). None when the items have none."""
    sel = [correct(x, z) for x, z in zip(items, logits) if x["key"] == "want" and x.get("said_against")]
    return sum(sel) / len(sel) if sel else None


def probs(x, z, t):
    if x["qi"] == 2 and len(z) == 1:
        p = 1.0 / (1.0 + math.exp(-z[0] / t))
        return [1.0 - p, p], x["answer"]  # two-outcome form for NLL/ECE: index 1 = true
    m = max(v / t for v in z)
    e = [math.exp(v / t - m) for v in z]
    s = sum(e)
    return [v / s for v in e], x["answer"]


def nll(pairs, t):
    tot = 0.0
    for x, z in pairs:
        p, a = probs(x, z, t)
        tot -= math.log(max(p[a], 1e-12))
    return tot / max(1, len(pairs))


def fit_temperature(pairs):
    grid = [math.exp(math.log(0.05) + i * (math.log(20.0) - math.log(0.05)) / 199) for i in range(200)]
    return min(grid, key=lambda t: nll(pairs, t))


def ece(pairs, t, bins=10):
    conf = []
    for x, z in pairs:
        p, a = probs(x, z, t)
        pick = max(range(len(p)), key=lambda i: p[i])
        conf.append((p[pick], pick == a))
    tot = 0.0
    for b in range(bins):
        sel = [(c, r) for c, r in conf if b / bins < c <= (b + 1) / bins or (b == 0 and c == 0)]
        if sel:
            tot += len(sel) / len(conf) * abs(sum(c for c, _ in sel) / len(sel) - sum(r for _, r in sel) / len(sel))
    return tot


def calibrate(calib, calib_logits):
    """Temperatures fitted on calib: per question type over all option counts, then per option count where the
    count has at least 200 questions."""
    temps, by_options = [1.0, 1.0, 1.0], {}
    for qi, q in enumerate(("choice", "score", "noul")):
        pairs = [(x, z) for x, z in zip(calib, calib_logits) if x["qi"] == qi]
        if not pairs:
            continue
        temps[qi] = fit_temperature(pairs)
        for k in sorted({len(z) for _, z in pairs}):
            sub = [(x, z) for x, z in pairs if len(z) == k]
            if len(sub) >= 200:
                by_options.setdefault(q, {})[str(k)] = fit_temperature(sub)
    return temps, by_options


def temp_of(temps, by_options, x, z):
    return by_options.get(x["qtype"], {}).get(str(len(z)), temps[x["qi"]])
