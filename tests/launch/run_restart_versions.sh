#!/usr/bin/env bash
# tests/launch/run_restart_versions.sh: a PPO trainer (trainer.max_staleness 1) SIGKILLed after
# its first checkpoint comes back from that checkpoint and goes on publishing versions above its
# predecessor's last one, so that version numbers only go up within the run: the replay's
# staleness floor, raised by the dead trainer, keeps admitting the chunks acted with the new
# versions, and training goes on (a trainer that published the checkpoint's lower numbers again
# had every new chunk expire as it arrived and trained no more). The policy workers serve the new
# versions. The goal is out of reach: the run ends at its env-step budget.
# usage: run_restart_versions.sh GEARBOX CONFIG WORK_DIR
set -u
gearbox=$1 config=$2 work=$3
. "$(dirname "$0")/run_lib.sh"
rm -rf "$work"; mkdir -p "$work"
"$gearbox" run "$config" --run-dir "$work/run" --set trainer.checkpoint_every_s=1 \
  --set trainer.max_staleness=1 \
  --set experiment.target_return=1000 --set experiment.max_env_steps=1500000 \
  --set experiment.max_seconds=300 --set launch.progress=off > "$work/out.log" 2>&1 &
launcher=$!
log="$work/run/logs/trainer-0.log"
wait_for_log "$log" "checkpoint written" 120 || fail "no checkpoint written"
sleep 0.5
pid=$(worker_pids "$log" | head -1)
[ -n "$pid" ] || fail "no pid in $log"
kill -KILL "$pid"; echo "SIGKILL trainer-0 (pid $pid)"
wait "$launcher"; status=$?
grep -E "restored|versions go on" "$log"
[ "$status" -eq 0 ] || fail "exit status $status"
s="$work/run/summary.json"
[ "$(json_get "$s" exit_reason)" = max_env_steps ] || fail "ended by $(json_get "$s" exit_reason)"
restored=$(sed -n 's/.*restored from .*(\([0-9]*\) training steps).*/\1/p' "$log" | tail -1)
from=$(sed -n 's/.*parameter versions go on from \([0-9]*\) .*/\1/p' "$log" | tail -1)
[ -n "$restored" ] && [ -n "$from" ] || fail "the restarted trainer did not go on above the published versions"
steps=$(json_get "$s" train_steps)
echo "restored at step $restored, versions from $from; $steps train steps at the end"
# the restarted trainer's PPO learner goes on in gearbox's C from the restored state, its
# shuffles those the killed one would have drawn (workers/roles/learning.h)
grep -q "restored from the checkpoint at training step $restored; the learning goes on in" "$log" ||
  fail "the restored PPO learner did not go on in gearbox's C"
# trained on after the restart: a frozen trainer adds a step or two
[ "$steps" -ge $((restored + 20)) ] || fail "training stopped after the restart ($restored -> $steps steps)"
python3 - "$work/run/metrics.csv" "$from" <<'PY' || fail "versions went down, or the policy did not serve the new ones"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1]))); start = int(sys.argv[2])
def col(name):  # empty or nan: not reported yet
    return [float(r[name]) for r in rows if r[name] not in ("", "nan")]
v, served = col("policy_version"), col("served_version_min")
print("trainer versions", [int(x) for x in v], "served", [int(x) for x in served])
assert all(b >= a for a, b in zip(v, v[1:])), "a published version went down"
assert max(served) > start, "the policy worker never served a version after the restart"
PY
sleep 0.2
[ -z "$(run_processes "$work/run")" ] || fail "workers still running"
echo "1 passed, 0 failed"
