#!/usr/bin/env bash
# tests/launch/run_relay.sh: a run with parameters.relay=per_host solves like one without: the
# launcher starts this host's relay, the policy workers take their parameters from it (found in
# the registry under relay/<host>/), and it relayed versions. Then the relay is SIGKILLed early in
# a second run: the launcher restarts it like the parameter service, the policy workers take the
# next versions from the new one, and the run still solves.
# With TRANSPORT tcp every endpoint is tcp:// on 127.0.0.1 (ports picked at bind) and, once the
# restarted relay serves, the parameter service is SIGKILLed too: each restarted worker binds the
# port its predecessor had (the registry keeps it), so the policy workers' and the relay's
# connected sockets find it again; with a new port they would wait forever, the policy would
# freeze and PPO (max_staleness 1) would stop learning.
# usage: run_relay.sh GEARBOX CONFIG WORK_DIR MIN_RETURN MAX_ENV_STEPS [ipc|tcp]
set -u
gearbox=$1 config=$2 work=$3 min_return=$4 budget=$5 transport=${6:-ipc}
. "$(dirname "$0")/run_lib.sh"
extra=(--set parameters.relay=per_host)
[ "$transport" = tcp ] &&
  extra+=(--set streams.transport=tcp --set streams.interface=127.0.0.1)
"$(dirname "$0")/run_learns.sh" "$gearbox" "$config" "$work" "$min_return" "$budget" \
  "${extra[@]}" | grep -v "passed, 0 failed"
[ "${PIPESTATUS[0]}" = 0 ] || fail "the run with relays did not learn"
reason=$(json_get "$work/run/summary.json" exit_reason)
[ "$reason" = solved ] || fail "exit_reason $reason, not solved"
logs=$work/run/logs
[ -s "$logs/relay-0.log" ] || fail "no relay log"
grep -q "relay: serving host" "$logs/relay-0.log" || fail "the relay did not start serving"
grep -q "parameters from relay/" "$logs/policy-0.log" || fail "policy 0 did not use the relay"
line=$(grep "relay: stopping" "$logs/relay-0.log") || fail "the relay did not stop cleanly"
echo "$line"
n=$(echo "$line" | sed -n 's/.*: \([0-9]*\) versions relayed.*/\1/p')
[ -n "$n" ] && [ "$n" -gt 1 ] || fail "the relay relayed ${n:-no} versions"

k=$work/kill
rm -rf "$k"; mkdir -p "$k"
"$gearbox" run "$config" --run-dir "$k/run" "${extra[@]}" \
  --set experiment.max_env_steps="$budget" --set experiment.max_seconds=240 \
  --set launch.progress=off > "$k/out.log" 2>&1 &
launcher=$!
log=$k/run/logs/relay-0.log
wait_for_log "$log" "relay: serving host" 60 || fail "the relay did not start"
pid=$(worker_pids "$log" | head -1)
[ -n "$pid" ] || fail "no pid in $log"
kill -KILL "$pid"
if [ "$transport" = tcp ]; then
  wait_for_log "$log" "binding .* again" 60 || fail "the restarted relay did not bind its old port"
  first=$(grep -m1 "relay: serving host" "$log" | sed 's/.* at \(tcp:[^ ]*\) .*/\1/')
  again=$(grep "relay: serving host" "$log" | tail -1 | sed 's/.* at \(tcp:[^ ]*\) .*/\1/')
  [ -n "$first" ] && [ "$first" = "$again" ] ||
    fail "the restarted relay serves at '$again', its predecessor at '$first'"
  plog=$k/run/logs/params-0.log
  ppid=$(worker_pids "$plog" | head -1)
  [ -n "$ppid" ] || fail "no pid in $plog"
  kill -KILL "$ppid"
  wait_for_log "$plog" "binding .* again" 60 ||
    fail "the restarted parameter service did not bind its old ports"
fi
wait "$launcher"; status=$?
tail -4 "$k/out.log"
s=$k/run/summary.json
[ "$status" -eq 0 ] && [ "$(json_get "$s" exit_reason)" = solved ] ||
  fail "with the relay killed: exit status $status, $(json_get "$s" exit_reason)"
grep -q '"worker": "relay-0"' "$s" || fail "no restart of relay-0 in summary.json"
[ "$transport" != tcp ] || grep -q '"worker": "params-0"' "$s" ||
  fail "no restart of params-0 in summary.json"
line=$(grep "relay: stopping" "$log" | tail -1) || fail "the restarted relay did not stop cleanly"
echo "restarted $line"
n=$(echo "$line" | sed -n 's/.*: \([0-9]*\) versions relayed.*/\1/p')
[ -n "$n" ] && [ "$n" -gt 1 ] || fail "the restarted relay relayed ${n:-no} versions"
[ -z "$(run_processes "$k/run")" ] || fail "workers still running"
echo "1 passed, 0 failed"
