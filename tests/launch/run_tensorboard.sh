#!/usr/bin/env bash
# tests/launch/run_tensorboard.sh: every run writes TensorBoard event files (RUN_DIR/tb/) holding
# what metrics.csv holds: read back with TensorBoard's own readers (tb_check.py, run by gearbox's
# Python), one event per row, same steps and values, one tag per column with a value.
#  1. CartPole PPO, then resumed: two events files (one a launch) that continue each other;
#     PPO's approx KL, losses, entropy and learning rate are there, no Q-values.
#  2. CartPole DQN: Q-values and learning rate, no KL, no entropy.
#  3. Inline mode (its own metrics.csv columns) writes them as well.
# usage: run_tensorboard.sh GEARBOX PYTHON CONFIGS_DIR WORK_DIR
set -u
gearbox=$1 python=$2 configs=$3 work=$4
. "$(dirname "$0")/run_lib.sh"
rm -rf "$work"; mkdir -p "$work"
export GEARBOX_RUN_TABLE="$work/table"
check=$(dirname "$0")/tb_check.py
"$python" -c "import tensorboard" 2>/dev/null ||
  fail "$python has no tensorboard package (launch/install-deps.sh installs it)"
common=(--set experiment.target_return=1e9 --set experiment.max_seconds=120
        --set experiment.metrics_interval_s=0.25 --set launch.progress=off)
always="charts/return_mean_100 charts/length_mean_100 charts/episodes losses/loss train/lr
        perf/env_steps_per_s perf/train_steps_per_s perf/time_s replay/replay_fill
        replay/sample_drops policy/version_lag policy/policy_version run/segment"

# ---- 1. PPO, resumed ---------------------------------------------------------------------------
run="$work/ppo"
"$gearbox" run "$configs/cartpole_ppo.yaml" --run-dir "$run" "${common[@]}" \
  --set experiment.max_env_steps=20000 > "$work/ppo.log" 2>&1 || { tail "$work/ppo.log"; fail "PPO run failed"; }
"$gearbox" run --resume "$run" "${common[@]}" \
  --set experiment.max_env_steps=40000 > "$work/ppo2.log" 2>&1 || { tail "$work/ppo2.log"; fail "the resume failed"; }
[ "$(ls "$run"/tb/events.out.tfevents.* | wc -l)" = 2 ] || fail "not one events file a launch: $(ls "$run/tb")"
# shellcheck disable=SC2086
"$python" "$check" "$run" $always losses/entropy losses/approx_kl losses/policy_loss \
  losses/value_loss --absent losses/q_mean || fail "PPO: TensorBoard and metrics.csv differ"

# ---- 2. DQN ------------------------------------------------------------------------------------
run="$work/dqn"
"$gearbox" run "$configs/cartpole_dqn.yaml" --run-dir "$run" "${common[@]}" \
  --set experiment.max_env_steps=15000 > "$work/dqn.log" 2>&1 || { tail "$work/dqn.log"; fail "DQN run failed"; }
# shellcheck disable=SC2086
"$python" "$check" "$run" $always losses/q_mean losses/value_loss \
  --absent losses/approx_kl losses/entropy losses/policy_loss || fail "DQN: TensorBoard and metrics.csv differ"

# ---- 3. inline mode ----------------------------------------------------------------------------
run="$work/inline"
"$gearbox" run "$configs/cartpole_ppo.yaml" --run-dir "$run" --set launch.mode=inline \
  "${common[@]}" --set experiment.max_env_steps=10000 > "$work/inline.log" 2>&1 ||
  { tail "$work/inline.log"; fail "inline run failed"; }
"$python" "$check" "$run" charts/return_mean_100 losses/loss losses/approx_kl train/lr ||
  fail "inline: TensorBoard and metrics.csv differ"
echo "3 passed, 0 failed"
