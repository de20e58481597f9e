#!/usr/bin/env bash
# tests/launch/run_dir_lock.sh: one run a run directory. A second `gearbox run` into the folder
# of a live run is refused (naming the pid that holds it) and leaves the live run alone; once
# that run has ended, running into its folder again is refused too (it would truncate its
# metrics.csv and overwrite its checkpoints). The folder's name is not ASCII and its path is
# too long for Unix socket paths (107 bytes): such paths work, the run's ipc sockets in a short
# folder under /tmp that <run>/sockets links to, gone with the link once the run ends (such a
# run was refused).
# Both once ran: the two runs cross-connected and both exited 0. Runs started in the same second
# without --run-dir each get their own folder (mkdir reserves the name; the window in which two
# could choose the same one was microseconds wide, and this does not hit it reliably).
# usage: run_dir_lock.sh GEARBOX CONFIG WORK_DIR
set -u
gearbox=$1 config=$2 work=$3
. "$(dirname "$0")/run_lib.sh"
rm -rf "$work"; mkdir -p "$work"
export GEARBOX_RUN_TABLE="$work/table"
run="$work/rün ☃ $(printf 'deep%.0s' $(seq 25))"

"$gearbox" run "$config" --run-dir "$run" --set experiment.max_seconds=10 \
  --set experiment.max_env_steps=0 --set experiment.target_return=1e9 \
  --set launch.progress=off > "$work/first.log" 2>&1 &
first=$!
wait_for_log "$run/logs/actor-0.log" "actor: " 60 || { cat "$work/first.log"; fail "the first run did not start"; }
socks=$(readlink "$run/sockets")
echo "${#run}-byte run folder: sockets in $socks ($(ls "$socks" 2>/dev/null | wc -l) files)"
[[ "$socks" =~ ^/tmp/gearbox-sockets-$(id -u)/[0-9a-f]{16}$ ]] ||
  fail "$run/sockets does not link to a short socket folder: '$socks'"
[ -S "$socks/trainer-0-samples" ] || fail "no trainer socket in $socks"

"$gearbox" run "$config" --run-dir "$run" --set experiment.max_seconds=5 \
  --set launch.progress=off > "$work/second.log" 2>&1
status=$?
echo "second run into a live run's folder: exit status $status"; cat "$work/second.log"
[ "$status" -ne 0 ] || fail "a second run into a live run's folder exited 0"
grep -q "in use by another run (gearbox pid $first " "$work/second.log" ||
  fail "the refusal does not name the live run's pid $first"

wait "$first"; status=$?
echo "first run: exit status $status"
[ "$status" -eq 0 ] || { tail -20 "$work/first.log"; fail "the first run failed beside the refused one"; }
[ "$(json_get "$run/summary.json" exit_reason)" = max_seconds ] || fail "first run's summary.json"
check_ledger "$run/summary.json"
[ ! -e "$socks" ] && [ ! -L "$run/sockets" ] || fail "the socket folder or its link outlived the run"

rows=$(wc -l < "$run/metrics.csv")
"$gearbox" run "$config" --run-dir "$run" --set experiment.max_seconds=5 \
  --set launch.progress=off > "$work/third.log" 2>&1
status=$?
echo "run into a finished run's folder: exit status $status"; cat "$work/third.log"
[ "$status" -ne 0 ] || fail "a run into a finished run's folder exited 0"
grep -q "already holds a run" "$work/third.log" || fail "the refusal does not say why"
[ "$(wc -l < "$run/metrics.csv")" = "$rows" ] || fail "metrics.csv of the finished run was changed"

# An interrupted run (no summary.json) is refused just the same.
rm "$run/summary.json"
"$gearbox" run "$config" --run-dir "$run" --set launch.progress=off > "$work/fourth.log" 2>&1 &&
  fail "a run into an interrupted run's folder exited 0"
grep -q "already holds a run (metrics.csv)" "$work/fourth.log" || { cat "$work/fourth.log"; fail "no reason"; }
[ "$(wc -l < "$run/metrics.csv")" = "$rows" ] || fail "metrics.csv of the interrupted run was truncated"
# Three runs at once, each choosing its own folder under run_root.
pids=()
for i in 1 2 3; do
  "$gearbox" run "$config" --set experiment.run_root="$work/root" --set launch.mode=inline \
    --set experiment.max_seconds=3 --set experiment.target_return=1e9 \
    --set launch.progress=off > "$work/same-$i.log" 2>&1 &
  pids+=($!)
done
for i in 0 1 2; do
  wait "${pids[$i]}" || { cat "$work/same-$((i + 1)).log"; fail "run $((i + 1)) of three started together failed"; }
done
made=$(find "$work/root" -name summary.json | wc -l)
[ "$made" = 3 ] || { find "$work/root"; fail "three runs started together left $made summaries"; }
echo "6 passed, 0 failed"
