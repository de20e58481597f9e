#!/usr/bin/env bash
# tests/launch/run_learns.sh: a real distributed run (processes, sockets, files) learns well above
# random within an env-step budget, and writes its run directory. The run stops as solved at
# MIN_RETURN (unless the arguments set another target): DQN's mean return can fall back after
# its peak, and the test asks whether it learns, not whether it stays there. A config with
# evaluations is judged by the deciding evaluation's mean return.
# usage: run_learns.sh GEARBOX CONFIG WORK_DIR MIN_RETURN MAX_ENV_STEPS [--set KEY=VALUE ...]
set -u
gearbox=$1 config=$2 work=$3 min_return=$4 budget=$5
shift 5
. "$(dirname "$0")/run_lib.sh"
rm -rf "$work"; mkdir -p "$work"
"$gearbox" run "$config" --run-dir "$work/run" --set experiment.max_env_steps="$budget" \
  --set experiment.max_seconds=240 --set experiment.target_return="$min_return" \
  --set launch.progress=plain "$@" > "$work/out.log" 2>&1
status=$?
cat "$work/out.log" | tail -5
s="$work/run/summary.json"
[ -s "$s" ] || fail "no summary.json"
for f in config.yaml metrics.csv logs/launcher.log logs/actor-0.log logs/policy-0.log \
         logs/trainer-0.log logs/params-0.log checkpoints/trainer-0.checkpoint; do
  [ -s "$work/run/$f" ] || fail "run directory lacks $f"
done
reason=$(json_get "$s" exit_reason)
ret=$(json_get "$s" episode_return_mean)
steps=$(json_get "$s" env_steps)
# a config with evaluations (experiment.eval_every) is judged by its policy's: the deciding
# evaluation's mean return, not the exploring training episodes'
if [ "$(json_get "$s" solved_by)" = evaluation ]; then
  ret=$(python3 -c "import json; print(json.load(open('$s'))['evaluation']['return_mean'])")
  echo "solved by evaluation: its mean return $ret"
fi
echo "exit $status, $reason, mean return $ret after $steps env steps"
[ "$status" -eq 0 ] || fail "exit status $status"
case "$reason" in solved|max_env_steps) ;; *) fail "exit_reason $reason" ;; esac
python3 -c "import sys; sys.exit(0 if float('$ret') >= float('$min_return') else 1)" ||
  fail "mean return $ret < $min_return"
# a row a second and the final one (a run of under a second, Acrobot's, has only that one),
# which holds the summary's env steps
[ "$(wc -l < "$work/run/metrics.csv")" -ge 2 ] || fail "metrics.csv has no rows"
last=$(python3 -c 'import csv, sys; print(int(float(list(csv.DictReader(open(sys.argv[1])))[-1]["env_steps"])))' \
  "$work/run/metrics.csv")
[ "$last" = "$steps" ] || fail "metrics.csv's last row has $last env steps, summary.json $steps"
check_ledger "$s"
[ -z "$(run_processes "$work/run")" ] || fail "workers still running after the run ended"
# a trainer that learned without libtorch (workers/roles/learning.h) wrote its checkpoints' model
# files itself (workers/roles/learner_file.h); EXPECT_TRAINER_LOG (the test's environment): a
# line its log must have
t="$work/run/logs/trainer-0.log"
if grep -q "gearbox C, libtorch loaded only for its BLAS" "$t"; then
  for m in "$work"/run/checkpoints/trainer-0.*.model; do
    [ "$(head -c 8 "$m")" = GBLEARNR ] || fail "$m is not a learner file"
  done
fi
if [ -n "${EXPECT_TRAINER_LOG:-}" ]; then
  grep -q "$EXPECT_TRAINER_LOG" "$t" || fail "logs/trainer-0.log lacks '$EXPECT_TRAINER_LOG'"
fi
echo "1 passed, 0 failed"
