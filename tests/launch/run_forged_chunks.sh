#!/usr/bin/env bash
# tests/launch/run_forged_chunks.sh: a process on the machine writes to a live run's sample
# socket (the trainer's, found in the run directory's sockets/): garbage bytes, a well-formed
# chunk from an actor the run does not have, a chunk of the wrong layout from actor 0, and a
# frame larger than any chunk (tests/launch/probe.c). The trainer refuses and counts the three
# messages (summary.json samples.rejected, outside the ledger), drops the connection of the
# oversized frame before reading it, and the run finishes normally: exit 0 at its time budget,
# learning on, every chunk its actors sent received (the ledger balances).
# usage: run_forged_chunks.sh GEARBOX CONFIG PROBE WORK_DIR
set -u
gearbox=$1 config=$2 probe=$3 work=$4
. "$(dirname "$0")/run_lib.sh"
rm -rf "$work"; mkdir -p "$work"
run="$work/run"
# ends at max_seconds (exit 0), never solved first: the probe must find the run alive
"$gearbox" run "$config" --run-dir "$run" --set experiment.max_seconds=10 \
  --set experiment.max_env_steps=0 --set experiment.target_return=1e9 \
  --set launch.progress=off > "$work/out.log" 2>&1 &
launcher=$!
wait_for_log "$run/logs/actor-0.log" "actor: " 60 || fail "the run did not start"
ep="ipc://$run/sockets/trainer-0-samples"
[ -S "$run/sockets/trainer-0-samples" ] || fail "no trainer sample socket in $run/sockets"
# the run's chunk length and the first actor index it does not have (its count and the slots
# for actors joining from other hosts, actors.join_max), from its resolved config
actors_key() { awk -v k="$1" '/^[a-z]/ {s = $1} s == "actors:" && $1 == k":" {print $2}' "$run/config.yaml"; }
T=$(actors_key chunk_len) count=$(actors_key count) join_max=$(actors_key join_max)
[ -n "$T" ] && [ -n "$count" ] && [ -n "$join_max" ] ||
  fail "no actors.chunk_len/count/join_max in $run/config.yaml"
actors=$((count + join_max))
# as actor 0 (its own credential: the run refuses a process without one, run_forged_identity.sh)
GB_TEST_KEYS="$run/keys" "$probe" forge "$ep" "$T" 4 "$actors" ||
  fail "the probe could not send everything, or the trainer kept the oversized frame's connection"
wait "$launcher"; status=$?
tail -3 "$work/out.log"
s="$run/summary.json"
[ -s "$s" ] || fail "no summary.json"
reason=$(json_get "$s" exit_reason) rejected=$(json_get "$s" rejected)
echo "exit $status, $reason, $rejected messages rejected"
[ "$status" -eq 0 ] || fail "exit status $status ($(json_get "$s" error))"
[ "$reason" = max_seconds ] || fail "exit_reason $reason"
[ "$rejected" -ge 3 ] || fail "the trainer counted $rejected rejected messages, expected >= 3"
[ "$(json_get "$s" train_steps)" -gt 0 ] || fail "no training"
grep -qE "refused a (sample from|chunk as) actor $actors" "$run/logs/trainer-0.log" ||
  fail "the trainer did not say it refused the forged chunk"
check_ledger "$s"
[ -z "$(run_processes "$run")" ] || fail "workers still running after the run ended"
echo "1 passed, 0 failed"
