#!/usr/bin/env bash
# tests/launch/run_kill_trainer.sh: killing one of several data-parallel trainers ends the run
# within the stop grace, naming the dead rank with the tail of its log; no other trainer hangs in
# a collective, no worker is left, and the exit status says the run failed.
# usage: run_kill_trainer.sh GEARBOX CONFIG WORK_DIR [--set ...]
set -u
gearbox=$1 config=$2 work=$3
shift 3
. "$(dirname "$0")/run_lib.sh"
rm -rf "$work"; mkdir -p "$work"
grace=5
"$gearbox" run "$config" --run-dir "$work/run" --set experiment.max_seconds=120 \
  --set trainer.count=2 --set launch.stop_timeout_s=$grace --set launch.progress=off "$@" \
  > "$work/out.log" 2>&1 &
launcher=$!
log="$work/run/logs/trainer-1.log"
wait_for_log "$work/run/logs/trainer-0.log" "parameter checksum" 90 || fail "trainers never trained"
pid=$(sed -n 's/.*worker started (pid \([0-9]*\)).*/\1/p' "$log" | head -1)
[ -n "$pid" ] || fail "no pid in $log"
killed_at=$(date +%s.%N)
kill -KILL "$pid"
wait "$launcher"; status=$?
took=$(python3 -c "import time; print(f'{time.time() - $killed_at:.1f}')")
tail -8 "$work/out.log"
echo "the launcher exited $took s after trainer-1 was killed (status $status)"
[ "$status" -eq 1 ] || fail "exit status $status, expected 1"
grep -q "worker trainer-1 killed by signal 9" "$work/out.log" || fail "no report naming trainer-1"
grep -q "    | .*trainer-1" "$work/out.log" || fail "no log tail in the report"
# reaping (50 ms polls), the stop grace, then SIGKILL: well inside grace + 5 s
python3 -c "import sys; sys.exit(0 if $took < $grace + 5 else 1)" ||
  fail "the run took $took s to end after the kill (grace $grace s)"
[ "$(json_get "$work/run/summary.json" exit_reason)" = worker_died ] || fail "exit_reason"
sleep 0.2
[ -z "$(run_processes "$work/run")" ] || fail "workers still running"
echo "1 passed, 0 failed"
