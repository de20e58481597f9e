#!/usr/bin/env bash
# tests/gpu/run_gpu_learns.sh: tests/launch/run_learns.sh with the trainer and the policy workers
# on cuda (the same config, thresholds and budgets as on the cpu). Skipped (exit 77) where the
# launcher refuses cuda at start: a gearbox built without CUDA, or no CUDA device visible.
# usage: run_gpu_learns.sh GEARBOX CONFIG WORK_DIR MIN_RETURN MAX_ENV_STEPS [--set KEY=VALUE ...]
set -u
here=$(cd "$(dirname "$0")" && pwd)
gearbox=$1 config=$2 work=$3
mkdir -p "$work"
out=$("$gearbox" run "$config" --run-dir "$work/probe" --set trainer.device=cuda \
      --set experiment.max_env_steps=1 --set launch.progress=off 2>&1)
if [ $? -eq 2 ] && printf '%s' "$out" | grep -q "trainer.device: cuda: "; then
  echo "skipped: $(printf '%s' "$out" | grep "trainer.device: cuda: " | head -1)"
  exit 77
fi
rm -rf "$work/probe"
shift 3
exec "$here/../launch/run_learns.sh" "$gearbox" "$config" "$work" "$@" \
  --set trainer.device=cuda --set policy.device=cuda
