#!/usr/bin/env bash
# tests/launch/run_last_words.sh: a worker that fails says why in the run's summary, not only
# its exit status: its last words travel on a pipe from the worker to the launcher (not through
# its log, which a full disk would stop). A short DQN run, then its model checkpoint damaged and
# the run resumed: the trainer cannot restore it, fails at every restart, and summary.json's
# error names the checkpoint and libtorch's reason.
# usage: run_last_words.sh GEARBOX CONFIG WORK_DIR
set -u
gearbox=$1 config=$2 work=$3
. "$(dirname "$0")/run_lib.sh"
rm -rf "$work"; mkdir -p "$work"
"$gearbox" run "$config" --run-dir "$work/run" --set experiment.max_env_steps=20000 \
  --set launch.progress=off > "$work/first.log" 2>&1 || fail "the first run failed"
model=$(ls "$work"/run/checkpoints/*.model | head -1)
[ -n "$model" ] || fail "no model checkpoint"
head -c 100 /dev/urandom > "$model"
"$gearbox" run --resume "$work/run" --set experiment.max_env_steps=40000 \
  --set launch.progress=off > "$work/resume.log" 2>&1
status=$?
[ "$status" -ne 0 ] || fail "a run whose trainer cannot start exited 0"
error=$(python3 -c "import json; print(json.load(open('$work/run/summary.json'))['error'])")
echo "summary error: $error"
case "$error" in
  *"trainer-0 exited with status 1 (learning: restoring $model"*) ;;
  *) fail "the summary's error does not say why the trainer failed" ;;
esac
echo "1 passed, 0 failed"
