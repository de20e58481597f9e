#!/usr/bin/env bash
# tests/launch/run_trainer_hosts.sh: two data-parallel trainers on two "hosts" (network
# namespaces on a private bridge, netns_lib.sh): the launcher on h1 starts trainer 0, the
# parameter service, the policy worker and the actors (trainer.local=1); trainer 1 joins from h2
# with `gearbox join --role trainer`, knowing nothing but the registry: it finds trainer 0's
# TCP store there (trainer.rendezvous.store registry) and its collectives run on h2's address.
#   run P: CartPole PPO over the two trainers solves (the config's 475);
#   run D: CartPole DQN with prioritized replay and global selection (one weighted draw over
#          both shards, rows gathered by their owners and sent over the network) learns to the
#          target its settings name (DQN_SETTINGS: run_dqn_2trainers' own, from CMake: a mean
#          return of 150, random play 22, in larger steps: two DQN trainers take about 4 ms a
#          step on 2 cores; 120 took 57 s in one CI run with the smaller steps those settings
#          had before); what trainer 1's all-to-alls sent and received (agreement, selection,
#          rows, priorities, and the gradients' small all-reduces, which go as one all-to-all)
#          must have crossed h2's veth, and both are printed beside it; and the joined
#          trainer's worker is SIGKILLed mid-run: gearbox join starts it again (the slot's next
#          incarnation, asked for as that trainer), the two form their group again and the run
#          solves, its ledger exact (lost 0).
# Both: the replicas' parameter checksums agree, the sample ledger is exact, the joined trainer
# keeps its checkpoint in its own folder on h2, and the launcher started no trainer 1.
# usage: run_trainer_hosts.sh GEARBOX PPO_CONFIG DQN_CONFIG WORK_DIR [DQN_SETTINGS...]  (root
# and `ip netns` needed, else skipped: 77; DQN_SETTINGS: run D's --set arguments)
set -u
gearbox=$1 ppo=$2 dqn=$3 work=$4
shift 4
. "$(dirname "$0")/run_lib.sh"
. "$(dirname "$0")/netns_lib.sh"
rm -rf "$work"; mkdir -p "$work"
netns_hosts "h1 h2"

# two_hosts NAME CONFIG [--set ...]: the run with trainer 1 joined from h2; waits for both ends
# and checks what every run must show. Sets $s (its summary) and $tlog (the joined trainer's log).
two_hosts() {
  local name=$1
  config=$2
  shift 2
  netns_start_run "$name" h1 --set trainer.count=2 --set trainer.local=1 \
    --set trainer.rendezvous.store=registry --set trainer.checksum_every=4 "$@"
  local tx0 rx0 tx1 rx1
  read -r tx0 rx0 < <(netns_bytes h2)
  netns_join "${name}_trainer" h2 trainer 1 --dir "$work/${name}_h2"
  local join_pid=$joined status join_status
  [ -z "${KILL_JOINED:-}" ] || kill_joined "$name" "$join_pid"
  wait "$launcher"; status=$?
  wait "$join_pid"; join_status=$?
  read -r tx1 rx1 < <(netns_bytes h2)
  tx=$((tx1 - tx0)) rx=$((rx1 - rx0))
  tail -3 "$work/$name.log"
  s=$work/$name/summary.json tlog=$work/${name}_trainer.log
  [ -s "$s" ] || fail "run $name: no summary.json"
  echo "run $name: exit $status, $(json_get "$s" exit_reason) after $(json_get "$s" env_steps)" \
       "env steps, mean return $(json_get "$s" episode_return_mean); gearbox join exited" \
       "$join_status"
  [ "$status" = 0 ] && [ "$(json_get "$s" exit_reason)" = solved ] || fail "run $name did not solve"
  [ "$join_status" = 0 ] || fail "run $name: the joined trainer failed: $(tail -5 "$tlog")"
  [ "$(json_get "$s" joined)" = 1 ] || fail "run $name: joined $(json_get "$s" joined), not 1"
  if [ -n "${KILL_JOINED:-}" ]; then check_crash_ledger "$s"; else check_ledger "$s"; fi
  grep -q "rank 1 of 2 trainers (registry rendezvous at $net.1, collectives on $net.2" "$tlog" ||
    fail "run $name: trainer 1 did not meet trainer 0's store on h1 from h2"
  grep -q "rank 0 of 2 trainers (registry rendezvous at $net.1, collectives on $net.1" \
    "$work/$name/logs/trainer-0.log" || fail "run $name: trainer 0 not on h1's address"
  [ ! -e "$work/$name/logs/trainer-1.log" ] || fail "run $name: the launcher started trainer 1"
  [ -s "$work/${name}_h2/checkpoints/trainer-1.checkpoint" ] ||
    fail "run $name: no checkpoint of trainer 1 in its folder on h2"
  # the checks both made since the group last formed (a killed trainer may have missed the last
  # one before it died)
  local since="generation ${KILL_JOINED:+1}"
  sed -n "/rank 0 of 2 trainers.*$since/,\$p" "$work/$name/logs/trainer-0.log" |
    grep -o "step [0-9]* parameter checksum [0-9a-f]*" > "$work/$name.sums0"
  sed -n "/rank 1 of 2 trainers.*$since/,\$p" "$tlog" |
    grep -o "step [0-9]* parameter checksum [0-9a-f]*" > "$work/$name.sums1"
  [ "$(wc -l < "$work/$name.sums0")" -ge 2 ] && cmp -s "$work/$name.sums0" "$work/$name.sums1" ||
    fail "run $name: the two trainers' parameter checksums differ or are missing"
  echo "run $name: parameters equal on both hosts at $(wc -l < "$work/$name.sums0") checks;" \
       "h2's eth0 sent $tx bytes, received $rx"
}

# kill_joined NAME JOIN_PID: SIGKILLs the joined trainer's worker (a child of gearbox join on
# h2) once the trainers train; gearbox join starts it again as the slot's next incarnation and
# the two trainers form their group again as generation 1 within 2x the heartbeat timeout
kill_joined() {
  local t0 pid took
  wait_for_log "$work/$1/logs/trainer-0.log" "parameter checksum" 120 ||
    fail "run $1: the trainers never trained"
  pid=$(pgrep -P "$2" | head -1)
  [ -n "$pid" ] || fail "run $1: no worker under gearbox join"
  t0=$(date +%s.%N)
  kill -KILL "$pid"
  wait_for_log "$work/$1/logs/trainer-0.log" "formed again as generation 1" 30 ||
    fail "run $1: the group did not form again after the joined trainer was killed"
  took=$(python3 -c "import time; print(f'{time.time() - $t0:.2f}')")
  grep -q "trainer 1 started again (incarnation 1" "$work/${1}_trainer.log" ||
    fail "run $1: gearbox join did not start trainer 1 again"
  echo "run $1: the joined trainer killed on h2; the group worked again $took s later"
  python3 -c "import sys; sys.exit(0 if $took < 2 * $heartbeat else 1)" ||
    fail "run $1: $took s to form the group again (2x heartbeat: $((2 * heartbeat)) s)"
}
heartbeat=5

two_hosts p "$ppo" --set experiment.max_seconds=150 --set trainer.replay.min_size=16 \
  --set trainer.replay.capacity=16

KILL_JOINED=1 two_hosts d "$dqn" --set launch.heartbeat_timeout_s=$heartbeat \
  --set experiment.max_seconds=380 "$@"
read -r sent received < <(sed -n \
  's/.*all-to-all traffic .*: \([0-9]*\) bytes sent, \([0-9]*\) received.*/\1 \2/p' "$tlog")
[ -n "${sent:-}" ] && [ "$sent" -gt 0 ] && [ "$received" -gt 0 ] ||
  fail "run d: the joined trainer logged no all-to-all traffic: $(grep -c traffic "$tlog")"
echo "run d: trainer 1's all-to-alls (the step's agreement, selection, rows, priorities and the" \
     "gradients' small all-reduces) sent $sent bytes and received $received; h2's veth" \
     "carried $tx out ($(( 100 * sent / tx ))% of it) and $rx in ($(( 100 * received / rx ))%;" \
     "the rest: chunks from h1's actors, Gloo's framing, reports)"
[ "$tx" -ge "$sent" ] && [ "$rx" -ge "$received" ] ||
  fail "run d: the veth carried less than the trainers' all-to-alls (did they cross it?)"
echo "OK"
