#!/usr/bin/env bash
# Does a job stop when asked, and if not, where does the stop get lost? Starts the CPU job of
# config/examples/cpu.yaml (port 18480) with `tandem launch` as a script starts it (in the background, so
# SIGINT and SIGQUIT are ignored by whatever it starts unless they set their own handlers), waits for
# /health, prints each process's group and signal state, then sends SIGUSR1 to mpirun as `tandem launch`
# does on a stop (mpirun forwards it to every rank's process group; odls_base_verbose shows the kill), and
# says whether rank 0 heard it; then SIGINT to tandem launch (which also signals rank 0 directly), which
# stops the job if mpirun did not pass the first signal on. Everything goes to stdout; exit 0 when the
# first SIGUSR1 stopped the job, 1 when only the SIGINT did, 3 when nothing did. Seen on the H200 machine
# (Open MPI 4.1.6): mpirun caught SIGUSR1 and passed nothing on (no "Forwarding signal" line), which is
# why tandem launch now also signals rank 0 directly (launch/rank0_process.h).
#   BUILD=build ./tools/stop-check.sh
set -u
cd "$(dirname "$0")/.."
. tools/job-common.sh
BUILD=${BUILD:-build}
WORK=$(mktemp -d)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
sed -e 's/port: 8080/port: 18480/' -e 's#\.\./\.\./models#'"$PWD"'/models#' config/examples/cpu.yaml > "$WORK/job.yaml"
"$BUILD/launch/tandem" launch --config "$WORK/job.yaml" --oversubscribe --raw-mpi-output \
  -- --mca odls_base_verbose 5 > "$WORK/job.log" 2>&1 &
JOB=$!
wait_healthy 18480 "$JOB" 120 || { echo "the job did not come up"; tail -30 "$WORK/job.log"; kill -INT "$JOB"; exit 2; }
show() {
  for p in $(process_tree "$JOB"); do
    [ -r /proc/"$p"/stat ] || continue
    # stat fields 5 and 6: process group and session
    echo "pid $p pgid $(cut -d' ' -f5 /proc/"$p"/stat) sid $(cut -d' ' -f6 /proc/"$p"/stat):" \
      "$(tr '\0' ' ' < /proc/"$p"/cmdline | cut -c1-90)"
    grep -E "^Sig(Pnd|Blk|Ign|Cgt)|^ShdPnd" /proc/"$p"/status | tr '\n' ' '
    echo
  done
}
heard() { grep -q "stopping:" "$WORK/job.log"; }
wait_stop() {  # SECONDS: true if the job ended or rank 0 said it is stopping within them
  for _ in $(seq 1 $(( $1 * 2 ))); do
    heard && return 0
    kill -0 "$JOB" 2>/dev/null || return 0
    sleep 0.5
  done
  return 1
}
echo "== the job's processes"
show
MPIRUN=$(pgrep -P "$JOB" -x mpirun || pgrep -P "$JOB" | head -1)
echo "== SIGUSR1 to mpirun ($MPIRUN), as tandem launch sends it"
kill -USR1 "$MPIRUN"
rc=0
if wait_stop 10; then
  echo "rank 0 heard it"
else
  rc=1
  echo "rank 0 did not hear it within 10 s"
  show
fi
echo "== SIGINT to tandem launch"
kill -INT "$JOB" 2>/dev/null
for _ in $(seq 1 60); do kill -0 "$JOB" 2>/dev/null || break; sleep 0.5; done
if kill -0 "$JOB" 2>/dev/null; then
  echo "still running 30 s after SIGINT: killing it"
  kill -KILL "$JOB"
  rc=3
else
  wait "$JOB"
  echo "tandem launch exited with $?"
fi
echo "== the job's log (mpirun's signal lines and rank 0's stop)"
grep -E -i "signal|stopp|sending|kill" "$WORK/job.log" | head -40
rm -rf "$WORK"
exit "$rc"
