#!/usr/bin/env bash
# tests/launch/run_forged_identity.sh: a worker speaks as another during a live run (issue 35:
# identity per worker). The run (ipc://, its workers proving their identities with ZeroMQ PLAIN
# and their own key pairs, RUN_DIR/keys) is sent, with actor 1's credential (GB_TEST_KEYS,
# GB_TEST_AS: tests/launch/test_as.h), each kind of message stamped as another worker, every one
# well-formed and of plausible content:
# - a metrics report as actor 0 (no episodes, a small step count) and 50 chunks as actor 0
#   (reward 1): refused and counted (reports_rejected, chunks rejected), never in the ledger;
# - a registration of policy/0/inference and of trainer/0/samples (pointing elsewhere):
#   refused, and both names still point to their owners' sockets;
# - a run-control watch as actor 0 confirming the flush, an inference request as actor 0, and a
#   parameter version as trainer 0 (to the parameter service's input): refused;
# - chunks from a process with no credential at all: refused at the handshake (the trainer's
#   log counts the refused connection).
# The summary stays true: not solved (lr 0: only a forgery could reach the target), ended at its
# time budget, env_steps within the chunks received, the ledger balanced (lost 0).
# Before identities every one of these was taken: the forged chunks counted as actor 0's
# (samples.lost -50), the registry re-pointed both names, the watch and the request answered.
# usage: run_forged_identity.sh GEARBOX CONFIG FORGER PROBE WORK_DIR
set -u
gearbox=$1 config=$2 forger=$3 probe=$4 work=$5
. "$(dirname "$0")/run_lib.sh"
rm -rf "$work"; mkdir -p "$work"
run="$work/run"
"$gearbox" run "$config" --run-dir "$run" --set experiment.max_seconds=20 \
  --set experiment.max_env_steps=0 --set experiment.target_return=500 \
  --set experiment.eval_every=0 --set trainer.algorithm.lr=0 --set actors.count=2 \
  --set launch.progress=off > "$work/out.log" 2>&1 &
launcher=$!
wait_for_log "$run/logs/actor-1.log" "actor: " 60 || fail "the run did not start"
sleep 2
sock="$run/sockets"
reg="ipc://$sock/registry" met="ipc://$sock/metrics" samples="ipc://$sock/trainer-0-samples"
for s in registry metrics trainer-0-samples; do
  [ -S "$sock/$s" ] || fail "no $s socket in $sock"
done
[ -s "$run/keys/actor-1.key" ] || fail "no key pair of its own for actor 1 in $run/keys"
T=$(awk '/^[a-z]/ {s = $1} s == "actors:" && $1 == "chunk_len:" {print $2}' "$run/config.yaml")
[ -n "$T" ] || fail "no actors.chunk_len in $run/config.yaml"
export GB_TEST_KEYS="$run/keys"
as_actor0() { GB_TEST_AS=actor/0 "$probe" lookup "$reg" "$1"; }
policy_ep=$(as_actor0 policy/0/inference) || fail "no policy/0/inference"
trainer_ep=$(as_actor0 trainer/0/samples) || fail "no trainer/0/samples"
params_in=$(as_actor0 params/0/in) || fail "no params/0/in"

# actor 1's credential, claiming to be actor 0 (or to hold another worker's names)
export GB_TEST_AS=actor/1
"$forger" report "$met" actor 0 0 0 0 0 env_steps=10 || fail "could not send the report"
"$forger" chunks "$samples" "$T" 4 0 50 1 || fail "could not send the chunks"
"$forger" register "$reg" actor 1 policy/0/inference "ipc://$work/evil-policy"
[ $? -eq 3 ] || fail "the registry let actor 1 re-point policy/0/inference"
"$forger" register "$reg" actor 1 trainer/0/samples "ipc://$work/evil-trainer"
[ $? -eq 3 ] || fail "the registry let actor 1 re-point trainer/0/samples"
"$forger" watch "$reg" actor 0
[ $? -eq 3 ] || fail "run control took a watch from actor 1 as actor 0"
"$forger" infer "$policy_ep" 0 4
[ $? -eq 3 ] || fail "the policy answered actor 1 asking as actor 0"
"$forger" params "$params_in" 1000000000 || fail "could not send the parameters"
# its own names, as itself: taken (the checks refuse the lie, not the worker)
"$forger" register "$reg" actor 1 actor/1/extra "ipc://$work/extra" ||
  fail "actor 1 could not register a name of its own"
# no credential at all: the handshake refuses it
GB_TEST_KEYS= "$forger" chunks "$samples" "$T" 4 0 1 1 # queued to a connection never made
[ "$(as_actor0 policy/0/inference)" = "$policy_ep" ] || fail "policy/0/inference was re-pointed"
[ "$(as_actor0 trainer/0/samples)" = "$trainer_ep" ] || fail "trainer/0/samples was re-pointed"
unset GB_TEST_AS GB_TEST_KEYS

wait "$launcher"; status=$?
tail -3 "$work/out.log"
read_summary "$run"
echo "exit $status, $reason, solved $solved, $refused reports and $rejected chunks rejected," \
     "env_steps $env_steps, chunks received $received"
[ "$status" -eq 0 ] || fail "exit status $status ($(json_get "$s" error))"
[ "$reason" = max_seconds ] || fail "exit_reason $reason"
[ "$solved" = False ] || fail "solved is $solved"
[ "$refused" != null ] && [ "$refused" -ge 1 ] || fail "reports_rejected $refused, expected >= 1"
[ "$rejected" -ge 50 ] || fail "samples.rejected $rejected, expected >= 50"
# two registrations of others' names and a watch as actor 0: the registry's refusals
reg_rejected=$(json_get "$s" registry_rejected)
[ "$reg_rejected" -ge 3 ] || fail "registry_rejected $reg_rejected, expected >= 3"
[ "$env_steps" -gt 0 ] && [ "$env_steps" -le $((received * T)) ] ||
  fail "env_steps $env_steps beyond the $received chunks of $T steps received"
grep -q "refused a report as actor 0 sent by actor/1" "$run/logs/launcher.log" ||
  fail "the launcher did not say it refused actor 1's report as actor 0"
grep -q "refused a chunk as actor 0 sent by actor/1" "$run/logs/trainer-0.log" ||
  fail "the trainer did not say it refused actor 1's chunks as actor 0"
grep -q "may register names under 'actor/1/' only" "$run/logs/launcher.log" ||
  fail "the registry did not say why it refused actor 1"
grep -q "parameters as trainer 0 sent by actor/1" "$run/logs/params-0.log" ||
  fail "the parameter service did not say it refused actor 1's parameters as trainer 0"
grep -q "rejected a request from actor 0.*sent by actor/1" "$run/logs/policy-0.log" ||
  fail "the policy worker did not say it refused the request"
grep -q "refused a connection.*handshake failed" "$run/logs/trainer-0.log" ||
  fail "the trainer did not count the connection without a credential"
check_ledger "$s"
[ -z "$(run_processes "$run")" ] || fail "workers still running after the run ended"
echo "1 passed, 0 failed"
