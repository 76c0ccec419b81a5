# shellcheck shell=bash
# shellcheck disable=SC2034  # the variables are for the scripts that source it
# The preamble the tools/gpu-*.sh scripts share. Each sources it first with its default output and build
# folders (under the repository root; OUT and BUILD in the environment override them):
#   . "$(dirname "$0")/gpu-common.sh" gpu-out build-gpu
# It leaves the shell at the repository root with ROOT, OUT (created), BUILD and START set, elapsed, say
# (a timestamped line to stdout and to the script's $LOG) and the configure flags below.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/$1}
mkdir -p "$OUT"
BUILD=${BUILD:-$ROOT/$2}
export NCCL_NVLS_ENABLE=0             # must stay set on the GPU machine (gpu-machine.md)
export XDG_CACHE_HOME=$BUILD/cache    # the kernel and GEMM-choice caches live with the build
START=$(date +%s)
# GEMM choices of an earlier call (a fresh machine probes and times every decoder shape again, minutes of a
# call): .gpu-deps/gemm-choices/*.txt, carried by the device call, seed the build's cache; save_gemm_choices
# copies the cache's files to $OUT to be kept there for the next call.
if ls "$ROOT"/.gpu-deps/gemm-choices/*.txt > /dev/null 2>&1; then
  mkdir -p "$XDG_CACHE_HOME/tandem/gemm"
  cp -n "$ROOT"/.gpu-deps/gemm-choices/*.txt "$XDG_CACHE_HOME/tandem/gemm/"
fi
save_gemm_choices() { cp "$XDG_CACHE_HOME"/tandem/gemm/*.txt "$OUT/" 2>/dev/null || true; }

. "$ROOT/tools/job-common.sh"
elapsed() { echo $(( $(date +%s) - START )); }
# The build targets of BUILD's `gpu`-labelled tests (a test that runs another test's binary, such as
# cuda_served_round_split_test, has no target of its own).
gpu_test_targets() {
  local targets
  targets=$(ninja -C "$1" -t targets all 2>/dev/null | sed 's/: .*//')
  (cd "$1" && ctest -L gpu -N 2>/dev/null) | awk '/Test +#/ {print $3}' | grep -x -F "$targets"
}
say() { echo "[$(elapsed) s] $*" | tee -a "$LOG"; }

# A Release build with pcre2.h from .gpu-deps/include where the machine lacks it; CUDA_CONFIG also asks
# for the CUDA backend and leaves warnings as warnings.
RELEASE_CONFIG=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DTANDEM_PCRE2_INCLUDE_DIR="$ROOT/.gpu-deps/include")
CUDA_CONFIG=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DTANDEM_CUDA=ON -DTANDEM_WERROR=OFF
             -DTANDEM_PCRE2_INCLUDE_DIR="$ROOT/.gpu-deps/include")
