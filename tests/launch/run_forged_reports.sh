#!/usr/bin/env bash
# tests/launch/run_forged_reports.sh: a process on the machine speaks to a live run as its
# workers would, claiming what they did not do (issue 35), and the run's summary stays true:
# - a metrics report as actor 0 with 100 episodes of return 500 and length 500 (more steps than
#   the run took), one with chunks_sent -1e18 and a NaN counter, and one as actor 1 with an
#   incarnation the launcher never issued: each refused and counted (summary.json
#   reports_rejected); the run is not "solved" (its policy cannot learn: lr 0), actor 1 is not
#   restarted as hung, the ledger's counts stay sane;
# - the same 100 episodes as an actor slot no process holds, with a million steps claimed: taken,
#   but the verdict waits until the trainers have received the steps the episodes claim, by when
#   the real episodes have filled the window again; and the million steps it says it sent are
#   not counted in metrics.csv's env_steps (they never reached a trainer);
# - 200 well-formed chunks stamped as actor 0 with reward 1e30: refused before they train and
#   counted as rejected (samples.rejected), never as received: the ledger balances (lost 0);
#   and, inside the run's guard but outside the environment's declared reward range (CartPole:
#   [0, 1]), 50 chunks with reward 5 and an episode of 10 steps returning 50: refused too.
# Before the fix the run ended "solved" (or worker_hung) and samples.lost was -200.
# usage: run_forged_reports.sh GEARBOX CONFIG FORGER WORK_DIR
set -u
gearbox=$1 config=$2 forger=$3 work=$4
. "$(dirname "$0")/run_lib.sh"
rm -rf "$work"; mkdir -p "$work"
run="$work/run"
# lr 0: the policy never improves, so only a forged claim could reach the target of 500
"$gearbox" run "$config" --run-dir "$run" --set experiment.max_seconds=16 \
  --set experiment.max_env_steps=0 --set experiment.target_return=500 \
  --set experiment.eval_every=0 --set trainer.algorithm.lr=0 --set actors.count=2 \
  --set launch.heartbeat_timeout_s=4 --set launch.progress=off > "$work/out.log" 2>&1 &
launcher=$!
wait_for_log "$run/logs/actor-1.log" "actor: " 60 || fail "the run did not start"
sleep 3 # a few reports in: actor 0 has taken some steps
met="ipc://$run/sockets/metrics" samples="ipc://$run/sockets/trainer-0-samples"
[ -S "$run/sockets/metrics" ] || fail "no metrics socket in $run/sockets"
[ -S "$run/sockets/trainer-0-samples" ] || fail "no trainer sample socket in $run/sockets"
T=$(awk '/^[a-z]/ {s = $1} s == "actors:" && $1 == "chunk_len:" {print $2}' "$run/config.yaml")
[ -n "$T" ] || fail "no actors.chunk_len in $run/config.yaml"
# each claim is made by the worker it names, with its own credential (test_as.h): a worker lying
# about itself (one speaking as another: run_forged_identity.sh)
export GB_TEST_KEYS="$run/keys"
"$forger" report "$met" actor 1 7 0 0 0 env_steps=1 || fail "could not send the report"
"$forger" report "$met" actor 0 0 100 500 500 || fail "could not send the report"
"$forger" report "$met" actor 0 0 0 0 0 chunks_sent=-1e18 env_steps_sent=nan ||
  fail "could not send the report"
"$forger" chunks "$samples" "$T" 4 0 200 1e30 || fail "could not send the chunks"
# within the run's guard (trainer.chunk_guard, 1e6) but outside CartPole's declared reward range
# [0, 1] (envs/env.h): 50 chunks with reward 5 each step, and an episode of 10 steps returning 50
"$forger" chunks "$samples" "$T" 4 0 50 5 || fail "could not send the chunks"
"$forger" report "$met" actor 0 0 1 50 10 || fail "could not send the report"
sleep 1
"$forger" report "$met" actor 0 0 100 500 500 || fail "could not send the report"
# as actor 2, a slot for an actor joining from another host (actors.join_max) that none took:
# no real report to contradict it, and steps enough for its episodes; the trainers have not
# received the steps these episodes claim, so they decide nothing until they have
"$forger" report "$met" actor 2 0 100 500 500 env_steps=1000000 env_steps_sent=1000000 ||
  fail "could not send the report"
sleep 2
wait "$launcher"; status=$?
tail -3 "$work/out.log"
read_summary "$run"
mean=$(json_get "$s" episode_return_mean) restarts=$(json_get "$s" restarts)
echo "exit $status, $reason, solved $solved, return mean $mean, $refused reports and" \
     "$rejected chunks rejected, env_steps $env_steps, chunks received $received," \
     "restarts $restarts"
[ "$status" -eq 0 ] || fail "exit status $status ($(json_get "$s" error))"
[ "$reason" = max_seconds ] || fail "exit_reason $reason (a forged report decided the run)"
[ "$solved" = False ] || fail "solved is $solved"
[ "$refused" != null ] && [ "$refused" -ge 5 ] || fail "reports_rejected $refused, expected >= 5"
[ "$rejected" -ge 250 ] || fail "samples.rejected $rejected, expected >= 250"
[ "$restarts" = "[]" ] || fail "workers restarted: $restarts"
python3 -c 'import sys; m = float(sys.argv[1]); sys.exit(not (0 < m < 200))' "$mean" ||
  fail "episode_return_mean $mean: not the training episodes' own"
# every env step counted is in a chunk a trainer received, in every row of metrics.csv too (the
# budget, the learners' progress and the verdicts go by the rows)
[ "$env_steps" -gt 0 ] && [ "$env_steps" -le $((received * T)) ] ||
  fail "env_steps $env_steps beyond the $received chunks of $T steps received"
most=$(python3 -c 'import csv, sys
print(max(int(float(r["env_steps"])) for r in csv.DictReader(open(sys.argv[1]))))' "$run/metrics.csv")
[ "$most" -le "$env_steps" ] || fail "metrics.csv counted $most env steps, the run $env_steps"
grep -q "refused a chunk from actor 0: a 'reward' value" "$run/logs/trainer-0.log" ||
  fail "the trainer did not say it refused the forged chunks"
grep -q "the verdict waits until the trainers have received" "$run/logs/launcher.log" ||
  fail "the launcher did not hold the verdict on the episodes the trainers had not received"
grep -q "refused a report from actor 1 (incarnation 7)" "$run/logs/launcher.log" ||
  fail "the launcher did not say it refused the report of a foreign incarnation"
check_ledger "$s"
[ -z "$(run_processes "$run")" ] || fail "workers still running after the run ended"
echo "1 passed, 0 failed"
