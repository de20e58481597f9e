#!/usr/bin/env bash
# tests/launch/run_slow_checkpoint.sh: a trainer whose final checkpoint outlasts the stop's
# grace (launch.stop_timeout_s) because its fsync is slow (slow_fsync.c: 6 s, preloaded) is
# waited for, not killed: the run ends solved, exit 0, with the final checkpoint at the last
# training step, and the launcher says why it waits. With launch.stop_checkpoint_s shorter than
# the write, the trainer is killed and the run fails (worker_failed, exit 1), as before.
# usage: run_slow_checkpoint.sh GEARBOX CONFIG SLOW_FSYNC_LIB WORK_DIR
set -u
gearbox=$1 config=$2 lib=$3 work=$4
. "$(dirname "$0")/run_lib.sh"
rm -rf "$work"; mkdir -p "$work"
# runs CASE [--set ...]: CartPole to its target, the final checkpoint's fsync 6 s, a 2 s grace
runs() {
  local name=$1; shift
  GB_TEST_SLOW_FSYNC_S=6 LD_PRELOAD="$lib" "$gearbox" run "$config" --run-dir "$work/$name" \
    --set trainer.checkpoint_every_s=0 --set launch.stop_timeout_s=2 \
    --set launch.progress=off "$@" > "$work/$name.log" 2>&1
}
runs waits; status=$?
s="$work/waits/summary.json"
[ "$status" -eq 0 ] || { tail -20 "$work/waits.log"; fail "the run exited $status"; }
[ "$(json_get "$s" exit_reason)" = solved ] || fail "exit_reason $(json_get "$s" exit_reason)"
grep -q "slow_fsync: 6 s before fsync of .*checkpoints/trainer-0" "$work/waits/logs/trainer-0.log" ||
  fail "the trainer's checkpoint was not slowed (the preload did not take)"
grep -q "trainer-0 is writing its checkpoint: the stop waits for it" "$work/waits.log" ||
  fail "the launcher did not say it waits for the checkpoint"
steps=$(json_get "$s" train_steps)
grep -q "checkpoint written ($steps training steps" "$work/waits/logs/trainer-0.log" ||
  fail "no final checkpoint at the last training step ($steps)"
echo "a 6 s final checkpoint with a 2 s grace: waited for; solved, exit 0, checkpoint at $steps"
runs cut --set launch.stop_checkpoint_s=1; status=$?
s="$work/cut/summary.json"
[ "$status" -ne 0 ] || fail "a trainer killed in its checkpoint, and the run exited 0"
[ "$(json_get "$s" exit_reason)" = worker_failed ] || fail "exit_reason $(json_get "$s" exit_reason)"
grep -q "trainer-0 did not stop within the grace and was killed" "$s" ||
  fail "summary.json's error does not name the killed trainer: $(json_get "$s" error)"
echo "launch.stop_checkpoint_s 1: the trainer killed, worker_failed, exit $status"
echo "2 passed, 0 failed"
