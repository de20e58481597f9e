#!/usr/bin/env bash
# tests/launch/run_shm_left.sh: a run leaves no shared memory behind, and only a trainer that did
# not stop cleanly makes the launcher say it removed something: a clean run's trainer removes its
# replay and ledger segments itself (no message; every clean run once logged "removed 1
# shared-memory segments a trainer left"); a SIGKILLed trainer's segments (kept for a restart)
# are removed by the launcher at the end, with a warning.
# usage: run_shm_left.sh GEARBOX CONFIG WORK_DIR
set -u
gearbox=$1 config=$2 work=$3
. "$(dirname "$0")/run_lib.sh"
rm -rf "$work"; mkdir -p "$work"

# start NAME ARGS...: starts a run in $work/NAME (background; pid in $launcher) and sets $id to
# the run id in its trainer's segment names (/proc/<trainer>/maps)
start() {
  local name=$1; shift
  "$gearbox" run "$config" --run-dir "$work/$name" --set experiment.target_return=1e9 \
    --set launch.progress=off "$@" > "$work/$name.out" 2>&1 &
  launcher=$!
  wait_for_log "$work/$name/logs/trainer-0.log" "trainer: .* on " 60 || fail "$name: no trainer"
  trainer=$(worker_pids "$work/$name/logs/trainer-0.log" | head -1)
  id=$(grep -o 'gearbox-[0-9a-f]\{16\}-' "/proc/$trainer/maps" | head -1)
  [ -n "$id" ] || fail "$name: the trainer (pid $trainer) maps no run segment"
}
left() { ls /dev/shm | grep -c -- "^$id" || true; }

start clean --set experiment.max_env_steps=20000 --set experiment.max_seconds=120
wait "$launcher"; status=$?
[ "$status" -eq 0 ] || { tail "$work/clean.out"; fail "clean: exit status $status"; }
! grep -q "shared-memory segments" "$work/clean.out" ||
  fail "clean: $(grep "shared-memory segments" "$work/clean.out")"
[ "$(left)" -eq 0 ] || fail "clean: $(left) segments ${id}* left in /dev/shm"
echo "clean run: no segment left, nothing said"

start killed --set experiment.max_seconds=60 --set launch.restart.max_restarts=0
sleep 1
kill -KILL "$trainer"
wait "$launcher"; status=$?
[ "$status" -eq 1 ] || fail "killed: exit status $status, expected 1"
seg_msg="shared-memory segments that a trainer which did not stop cleanly left"
grep -q "WARN .*removed [1-9][0-9]* $seg_msg" \
  "$work/killed.out" || { tail "$work/killed.out"; fail "killed: no warning about the segments"; }
[ "$(left)" -eq 0 ] || fail "killed: $(left) segments ${id}* left in /dev/shm"
echo "killed trainer: $(grep -o 'removed [0-9]* shared-memory segments' "$work/killed.out")," \
  "with a warning"
echo "2 passed, 0 failed"
