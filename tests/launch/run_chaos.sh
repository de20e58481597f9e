#!/usr/bin/env bash
# tests/launch/run_chaos.sh: a DQN CartPole run survives its workers being killed: every few
# seconds a random actor, the policy worker or the parameter service is SIGKILLed, and one actor
# is SIGSTOPped for longer than launch.heartbeat_timeout_s (the launcher must notice the silence,
# kill and restart it). The run must still solve, summary.json must list every restart with its
# reason, the sample ledger must balance (sent = received + lost_in_crash, nothing else lost),
# and no worker may be left when the launcher exits.
# usage: run_chaos.sh GEARBOX CONFIG WORK_DIR [SEED]
set -u
gearbox=$1 config=$2 work=$3 seed=${4:-$RANDOM}
. "$(dirname "$0")/run_lib.sh"
rm -rf "$work"; mkdir -p "$work"
RANDOM=$seed
echo "chaos seed $seed"
"$gearbox" run "$config" --run-dir "$work/run" --set actors.count=2 --set actors.envs_per_actor=8 \
  --set launch.heartbeat_timeout_s=3 --set launch.restart.max_restarts=20 \
  --set launch.restart.window_s=60 --set experiment.max_seconds=300 \
  --set launch.progress=plain > "$work/out.log" 2>&1 &
launcher=$!
logs="$work/run/logs"
wait_for_log "$logs/actor-1.log" "actor: " 60 || fail "the run did not start"
# the pid of a worker's newest process, from its log
pid_of() { sed -n 's/.*worker started (pid \([0-9]*\)).*/\1/p' "$logs/$1.log" | tail -1; }
victims=(actor-0 actor-1 policy-0 params-0)
kills=() stopped=""
for round in 1 2 3 4 5 6; do
  sleep 3
  kill -0 "$launcher" 2>/dev/null || break
  if [ "$round" -eq 4 ]; then
    # one silent worker: SIGSTOP for twice the heartbeat timeout
    stopped=actor-$((RANDOM % 2)); p=$(pid_of "$stopped")
    echo "SIGSTOP $stopped (pid $p) for 6 s"
    kill -STOP "$p"; sleep 6; kill -CONT "$p" 2>/dev/null
    continue
  fi
  v=${victims[$((RANDOM % ${#victims[@]}))]}; p=$(pid_of "$v")
  [ -n "$p" ] && kill -KILL "$p" 2>/dev/null && { echo "SIGKILL $v (pid $p)"; kills+=("$v"); }
  # wait for it to be back before the next round (a restart writes a new "worker started")
done
wait "$launcher"; status=$?
grep -E "restarted|solved|ERROR" "$work/out.log" | tail -20
s="$work/run/summary.json"
[ -s "$s" ] || fail "no summary.json"
[ "$status" -eq 0 ] || fail "exit status $status"
[ "$(json_get "$s" solved)" = True ] || fail "not solved: $(json_get "$s" exit_reason)"
python3 - "$s" "$stopped" "${kills[@]}" <<'PY' || fail "summary.json does not list every restart"
import json, sys
d = json.load(open(sys.argv[1])); stopped = sys.argv[2]; kills = sys.argv[3:]
r = d["restarts"]
died = [x["worker"] for x in r if x["reason"].startswith("killed by signal 9")]
hung = [x["worker"] for x in r if x["reason"].startswith("hung")]
print("restarts:", [(x["worker"], x["reason"][:30]) for x in r])
assert sorted(died) == sorted(kills), (died, kills)
assert hung == [stopped], (hung, stopped)
PY
sent=$(json_get "$s" chunks_sent) got=$(json_get "$s" chunks_received)
crash=$(json_get "$s" lost_in_crash) lost=$(json_get "$s" lost) dropped=$(json_get "$s" dropped)
echo "sample ledger: sent $sent, received $got, lost_in_crash $crash, lost $lost, dropped $dropped"
[ "$lost" = 0 ] && [ "$sent" -eq $((got + crash)) ] || fail "the sample ledger does not balance"
sleep 0.2
[ -z "$(run_processes "$work/run")" ] || fail "workers still running"
echo "1 passed, 0 failed"
