#!/usr/bin/env bash
# The GPU test suite alone on the GPU machine (`ctest -L gpu`), for a call that does other work beside it (a
# training run, a study): configures the CUDA build (with MPI where the machine has it, else without), builds the
# gpu-labelled tests with JOBS cores (default: all) and runs them three at a time. One file comes back:
# $OUT/suite.log (the build's errors if any, then ctest's output; the summary is its last lines).
#   OUT=/tmp/suite JOBS=12 ./tools/gpu-suite.sh
. "$(dirname "$0")/gpu-common.sh" gpu-out build-gpu
LOG=$OUT/suite.log
: > "$LOG"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >> "$LOG" 2>&1
say "configure"
cmake -S . -B "$BUILD" "${CUDA_CONFIG[@]}" > "$BUILD.configure.log" 2>&1 ||
  cmake -S . -B "$BUILD" "${CUDA_CONFIG[@]}" -DTANDEM_MPI=OFF > "$BUILD.configure.log" 2>&1 ||
  { say "configure failed"; tail -20 "$BUILD.configure.log" >> "$LOG"; exit 1; }
# shellcheck disable=SC2046  # one target per word
cmake --build "$BUILD" -j"${JOBS:-$(nproc)}" --target $(gpu_test_targets "$BUILD") > "$BUILD.build.log" 2>&1 ||
  { say "build failed"; grep -E "error" "$BUILD.build.log" | head -30 >> "$LOG"; exit 1; }
say "built; ctest -L gpu"
(cd "$BUILD" && ctest -L gpu -j3 --timeout 240 --output-on-failure) >> "$LOG" 2>&1
rc=$?
say "ctest rc $rc"
exit $rc
