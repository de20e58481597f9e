#!/usr/bin/env bash
# tests/launch/run_kill_trainer.sh: one of two data-parallel trainers SIGKILLed mid-run, twice
# (trainer 1, then trainer 0 once the group works again): each time the launcher restarts it, the
# survivor closes the failed group and the two form it again as the next generation (the
# restarted one re-attaches its replay shard and ledger from shared memory and takes the
# survivor's state, which trained further); the run learns on to the target return its
# arguments set (solved), its sample ledger exact (lost 0), and each re-formed group works again
# within 2x the heartbeat timeout of the kill.
# usage: run_kill_trainer.sh GEARBOX CONFIG WORK_DIR [--set ...]
set -u
gearbox=$1 config=$2 work=$3
shift 3
. "$(dirname "$0")/run_lib.sh"
rm -rf "$work"; mkdir -p "$work"
heartbeat=5
"$gearbox" run "$config" --run-dir "$work/run" --set experiment.max_seconds=380 \
  --set trainer.count=2 --set launch.heartbeat_timeout_s=$heartbeat --set launch.progress=off \
  --set trainer.checksum_every=50 "$@" > "$work/out.log" 2>&1 &
launcher=$!
logs="$work/run/logs"

# kill_trainer K GENERATION: SIGKILLs trainer K's process, then waits until the survivor says
# the group formed again as GENERATION; prints how long that took from the kill
kill_trainer() {
  local k=$1 gen=$2 other=$((1 - $1)) pid killed_at
  pid=$(worker_pids "$logs/trainer-$k.log" | tail -1)
  [ -n "$pid" ] || fail "no pid in trainer-$k's log"
  killed_at=$(date +%s.%N)
  kill -KILL "$pid"
  wait_for_log "$logs/trainer-$other.log" "formed again as generation $gen" \
    $((2 * heartbeat + 30)) || { tail -5 "$logs/trainer-$other.log"; fail "no generation $gen"; }
  took=$(python3 -c "import time; print(f'{time.time() - $killed_at:.2f}')")
  echo "trainer-$k killed: the group worked again as generation $gen $took s later" \
       "($(grep -o "formed again as generation $gen [0-9.]* s after it failed" \
           "$logs/trainer-$other.log"))"
  python3 -c "import sys; sys.exit(0 if $took < 2 * $heartbeat else 1)" ||
    fail "the group took $took s to work again (2x the heartbeat timeout: $((2 * heartbeat)) s)"
}
wait_for_log "$logs/trainer-0.log" "parameter checksum" 120 || fail "the trainers never trained"
kill_trainer 1 1
sleep 3 # generation 1 trains a while
kill_trainer 0 2
wait "$launcher"; status=$?
tail -4 "$work/out.log"
s=$work/run/summary.json
[ -s "$s" ] || fail "no summary.json"
echo "exit $status, $(json_get "$s" exit_reason) after $(json_get "$s" env_steps) env steps," \
     "mean return $(json_get "$s" episode_return_mean)"
[ "$status" = 0 ] && [ "$(json_get "$s" exit_reason)" = solved ] || fail "the run did not solve"
check_crash_ledger "$s"
check_restarts "$s" trainer-1 trainer-0
# the restarted trainers took their predecessors' replay and ledger, and the survivor's state
for k in 0 1; do
  grep -q "replay re-attached" "$logs/trainer-$k.log" || fail "trainer-$k did not re-attach its replay"
  grep -q "sample ledger taken over" "$logs/trainer-$k.log" || fail "trainer-$k's ledger not kept"
done
# after each re-form the replicas agree again (every checksum compared equal: a mismatch ends
# the run), and the last checks came after the second re-form
grep -q "generation 2, " "$logs/trainer-0.log" || fail "trainer 0 did not join generation 2"
echo "1 passed, 0 failed"
