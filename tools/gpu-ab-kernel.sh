#!/usr/bin/env bash
# Kernel sources against a baseline in one GPU call (METHOD: before and after on the same machine, same run).
# The kernels are embedded in the backend, so: build TARGET and run it with the working tree's KERNEL ("new"),
# then with each CANDIDATES source in KERNEL's place, then with BASELINE ("old"), rebuilding each time, and put
# the working tree's back. Each side's stdout goes to $OUT/ab-SIDE.out; its stderr and build log stay in
# $BUILD/ab-logs, with the stderr's last lines and a failed build's errors in $OUT/ab.log (so up to seven sides
# fit the 8 files a device call returns). The NVRTC cache is keyed by the source, so no side reuses another's
# binary. Last, tools/ab_compare.py's tables of each side against "old": the kernel medians of
# cuda_drafter_quant_bench --kernels and the draft, settle and verify times of cuda_spec_bench, from the JSON the
# command prints on stdout.
#   BASELINE=.gpu-deps/qgemm_tc.main.cuh KERNEL=kernels/qgemm_tc.cuh TARGET=cuda_drafter_quant_bench \
#     CANDIDATES="lean=.gpu-deps/lean.cuh skip=.gpu-deps/skip.cuh" \
#     OUT=/tmp/ab tools/gpu-ab-kernel.sh bench/cuda_drafter_quant_bench --kernels
# (the command is relative to the build folder; BASELINE e.g. from `git show HEAD:kernels/qgemm_tc.cuh`, and
# the candidates, kept in the ignored .gpu-deps/ that the device call carries; TARGET="a b" builds both;
# AB_FILTER=REGEX keeps the table's kernel rows whose kernel name matches).
. "$(dirname "$0")/gpu-common.sh" gpu-out build-gpu
LOG=$OUT/ab.log
: > "$LOG"
: "${BASELINE:?the baseline source}" "${KERNEL:?the kernel file it replaces}" "${TARGET:?the build target}"
[ $# -ge 1 ] || { echo "usage: $0 COMMAND [ARGS] (relative to the build folder)" >&2; exit 2; }
SIDES=(new)
for c in ${CANDIDATES:-}; do
  [[ $c == *=* && -f ${c#*=} ]] || { say "candidate '$c' is not NAME=FILE with an existing FILE"; exit 2; }
  [[ ${c%%=*} =~ ^[a-z0-9_-]+$ && ${c%%=*} != new && ${c%%=*} != old ]] ||
    { say "candidate name '${c%%=*}': lower-case letters, digits, - and _, not new or old"; exit 2; }
  SIDES+=("$c")
done
SIDES+=("old=$BASELINE")
if [ ! -f "$BASELINE" ] || [ ! -f "$KERNEL" ]; then say "no $BASELINE or $KERNEL"; exit 2; fi
SAVED=$(mktemp)
cp "$KERNEL" "$SAVED"
restore() { cp "$SAVED" "$KERNEL"; rm -f "$SAVED"; }
trap restore EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv >> "$LOG" 2>&1
cmake -S . -B "$BUILD" "${CUDA_CONFIG[@]}" -DTANDEM_MPI=OFF >> "$LOG" 2>&1 || { say "configure failed"; exit 1; }
mkdir -p "$BUILD/ab-logs"
rm -f "$OUT"/ab-*.out  # an earlier run's sides in a reused OUT would join the tables
for side in "${SIDES[@]}"; do
  name=${side%%=*}
  if [ "$side" = new ]; then cp "$SAVED" "$KERNEL"; else cp "${side#*=}" "$KERNEL"; fi
  # shellcheck disable=SC2086  # TARGET may name several targets (a kernel lives in every binary that runs it)
  cmake --build "$BUILD" -j"$(nproc)" --target $TARGET > "$BUILD/ab-logs/$name-build.log" 2>&1 ||
    { say "$name: build failed"; grep -E "error" "$BUILD/ab-logs/$name-build.log" | head -20 | tee -a "$LOG"; exit 1; }
  (cd "$BUILD" && timeout "${AB_TIMEOUT:-200}" "$@") > "$OUT/ab-$name.out" 2> "$BUILD/ab-logs/$name.log"
  rc=$?  # before anything else runs: a command substitution in the line below would set $? first
  if [ "$side" = new ]; then say "new ($KERNEL): rc $rc"; else say "$name ($KERNEL = ${side#*=}): rc $rc"; fi
  tail -n 8 "$BUILD/ab-logs/$name.log" | sed "s/^/  $name: /" >> "$LOG"
done
python3 "$ROOT/tools/ab_compare.py" "$OUT" "${AB_FILTER:-}" | tee -a "$LOG"
