#!/usr/bin/env bash
# Trains, verifies and packs the embedded default models in one command on the GPU machine (one H200, torch +
# transformers + tokenizers + safetensors, no network), within 9 minutes:
#   0. tools/train/selftest.py and every script in --smoke mode (toy sizes, seconds) in a scratch root; the first
#      failure stops the run and prints its traceback;
#   1. tools/train_lm.py (tokenizer + models/pylm; with SKIP_LM=1 the shipped LM is kept and only its corpus is
#      encoded) and the decision-model variants, then the drafter variants (v1 and v2 of each), every variant in
#      its own scratch root, side by side on the one GPU;
#   2. tools/select_default_models.py picks the shipped drafters and decision model by their held-out training
#      figures (never the test split) under the 40 MB limit and copies them into models/;
#   3. tools/verify_default_models.py, its four parts together (reload with tokenizers/transformers/safetensors,
#      acceptance lengths at blocks 4/8/16, decision accuracy), then $OUT/figures.json;
#   4. the four model folders packed as $OUT/models.tar.gz.part-00, -01, ... (15 MB each; unpack at the
#      repository root: cat models.tar.gz.part-* | tar xzf -), and $OUT/train.log (the summary and the last lines
#      of every script's log). Full logs stay in $WORK/logs.
# Usage (repository root): OUT=/tmp/out ./tools/train_default_models.sh
# The decision model trains best without the drafters beside it: processes share the GPU by time slices, and its
# small kernels then waited behind the drafters' large ones (1,358 steps in 300 s beside two drafters and two other
# decision variants, 9,798 in 400 s beside one other decision variant). The shipped v1 drafter and decision model
# came from:
#   ONLY=drafters DRAFTER_VERSIONS=1 DRAFTER_VARIANTS="l3i384s36kd=--layers 3 --inter 384 --batch 128
#   --sequences 36864 --distill" TOTAL_SECONDS=550 DRAFTER_SECONDS=330 (the v1 drafter of 2026-12-07, trained
#   beside the GPU suite on an H100; the defaults below have not run with --distill at full size), and
#   ONLY=decision TOTAL_SECONDS=560 DECISION_SECONDS=370 with the default DECISION_VARIANTS (the decision model of
#   2026-12-06: variant c7, chosen by hand before the selection's rule was changed to choose it; BENCHMARKS "The
#   shipped small models", 2026-12-06, night). Probe a candidate through the CPU job (tools/probe_decision.py)
#   before shipping it.
# Budgets (seconds): LM_SECONDS, DECISION_SECONDS, DRAFTER_SECONDS; TOTAL_SECONDS caps the run (budgets shrink to
# fit what the smoke run left). Variants: DECISION_VARIANTS and DRAFTER_VARIANTS, "name=args;name=args" (args
# passed to the training script); DRAFTER_VERSIONS="1" trains v1 drafters only.
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?set OUT to the folder whose files come back}"
export PYTHONUNBUFFERED=1
WORK=${WORK:-/tmp/tandem-train}
LM_SECONDS=${LM_SECONDS:-180}
DECISION_SECONDS=${DECISION_SECONDS:-180}
DRAFTER_SECONDS=${DRAFTER_SECONDS:-140}
TOTAL_SECONDS=${TOTAL_SECONDS:-510}
SKIP_LM=${SKIP_LM:-}
# Two decision variants of one recipe (two init seeds): product problems told in account frames in 15% of the
# training tickets and 60% of wants said against another option (--want-not; 45% by default). Its first run (c13,
# 294 s) met 95% on every type of the test split; its next two (245 s) fell short (c13's score questions never
# learned, c7 0.9497 on choice), and x13's 0.3 cross frames alone cost the negation (BENCHMARKS "The shipped small
# models", 2026-12-06). Give it the full DECISION_SECONDS (370); its third run (c7, 351 s) is the shipped model.
# The selection's goal is the question types; the said-against wants' calibration accuracy counts in a
# candidate's lowest, the score among candidates that meet the goal alike. Accuracy varies by up to 3
# points a type between runs of one recipe (GPU training is not bit-reproducible); the selection keeps the best,
# the shipped model included, and every variant comes back packed for the probe.
DECISION_VARIANTS=${DECISION_VARIANTS-"c13=--init-seed 13 --cross-frames 0.15 --want-not 0.6 --eval-every 45;c7=--init-seed 7 --cross-frames 0.15 --want-not 0.6 --eval-every 45"}
DRAFTER_VARIANTS=${DRAFTER_VARIANTS-"l2i512b128=--layers 2 --inter 512 --batch 128;l3i384b128=--layers 3 --inter 384 --batch 128"}
DRAFTER_VERSIONS=${DRAFTER_VERSIONS:-"1 2"}  # "1": only v1 drafters train (the shipped v2 stays a candidate)
ONLY=${ONLY:-}  # decision | drafters: train only those (the shipped LM stays, as with SKIP_LM)
case "$ONLY" in
  "") ;;
  decision) SKIP_LM=1; DRAFTER_VARIANTS= ;;
  drafters) SKIP_LM=1; DECISION_VARIANTS= ;;
  *) echo "ONLY=$ONLY: say decision or drafters" >&2; exit 2 ;;
esac
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
if [ "$ONLY" = decision ]; then  # the decision model's scripts alone
  run_all "smoke-selftest:python3 tools/train/selftest.py" \
          "smoke-decision:python3 tools/train_decision.py --smoke --ema 0.99 --want-not 0.6 --root $S --log $LOGS/smoke-decision.log" ||
    fail "a smoke run failed"
  run_all "smoke-verify-decision:python3 tools/verify_default_models.py --smoke --part decision --root $S --work $SW --figures $WORK/smoke-dec.json" ||
    fail "a smoke verification failed"
else
run_all "smoke-selftest:python3 tools/train/selftest.py" \
        "smoke-lm:python3 tools/train_lm.py --smoke --root $S --work $SW --log $LOGS/smoke-lm.log" \
        "smoke-decision:python3 tools/train_decision.py --smoke --ema 0.99 --want-not 0.6 --root $S --log $LOGS/smoke-decision.log" ||
  fail "a smoke run failed"
run_all "smoke-dflash1:python3 tools/train_drafter.py --smoke --version 1 --root $S --work $SW --log $LOGS/smoke-dflash1.log" \
        "smoke-dflash2:python3 tools/train_drafter.py --smoke --version 2 --distill --root $S --work $SW --log $LOGS/smoke-dflash2.log" \
        "smoke-corpus:python3 tools/train_lm.py --smoke --corpus-only --root $S --work $SW-corpus --log $LOGS/smoke-corpus.log" ||
  fail "a smoke run failed"
mkdir -p "$WORK/smoke-var" "$WORK/smoke-select/models"
ln -sfn "$S" "$WORK/smoke-var/only"
ln -sfn "$S/models/pylm" "$WORK/smoke-select/models/pylm"
python3 tools/select_default_models.py --variants "$WORK/smoke-var" --root "$WORK/smoke-select" >"$LOGS/smoke-select.out" 2>&1 ||
  { tail -n 20 "$LOGS/smoke-select.out" >&2; fail "the selection's smoke run failed"; }
run_all "smoke-verify-lm:python3 tools/verify_default_models.py --smoke --part lm --root $S --work $SW --figures $WORK/smoke-lm.json" \
        "smoke-verify-dflash1:python3 tools/verify_default_models.py --smoke --part dflash1 --root $S --work $SW --figures $WORK/smoke-d1.json" \
        "smoke-verify-dflash2:python3 tools/verify_default_models.py --smoke --part dflash2 --root $S --work $SW --figures $WORK/smoke-d2.json" \
        "smoke-verify-decision:python3 tools/verify_default_models.py --smoke --part decision --root $S --work $SW --figures $WORK/smoke-dec.json" ||
  fail "a smoke verification failed"
fi

# ---- budgets: what the smoke run left, less ~150 s for data preparation outside the budgets, selection,
# verification and packing. With SKIP_LM the decision model trains beside the drafters (one phase). ----
left=$((TOTAL_SECONDS - ($(date +%s) - START) - 150))
if [ -n "$SKIP_LM" ]; then
  need=$(( DECISION_SECONDS > DRAFTER_SECONDS ? DECISION_SECONDS : DRAFTER_SECONDS ))
else
  need=$(( (LM_SECONDS > DECISION_SECONDS ? LM_SECONDS : DECISION_SECONDS) + DRAFTER_SECONDS ))
fi
if (( need > left )); then
  LM_SECONDS=$((LM_SECONDS * left / need))
  DECISION_SECONDS=$((DECISION_SECONDS * left / need))
  DRAFTER_SECONDS=$((DRAFTER_SECONDS * left / need))
fi
say "budgets: LM ${LM_SECONDS} s${SKIP_LM:+ (skipped: the shipped LM stays)}, decision ${DECISION_SECONDS} s, drafters ${DRAFTER_SECONDS} s each"

# ---- 1. train: each variant in its own scratch root (models/pylm linked in), side by side ----
W=$WORK/work
V=$WORK/var
variant_root() {  # variant_root NAME: a scratch root whose models/pylm is the repository's
  mkdir -p "$V/$1/models"
  ln -sfn "$PWD/models/pylm" "$V/$1/models/pylm"
  echo "$V/$1"
}
specs() {  # specs SCRIPT_ARGS VARIANTS PREFIX: one run_all spec per variant
  local IFS=';'
  for v in $2; do
    local name=${v%%=*} extra=${v#*=}
    echo "$3-$name:python3 $1 $extra --root $(variant_root "$3-$name") --log $LOGS/$3-$name.log"
  done
}
mapfile -t decision_specs < <(specs "tools/train_decision.py --seconds $DECISION_SECONDS" "$DECISION_VARIANTS" decision)
mapfile -t drafter_specs < <(for v in $DRAFTER_VERSIONS; do
                               specs "tools/train_drafter.py --version $v --work $W --seconds $DRAFTER_SECONDS" "$DRAFTER_VARIANTS" "dflash$v"
                             done)
if [ "$ONLY" = decision ]; then
  run_all "${decision_specs[@]}" || fail "training failed"
elif [ -n "$SKIP_LM" ]; then
  python3 tools/train_lm.py --root . --work "$W" --corpus-only --log "$LOGS/corpus.log" >"$LOGS/corpus.out" 2>&1 ||
    { tail -n 20 "$LOGS/corpus.out" >&2; fail "encoding the corpus with the shipped tokenizer failed"; }
  run_all "${decision_specs[@]}" "${drafter_specs[@]}" || fail "training failed"
else
  run_all "lm:python3 tools/train_lm.py --root . --work $W --seconds $LM_SECONDS --log $LOGS/lm.log" \
          "${decision_specs[@]}" || fail "training failed"
  run_all "${drafter_specs[@]}" || fail "drafter training failed"
fi

# ---- 2. select ----
mkdir -p "$V"
fresh=()
[ -n "$SKIP_LM" ] || fresh=(--fresh-lm)  # a new LM: the shipped drafters belong to the old one
python3 tools/select_default_models.py --variants "$V" --root . "${fresh[@]}" > "$WORK/selection.json" 2>"$LOGS/select.out" ||
  { cat "$LOGS/select.out" >&2; fail "selection failed"; }
say "selection: $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps({k: d[k] for k in ("chosen", "goals_met", "models_bytes")}), json.dumps(d["candidates"]))' "$WORK/selection.json")"

# ---- 3. verify ----
verify_ok=1
verify=("verify-decision:python3 tools/verify_default_models.py --part decision --root . --work $W --figures $WORK/f-dec.json")
if [ "$ONLY" != decision ]; then  # ONLY=decision leaves the LM and drafters as they were verified
  verify+=("verify-lm:python3 tools/verify_default_models.py --part lm --root . --work $W --figures $WORK/f-lm.json"
           "verify-dflash1:python3 tools/verify_default_models.py --part dflash1 --root . --work $W --figures $WORK/f-d1.json"
           "verify-dflash2:python3 tools/verify_default_models.py --part dflash2 --root . --work $W --figures $WORK/f-d2.json")
fi
run_all "${verify[@]}" || verify_ok=0

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
# Every decision variant as trained, whatever the selection chose: its figures are measured on its own split
# and a choice between variants may need the probe of the served model (tools/probe_decision.py) too; the run
# of 2026-12-06 at 07:30 lost a variant that met every goal because only the chosen models came back.
# Unpack: cat variants.tar.gz.part-* | tar xzf - (folders var/decision-NAME/models/decision-tickets).
mapfile -t trained < <(cd "$WORK" && ls -d var/decision-*/models/decision-tickets 2>/dev/null)
if (( ${#trained[@]} )); then
  tar czf "$WORK/variants.tar.gz" -C "$WORK" "${trained[@]}" && split -b 15000000 -d -a 2 "$WORK/variants.tar.gz" "$OUT/variants.tar.gz.part-"
fi
say "packed: $(ls "$OUT" | tr '\n' ' ')"
say "total $(($(date +%s) - START)) s"
tails
(( verify_ok )) || { say "VERIFICATION FAILED (see above)"; exit 1; }
