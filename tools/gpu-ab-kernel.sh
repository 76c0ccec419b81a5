#!/usr/bin/env bash
# One kernel source against its baseline in one GPU call (METHOD: before and after on the same machine, same
# run). The kernels are embedded in the backend, so: build TARGET and run it with the working tree's KERNEL
# ("new"), put BASELINE in KERNEL's place, rebuild and run again ("old"), put the working tree's back. Each run's
# stdout goes to $OUT/ab-new.out / ab-old.out, its stderr to .log. The NVRTC cache is keyed by the source, so
# neither run reuses the other's binary.
#   BASELINE=.gpu-deps/qgemm_tc.before.cu KERNEL=kernels/qgemm_tc.cu TARGET=cuda_drafter_quant_bench \
#     OUT=/tmp/ab tools/gpu-ab-kernel.sh bench/cuda_drafter_quant_bench --kernels
# (the command is relative to the build folder; BASELINE e.g. from `git show HEAD~1:kernels/qgemm_tc.cu`, kept
# in the ignored .gpu-deps/ that the device call carries; TARGET="a b" builds both).
. "$(dirname "$0")/gpu-common.sh" gpu-out build-gpu
LOG=$OUT/ab.log
: > "$LOG"
: "${BASELINE:?the baseline source}" "${KERNEL:?the kernel file it replaces}" "${TARGET:?the build target}"
[ $# -ge 1 ] || { echo "usage: $0 COMMAND [ARGS] (relative to the build folder)" >&2; exit 2; }
[ -f "$BASELINE" ] && [ -f "$KERNEL" ] || { say "no $BASELINE or $KERNEL"; exit 2; }
SAVED=$(mktemp)
cp "$KERNEL" "$SAVED"
restore() { cp "$SAVED" "$KERNEL"; rm -f "$SAVED"; }
trap restore EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv >> "$LOG" 2>&1
cmake -S . -B "$BUILD" "${CUDA_CONFIG[@]}" -DTANDEM_MPI=OFF >> "$LOG" 2>&1 || { say "configure failed"; exit 1; }
for side in new old; do
  [ "$side" = old ] && cp "$BASELINE" "$KERNEL"
  # shellcheck disable=SC2086  # TARGET may name several targets (a kernel lives in every binary that runs it)
  cmake --build "$BUILD" -j"$(nproc)" --target $TARGET > "$OUT/ab-$side-build.log" 2>&1 ||
    { say "$side: build failed"; grep -E "error" "$OUT/ab-$side-build.log" | head -20 | tee -a "$LOG"; exit 1; }
  (cd "$BUILD" && timeout "${AB_TIMEOUT:-200}" "$@") > "$OUT/ab-$side.out" 2> "$OUT/ab-$side.log"
  rc=$?  # before anything else runs: a command substitution in the line below would set $? first
  if [ "$side" = old ]; then say "old ($KERNEL = $BASELINE): rc $rc"; else say "new ($KERNEL): rc $rc"; fi
done
