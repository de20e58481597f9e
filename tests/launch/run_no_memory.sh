#!/usr/bin/env bash
# tests/launch/run_no_memory.sh: a task that needs memory is not solved without one. The config's
# policy with its core removed (policy.model.core none, and the given --set arguments: the MLP that
# solves CartPole-v1 in about 0.1M env steps) trains for MAX_ENV_STEPS and its mean return stays
# below MAX_RETURN, far under the config's target: what the memory configs' comments claim, and
# what makes their solving a test of the memory (issue #31).
# usage: run_no_memory.sh GEARBOX CONFIG WORK_DIR MAX_RETURN MAX_ENV_STEPS [--set KEY=VALUE ...]
set -u
gearbox=$1 config=$2 work=$3 max_return=$4 budget=$5
shift 5
. "$(dirname "$0")/run_lib.sh"
rm -rf "$work"; mkdir -p "$work"
"$gearbox" run "$config" --run-dir "$work/run" --set policy.model.core=none \
  --set experiment.max_env_steps="$budget" --set experiment.max_seconds=240 \
  --set launch.mode=inline --set experiment.eval_every=0 --set launch.progress=plain "$@" \
  > "$work/out.log" 2>&1
status=$?
tail -3 "$work/out.log"
s="$work/run/summary.json"
[ -s "$s" ] || fail "no summary.json"
reason=$(json_get "$s" exit_reason)
ret=$(json_get "$s" episode_return_mean)
steps=$(json_get "$s" env_steps)
echo "exit $status, $reason, mean return $ret after $steps env steps without a core"
[ "$status" -eq 0 ] || fail "exit status $status"
[ "$reason" = max_env_steps ] || fail "exit_reason $reason: the run should have used its budget"
python3 -c "import sys; sys.exit(0 if float('$ret') < float('$max_return') else 1)" ||
  fail "mean return $ret >= $max_return without memory: the task does not need memory"
echo "PASS"
