#!/usr/bin/env bash
# tests/launch/run_precision.sh: a run whose policy workers act in reduced precision
# (policy.precision) solves like an fp32 one: run_learns.sh with the precision set, then the
# policy worker's log must say it ran in that precision, and whether libtorch was in the process
# (LIBTORCH: loaded, or "not loaded" for a plain MLP on gearbox's kernels,
# workers/roles/policy_mlp.h; the worker asks its loader, not the config).
# usage: run_precision.sh GEARBOX CONFIG WORK_DIR MIN_RETURN MAX_ENV_STEPS PRECISION LIBTORCH
#        [--set ...]
set -u
gearbox=$1 config=$2 work=$3 min_return=$4 budget=$5 precision=$6 libtorch=$7
shift 7
. "$(dirname "$0")/run_lib.sh"
"$(dirname "$0")/run_learns.sh" "$gearbox" "$config" "$work" "$min_return" "$budget" \
  --set policy.precision="$precision" "$@" || exit 1
grep -q "policy: inference in $precision" "$work/run/logs/policy-0.log" ||
  fail "logs/policy-0.log does not say the policy worker ran in $precision"
grep -q "policy: serving .*, libtorch $libtorch$" "$work/run/logs/policy-0.log" ||
  fail "logs/policy-0.log does not say libtorch was $libtorch in the policy worker"
grep -h "policy: inference in\|policy: serving" "$work/run/logs/policy-0.log" | head -2
echo "1 passed, 0 failed"
