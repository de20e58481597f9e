#!/usr/bin/env bash
# tests/launch/run_nan_env.sh: an environment plugin that emits NaN observations
# (tests/launch/nan_env.c). Now and then (every 50th step of its episodes): the run goes on to
# its budget and exits 0; the trainers refuse the chunks holding a NaN and count them
# (summary.json samples.nonfinite > 0, fewer than received), the losses stay finite (a
# non-finite loss stops the trainer), and the sample ledger balances. Always (every step): the
# run does not train on nothing until its budget; it ends early, non-zero, with
# exit_reason unusable_data and the cause in summary.json's error.
# usage: run_nan_env.sh GEARBOX PLUGIN WORK_DIR
set -u
gearbox=$1 plugin=$2 work=$3
. "$(dirname "$0")/run_lib.sh"
rm -rf "$work"; mkdir -p "$work"

# config NAN_EVERY: a short PPO run of the plugin
config() {
  cat > "$work/nan_$1.yaml" <<YAML
experiment: {name: nan_env, seed: 1, max_env_steps: 300000, max_seconds: 120,
             metrics_interval_s: 0.2}
env:
  name: plugin
  plugin: $plugin
  args: {nan_every: $1, episode: 200}
actors: {count: 1, envs_per_actor: 32, splits: 2, chunk_len: 16}
policy:
  model: {type: mlp, hidden: [32, 32], activation: tanh}
trainer:
  batch_size: 64
  max_staleness: 2
  algorithm:
    name: ppo
    lr: 0.0003
    ppo: {gae_lambda: 0.95, clip: 0.2, epochs: 2, minibatches: 2}
  replay: {capacity: 128, selector: fifo, remover: fifo, max_times_sampled: 1, min_size: 64}
launch: {progress: off}
YAML
  echo "$work/nan_$1.yaml"
}

# 1. A NaN every 50 steps: the poisoned chunks are dropped and counted, the run goes on.
"$gearbox" run "$(config 50)" --run-dir "$work/some" > "$work/some.log" 2>&1
status=$?
tail -3 "$work/some.log"
s="$work/some/summary.json"
[ -s "$s" ] || fail "no summary.json (exit $status)"
reason=$(json_get "$s" exit_reason)
nonfinite=$(json_get "$s" nonfinite) received=$(json_get "$s" chunks_received)
echo "some NaN: exit $status, $reason, $nonfinite of $received chunks non-finite"
[ "$status" -eq 0 ] || fail "exit status $status ($(json_get "$s" error))"
[ "$reason" = max_env_steps ] || fail "exit_reason $reason"
[ "$nonfinite" -gt 0 ] || fail "no chunk counted as non-finite"
[ "$nonfinite" -lt "$received" ] || fail "every chunk was non-finite"
grep -q "non-finite 'obs' value: not stored" "$work/some/logs/trainer-0.log" ||
  fail "the trainer did not warn about the non-finite chunks"
warnings=$(grep -c "non-finite 'obs' value" "$work/some/logs/trainer-0.log")
# rate-limited: the 1st, 2nd, 4th, ... occurrence, so at most log2(n) + 1 lines
python3 -c "import math,sys; sys.exit(0 if $warnings <= math.log2($nonfinite) + 2 else 1)" ||
  fail "$warnings warnings for $nonfinite chunks: not rate-limited"
! grep -q "the loss is" "$work/some/logs/trainer-0.log" || fail "the loss went non-finite"
python3 - "$work/some/metrics.csv" <<'PY' || fail "no finite loss in metrics.csv"
import csv, math, sys
rows = list(csv.DictReader(open(sys.argv[1])))
losses = [float(r["loss"]) for r in rows if r["loss"]]
print(f"{len(losses)} losses in metrics.csv, last {losses[-1] if losses else None}")
sys.exit(0 if losses and all(math.isfinite(x) for x in losses) else 1)
PY
check_ledger "$s"

# 2. Nothing but NaN: the run ends early with the cause, non-zero.
"$gearbox" run "$(config 1)" --run-dir "$work/all" > "$work/all.log" 2>&1
status=$?
tail -3 "$work/all.log"
s="$work/all/summary.json"
[ -s "$s" ] || fail "no summary.json (exit $status)"
reason=$(json_get "$s" exit_reason) error=$(json_get "$s" error)
wall=$(json_get "$s" wall_seconds) env_steps=$(json_get "$s" env_steps)
echo "only NaN: exit $status, $reason after $wall s and $env_steps env steps: $error"
[ "$status" -ne 0 ] || fail "a run of nothing but NaN exited 0"
[ "$reason" = unusable_data ] || fail "exit_reason $reason"
case "$error" in *NaN*) ;; *) fail "the error does not name the cause: $error" ;; esac
[ "$env_steps" -lt 300000 ] || fail "the run went on to its budget"
# the trainer saw the end at once, its ingest not held by the stream of refused chunks
! grep -q "not every trainer confirmed" "$work/all/logs/launcher.log" ||
  fail "the trainer did not confirm the end of the run in time"
check_ledger "$s"
[ "$(json_get "$s" chunks_received)" = "$(json_get "$s" nonfinite)" ] ||
  fail "a chunk of nothing but NaN was counted as usable"
[ -z "$(run_processes "$work/all")" ] || fail "workers still running after the run ended"
echo "1 passed, 0 failed"
