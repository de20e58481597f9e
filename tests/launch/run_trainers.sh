#!/usr/bin/env bash
# tests/launch/run_trainers.sh: a run with several data-parallel trainers learns (run_learns.sh's
# thresholds) and every trainer's parameters agree at every check: each rank logs the checksum it
# compared with the others at the same train steps, and the logs must show the same values. With
# evaluations on, a held evaluation that decides leaves every trainer's final checkpoint at the
# step it played.
# usage: run_trainers.sh GEARBOX CONFIG WORK_DIR MIN_RETURN MAX_ENV_STEPS TRAINERS [--set ...]
set -u
gearbox=$1 config=$2 work=$3 min_return=$4 budget=$5 trainers=$6
shift 6
here=$(dirname "$0")
. "$here/run_lib.sh"
"$here/run_learns.sh" "$gearbox" "$config" "$work" "$min_return" "$budget" \
  --set trainer.count="$trainers" --set trainer.checksum_every=4 "$@" || exit 1
logs="$work/run/logs"
for ((i = 0; i < trainers; i++)); do
  [ -s "$logs/trainer-$i.log" ] || fail "no log for trainer-$i"
  grep -q "rank $i of $trainers trainers" "$logs/trainer-$i.log" || fail "trainer-$i did not join"
  grep -o "step [0-9]* parameter checksum [0-9a-f]*" "$logs/trainer-$i.log" > "$work/sums-$i"
done
checks=$(wc -l < "$work/sums-0")
[ "$checks" -ge 2 ] || fail "only $checks parameter checks in trainer-0's log"
for ((i = 1; i < trainers; i++)); do
  cmp -s "$work/sums-0" "$work/sums-$i" ||
    fail "trainer-$i's checksums differ from trainer-0's: $(diff "$work/sums-0" "$work/sums-$i" | head -4)"
done
echo "parameters equal on all $trainers trainers at $checks checks (last: $(tail -1 "$work/sums-0"))"
# a run that a held evaluation decided (experiment.eval_every, eval_hold) ends on the policy it
# played: every trainer's final checkpoint is at that evaluation's step (their agreement held all)
s="$work/run/summary.json"
if [ "$(json_get "$s" solved_by)" = evaluation ] &&
   python3 -c "import json,sys; e=json.load(open('$s'))['evaluation']; sys.exit(0 if e['held'] and e['reached_target'] else 1)"; then
  step=$(python3 -c "import json; print(json.load(open('$s'))['evaluation']['checkpoint_step'])")
  for ((i = 0; i < trainers; i++)); do
    grep -qx "step $step" "$work/run/checkpoints/trainer-$i.checkpoint" ||
      fail "trainer-$i's final checkpoint is not the evaluated step $step: $(head -2 "$work/run/checkpoints/trainer-$i.checkpoint")"
  done
  echo "held evaluation: all $trainers trainers ended at the evaluated step $step"
fi
