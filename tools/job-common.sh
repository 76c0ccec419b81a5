# shellcheck shell=bash
# What the tools that start a serving job share (sourced; gpu-common.sh sources it for the gpu-*.sh scripts).

# wait_healthy PORT PID SECONDS: 0 once http://127.0.0.1:PORT/health answers 200 (every rank ready); 1 when
# process PID (the job's `tandem launch`) has ended, or SECONDS have passed, first.
wait_healthy() {
  local _
  for _ in $(seq 1 $(( $3 * 2 ))); do
    kill -0 "$2" 2>/dev/null || return 1
    python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$1/health', timeout=1)" 2>/dev/null && return 0
    sleep 0.5
  done
  return 1
}

# process_tree PID: PID and every process below it, one a line (/proc's children lists).
process_tree() {
  echo "$1"
  local c
  for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do process_tree "$c"; done
}
