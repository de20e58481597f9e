#!/usr/bin/env bash
# tests/launch/python/test_sweep_slurm.sh: a sweep file with `launch: slurm` (gearbox-sweep,
# launch/python/gearbox/sweep_slurm.py) on a real one-node Slurm cluster made as run_slurm.sh
# makes it (munged, slurmctld and slurmd from Debian's packages, every file in a temporary
# folder): a grid of 4 CartPole PPO trials over the learning rate runs as one job array
# (squeue shows gearbox-sweep:<name> with array tasks, never more than `parallel` = 2 running),
# every trial a run directory with its summary and its console log, the table names the best
# trial, nothing is left in squeue; launch: slurm with method optuna is refused (status 2).
# Skipped (exit 77) where no cluster can be made: not root, or Slurm/munge not installed.
# usage: test_sweep_slurm.sh PYTHON GEARBOX SOURCE_ROOT WORK_DIR
set -u
py=$1 gearbox=$(readlink -f "$2") src=$(readlink -f "$3") work=$4
. "$src/tests/launch/run_lib.sh"
. "$src/tests/launch/slurm_lib.sh"

[ "$(id -u)" -eq 0 ] || { echo "SKIP: a test Slurm cluster needs root"; exit 77; }
for tool in munged munge slurmctld slurmd sbatch squeue scancel sinfo; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "SKIP: $tool not installed (launch/install-deps.sh installs Slurm and munge)"; exit 77; }
done
rm -rf "$work"; mkdir -p "$work"
work=$(readlink -f "$work")
export GEARBOX_BIN=$gearbox PYTHONPATH=$src/launch/python
sweep() { "$py" -c 'import sys; from gearbox.sweeps import main; sys.exit(main())' "$@"; }

# refused before any cluster is asked
cat > "$work/optuna.yaml" <<EOF
base: $src/configs/cartpole_ppo.yaml
method: optuna
launch: slurm
objective: {key: wall_seconds}
params: {trainer.algorithm.lr: {log_uniform: [1.0e-4, 1.0e-2]}}
EOF
sweep "$work/optuna.yaml" --dir "$work/optuna" > "$work/optuna.log" 2>&1; status=$?
[ $status -eq 2 ] && grep -q "launch: slurm runs trials known in advance" "$work/optuna.log" ||
  { cat "$work/optuna.log"; fail "optuna with launch: slurm: status $status"; }
echo "ok: optuna with launch: slurm refused"

D=$(mktemp -d /tmp/gbsweep.XXXXXX)
pids=()
cleanup() {
  slurm_stop
  rm -rf "$D"
}
trap cleanup EXIT
trap 'exit 1' TERM INT

slurm_start_one_node gbsweep

cat > "$work/grid.yaml" <<EOF
name: lr_on_slurm
base: $src/configs/cartpole_ppo.yaml
set: {experiment.max_seconds: 90, actors.count: 1}
method: grid
parallel: 2
launch: slurm
objective: {key: wall_seconds, direction: min}
params: {trainer.algorithm.lr: [0.001, 0.002, 0.003, 0.004]}
EOF
start=$SECONDS
sweep "$work/grid.yaml" --dir "$work/grid" > "$work/grid.log" 2>&1 &
sweeper=$!
seen="" most=0
while kill -0 $sweeper 2>/dev/null; do
  seen+=$(squeue -h -r -o '%j %i %T' 2>/dev/null)$'\n'
  running=$(squeue -h -r -t RUNNING -o %i 2>/dev/null | wc -l)
  [ "$running" -gt "$most" ] && most=$running
  sleep 0.5
done
wait $sweeper; status=$?
cat "$work/grid.log"
echo "the sweep took $((SECONDS - start)) s; at most $most array tasks ran at once"
[ $status -eq 0 ] || fail "gearbox-sweep exited $status"
grep -q '^gearbox-sweep:lr_on_slurm [0-9]*_[0-3] ' <<< "$seen" ||
  fail "squeue never showed the array's tasks: $seen"
[ "$most" -ge 1 ] && [ "$most" -le 2 ] || fail "$most tasks ran at once (parallel: 2)"
[ -z "$(squeue -h -o %A)" ] || { squeue; fail "tasks left in squeue"; }
for i in 0 1 2 3; do
  t=$work/grid/trial-00$i
  [ "$(json_get "$t/summary.json" mode)" = local ] || fail "trial $i: no summary.json in $t"
  [ -s "$t/logs/console.log" ] || fail "trial $i: no console log"
done
"$py" - "$work/grid/sweep.json" <<'EOF' || fail "sweep.json"
import json, sys
doc = json.load(open(sys.argv[1]))
ok = [t for t in doc["trials"] if t["status"] == "ok" and t["objective"] is not None]
print("best:", doc["best"], [(t["trial"], t["params"], t["objective"]) for t in ok])
sys.exit(0 if doc["best"] and len(ok) == 4 else 1)
EOF
echo "PASS"
