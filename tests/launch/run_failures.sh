#!/usr/bin/env bash
# tests/launch/run_failures.sh: a failure anywhere ends the run with a non-zero exit status and
# the cause where the user looks (summary.json, or stderr when summary.json itself cannot be
# written). Each case once exited 0:
#   stop_timeout   launch.stop_timeout_s: 0: every worker is killed at the stop;
#   checkpoint     the trainer's final checkpoint fails (checkpoints/ replaced by a file);
#   summary        summary.json cannot be written (summary.json.tmp is a folder).
# (A run folder too deep for ipc socket paths, once a failure here, now works: run_dir_lock.)
# usage: run_failures.sh GEARBOX CONFIG WORK_DIR
set -u
gearbox=$1 config=$2 work=$3
. "$(dirname "$0")/run_lib.sh"
rm -rf "$work"; mkdir -p "$work"

# start_run NAME ARGS...: a short run that never solves; sets $launcher and $run.
start_run() {
  run="$work/$1"; shift
  "$gearbox" run "$config" --run-dir "$run" --set experiment.max_seconds=8 \
    --set experiment.target_return=1e9 --set launch.progress=off "$@" > "$run.out" 2>&1 &
  launcher=$!
  wait_for_log "$run/logs/actor-0.log" "actor: " 60 || fail "$run did not start"
}

# finish_run: waits for the launcher; sets $status.
finish_run() { wait "$launcher"; status=$?; echo "$run: exit status $status"; }

start_run stop_timeout --set launch.stop_timeout_s=0
finish_run
[ "$status" -ne 0 ] || fail "stop_timeout_s 0 (every worker killed) exited 0"
[ "$(json_get "$run/summary.json" exit_reason)" = worker_failed ] ||
  fail "exit_reason $(json_get "$run/summary.json" exit_reason), expected worker_failed"
grep -q "was killed" "$run/summary.json" || fail "summary.json does not name the killed workers"

start_run checkpoint
rm -rf "$run/checkpoints" && echo "not a folder" > "$run/checkpoints"
finish_run
[ "$status" -ne 0 ] || fail "a failed final checkpoint exited 0"
err=$(json_get "$run/summary.json" error)
[[ "$err" == *trainer-0* ]] || fail "summary.json error does not name trainer-0: $err"
grep -q "checkpoint failed" "$run/logs/trainer-0.log" || fail "trainer log does not say why"

start_run summary
mkdir "$run/summary.json.tmp"
finish_run
[ "$status" -ne 0 ] || fail "a summary.json that could not be written exited 0"
grep -q "summary.json not written" "$run.out" || fail "stderr does not say summary.json failed"
[ -z "$(run_processes "$run")" ] || fail "workers still running"

echo "3 passed, 0 failed"
