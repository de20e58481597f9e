#!/usr/bin/env bash
# tests/launch/run_slow_checkpoint.sh: a trainer whose final checkpoint outlasts the stop's
# grace (launch.stop_timeout_s) because its fsync is slow (slow_fsync.c: 4 s, preloaded) is
# waited for, not killed: the run ends solved, exit 0, with the final checkpoint at the last
# training step, and the launcher says why it waits. With launch.stop_checkpoint_s shorter than
# the write, the trainer is killed and the run fails (worker_failed, exit 1), as before. A held
# evaluation whose checkpoint is the slow one: past experiment.eval_hold_wait_s (1 s) the hold
# is let go (the launcher says so), that evaluation is dropped (no checkpoint yet), and the
# evaluations after it hold and decide the run: solved, exit 0. A --record dataset whose
# closing fsync is the slow one is waited for likewise: solved, exit 0, every chunk recorded.
# usage: run_slow_checkpoint.sh GEARBOX CONFIG SLOW_FSYNC_LIB WORK_DIR
set -u
gearbox=$1 config=$2 lib=$3 work=$4
. "$(dirname "$0")/run_lib.sh"
rm -rf "$work"; mkdir -p "$work"
# runs CASE [--set ...]: CartPole to its target, the final checkpoint's fsync 4 s, a 2 s grace
runs() {
  local name=$1; shift
  GB_TEST_SLOW_FSYNC_S=4 LD_PRELOAD="$lib" "$gearbox" run "$config" --run-dir "$work/$name" \
    --set trainer.checkpoint_every_s=0 --set launch.stop_timeout_s=2 \
    --set launch.progress=off "$@" > "$work/$name.log" 2>&1
}
# solved CASE STATUS SLOWED: the run ended solved, exit 0, and the slow fsync was of a path
# matching SLOWED (a grep pattern); sets s to its summary
solved() {
  local name=$1 status=$2 slowed=$3 reason
  s="$work/$name/summary.json"
  [ "$status" -eq 0 ] || { tail -20 "$work/$name.log"; fail "$name: the run exited $status"; }
  reason=$(json_get "$s" exit_reason)
  [ "$reason" = solved ] || fail "$name: exit_reason $reason"
  grep -q "slow_fsync: 4 s before fsync of .*$slowed" "$work/$name/logs/trainer-0.log" ||
    fail "$name: no fsync of $slowed was slowed (the preload did not take)"
}
runs waits; solved waits $? "checkpoints/trainer-0"
grep -q "trainer-0 is writing its checkpoint: the stop waits for it" "$work/waits.log" ||
  fail "the launcher did not say it waits for the checkpoint"
steps=$(json_get "$s" train_steps)
grep -q "checkpoint written ($steps training steps" "$work/waits/logs/trainer-0.log" ||
  fail "no final checkpoint at the last training step ($steps)"
echo "a 4 s final checkpoint with a 2 s grace: waited for; solved, exit 0, checkpoint at $steps"
runs cut --set launch.stop_checkpoint_s=1; status=$?
s="$work/cut/summary.json"
[ "$status" -ne 0 ] || fail "a trainer killed in its checkpoint, and the run exited 0"
reason=$(json_get "$s" exit_reason)
[ "$reason" = worker_failed ] || fail "exit_reason $reason"
grep -q "trainer-0 did not stop within the grace and was killed" "$s" ||
  fail "summary.json's error does not name the killed trainer: $(json_get "$s" error)"
echo "launch.stop_checkpoint_s 1: the trainer killed, worker_failed, exit $status"
runs held --set experiment.eval_every=5000 --set experiment.eval_hold_wait_s=1 \
  --set trainer.checkpoint_every_s=1000
solved held $? "checkpoints/trainer-0"
grep -q "trainer 0 did not hold at a checkpoint within 1 s (request 1)" "$work/held.log" ||
  fail "held: the launcher did not give up the first hold after 1 s"
sed -n '/did not hold at a checkpoint/,$p' "$work/held.log" | grep -q "the trainers held at it" ||
  fail "held: no evaluation held the trainers after the missed hold"
grep -q "evaluation at [0-9]* env steps dropped: no checkpoint to play yet" "$work/held.log" &&
  ! grep -q "evaluation at [0-9]* env steps failed" "$work/held.log" ||
  fail "held: the evaluation with nothing to play was not said dropped (or was called failed)"
echo "a held evaluation's 4 s checkpoint with eval_hold_wait_s 1: let go; a later hold decided"
(export GB_TEST_SLOW_FSYNC_MATCH=.gbds; runs record --record "$work/recorded")
solved record $? "recorded/trainer-0.gbds"
grep -q "trainer-0 is writing its recorded dataset: the stop waits for it" "$work/record.log" ||
  fail "record: the launcher did not say it waits for the dataset"
grep -q "trainer: recorded [1-9][0-9]* chunks" "$work/record/logs/trainer-0.log" ||
  fail "record: the dataset was not closed"
echo "a --record dataset's 4 s closing fsync with a 2 s grace: waited for; solved, exit 0"
echo "4 passed, 0 failed"
