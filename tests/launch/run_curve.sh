#!/usr/bin/env bash
# tests/launch/run_curve.sh: runs over tcp:// with CURVE (streams.curve on). The first, kept
# alive to its time budget (target out of reach), is probed while it runs: a process without the
# keys (tests/launch/probe.c: plain tcp, then CURVE with the server's public key but a key pair
# of its own) sends an inference request to the policy worker and a chunk to the trainer:
# nothing comes back, the trainer ingests nothing from it (no rejected message, the ledger
# balances), both workers log the refused connections, and the run learns as usual. The second
# solves CartPole PPO. Keys are in RUN_DIR/keys (0700), server.key and client.key (0600), and no
# secret appears in a log or the resolved config.
# usage: run_curve.sh GEARBOX CONFIG PROBE WORK_DIR
set -u
gearbox=$1 config=$2 probe=$3 work=$4
. "$(dirname "$0")/run_lib.sh"
rm -rf "$work"; mkdir -p "$work"
run="$work/run"
"$gearbox" run "$config" --run-dir "$run" --set streams.transport=tcp --set streams.curve=on \
  --set experiment.max_env_steps=0 --set experiment.max_seconds=25 \
  --set experiment.target_return=1e9 --set launch.progress=plain > "$work/out.log" 2>&1 &
launcher=$!
wait_for_log "$run/logs/policy-0.log" "policy: serving" 60 || fail "the run did not start"
[ "$(stat -c %a "$run/keys")" = 700 ] || fail "keys folder mode $(stat -c %a "$run/keys")"
for k in server.key client.key; do
  [ "$(stat -c %a "$run/keys/$k")" = 600 ] || fail "$k mode $(stat -c %a "$run/keys/$k")"
done
# a tcp run's registry is on tcp too (RUN_DIR/registry names it): with the keys it answers,
# without them it does not
reg=$(cat "$run/registry")
case "$reg" in tcp://*) ;; *) fail "registry endpoint $reg is not tcp" ;; esac
# the join hint names the keys a joiner needs (without them it would wait and fail)
grep -q "join with \`gearbox join $reg --role actor --keys DIR\`, DIR a copy of $run/keys" \
  "$work/out.log" || fail "the join hint does not name the keys"
policy_ep=$("$probe" lookup "$reg" policy/0/inference "$run/keys") || fail "no policy endpoint"
trainer_ep=$("$probe" lookup "$reg" trainer/0/samples "$run/keys") || fail "no trainer endpoint"
"$probe" lookup "$reg" policy/0/inference > /dev/null 2>&1 &&
  fail "the registry answered a client without the keys"
echo "policy $policy_ep, trainer $trainer_ep"
case "$policy_ep$trainer_ep" in tcp://*tcp://*) ;; *) fail "endpoints are not tcp" ;; esac
"$probe" unkeyed "$policy_ep" "$run/keys/server.key" || fail "the policy answered a client without the keys"
"$probe" unkeyed "$trainer_ep" "$run/keys/server.key" || fail "the trainer answered a client without the keys"
wait "$launcher"; status=$?
tail -3 "$work/out.log"
s="$run/summary.json"
[ -s "$s" ] || fail "no summary.json"
reason=$(json_get "$s" exit_reason) ret=$(json_get "$s" episode_return_mean)
echo "exit $status, $reason, mean return $ret after $(json_get "$s" env_steps) env steps"
[ "$status" -eq 0 ] || fail "exit status $status"
[ "$reason" = max_seconds ] || fail "exit_reason $reason"
python3 -c "import sys; sys.exit(0 if float('$ret') >= 150 else 1)" || fail "mean return $ret < 150"
[ "$(json_get "$s" rejected)" = 0 ] || fail "the trainer rejected messages: one got through"
# the refusals reach the run's record: the probes above were refused 4 times at least (the
# registry's, the policy's and the trainer's sockets; the launcher's count included)
refused=$(json_get "$s" auth_refused)
[ "$refused" -ge 4 ] 2>/dev/null || fail "summary.json auth_refused is '$refused', expected >= 4"
echo "summary.json: auth_refused $refused"
check_ledger "$s"
for w in policy-0 trainer-0; do
  grep -q "refused [0-9]* connections without the run's keys" "$run/logs/$w.log" ||
    fail "$w did not count the refused connections"
  grep -h "refused [0-9]* connections" "$run/logs/$w.log"
done
# no secret key in any log or the resolved config
for k in server.key client.key; do
  secret=$(awk '$1 == "secret" {print $2}' "$run/keys/$k")
  ! grep -rqF -- "$secret" "$run/logs" "$run/config.yaml" "$work/out.log" || fail "a secret key was logged"
done
[ -z "$(run_processes "$run")" ] || fail "workers still running after the run ended"

solve="$work/solve"
"$gearbox" run "$config" --run-dir "$solve" --set streams.transport=tcp --set streams.curve=on \
  --set experiment.max_seconds=240 \
  --set launch.progress=plain > "$work/solve.log" 2>&1
status=$?
tail -2 "$work/solve.log"
s="$solve/summary.json"
[ -s "$s" ] || fail "no summary.json for the solving run"
reason=$(json_get "$s" exit_reason)
echo "exit $status, $reason, mean return $(json_get "$s" episode_return_mean) after $(json_get "$s" env_steps) env steps"
[ "$status" -eq 0 ] && [ "$reason" = solved ] || fail "the CURVE run did not solve: $reason"
[ "$(stat -c %a "$solve/keys/server.key")" = 600 ] || fail "server.key mode"
check_ledger "$s"
echo "1 passed, 0 failed"
