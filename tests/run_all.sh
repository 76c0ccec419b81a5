#!/usr/bin/env bash
# The whole test suite on a fresh Debian 12 machine: installs dependencies, builds tandem (with the CUDA
# backend when a toolkit is present; GPU tests skip without a GPU), runs every ctest and the demo, then
# rebuilds the input-facing tests under AddressSanitizer + UndefinedBehaviorSanitizer and runs them, and fuzzes the
# generation request parsers and the chat template renderer with libFuzzer for a bounded time.
set -euo pipefail
cd "$(dirname "$0")/.."
# The elapsed wall time on stderr as each stage ends, so a slow CI run says where its time went.
stage() { echo "run_all: $1 done at $SECONDS s" >&2; }
./tools/setup-debian.sh
stage setup
jobs=$(nproc)
# Debug information: line tables only (-g1), for every build here. Backtraces, gdb's bt and the sanitizers'
# and libFuzzer's reports still name file and line; what goes is the description of types and local
# variables, which nobody reads on a CI machine, and which cost about 30% of the -O2 compile time of the
# heavy files (gcc 12; less at -O0 and with clang). GCC and clang are designed so that -g does not change
# the generated code: the tests run what a -g build runs. Build with the defaults to debug.
# Tried and not kept (2026-12-06): one precompiled header (GoogleTest, nlohmann/json, 22 standard headers)
# reused by every test target took the 153 test objects from 1,045 to 1,014 CPU-seconds (3%; the header
# itself costs 8 s): their time is in the project's own headers and in code generation, not in those.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTANDEM_WERROR=ON \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG"
cmake --build build -j"$jobs"
stage build
(cd build && ctest --output-on-failure -j"$jobs" --timeout 900)
stage ctest
# The README's main command as a user runs it (on this build): the job up, decide, a streamed
# completion, speculation on and off with the same text, a clean stop; any failing step fails the run.
DEMO_PORT=18473 DEMO_BUILD=build ./launch/demo.sh
stage demo

# With clang, as the fuzz build below: the same -O0 -g1 ASan + UBSan build compiles in 795 CPU-s against
# gcc 12's 1,394 (both -j2 on 2 cores: 398 s against 698 s of wall time), and its tests run in 66 s
# against 74 s. -O1 was not kept: it triples the compile time of the heaviest files for seconds of tests.
cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER=clang++ \
  -DTANDEM_SANITIZE=address,undefined -DTANDEM_CUDA=OFF -DTANDEM_MPI=OFF -DTANDEM_BENCH=OFF -DTANDEM_WERROR=ON \
  -DCMAKE_CXX_FLAGS_DEBUG="-g1"
cmake --build build-sanitize -j"$jobs" --target sanitize-tests
stage "sanitize build"
(cd build-sanitize && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --output-on-failure -j"$jobs" -L sanitize --timeout 900)
stage "sanitize tests"

# The parsers of untrusted input under libFuzzer (clang, ASan + UBSan): completion and chat bodies, chat
# templates, and /v1/decide and /v1/score bodies with their layout, 35 s each from the seeds in
# tests/fuzz/corpus. Any crash fails the run.
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DTANDEM_FUZZ=ON -DTANDEM_SANITIZE=address,undefined -DTANDEM_CUDA=OFF \
  -DTANDEM_MPI=OFF -DTANDEM_BENCH=OFF -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG"
cmake --build build-fuzz -j"$jobs" --target fuzz-targets
stage "fuzz build"
for target in completion_request chat_template decision_request; do
  mkdir -p "build-fuzz/corpus-$target"
  build-fuzz/tests/fuzz/fuzz_$target -max_total_time=35 -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
    "build-fuzz/corpus-$target" "tests/fuzz/corpus/$target"
done
stage fuzzing
echo "run_all: every test passed"
