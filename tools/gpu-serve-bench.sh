#!/usr/bin/env bash
# Serving throughput and latency on the GPU machine (two GPUs): builds tandem and tandem-loadgen, makes a
# random ModernBERT-large compat checkpoint and a pool of W1-shaped questions, then for 1 and 2 CUDA scorer
# ranks launches the job, drives it closed loop (questions/s at saturation) and open loop at a fixed rate
# (p50/p99), and prints a table last. SCORERS picks the rank counts (default "1 2"). Saturation scales
# with the ranks: REQUESTS and CONNECTIONS are per scorer rank. While the closed loop runs, the busiest
# threads (coordinator "http-io", "batcher", "mpi", the workers, the load generator) are sampled with top
# to threads-N.txt, to tell a coordinator limit from a device limit. Logs go to $OUT (default ./serve-out).
. "$(dirname "$0")/gpu-common.sh" serve-out build-serve
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
REQUESTS=${REQUESTS:-20000}
CONNECTIONS=${CONNECTIONS:-256}
nvidia-smi --query-gpu=index,name,memory.total --format=csv > "$OUT/machine.txt" 2>&1
if [ -z "${SKIP_BUILD:-}" ]; then  # SKIP_BUILD=1 reuses an existing $BUILD
  cmake -S . -B "$BUILD" "${RELEASE_CONFIG[@]}" -DTANDEM_TESTS=OFF > "$OUT/configure.log" 2>&1 || { tail "$OUT/configure.log"; exit 1; }
  cmake --build "$BUILD" -j"$(nproc)" --target tandem tandem-loadgen > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
fi
# MODEL_DIR and POOL override the random ModernBERT-large checkpoint (e.g. a CPU dry run on decision-tiny).
MODEL_DIR=${MODEL_DIR:-}
POOL=${POOL:-/tmp/pool.json}
BACKEND=${BACKEND:-"{name: cuda, precision: f16}"}
if [ -z "$MODEL_DIR" ]; then
  MODEL_DIR=/tmp/large
  python3 tools/make_large_decision_checkpoint.py --out "$MODEL_DIR" --pool "$POOL" --questions 1024 || exit 1
fi

run_job() {  # run_job SCORERS
  local n=$1 yaml=/tmp/serve-$1.yaml port=$((8090 + $1))
  {
    echo "version: 1"
    echo "server: {host: 127.0.0.1, port: $port, io_threads: 4}"
    echo "limits: {max_queue_sequences: 65536, request_timeout_ms: 60000, max_connections: 4096}"
    echo "batcher: {max_batch_tokens: ${BATCH_TOKENS:-4096}, max_wait_us: 500, max_inflight_per_rank: 3}"
    echo "backend: $BACKEND"
    echo "models: {scorer: {dir: $MODEL_DIR, name: scorer}}"
    echo "ranks:"
    echo "  - role: coordinator"
    for ((d = 0; d < n; d++)); do
      if [ -n "${NO_DEVICES:-}" ]; then echo "  - role: scorer"; else echo "  - {role: scorer, device: $d}"; fi
    done
  } > "$yaml"
  "$BUILD/launch/tandem" launch --config "$yaml" ${LAUNCH_ARGS:-} > "$OUT/job-$n.log" 2>&1 &
  local job=$!
  if ! wait_healthy "$port" "$job" 240 && ! kill -0 "$job" 2>/dev/null; then
    echo "the $n-scorer job ended before serving:"
    tail -5 "$OUT/job-$n.log"
    return 1
  fi
  "$BUILD/bench/tandem-loadgen" --url "http://127.0.0.1:$port" --input "$POOL" --per-request 1 \
    --requests 2000 --connections 64 > "$OUT/warm-$n.json" 2>&1
  # Two 3 s samples of per-thread CPU, taken inside the closed loop (the first second is ramp-up).
  (sleep 1; top -H -b -d 3 -n 2 -w 160 -o %CPU | awk '/^top -/ {k = 0} {if (k++ < 28) print}') \
    > "$OUT/threads-$n.txt" 2>&1 &
  "$BUILD/bench/tandem-loadgen" --url "http://127.0.0.1:$port" --input "$POOL" --per-request 1 \
    --requests $(( REQUESTS * n )) --connections $(( CONNECTIONS * n )) > "$OUT/closed-$n.json" 2>&1
  wait $!
  local qps
  qps=$(python3 -c "import json;print(int(json.load(open('$OUT/closed-$n.json'))['questions_per_s']))" 2>/dev/null || echo 0)
  local rate=$(( qps * 7 / 10 ))
  [ "$rate" -gt 0 ] || rate=100
  "$BUILD/bench/tandem-loadgen" --url "http://127.0.0.1:$port" --input "$POOL" --per-request 1 \
    --requests $(( rate * 10 )) --connections $(( CONNECTIONS * n )) --rate "$rate" > "$OUT/open-$n.json" 2>&1
  python3 -c "import urllib.request as u; print(u.urlopen('http://127.0.0.1:$port/metrics').read().decode())" \
    > "$OUT/metrics-$n.txt" 2>&1
  kill -INT "$job" 2>/dev/null; wait "$job" 2>/dev/null
  echo "$n scorer(s): closed loop $qps questions/s; open loop at $rate/s"
}

SCORERS=${SCORERS:-1 2}  # SCORERS=1 on a one-GPU machine
for n in $SCORERS; do run_job "$n"; done
for n in $SCORERS; do  # the second (in-loop) sample of each closed loop
  echo "== busiest threads during the closed loop, $n scorer(s)"
  awk '/^top -/ {k++} k == 2' "$OUT/threads-$n.txt" | sed -n '7,20p'
done
python3 - "$OUT" $SCORERS <<'PY'
import json, sys
out, counts = sys.argv[1], [int(n) for n in sys.argv[2:]]
def get(name):
    try:
        return json.load(open(f"{out}/{name}"))
    except Exception as e:
        return {"error": str(e)}
print(f"{'':28}" + "".join(f"{f'{n} scorer(s)':>22}" for n in counts))
rows = [("closed loop questions/s", "closed", "questions_per_s"), ("closed loop p50 ms", "closed", "p50"),
        ("closed loop p99 ms", "closed", "p99"), ("open loop rate /s", "open", "rate"),
        ("open loop questions/s", "open", "questions_per_s"), ("open loop p50 ms", "open", "p50"),
        ("open loop p99 ms", "open", "p99")]
def value(d, key):
    return d.get("latency_ms", {}).get(key, "?") if key in ("p50", "p99") else d.get(key, "?")
for label, kind, key in rows:
    vals = [value(get(f"{kind}-{n}.json"), key) for n in counts]
    print(f"{label:28}" + "".join(f"{v if isinstance(v, str) else round(v, 3):>22}" for v in vals))
for n in counts:
    c = get(f"closed-{n}.json")
    print(n, "closed:", {k: c.get(k) for k in ("statuses", "lost", "timed_out", "mismatched", "duplicated", "errors")})
a, b = get("closed-1.json").get("questions_per_s", 0), get("closed-2.json").get("questions_per_s", 0)
if a and b:
    print(f"scaling 2 vs 1 scorer: {b / a:.2f}x")
PY
