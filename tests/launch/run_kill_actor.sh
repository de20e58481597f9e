#!/usr/bin/env bash
# tests/launch/run_kill_actor.sh: with no restarts allowed (launch.restart.max_restarts 0),
# killing one actor ends the run with a clear report (which worker, how it died, the tail of its
# log), a non-zero exit status, no workers left, and summary.json with exit_reason worker_died.
# (Restarts themselves: run_chaos.sh.)
# usage: run_kill_actor.sh GEARBOX CONFIG WORK_DIR
set -u
gearbox=$1 config=$2 work=$3
. "$(dirname "$0")/run_lib.sh"
rm -rf "$work"; mkdir -p "$work"
# (no target: the default config solves in about a second of learning, before the kill below)
"$gearbox" run "$config" --run-dir "$work/run" --set experiment.max_seconds=120 \
  --set experiment.target_return=1e9 --set launch.restart.max_restarts=0 \
  --set launch.progress=off > "$work/out.log" 2>&1 &
launcher=$!
log="$work/run/logs/actor-0.log"
wait_for_log "$log" "actor: " 60 || fail "the run did not start"
sleep 1
pid=$(worker_pids "$log" | head -1)
[ -n "$pid" ] || fail "no pid in $log"
kill -KILL "$pid"
wait "$launcher"; status=$?
cat "$work/out.log" | tail -8
[ "$status" -eq 1 ] || fail "exit status $status, expected 1"
grep -q "worker actor-0 killed by signal 9" "$work/out.log" || fail "no report naming actor-0"
grep -q "    | .*actor-0" "$work/out.log" || fail "no log tail in the report"
s="$work/run/summary.json"
[ -s "$s" ] || fail "no summary.json"
[ "$(json_get "$s" exit_reason)" = worker_died ] || fail "exit_reason $(json_get "$s" exit_reason)"
# The killed actor sent no final report: the ledger cannot know what it lost, and says so.
[ "$(json_get "$s" lost)" = null ] || fail "samples.lost is $(json_get "$s" lost), expected null"
grep -q "sample ledger incomplete: no final report from actor-0" "$work/out.log" ||
  fail "the launcher did not say the sample ledger is incomplete"
sleep 0.2
[ -z "$(run_processes "$work/run")" ] || fail "workers still running"
echo "1 passed, 0 failed"
