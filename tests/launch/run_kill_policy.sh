#!/usr/bin/env bash
# tests/launch/run_kill_policy.sh: the policy worker is SIGKILLed under a short heartbeat
# (launch.heartbeat_timeout_s 1): the launcher restarts it, and the actors, whose requests find
# no policy worker while it starts again (longer than the heartbeat), keep reporting meanwhile:
# summary.json lists that one restart and no other (an actor once waited out its whole 10 s
# send timeout in silence and was killed as hung: run_chaos, seed 8039). Training goes on after.
# usage: run_kill_policy.sh GEARBOX CONFIG WORK_DIR
set -u
gearbox=$1 config=$2 work=$3
. "$(dirname "$0")/run_lib.sh"
rm -rf "$work"; mkdir -p "$work"
run="$work/run"
"$gearbox" run "$config" --run-dir "$run" --set experiment.max_seconds=12 \
  --set experiment.target_return=1e9 --set launch.heartbeat_timeout_s=1 \
  --set launch.progress=off > "$work/out.log" 2>&1 &
launcher=$!
plog="$run/logs/policy-0.log"
wait_for_log "$run/logs/actor-0.log" "actor: " 60 || fail "the run did not start"
sleep 2
ppid=$(worker_pids "$plog" | head -1)
[ -n "$ppid" ] || fail "no pid in $plog"
kill -KILL "$ppid"
steps_at_kill=$(tail -1 "$run/metrics.csv" | cut -d, -f4)
wait "$launcher"; status=$?
tail -4 "$work/out.log"
grep -hE "policy: serving|worker started" "$plog"
s="$run/summary.json"
[ -s "$s" ] || fail "no summary.json"
python3 - "$s" <<'PY' || fail "summary.json does not list the policy worker's restart alone"
import json, sys
r = json.load(open(sys.argv[1]))["restarts"]
print("restarts:", [(x["worker"], x["reason"][:40]) for x in r])
assert [(x["worker"], x["reason"][:18]) for x in r] == [("policy-0", "killed by signal 9")]
PY
echo "exit $status, $(json_get "$s" exit_reason), $(json_get "$s" train_steps) train steps"
[ "$status" -eq 0 ] || fail "exit status $status ($(json_get "$s" error))"
[ "$(json_get "$s" exit_reason)" = max_seconds ] || fail "exit_reason $(json_get "$s" exit_reason)"
[ "$(json_get "$s" train_steps)" -gt "${steps_at_kill:-0}" ] ||
  fail "no training after the policy worker's restart ($steps_at_kill train steps at the kill)"
check_ledger "$s"
sleep 0.2
[ -z "$(run_processes "$run")" ] || fail "workers still running after the run ended"
echo "1 passed, 0 failed"
