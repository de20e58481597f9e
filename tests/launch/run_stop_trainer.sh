#!/usr/bin/env bash
# tests/launch/run_stop_trainer.sh: one of two data-parallel trainers SIGSTOPped (it hangs, it
# does not die): the watchdog takes it for hung after launch.heartbeat_timeout_s and restarts it,
# and only it: the other trainer, waiting for it in a collective all that time, keeps reporting
# (workers/roles/trainer_group.c), so it is not taken for hung too; the two form the group again
# as generation 1 and train on. Then SIGTERM: summary.json lists the one restart and the sample
# ledger balances.
# (b) a trainer killed while it waits for the group to form (the other SIGSTOPped before it
# joined): it reported while it waited, before its first report of counts; the launcher still
# knows its sample ledger survives it (it said so as it opened it), the run solves and the
# ledger balances (lost 0, not null).
# usage: run_stop_trainer.sh GEARBOX CONFIG WORK_DIR
set -u
gearbox=$1 config=$2 work=$3
. "$(dirname "$0")/run_lib.sh"
rm -rf "$work"; mkdir -p "$work"
heartbeat=3
"$gearbox" run "$config" --run-dir "$work/run" --set trainer.count=2 \
  --set experiment.target_return=1e9 --set experiment.max_env_steps=0 \
  --set experiment.max_seconds=120 --set launch.heartbeat_timeout_s=$heartbeat \
  --set launch.progress=off --set trainer.checksum_every=20 > "$work/out.log" 2>&1 &
launcher=$!
trap 'kill -CONT "${victim:-0}" 2>/dev/null; kill -TERM $launcher 2>/dev/null' EXIT
logs=$work/run/logs
wait_for_log "$logs/trainer-0.log" "parameter checksum" 60 || fail "the trainers never trained"
victim=$(worker_pids "$logs/trainer-1.log" | head -1)
[ -n "$victim" ] || fail "no pid in trainer-1's log"
kill -STOP "$victim"; echo "SIGSTOP trainer-1 (pid $victim)"
wait_for_log "$logs/trainer-0.log" "formed again as generation 1" $((3 * heartbeat + 30)) ||
  { tail -5 "$logs/trainer-0.log"; grep -i hung "$logs/launcher.log"; fail "no generation 1"; }
echo "$(grep -o "worker trainer-1 hung: no report for [0-9.]* s" "$logs/launcher.log");" \
     "$(grep -o "formed again as generation 1 [0-9.]* s after it failed" "$logs/trainer-0.log")"
grep -q "worker trainer-1 hung" "$logs/launcher.log" || fail "trainer-1 was not taken for hung"
sleep 2 # generation 1 trains a while
kill -TERM "$launcher"
wait "$launcher"; status=$?
trap - EXIT
s=$work/run/summary.json
[ -s "$s" ] || fail "no summary.json (exit $status)"
[ "$(json_get "$s" exit_reason)" = interrupted ] || fail "exit_reason $(json_get "$s" exit_reason)"
check_restarts "$s" trainer-1 # the waiting trainer-0 not taken too
check_crash_ledger "$s"
grep -q "generation 1, " "$logs/trainer-1.log" || fail "the restarted trainer-1 did not join"
echo "(a) passed"

# --- (b) trainer-0 killed while it waits for trainer-1 to meet it ------------------------------
"$gearbox" run "$config" --run-dir "$work/form" --set trainer.count=2 \
  --set launch.progress=off > "$work/form.log" 2>&1 &
launcher=$!
trap 'kill -CONT "${held:-0}" 2>/dev/null; kill -TERM $launcher 2>/dev/null' EXIT
held=""
for _ in $(seq 1000); do
  held=$(pgrep -f -- "worker --role trainer --index 1 --run-dir $work/form" | head -1)
  [ -n "$held" ] && break; sleep 0.01
done
[ -n "$held" ] || fail "(b) trainer-1 never started"
kill -STOP "$held"
logs=$work/form/logs
wait_for_log "$logs/trainer-0.log" "worker started" 30 || fail "(b) trainer-0 never started"
victim=$(worker_pids "$logs/trainer-0.log" | head -1)
sleep 1.5 # trainer-0 waits in the rendezvous for trainer-1, reporting while it waits
grep -q "rank 0 of 2" "$logs/trainer-0.log" && fail "(b) the group formed with trainer-1 stopped"
kill -KILL "$victim"; kill -CONT "$held"
echo "(b) SIGKILL trainer-0 (pid $victim) waiting for the group; trainer-1 (pid $held) let go"
wait "$launcher"; status=$?
trap - EXIT
s=$work/form/summary.json
[ "$status" = 0 ] || { tail -5 "$work/form.log"; fail "(b) the run exited $status"; }
grep -q "sample ledger incomplete" "$work/form.log" &&
  fail "(b) $(grep -o "sample ledger incomplete.*" "$work/form.log")"
check_restarts "$s" trainer-0
check_crash_ledger "$s"
grep -q "rank 1 of 2 trainers.*generation 1, " "$logs/trainer-1.log" ||
  fail "(b) trainer-1 did not meet the restarted trainer-0 in generation 1"
echo "2 passed, 0 failed"
