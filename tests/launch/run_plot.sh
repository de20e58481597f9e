#!/usr/bin/env bash
# tests/launch/run_plot.sh: `gearbox plot` on two seeds of a short CartPole PPO run (one group:
# their configs differ only in the seed) and on a DQN run beside them (a line of its own) writes
# PNGs (their signature, and width x height from the IHDR header); an unknown metric fails
# naming the columns there are; a folder without metrics.csv and a bad --x fail with the cause;
# among other runs, a run without rows (it failed early) is skipped with a warning.
# usage: run_plot.sh GEARBOX CONFIGS_DIR WORK_DIR
set -u
gearbox=$1 configs=$2 work=$3
. "$(dirname "$0")/run_lib.sh"
rm -rf "$work"; mkdir -p "$work"
export GEARBOX_RUN_TABLE="$work/table"
command -v gnuplot > /dev/null || fail "gnuplot is not installed (launch/install-deps.sh)"
common=(--set experiment.target_return=1e9 --set experiment.max_seconds=120
        --set experiment.max_env_steps=30000 --set experiment.metrics_interval_s=0.25
        --set launch.progress=off)
for seed in 1 2; do
  "$gearbox" run "$configs/cartpole_ppo.yaml" --run-dir "$work/seed$seed" "${common[@]}" \
    --set experiment.seed=$seed > "$work/seed$seed.log" 2>&1 || { tail "$work/seed$seed.log"; fail "seed $seed failed"; }
done
"$gearbox" run "$configs/cartpole_dqn.yaml" --run-dir "$work/dqn" "${common[@]}" \
  > "$work/dqn.log" 2>&1 || { tail "$work/dqn.log"; fail "the DQN run failed"; }

# png FILE: "WIDTH HEIGHT" from a PNG's IHDR, or fails when FILE is not a PNG
png() {
  python3 - "$1" <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read(33)
if b[:8] != b"\x89PNG\r\n\x1a\n" or b[12:16] != b"IHDR":
    sys.exit(f"{sys.argv[1]} is not a PNG")
print(*struct.unpack(">II", b[16:24]))
PY
}

# 1. two seeds, one group; default output beside the runs: ./plot.png
(cd "$work" && "$gearbox" plot seed1 seed2) > "$work/plot1.out" 2>&1 || { cat "$work/plot1.out"; fail "plot of two seeds"; }
cat "$work/plot1.out"
grep -q "2 runs in 1 curves" "$work/plot1.out" || fail "the two seeds were not one group"
size=$(png "$work/plot.png") || fail "no PNG written"
[ "$size" = "1000 600" ] || fail "PNG of $size, not 1000 x 600"

# 2. the group and the DQN run, x in seconds, another metric, -o
"$gearbox" plot "$work/seed1" "$work/seed2" "$work/dqn" --x seconds --metric loss \
  -o "$work/loss.png" > "$work/plot2.out" 2>&1 || { cat "$work/plot2.out"; fail "plot of three runs"; }
grep -q "3 runs in 2 curves" "$work/plot2.out" || fail "$(cat "$work/plot2.out")"
png "$work/loss.png" > /dev/null || fail "no PNG written with -o"

# 3. one run: RUN_DIR/plot.png
"$gearbox" plot "$work/dqn" > "$work/plot3.out" 2>&1 || { cat "$work/plot3.out"; fail "plot of one run"; }
png "$work/dqn/plot.png" > /dev/null || fail "one run: no RUN_DIR/plot.png"

# 4. errors
"$gearbox" plot "$work/seed1" --metric no_such_metric -o "$work/bad.png" > "$work/bad.out" 2>&1
status=$?
cat "$work/bad.out"
[ "$status" = 2 ] || fail "an unknown metric exited $status, not 2"
grep -q "no column 'no_such_metric'; its columns: time_s,env_steps," "$work/bad.out" ||
  fail "the unknown metric's message does not list the columns"
[ ! -e "$work/bad.png" ] || fail "a PNG was written for an unknown metric"
mkdir -p "$work/empty"
"$gearbox" plot "$work/empty" > "$work/empty.out" 2>&1 && fail "a folder without metrics.csv plotted"
grep -q "metrics.csv: No such file or directory" "$work/empty.out" || fail "$(cat "$work/empty.out")"
# a run that failed before its first row, beside one that did not: skipped with a warning
mkdir -p "$work/failed" && head -1 "$work/seed1/metrics.csv" > "$work/failed/metrics.csv"
"$gearbox" plot "$work/seed1" "$work/failed" "$work/empty" -o "$work/some.png" \
  > "$work/some.out" 2>&1 || fail "a failed run among good ones: $(cat "$work/some.out")"
grep -q "skipping $work/failed" "$work/some.out" && grep -q "1 runs in 1 curves" "$work/some.out" ||
  fail "$(cat "$work/some.out")"
"$gearbox" plot "$work/seed1" --x minutes > "$work/x.out" 2>&1
[ $? = 2 ] && grep -q "env_steps or seconds" "$work/x.out" || fail "--x minutes: $(cat "$work/x.out")"
PATH=/nonexistent "$gearbox" plot "$work/seed1" > "$work/nognuplot.out" 2>&1 && fail "plotted without gnuplot"
grep -q "gnuplot not found" "$work/nognuplot.out" || fail "$(cat "$work/nognuplot.out")"
echo "4 passed, 0 failed"
