#!/usr/bin/env bash
# Issue 13's figures on a machine with two GPUs (nvidia-h200-x2; NCCL_NVLS_ENABLE=0 stays set), one device call per
# step, each under 10 minutes (a step takes ~400-550 s, most of it the build, the random Qwen3-8B-shaped
# checkpoints, `tandem generate`'s expected answers and the job's warm-up):
#   STEP=generator        one `generator` rank on GPU 0: the co-located baseline, concurrency 1, 8, 32
#   STEP=split            `target` on GPU 0, `drafter` on GPU 1, overlap on: the same loads, with the data plane
#                         (NCCL: send time and bytes a round) in each row
#   STEP=split-no-overlap the same without overlapping the drafter's guesses with the verify
#   STEP=split-extra      split again at concurrency 8: the prompt's context crossing for 1,024- and 8,192-token
#                         prompts, then the drafter rank killed mid-load (every answer must stay exact)
#   STEP=scorers          one and two CUDA scorer ranks (tools/gpu-serve-bench.sh, SCORERS="1 2")
# The build (incremental: each call builds the working tree it carries) and the checkpoints stay in build-serve/
# between steps while the machine is warm; a cold machine makes them again. Results: $OUT/results-<topology>.json
# and the table in the log; the goals (issue 13): split with overlap >= 1.25x the generator at concurrency 1,
# never slower at 32.
#   OUT=/tmp/out STEP=split tools/gpu-two-gpus.sh
set -u
cd "$(dirname "$0")/.." || exit 2
STEP=${STEP:?"STEP=generator|split|split-no-overlap|split-extra|scorers"}
export NCCL_NVLS_ENABLE=0
WORK=${WORK:-$PWD/build-serve/work}
mkdir -p "$WORK"
# The first step writes the checkpoints; later steps on a warm machine reuse them.
if [ -f "$WORK/target/config.json" ] && [ -f "$WORK/drafter/config.json" ]; then
  export TARGET_DIR=$WORK/target DRAFTER_DIR=$WORK/drafter
fi
export WORK PROMPTS=${PROMPTS:-16} MAX_TOKENS=${MAX_TOKENS:-64} DEADLINE=${DEADLINE:-540}
case "$STEP" in
  generator | split | split-no-overlap)
    TOPOLOGY=$STEP CONCURRENCY=${CONCURRENCY:-1 8 32} exec tools/gpu-gen-serve-bench.sh ;;
  split-extra)
    TOPOLOGY=split CONCURRENCY=${CONCURRENCY:-8} LONG_PROMPTS=${LONG_PROMPTS:-1024 8192} KILL_DRAFTER=1 \
      exec tools/gpu-gen-serve-bench.sh ;;
  scorers) SCORERS=${SCORERS:-1 2} exec tools/gpu-serve-bench.sh ;;
  *) echo "STEP is '$STEP': generator, split, split-no-overlap, split-extra or scorers" >&2; exit 2 ;;
esac
