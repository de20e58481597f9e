#!/usr/bin/env bash
# tests/launch/run_precision.sh: a run whose policy workers act in reduced precision
# (policy.precision) solves like an fp32 one: run_learns.sh with the precision set, then the
# policy worker's log must say it ran in that precision.
# usage: run_precision.sh GEARBOX CONFIG WORK_DIR MIN_RETURN MAX_ENV_STEPS PRECISION [--set ...]
set -u
gearbox=$1 config=$2 work=$3 min_return=$4 budget=$5 precision=$6
shift 6
. "$(dirname "$0")/run_lib.sh"
"$(dirname "$0")/run_learns.sh" "$gearbox" "$config" "$work" "$min_return" "$budget" \
  --set policy.precision="$precision" "$@" || exit 1
grep -q "policy: inference in $precision" "$work/run/logs/policy-0.log" ||
  fail "logs/policy-0.log does not say the policy worker ran in $precision"
grep -h "policy: inference in" "$work/run/logs/policy-0.log" | head -1
echo "1 passed, 0 failed"
