#!/usr/bin/env bash
# tests/launch/run_env_steps.sh: summary.json's env_steps counts the steps in the chunks the
# actors sent, not those still being filled when the run stopped: with `--record DIR` every
# chunk the trainers received is in DIR, and with a balanced ledger (every chunk sent was
# received) env_steps equals the valid steps recorded there (tests/launch/probe.c steps).
# The steps taken and never sent are reported beside it (env_steps_unsent > 0: every one of
# the environment copies holds a partly filled chunk when the run stops), and the last row
# of metrics.csv says the same env_steps.
# usage: run_env_steps.sh GEARBOX CONFIG PROBE WORK_DIR
set -u
gearbox=$1 config=$2 probe=$3 work=$4
. "$(dirname "$0")/run_lib.sh"
rm -rf "$work"; mkdir -p "$work"
run="$work/run"
"$gearbox" run "$config" --run-dir "$run" --record "$work/data" \
  --set experiment.max_seconds=6 --set experiment.max_env_steps=0 \
  --set experiment.target_return=1e9 --set launch.progress=off > "$work/out.log" 2>&1
status=$?
tail -3 "$work/out.log"
s="$run/summary.json"
[ -s "$s" ] || fail "no summary.json"
[ "$status" -eq 0 ] || fail "exit status $status ($(json_get "$s" error))"
check_ledger "$s"
steps=$(json_get "$s" env_steps) unsent=$(json_get "$s" env_steps_unsent)
recorded=$("$probe" steps "$work/data") || fail "cannot read the recorded dataset"
echo "env_steps $steps, env_steps_unsent $unsent, valid steps in the chunks received $recorded"
[ "$steps" -gt 0 ] || fail "no env steps"
[ "$steps" = "$recorded" ] || fail "env_steps $steps, but the chunks sent hold $recorded steps"
[ "$unsent" != null ] && [ "$unsent" -gt 0 ] || fail "env_steps_unsent $unsent"
last=$(python3 -c 'import csv,sys; r=list(csv.DictReader(open(sys.argv[1]))); print(int(float(r[-1]["env_steps"])))' "$run/metrics.csv")
[ "$last" = "$steps" ] || fail "metrics.csv ends at env_steps $last, summary.json says $steps"
echo "1 passed, 0 failed"
