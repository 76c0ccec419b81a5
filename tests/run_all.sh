#!/usr/bin/env bash
# The whole test suite on a fresh Debian 12 machine: installs dependencies, builds tandem (with the CUDA
# backend when a toolkit is present; GPU tests skip without a GPU), runs every ctest, then rebuilds the
# input-facing tests under AddressSanitizer + UndefinedBehaviorSanitizer and runs them.
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/setup-debian.sh
jobs=$(nproc)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTANDEM_WERROR=ON
cmake --build build -j"$jobs"
(cd build && ctest --output-on-failure -j"$jobs" --timeout 900)

cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTANDEM_SANITIZE=address,undefined \
  -DTANDEM_CUDA=OFF -DTANDEM_MPI=OFF -DTANDEM_BENCH=OFF -DTANDEM_WERROR=ON
cmake --build build-sanitize -j"$jobs" --target sanitize-tests
(cd build-sanitize && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --output-on-failure -j"$jobs" -L sanitize --timeout 900)
echo "run_all: every test passed"
