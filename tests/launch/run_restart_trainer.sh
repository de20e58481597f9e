#!/usr/bin/env bash
# tests/launch/run_restart_trainer.sh: a lone trainer SIGKILLed during a DQN CartPole run comes
# back: the launcher restarts it, it re-attaches the replay its predecessor left in the run's
# shared memory (committed items kept) and reloads its last checkpoint, and the run still
# solves. summary.json lists the restart and its sample ledger balances exactly (the restarted
# trainer goes on with its predecessor's ledger); no replay segment outlives the run.
# usage: run_restart_trainer.sh GEARBOX CONFIG WORK_DIR
set -u
gearbox=$1 config=$2 work=$3
. "$(dirname "$0")/run_lib.sh"
rm -rf "$work"; mkdir -p "$work"
# twice the config's 300k env steps and a threshold of 300, not the suite's 475: DQN's mean
# return can collapse on the way (CI, 2026-11-25: 395 at 227k, 85 a second later, 386 at the
# 300k budget; CI, 2026-11-29: 475 not reached in 600k), and what this checks is that the
# restarted trainer goes on learning, not the config's sample efficiency (run_learns judges it).
# The trainer dies at its first checkpoint, a second into training: the policy it leaves is far
# from the threshold and stays frozen until the restarted trainer publishes, so the run cannot
# solve before the restart is done. (Killed a second after a checkpoint every 2 s, it once left
# a policy that solved alone, 0.8 s later, before its successor re-attached: CI, 2026-12-02.)
"$gearbox" run "$config" --run-dir "$work/run" --set trainer.checkpoint_every_s=1 \
  --set experiment.max_seconds=300 --set experiment.max_env_steps=600000 \
  --set experiment.target_return=300 \
  --set launch.progress=plain > "$work/out.log" 2>&1 &
launcher=$!
log="$work/run/logs/trainer-0.log"
wait_for_log "$log" "checkpoint written" 120 || fail "no checkpoint written"
pid=$(worker_pids "$log" | head -1)
[ -n "$pid" ] || fail "no pid in $log"
# the run's replay segments, found through the trainer's log line naming it
kill -KILL "$pid"; echo "SIGKILL trainer-0 (pid $pid)"
wait "$launcher"; status=$?
grep -E "restarted|solved|ERROR|ledger" "$work/out.log" | tail -8
grep -E "re-attached|restored" "$log"
[ "$status" -eq 0 ] || fail "exit status $status"
s="$work/run/summary.json"
[ "$(json_get "$s" solved)" = True ] || fail "not solved: $(json_get "$s" exit_reason)"
kept=$(sed -n 's/.*replay re-attached: \([0-9]*\) committed items kept.*/\1/p' "$log" | head -1)
[ -n "$kept" ] && [ "$kept" -gt 0 ] || fail "the restarted trainer did not re-attach its replay"
grep -q "model and optimiser restored from" "$log" || fail "the restarted trainer did not reload its checkpoint"
python3 - "$s" <<'PY' || fail "summary.json does not list the trainer's restart"
import json, sys
r = json.load(open(sys.argv[1]))["restarts"]
assert [x["worker"] for x in r] == ["trainer-0"] and r[0]["reason"].startswith("killed by signal 9"), r
PY
# the restarted trainer went on with its predecessor's ledger: the ledger is exact
check_crash_ledger "$s"
seg=$(sed -n 's/.*(segment \/\(gearbox-[^)]*\)).*/\1/p' "$log" | head -1)
[ -n "$seg" ] || fail "no segment name in $log"
[ ! -e "/dev/shm/$seg" ] || fail "/dev/shm/$seg outlived the run"
sleep 0.2
[ -z "$(run_processes "$work/run")" ] || fail "workers still running"
echo "1 passed, 0 failed"
