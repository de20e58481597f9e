#!/usr/bin/env bash
# tests/launch/run_sigterm.sh: SIGTERM (and SIGINT) mid-run stops every worker within 5 s and
# still writes summary.json (exit_reason interrupted), and loses no sample chunk on the way:
# none is discarded at stop (but into PPO's full queue, counted and said), and DQN's final
# checkpoint keeps every chunk received.
# usage: run_sigterm.sh GEARBOX CONFIG WORK_DIR SIGNAL
set -u
gearbox=$1 config=$2 work=$3 sig=${4:-TERM}
. "$(dirname "$0")/run_lib.sh"
rm -rf "$work"; mkdir -p "$work"
# never solved first: PPO can reach its target in the ~3 s before the signal
"$gearbox" run "$config" --run-dir "$work/run" --set experiment.max_seconds=120 \
  --set experiment.target_return=1e9 --set launch.progress=off > "$work/out.log" 2>&1 &
launcher=$!
wait_for_log "$work/run/logs/actor-0.log" "actor: " 60 || fail "the run did not start"
sleep 2
[ -n "$(run_processes "$work/run")" ] || fail "no workers found"
start=$(date +%s.%N)
kill -"$sig" "$launcher"
wait "$launcher"; status=$?
elapsed=$(python3 -c "import time; print(round(time.time() - $start, 2))")
echo "launcher exited with $status after SIG$sig in $elapsed s"
sleep 0.2
left=$(run_processes "$work/run")
[ -z "$left" ] || { ps -o pid,args -p $left; fail "workers still running"; }
python3 -c "import sys; sys.exit(0 if $elapsed <= 5.5 else 1)" || fail "took $elapsed s"
s="$work/run/summary.json"
[ -s "$s" ] || fail "no summary.json"
[ "$(json_get "$s" exit_reason)" = interrupted ] || fail "exit_reason $(json_get "$s" exit_reason)"
[ "$status" -ne 0 ] || fail "an interrupted run exited 0"
# Stopping loses no chunk, even with the trainer holding the actors back (DQN's rate limiter).
check_ledger "$s"
# Stopping loses no experience: every chunk received went into the replay (none discarded at
# stop: the actors' last chunks pass the rate limiter once the run ends, and those arriving after
# the last training step are stored before the final checkpoint); with a replay that keeps its
# items (DQN's) that checkpoint holds them all. PPO's queue of one round has no remover: when
# the learner stopped before emptying a full one (a loaded machine), the chunks that come after
# have no room and are discarded, counted, and the trainer says so (docs/guide/runs.md).
received=$(json_get "$s" chunks_received) discarded=$(json_get "$s" discarded_at_stop)
if [ "$discarded" != 0 ] && ! grep -q "^ *name: dqn" "$config"; then
  grep -qE " [1-9][0-9]* (chunks )?discarded \(no room\)" "$work/run/logs/trainer-0.log" ||
    fail "$discarded of $received chunks discarded at stop, and the trainer does not say why"
  echo "PPO's full queue at the stop: $discarded of $received chunks discarded, counted"
else
  [ "$discarded" = 0 ] || fail "$discarded of $received chunks discarded at stop"
fi
if grep -q "^ *name: dqn" "$config"; then
  items=$(sed -n 's/.*checkpoint written ([0-9]* training steps; replay \([0-9]*\) items.*/\1/p' \
    "$work/run/logs/trainer-0.log" | tail -1)
  capacity=$(sed -n 's/^ *capacity: *\([0-9]*\).*/\1/p' "$config" | head -1)
  want=$((received < capacity ? received : capacity))
  [ "$items" = "$want" ] || fail "the final checkpoint holds ${items:-no} replay items, not $want"
  echo "the final checkpoint's replay holds all $want chunks received"
fi
[ ! -e "$work/run/ending" ] || fail "the run directory still holds the 'ending' marker"
echo "1 passed, 0 failed"
