#!/usr/bin/env bash
# tests/launch/run_relay.sh: a run with parameters.relay=per_host solves like one without: the
# launcher starts this host's relay, the policy workers take their parameters from it (found in
# the registry under relay/<host>/), and it relayed versions.
# usage: run_relay.sh GEARBOX CONFIG WORK_DIR MIN_RETURN MAX_ENV_STEPS
set -u
gearbox=$1 config=$2 work=$3 min_return=$4 budget=$5
. "$(dirname "$0")/run_lib.sh"
"$(dirname "$0")/run_learns.sh" "$gearbox" "$config" "$work" "$min_return" "$budget" \
  --set parameters.relay=per_host | grep -v "passed, 0 failed"
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
echo "1 passed, 0 failed"
