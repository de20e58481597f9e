#!/usr/bin/env bash
# tests/launch/run_resume.sh: `gearbox run --resume RUN_DIR`.
#  1. A DQN run stopped at half its env-step budget, resumed with the full budget, reaches the
#     threshold; the resumed trainer's replay is the checkpointed one (same items, keys,
#     priorities and rate-limiter counters: the digest the trainer logged with its last
#     checkpoint equals the one it logs after the restore); model and optimiser come back;
#     env_steps, episodes and time count on in metrics.csv and summary.json; the first
#     segment's summary is kept as summary.0.json; the ledger of the resumed segment balances.
#  2. A run whose launcher was SIGKILLed (its workers die with it) resumes from its checkpoint.
#  2b. A C learner's checkpoint (a learner file) resumed on libtorch's learner.
#  2c. trainer.count changed at a resume: a new trainer starts from trainer 0's parameters, a
#     set no trainer takes up is named in a warning.
#  3. What cannot be resumed is refused with a clear message, and a checkpoint that names a
#     missing file fails the resume with the cause.
# usage: run_resume.sh GEARBOX CONFIG WORK_DIR MIN_RETURN MAX_ENV_STEPS
set -u
gearbox=$1 config=$2 work=$3 min_return=$4 budget=$5
. "$(dirname "$0")/run_lib.sh"
rm -rf "$work"; mkdir -p "$work"
export GEARBOX_RUN_TABLE="$work/table"
half=$((budget / 2))

# ---- 1. stopped at 50 %, resumed --------------------------------------------------------------
run="$work/run"
# the first segment must reach its budget, not solve first (a fast run solves DQN CartPole in
# under 75k steps): the config's target comes back with the resume
target=$(awk '/^ *target_return:/ {print $2; exit}' "$config")
[ -n "$target" ] || fail "no experiment.target_return in $config"
"$gearbox" run "$config" --run-dir "$run" --set experiment.max_env_steps="$half" \
  --set experiment.target_return=1e9 --set experiment.max_seconds=240 \
  --set launch.progress=plain > "$work/first.log" 2>&1
status=$?
tail -2 "$work/first.log"
[ "$status" -eq 0 ] || fail "the first segment exited $status"
[ "$(json_get "$run/summary.json" exit_reason)" = max_env_steps ] ||
  fail "the first segment ended $(json_get "$run/summary.json" exit_reason), not at its budget"
steps1=$(json_get "$run/summary.json" env_steps)
episodes1=$(json_get "$run/summary.json" episodes)
wall1=$(json_get "$run/summary.json" wall_seconds)
ckpt=$(grep -o "checkpoint written ([0-9]* training steps; replay [0-9]* items, digest [0-9a-f]*" \
  "$run/logs/trainer-0.log" | tail -1)
[ -n "$ckpt" ] || fail "no checkpoint with a replay digest in trainer-0's log"
echo "first segment: $steps1 env steps, $episodes1 episodes; last $ckpt"

"$gearbox" run --resume "$run" --set experiment.max_env_steps="$budget" \
  --set experiment.target_return="$target" --set launch.progress=plain > "$work/second.log" 2>&1
status=$?
tail -2 "$work/second.log"
s="$run/summary.json"
[ "$status" -eq 0 ] || fail "the resumed run exited $status"
reason=$(json_get "$s" exit_reason) ret=$(json_get "$s" episode_return_mean)
steps=$(json_get "$s" env_steps) episodes=$(json_get "$s" episodes)
echo "resumed: $reason, mean return $ret after $steps env steps in all"
case "$reason" in solved|max_env_steps) ;; *) fail "exit_reason $reason" ;; esac
python3 -c "import sys; sys.exit(0 if float('$ret') >= float('$min_return') else 1)" ||
  fail "mean return $ret < $min_return"
[ -s "$run/summary.0.json" ] || fail "the first segment's summary was not kept as summary.0.json"
[ "$(json_get "$s" segment)" = 1 ] || fail "summary.json does not say segment 1"
[ "$(json_get "$s" from_env_steps)" = "$steps1" ] || fail "resumed.from_env_steps is not $steps1"
[ "$steps" -gt "$steps1" ] && [ "$episodes" -gt "$episodes1" ] ||
  fail "env_steps ($steps) or episodes ($episodes) did not count on from $steps1 / $episodes1"
python3 -c "import sys; sys.exit(0 if float('$(json_get "$s" wall_seconds)') > float('$wall1') else 1)" ||
  fail "wall_seconds did not count on"
want_steps=$(echo "$ckpt" | sed 's/.*(\([0-9]*\) training steps.*/\1/')
want=$(echo "$ckpt" | sed 's/.*replay \([0-9]*\) items, digest \([0-9a-f]*\)/\1 items, digest \2/')
grep -q "model and optimiser restored from .*trainer-0.step$want_steps-[0-9]*.model ($want_steps training steps)" \
  "$run/logs/trainer-0.log" || fail "the model was not restored from step $want_steps"
# a DQN trainer of a plain MLP goes on in gearbox's C from the restored state
# (workers/roles/learning.h, "The learning without libtorch")
grep -q "restored from the checkpoint at training step $want_steps; the learning goes on in" \
  "$run/logs/trainer-0.log" || fail "the restored DQN learner did not go on in gearbox's C"
got=$(grep -o "replay restored from .*: [0-9]* items, digest [0-9a-f]*" "$run/logs/trainer-0.log" | tail -1)
echo "$got"
[ "${got##*: }" = "$want" ] || fail "the restored replay ($got) is not the checkpointed one ($want)"
# metrics.csv: one header, segment 0 rows then segment 1 rows, time and env_steps never go back
python3 - "$run/metrics.csv" "$steps1" <<'EOF' || fail "metrics.csv does not continue"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
seg = [int(float(r["segment"])) for r in rows]
assert seg == sorted(seg) and set(seg) == {0, 1}, f"segments {sorted(set(seg))}"
for a, b in zip(rows, rows[1:]):
    assert float(b["time_s"]) >= float(a["time_s"]), f"time goes back at {b['time_s']}"
    assert float(b["env_steps"]) >= float(a["env_steps"]), f"env_steps go back at {b['env_steps']}"
first = next(r for r in rows if r["segment"] == "1")
assert float(first["env_steps"]) >= float(sys.argv[2]), "segment 1 starts below segment 0's end"
print(f"metrics.csv: {seg.count(0)} rows of segment 0, {seg.count(1)} of segment 1")
EOF
check_ledger "$s"
[ -z "$(run_processes "$run")" ] || fail "workers still running after the resumed run"

# ---- 2. the launcher SIGKILLed, then resumed ------------------------------------------------
crash="$work/crash"
"$gearbox" run "$config" --run-dir "$crash" --set experiment.max_seconds=120 \
  --set trainer.checkpoint_every_s=2 --set experiment.target_return=1e9 --set launch.progress=off > "$work/crash.log" 2>&1 &
launcher=$!
wait_for_log "$crash/logs/trainer-0.log" "checkpoint written" 90 || fail "no checkpoint"
sleep 1
kill -KILL "$launcher"
wait "$launcher" 2>/dev/null
for _ in $(seq 50); do [ -z "$(run_processes "$crash")" ] && break; sleep 0.2; done
[ -z "$(run_processes "$crash")" ] || fail "workers outlived the killed launcher"
[ ! -e "$crash/summary.json" ] || fail "a killed launcher wrote summary.json"
crashed_steps=$(tail -1 "$crash/metrics.csv" | cut -d, -f2)
# a budget of its own past the crashed run's steps (max_seconds counts the crashed time too)
"$gearbox" run --resume "$crash" --set experiment.max_env_steps=$((crashed_steps + 20000)) \
  --set experiment.max_seconds=240 --set launch.progress=off > "$work/crash-resume.log" 2>&1
status=$?
[ "$status" -eq 0 ] || { tail -5 "$work/crash-resume.log"; fail "the resume after the crash exited $status"; }
got=$(grep -o "replay restored from .*: [0-9]* items, digest [0-9a-f]*" "$crash/logs/trainer-0.log" | tail -1)
[ -n "$got" ] || fail "the resume after the crash restored no replay"
grep -q "replay ${got##*: })" "$crash/logs/trainer-0.log" ||
  fail "the restored replay ($got) matches no checkpoint the trainer wrote"
[ "$(json_get "$crash/summary.json" from_env_steps)" = "$crashed_steps" ] ||
  fail "the resume did not count on from the crashed run's last row ($crashed_steps env steps)"
echo "after the launcher's SIGKILL: resumed from $crashed_steps env steps, $got"

# ---- 2b. the C learner's checkpoint (a learner file) restored into libtorch's learner ---------
# (trainer.kernels libtorch at the resume: gb_learner_checkpoint_load, workers/roles/learner_file.h)
done_steps=$(json_get "$run/summary.json" env_steps)
"$gearbox" run --resume "$run" --set experiment.max_env_steps=$((done_steps + 4000)) \
  --set experiment.target_return=1e9 --set trainer.kernels=libtorch --set launch.progress=off \
  > "$work/torch.log" 2>&1 || fail "the resume on libtorch's learner: $(tail -3 "$work/torch.log")"
# the log from this segment's start on
seg=$(awk '/learning on the cpu/ {buf = ""} {buf = buf $0 "\n"} END {printf "%s", buf}' \
  "$run/logs/trainer-0.log")
echo "$seg" | grep -q "learning on the cpu (the network's forward and backward: libtorch" ||
  fail "the resume did not learn on libtorch's learner"
echo "$seg" | grep -q "model and optimiser restored from .*trainer-0.step[0-9-]*.model" ||
  fail "libtorch's learner did not restore the learner file"

# ---- 2c. trainer.count changed at a resume ---------------------------------------------------
# one trainer -> two: trainer-1 has no set and starts from trainer-0's restored parameters (the
# group's checksums agree); two -> one: trainer-1's set is not restored, and the launcher says so
for count in 2 1; do
  done_steps=$(json_get "$run/summary.json" env_steps)
  "$gearbox" run --resume "$run" --set experiment.max_env_steps=$((done_steps + 4000)) \
    --set experiment.target_return=1e9 --set trainer.count=$count --set launch.progress=off \
    > "$work/count$count.log" 2>&1 ||
    fail "the resume with trainer.count $count: $(tail -3 "$work/count$count.log")"
done
grep -q "resume: trainer-1 has no checkpoint: it starts from trainer-0's restored parameters" \
  "$run/logs/launcher.log" || fail "the launcher did not say where the new trainer-1 starts"
grep -q "parameter checksum [0-9a-f]*, equal on all 2 trainers" "$run/logs/trainer-1.log" ||
  fail "the two resumed trainers did not agree on their parameters"
[ "$(json_get "$run/summary.json" trainer_sets_left)" = 1 ] ||
  fail "summary.json does not count trainer-1's set left unrestored"
unrestored="checkpoints/trainer-1 (training step [0-9]*, with its replay) is not restored"
grep -q "WARN  launcher resume: $unrestored: trainer.count is 1" "$run/logs/launcher.log" || fail "the launcher did not warn of trainer-1's set left unrestored"

# ---- 3. refusals ------------------------------------------------------------------------------
"$gearbox" run --resume "$work/none" > "$work/none.log" 2>&1
[ $? -ne 0 ] && grep -q "config.yaml" "$work/none.log" || fail "--resume of a missing run: $(cat "$work/none.log")"
"$gearbox" run "$config" --resume "$run" > "$work/both.log" 2>&1
[ $? -eq 2 ] && grep -q "cannot go with it" "$work/both.log" || fail "CONFIG with --resume: $(cat "$work/both.log")"
# a checkpoint whose manifest names a file that is gone: the resume fails with the cause rather
# than starting the learner afresh
rm -f "$crash"/checkpoints/*.replay
"$gearbox" run --resume "$crash" --set experiment.max_seconds=240 --set launch.progress=off \
  > "$work/damaged.log" 2>&1
[ $? -ne 0 ] || fail "a resume from a damaged checkpoint exited 0"
grep -q "the last checkpoint cannot be restored: .*which is missing" "$crash/logs/trainer-0.log" ||
  fail "the trainer did not say why the checkpoint cannot be restored"
echo "1 passed, 0 failed"
