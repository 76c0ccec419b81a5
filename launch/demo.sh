#!/usr/bin/env bash
# The main job on the embedded default (CPU backend): installs dependencies, builds tandem, starts the
# deployment of config/examples/cpu.yaml (a coordinator, a scorer rank with models/decision-tickets, a
# generator rank with models/pylm and its DFlash drafter) with `tandem launch`, waits for /health, then
# asks it as a user would (tools/demo_client.py): /v1/decide on a sample ticket, a streamed
# /v1/completions, and the same completion with and without speculation; then stops the job cleanly.
# DEMO_PORT picks the port (default 8080); DEMO_BUILD the build folder (default build-demo: a Release build of
# the `tandem` binary alone, CPU backend only, which is all the demo runs; an existing folder, such as the test
# suite's `build`, is built as it is configured).
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${DEMO_PORT:-8080}
BUILD=${DEMO_BUILD:-build-demo}
say() { echo "==> $*" >&2; }

say "installing what is missing (tools/setup-debian.sh)"
./tools/setup-debian.sh
say "building tandem in $BUILD"
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTANDEM_CUDA=OFF -DTANDEM_TESTS=OFF \
    -DTANDEM_BENCH=OFF >/dev/null
fi
cmake --build "$BUILD" -j"$(nproc)" --target tandem >/dev/null

CONFIG=$(mktemp -d)/deploy.yaml
sed -e "s/port: 8080/port: $PORT/" -e "s#\.\./\.\./models#$PWD/models#g" config/examples/cpu.yaml > "$CONFIG"
LOG=$(dirname "$CONFIG")/job.log
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
say "starting the job: $BUILD/launch/tandem launch --config config/examples/cpu.yaml (log: $LOG)"
"$BUILD/launch/tandem" launch --config "$CONFIG" > "$LOG" 2>&1 &
JOB=$!
stop_job() {
  if kill -0 "$JOB" 2>/dev/null; then
    kill -INT "$JOB"
    wait "$JOB"
    return $?
  fi
  wait "$JOB"
}
trap 'kill -INT $JOB 2>/dev/null || true' EXIT

say "waiting for http://127.0.0.1:$PORT/health"
ready=0
for _ in $(seq 1 240); do
  if ! kill -0 "$JOB" 2>/dev/null; then break; fi
  if curl -sf "http://127.0.0.1:$PORT/health" > /dev/null; then ready=1; break; fi
  sleep 0.5
done
if [ "$ready" -ne 1 ]; then
  say "the job did not come up; its log:"
  cat "$LOG" >&2
  exit 1
fi
curl -s "http://127.0.0.1:$PORT/health"; echo

say "POST /v1/decide: the decision model answers questions about a support ticket"
python3 tools/demo_client.py "$PORT" decide
say "POST /v1/completions (stream): pylm completes Python, drafted by pylm-dflash2 and verified by pylm"
python3 tools/demo_client.py "$PORT" complete
say "the same greedy completion with and without speculation"
python3 tools/demo_client.py "$PORT" compare

say "stopping the job (SIGINT to tandem launch)"
trap - EXIT
if stop_job; then
  say "the job stopped cleanly"
else
  code=$?
  say "the job ended with code $code; its log:"
  tail -20 "$LOG" >&2
  exit "$code"
fi
