#!/usr/bin/env bash
# tests/launch/run_core_state.sh: a recurrent core's state end to end (policy.model.core lstm).
# A distributed run (actor, policy, trainer processes) of CartPoleNoVel-v1 carries each copy's
# state in the actor, sends it with every request and trains on the chunks' state column; a
# process on the machine asks the live policy worker for actions as an actor would
# (tests/launch/probe.c infer): without a state, with one too wide or of float64 it is refused
# (GB_EPROTO, logged by the policy worker), with a well-formed one answered with the next state;
# then the policy worker is killed: restarted, it serves the actors' states as before.
# The run ends at its time budget with exit 0, trained, its ledger balanced; `gearbox eval`
# plays its checkpoint with a state per agent; the run resumes (--resume) and trains on; inline mode
# runs the same config.
# usage: run_core_state.sh GEARBOX CONFIG PROBE WORK_DIR
set -u
gearbox=$1 config=$2 probe=$3 work=$4
. "$(dirname "$0")/run_lib.sh"
rm -rf "$work"; mkdir -p "$work"
run="$work/run"
core=(--set policy.model.core=lstm --set policy.model.core_size=8) # S = 16
"$gearbox" run "$config" --run-dir "$run" "${core[@]}" --set experiment.max_seconds=14 \
  --set experiment.max_env_steps=0 --set experiment.target_return=1e9 \
  --set trainer.checkpoint_every_s=2 --set launch.progress=off > "$work/out.log" 2>&1 &
launcher=$!
wait_for_log "$run/logs/actor-0.log" "actor: " 60 || fail "the run did not start"
[ -S "$run/sockets/policy-0-inference" ] || fail "no policy inference socket in $run/sockets"
GB_TEST_KEYS="$run/keys" "$probe" infer "ipc://$run/sockets/policy-0-inference" 2 16 ||
  fail "the policy worker took a request it must refuse, or answered a good one without its state"
# a policy worker killed mid-run holds no state: the launcher restarts it and the actors go on
# with theirs (the run still exits 0 below, and trains after the restart)
plog="$run/logs/policy-0.log"
ppid=$(worker_pids "$plog" | head -1)
[ -n "$ppid" ] || fail "no pid in $plog"
kill -KILL "$ppid"
steps_at_kill=$(tail -1 "$run/metrics.csv" | cut -d, -f4)
wait "$launcher"; status=$?
tail -2 "$work/out.log"
s="$run/summary.json"
python3 - "$s" <<'PY' || fail "the killed policy worker was not restarted"
import json, sys
r = json.load(open(sys.argv[1]))["restarts"]
print("restarts:", [(x["worker"], x["reason"][:40]) for x in r])
assert any(x["worker"] == "policy-0" for x in r)
PY
[ "$(json_get "$s" train_steps)" -gt "${steps_at_kill:-0}" ] ||
  fail "no training after the policy worker's restart ($steps_at_kill train steps at the kill)"
[ -s "$s" ] || fail "no summary.json"
echo "exit $status, $(json_get "$s" exit_reason), $(json_get "$s" train_steps) train steps," \
  "return $(json_get "$s" episode_return_mean)"
[ "$status" -eq 0 ] || fail "exit status $status ($(json_get "$s" error))"
[ "$(json_get "$s" exit_reason)" = max_seconds ] || fail "exit_reason $(json_get "$s" exit_reason)"
[ "$(json_get "$s" train_steps)" -gt 0 ] || fail "no training"
grep -q "without a state" "$run/logs/policy-0.log" ||
  fail "the policy worker did not say why it refused the request without a state"
check_ledger "$s"
[ -z "$(run_processes "$run")" ] || fail "workers still running after the run ended"

"$gearbox" eval "$run" --episodes 3 --json > "$work/eval.json" 2> "$work/eval.log" ||
  fail "gearbox eval failed: $(tail -2 "$work/eval.log")"
[ "$(json_get "$work/eval.json" episodes)" = 3 ] || fail "eval: $(cat "$work/eval.json")"

# resume (the time budget counts the first 14 s too): the model, its optimiser and the replay
# with its state column come back, and it trains on
before=$(json_get "$s" train_steps)
"$gearbox" run --resume "$run" --set experiment.max_seconds=22 --set launch.progress=off \
  > "$work/resume.log" 2>&1 || fail "resume failed: $(tail -2 "$work/resume.log")"
after=$(json_get "$s" train_steps)
echo "resume: $before -> $after train steps"
[ "$after" -gt "$before" ] || fail "resume: no training after the resume"
grep -q "replay restored" "$run/logs/trainer-0.log" || fail "resume: the replay was not restored"

"$gearbox" run "$config" --run-dir "$work/inline" "${core[@]}" --set launch.mode=inline \
  --set experiment.eval_every=0 \
  --set experiment.max_seconds=5 --set experiment.max_env_steps=0 \
  --set experiment.target_return=1e9 --set launch.progress=off > "$work/inline.log" 2>&1 ||
  fail "inline run failed: $(tail -2 "$work/inline.log")"
[ "$(json_get "$work/inline/summary.json" train_steps)" -gt 0 ] || fail "inline: no training"
echo "1 passed, 0 failed"
