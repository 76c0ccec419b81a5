#!/usr/bin/env bash
# Trains, verifies and packs the embedded default models in one command on the GPU machine (one H200, torch +
# transformers + tokenizers + safetensors, no network), within 9 minutes:
#   0. tools/train/selftest.py and every script in --smoke mode (toy sizes, seconds) in a scratch root; the first
#      failure stops the run and prints its traceback;
#   1. tools/train_lm.py (tokenizer + models/pylm) and tools/train_decision.py (models/decision-tickets) together;
#   2. tools/train_drafter.py --version 1 and --version 2 (models/pylm-dflash, models/pylm-dflash2) together;
#   3. tools/verify_default_models.py, its four parts together (reload with tokenizers/transformers/safetensors,
#      acceptance lengths at blocks 4/8/16, decision accuracy), then $OUT/figures.json;
#   4. the four model folders packed as $OUT/models.tar.gz.part-00, -01, ... (15 MB each; unpack at the
#      repository root: cat models.tar.gz.part-* | tar xzf -), and $OUT/train.log (the summary and the last lines
#      of every script's log). Full logs stay in $WORK/logs.
# Usage (repository root): OUT=/tmp/out ./tools/train_default_models.sh
# Budgets (seconds): LM_SECONDS, DECISION_SECONDS (phase 1), DRAFTER_SECONDS (phase 2); TOTAL_SECONDS caps the run
# (phase budgets shrink to fit what the smoke run left).
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?set OUT to the folder whose files come back}"
export PYTHONUNBUFFERED=1
WORK=${WORK:-/tmp/tandem-train}
LM_SECONDS=${LM_SECONDS:-180}
DECISION_SECONDS=${DECISION_SECONDS:-180}
DRAFTER_SECONDS=${DRAFTER_SECONDS:-140}
TOTAL_SECONDS=${TOTAL_SECONDS:-510}
LOGS=$WORK/logs
rm -rf "$WORK"
mkdir -p "$OUT" "$LOGS" "$WORK/smoke-root/models"
START=$(date +%s)
SUMMARY=$OUT/train.log
: >"$SUMMARY"

say() { echo "[$(($(date +%s) - START)) s] $*" | tee -a "$SUMMARY" >&2; }

# run_all NAME:COMMAND... runs the commands in parallel, each logging to $LOGS/NAME.out; on any failure prints
# the failing logs' tails (the traceback) and returns 1.
run_all() {
  local pids=() names=() failed=0
  for spec in "$@"; do
    local name=${spec%%:*} cmd=${spec#*:}
    bash -c "$cmd" >"$LOGS/$name.out" 2>&1 &
    pids+=($!)
    names+=("$name")
  done
  for i in "${!pids[@]}"; do
    if ! wait "${pids[$i]}"; then
      failed=1
      say "FAILED: ${names[$i]} (last lines of $LOGS/${names[$i]}.out follow)"
      tail -n 40 "$LOGS/${names[$i]}.out" | tee -a "$SUMMARY" >&2
    else
      say "done: ${names[$i]}"
    fi
  done
  return $failed
}

tails() {
  for f in "$LOGS"/*.out; do
    { echo "---- $(basename "$f") (last 25 lines)"; tail -n 25 "$f"; } >>"$SUMMARY"
  done
}

fail() {
  say "stopping: $*"
  tails
  exit 1
}

python3 - <<'PY' 2>&1 | tee -a "$SUMMARY" >&2
import platform, sys, torch, transformers, tokenizers, safetensors
print("python", platform.python_version(), "torch", torch.__version__, "transformers", transformers.__version__,
      "tokenizers", tokenizers.__version__, "safetensors", safetensors.__version__,
      "gpu", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none")
PY

# ---- 0. smoke ----
S=$WORK/smoke-root
SW=$WORK/smoke-work
say "smoke: selftest and every script at toy size"
run_all "smoke-selftest:python3 tools/train/selftest.py" \
        "smoke-lm:python3 tools/train_lm.py --smoke --root $S --work $SW --log $LOGS/smoke-lm.log" \
        "smoke-decision:python3 tools/train_decision.py --smoke --root $S --log $LOGS/smoke-decision.log" ||
  fail "a smoke run failed"
run_all "smoke-dflash1:python3 tools/train_drafter.py --smoke --version 1 --root $S --work $SW --log $LOGS/smoke-dflash1.log" \
        "smoke-dflash2:python3 tools/train_drafter.py --smoke --version 2 --root $S --work $SW --log $LOGS/smoke-dflash2.log" ||
  fail "a smoke run failed"
run_all "smoke-verify-lm:python3 tools/verify_default_models.py --smoke --part lm --root $S --work $SW --figures $WORK/smoke-lm.json" \
        "smoke-verify-dflash1:python3 tools/verify_default_models.py --smoke --part dflash1 --root $S --work $SW --figures $WORK/smoke-d1.json" \
        "smoke-verify-dflash2:python3 tools/verify_default_models.py --smoke --part dflash2 --root $S --work $SW --figures $WORK/smoke-d2.json" \
        "smoke-verify-decision:python3 tools/verify_default_models.py --smoke --part decision --root $S --work $SW --figures $WORK/smoke-dec.json" ||
  fail "a smoke verification failed"

# ---- budgets: what the smoke run left, less ~120 s for data preparation outside the budgets, verification
# and packing ----
left=$((TOTAL_SECONDS - ($(date +%s) - START) - 120))
phase1=$(( LM_SECONDS > DECISION_SECONDS ? LM_SECONDS : DECISION_SECONDS ))
if (( phase1 + DRAFTER_SECONDS > left )); then
  scale_num=$left scale_den=$((phase1 + DRAFTER_SECONDS))
  LM_SECONDS=$((LM_SECONDS * scale_num / scale_den))
  DECISION_SECONDS=$((DECISION_SECONDS * scale_num / scale_den))
  DRAFTER_SECONDS=$((DRAFTER_SECONDS * scale_num / scale_den))
fi
say "budgets: LM ${LM_SECONDS} s, decision ${DECISION_SECONDS} s, drafters ${DRAFTER_SECONDS} s each"

# ---- 1-3. train and verify ----
W=$WORK/work
run_all "lm:python3 tools/train_lm.py --root . --work $W --seconds $LM_SECONDS --log $LOGS/lm.log" \
        "decision:python3 tools/train_decision.py --root . --seconds $DECISION_SECONDS --log $LOGS/decision.log" ||
  fail "training failed"
run_all "dflash1:python3 tools/train_drafter.py --version 1 --root . --work $W --seconds $DRAFTER_SECONDS --log $LOGS/dflash1.log" \
        "dflash2:python3 tools/train_drafter.py --version 2 --root . --work $W --seconds $DRAFTER_SECONDS --log $LOGS/dflash2.log" ||
  fail "drafter training failed"
verify_ok=1
run_all "verify-lm:python3 tools/verify_default_models.py --part lm --root . --work $W --figures $WORK/f-lm.json" \
        "verify-dflash1:python3 tools/verify_default_models.py --part dflash1 --root . --work $W --figures $WORK/f-d1.json" \
        "verify-dflash2:python3 tools/verify_default_models.py --part dflash2 --root . --work $W --figures $WORK/f-d2.json" \
        "verify-decision:python3 tools/verify_default_models.py --part decision --root . --work $W --figures $WORK/f-dec.json" ||
  verify_ok=0

# ---- 4. figures and packing (also after a failed verification, so its logs and the models come back) ----
python3 - "$WORK" "$OUT/figures.json" "$verify_ok" <<'PY' 2>&1 | tee -a "$SUMMARY" >&2
import glob, json, os, sys
work, out, ok = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
fig = {"verified": ok}
for f in sorted(glob.glob(os.path.join(work, "f-*.json"))):
    with open(f) as fh:
        fig.update(json.load(fh))
sizes = {m: sum(os.path.getsize(os.path.join(d, x)) for d, _, xs in os.walk(os.path.join("models", m)) for x in xs)
         for m in ("pylm", "pylm-dflash", "pylm-dflash2", "decision-tickets") if os.path.isdir(os.path.join("models", m))}
fig["model_bytes"] = sizes
fig["model_bytes_total"] = sum(sizes.values())
fig["under_40MB"] = fig["model_bytes_total"] < 40_000_000
with open(out, "w") as fh:
    json.dump(fig, fh, indent=2)
short = {k: fig[k] for k in ("verified", "model_bytes_total", "under_40MB")}
for m in ("pylm-dflash", "pylm-dflash2"):
    if m in fig:
        short[m + " mean acceptance"] = {b: round(v, 3) for b, v in fig[m]["mean_acceptance"].items()}
if "decision-tickets" in fig:
    short["decision test accuracy"] = fig["decision-tickets"]["training"]["test_accuracy"]
if "pylm" in fig:
    short["pylm held-out loss"] = fig["pylm"]["training"]["heldout_loss"]
print("summary:", json.dumps(short))
PY
tar czf "$WORK/models.tar.gz" models/pylm models/pylm-dflash models/pylm-dflash2 models/decision-tickets ||
  fail "packing failed"
split -b 15000000 -d -a 2 "$WORK/models.tar.gz" "$OUT/models.tar.gz.part-"
say "packed: $(ls "$OUT" | tr '\n' ' ')"
say "total $(($(date +%s) - START)) s"
tails
(( verify_ok )) || { say "VERIFICATION FAILED (see above)"; exit 1; }
