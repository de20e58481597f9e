#!/usr/bin/env bash
# tests/launch/run_launcher_killed.sh: the launcher SIGKILLed mid-run. No worker outlives it by
# more than 5 s (PR_SET_PDEATHSIG, and a worker whose launcher is gone cannot hang in its
# stop), and the next `gearbox run` removes what the dead run left: its ipc socket files and
# the POSIX shm segments named after it (one planted here, and the trainer's replay when the
# trainer was killed before its own clean stop removed it), and starts cleanly.
# usage: run_launcher_killed.sh GEARBOX CONFIG WORK_DIR
set -u
gearbox=$1 config=$2 work=$3
. "$(dirname "$0")/run_lib.sh"
rm -rf "$work"; mkdir -p "$work"
export GEARBOX_RUN_TABLE="$work/table"
dead="$work/dead" next="$work/next"

"$gearbox" run "$config" --run-dir "$dead" --set experiment.max_seconds=120 \
  --set experiment.target_return=1e9 --set launch.progress=off > "$work/dead.log" 2>&1 &
launcher=$!
wait_for_log "$dead/logs/actor-0.log" "actor: " 60 || fail "the run did not start"
sleep 2
workers=$(run_processes "$dead")
[ -n "$workers" ] || fail "no workers found"
kill -KILL "$launcher"
start=$SECONDS
while [ $((SECONDS - start)) -le 5 ]; do
  alive=$(for p in $workers; do kill -0 "$p" 2>/dev/null && echo "$p"; done)
  [ -z "$alive" ] && break
  sleep 0.2
done
[ -z "$alive" ] || { ps -o pid,stat,args -p $alive; fail "workers outlived the launcher by 5 s"; }
echo "every worker ended within $((SECONDS - start)) s of the launcher's SIGKILL"
wait "$launcher" 2>/dev/null

entry=$(grep -lx "$(realpath "$dead")" "$GEARBOX_RUN_TABLE"/* 2>/dev/null)
[ -n "$entry" ] || fail "the dead run has no run-table entry"
id=$(basename "$entry")
replay="/dev/shm/gearbox-$id-replay-0"
[ -e "$replay" ] && echo "the dead trainer left its replay segment"
segment="/dev/shm/gearbox-$id-replay-test"
: > "$segment" || fail "cannot plant $segment"
socks=$(find "$dead/sockets" -type s 2>/dev/null | wc -l)
echo "the dead run left $socks socket files and $segment"

"$gearbox" run "$config" --run-dir "$next" --set experiment.max_seconds=4 \
  --set experiment.max_env_steps=0 --set experiment.target_return=1e9 \
  --set launch.progress=off > "$work/next.log" 2>&1
status=$?
[ "$status" -eq 0 ] || { tail -20 "$work/next.log"; fail "the next run exited $status"; }
[ "$(json_get "$next/summary.json" exit_reason)" = max_seconds ] || fail "the next run's summary"
[ ! -e "$segment" ] && rm -f "$segment" || { rm -f "$segment"; fail "$segment was left"; }
[ ! -e "$replay" ] || { rm -f "$replay"; fail "$replay was left"; }
[ "$(find "$dead/sockets" -type s 2>/dev/null | wc -l)" = 0 ] || fail "socket files left in $dead"
[ ! -e "$entry" ] || fail "the dead run's table entry was left"
grep -q "left by the dead run in $(realpath "$dead")" "$work/next.log" || fail "the next run did not say what it removed"
echo "1 passed, 0 failed"
