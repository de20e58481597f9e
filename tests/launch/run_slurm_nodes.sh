#!/usr/bin/env bash
# tests/launch/run_slurm_nodes.sh: `gearbox run --backend slurm` on a real Slurm cluster of
# several nodes on this one machine, with parameters.relay per_host (one relay step per node).
# The cluster, made from Debian's packages with every file in a temporary directory (nothing in
# /etc read or changed, this machine's network untouched):
#   - a private bridge in a network namespace of its own (as run_hosts.sh);
#   - "ctl": a network namespace with its own hostname (UTS namespace) where slurmctld runs and
#     from which every Slurm client and the launcher run (its address on the bridge is what
#     salloc/srun give the nodes to call back);
#   - NODES nodes n1..nN: each a network namespace (eth0 on the bridge, 10.x address) and a UTS
#     namespace whose hostname is its NodeName, running its own slurmd (slurmd finds its node by
#     its hostname); the steps slurmd starts are in that node's namespaces;
#   - munged in the root namespaces: its socket is a file in the temporary directory, which every
#     namespace shares.
# Every namespace has eth0 on the bridge: streams.interface=eth0 names an interface every "host"
# has, as it would on a cluster. Then:
#  (a) CartPole PPO with launch.slurm.nodes=NODES, parameters.relay=per_host, policy.count=NODES
#      and two trainers (trainer k on node k mod NODES, data-parallel over the network) solves,
#      though trainer 1 is SIGKILLed as the group forms (the two form it again; ledger exact);
#      squeue -s showed steps on more than one node, one relay step per node
#      (relay-<k> on the k-th node); every policy worker subscribed to its own node's relay;
#      the parameter service sent each version once per relay (its bytes per version = NODES x
#      the blob: its last log line and the relays'), with CURVE on (tcp's default);
#  (b) with two trainers, a relay step killed (SIGKILL to its worker): the watchdog starts it
#      again on the same node; trainer 1 killed: its step starts again on its node and the two
#      trainers form their group again; SIGTERM to the launcher then leaves nothing in squeue
#      and no `gearbox worker` in any namespace, and the sample ledger balances.
# Why the launcher runs in ctl and not in this machine's namespaces: salloc and srun give the
# nodes the address they reached slurmctld/slurmd from for their callbacks (job granted, step
# I/O); from ctl that is ctl's bridge address, which every node reaches. No /etc/hosts entry is
# needed: every node is named by its NodeAddr.
# Skipped (exit 77) where no cluster can be made: not root, no `ip netns`/unshare, or Slurm/munge
# not installed.
# usage: run_slurm_nodes.sh GEARBOX CONFIG WORK_DIR [NODES (2)]
set -u
gearbox=$(readlink -f "$1") config=$(readlink -f "$2") work=$3 nodes=${4:-2}
. "$(dirname "$0")/run_lib.sh"
. "$(dirname "$0")/slurm_lib.sh"
. "$(dirname "$0")/netns_lib.sh"

[ "$(id -u)" -eq 0 ] || { echo "SKIP: a test Slurm cluster needs root"; exit 77; }
for tool in munged munge slurmctld slurmd salloc srun squeue scancel sinfo scontrol ip unshare \
  nsenter; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "SKIP: $tool not installed (launch/install-deps.sh installs Slurm and munge)"; exit 77; }
done

rm -rf "$work"; mkdir -p "$work"
work=$(readlink -f "$work")
D=$(mktemp -d /tmp/gbslurmn.XXXXXX)
suffix=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
pre=gba$suffix
net=10.$((RANDOM % 200 + 20)).$((RANDOM % 250))
names="ctl"
for k in $(seq "$nodes"); do names+=" n$k"; done
pids=()
launcher=""
cleanup() {
  local rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] && [ -d "$D/log" ]; then
    echo "--- the cluster's logs (exit $rc) ---"; tail -n 15 "$D"/log/*.log
  fi
  if [ -n "$launcher" ] && kill -TERM "$launcher" 2>/dev/null; then wait "$launcher"; fi
  slurm_stop ctl
  for h in $names; do ip netns del "$pre-$h" 2>/dev/null; done
  ip netns del "$pre-br" 2>/dev/null
  rm -rf "$D"
}
trap cleanup EXIT
trap 'exit 1' TERM INT # the EXIT trap runs on a timeout's SIGTERM too

# ctl CMD...: runs CMD in the ctl namespace (where slurmctld listens), with this cluster's conf
ctl() { ip netns exec "$pre-ctl" env SLURM_CONF="$D/slurm.conf" "$@"; }

# --- the network: a bridge in a namespace of its own, eth0 of every host on it ----------------
netns_bridge "$names"

# --- munge -------------------------------------------------------------------------------------
slurm_start_munge

# --- slurm.conf: slurmctld on ctl's address, one NodeName per node namespace ------------------
port=$((20000 + RANDOM % 20000))
cat > "$D/slurm.conf" <<EOF
ClusterName=gbnodes
SlurmctldHost=gbctl($net.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SrunPortRange=$((port + 2))-$((port + 200))
EOF
slurm_conf_common "%n" >> "$D/slurm.conf"
i=2
for k in $(seq "$nodes"); do
  echo "NodeName=gbn$k NodeAddr=$net.$i CPUs=8 State=UNKNOWN" >> "$D/slurm.conf"
  mkdir -p "$D/spool/gbn$k"
  i=$((i + 1))
done
echo "PartitionName=gbnodes Nodes=ALL Default=YES MaxTime=INFINITE State=UP" >> "$D/slurm.conf"

nsenter --net="/run/netns/$pre-ctl" unshare --uts sh -c \
  "hostname gbctl; SLURM_CONF=$D/slurm.conf exec slurmctld -D -i" > "$D/log/slurmctld.out" 2>&1 &
pids+=($!)
for k in $(seq "$nodes"); do
  nsenter --net="/run/netns/$pre-n$k" unshare --uts sh -c \
    "hostname gbn$k; SLURM_CONF=$D/slurm.conf exec slurmd -D" > "$D/log/slurmd-gbn$k.out" 2>&1 &
  pids+=($!)
done
up=0
for _ in $(seq 100); do
  [ "$(ctl sinfo -h -o '%D %t' 2>/dev/null)" = "$nodes idle" ] && { up=1; break; }
  sleep 0.2
done
[ $up = 1 ] || { ctl sinfo; tail -n 20 "$D"/log/*; fail "the test cluster did not come up"; }
echo "cluster up: $(ctl sinfo -h -N -o '%N %t' | tr '\n' ' ')"

no_jobs() { # waits up to 10 s for squeue to be empty
  for _ in $(seq 50); do [ -z "$(ctl squeue -h -o %A)" ] && return 0; sleep 0.2; done
  ctl squeue; return 1
}
# a run's `gearbox worker` processes, in whatever namespace (they all share this pid namespace)
workers_of() { pgrep -f -- "^$gearbox worker .*--run-dir $1" || true; }
no_workers() {
  for _ in $(seq 50); do [ -z "$(workers_of "$1")" ] && return 0; sleep 0.2; done
  ps -o pid,args -p "$(workers_of "$1" | tr '\n' ,)"; return 1
}
# the launcher runs in ctl (its address on the bridge is where every node's workers reach the
# registry); the subshell, ip netns exec and env exec it, so $! is the launcher itself
launch() { # only as `launch ... &`: the background subshell becomes the launcher (exec)
  local dir=$1; shift
  exec ip netns exec "$pre-ctl" env SLURM_CONF="$D/slurm.conf" "$gearbox" run "$config" \
    --backend slurm --run-dir "$dir" --set streams.transport=tcp --set streams.interface=eth0 \
    --set launch.slurm.nodes="$nodes" --set parameters.relay=per_host \
    --set policy.count="$nodes" "$@"
}
node_of() { echo "gbn$(($1 + 1))"; } # node k of the allocation (Slurm lists gbn1..gbnN in order)

# --- (a) PPO solves over NODES nodes, one relay step on each --------------------------------------
start=$SECONDS
launch "$work/solve" --set launch.progress=plain --set trainer.count=2 \
  --set trainer.replay.min_size=16 --set trainer.replay.capacity=16 \
  --set trainer.checksum_every=4 > "$work/solve.log" 2>&1 &
launcher=$!
seen="" killed=""
while kill -0 "$launcher" 2>/dev/null; do
  seen+=$(ctl squeue -s -h -o '%j %N' 2>/dev/null)$'\n'
  # trainer 1 SIGKILLed as soon as the group has formed: its step comes back on its node, the
  # two trainers form the group again, and the run still solves
  if [ -z "$killed" ] && grep -q "rank 1 of 2 trainers" "$work/solve/logs/trainer-1.log" 2>/dev/null
  then
    killed=$(pgrep -f -- "^$gearbox worker --role trainer --index 1 --run-dir $work/solve" | head -1)
    [ -n "$killed" ] && kill -KILL "$killed"
  fi
  sleep 0.2
done
wait "$launcher"; status=$?
launcher=""
load=$(cut -d' ' -f1-3 /proc/loadavg)
echo "(a) launcher exited with $status after $((SECONDS - start)) s (load average $load)"
tail -n 3 "$work/solve.log"
[ "$status" -eq 0 ] || { cat "$work/solve.log"; fail "(a) the slurm run exited $status"; }
s=$work/solve/summary.json
[ "$(json_get "$s" solved)" = True ] || fail "(a) not solved: $(cat "$s")"
[ "$(json_get "$s" mode)" = slurm ] || fail "(a) summary.json mode $(json_get "$s" mode)"
echo "(a) solved: $(json_get "$s" env_steps) env steps in $(json_get "$s" wall_seconds) s" \
  "of run time"
[ -n "$killed" ] || fail "(a) trainer 1 was never killed"
grep -q "formed again as generation 1" "$work/solve/logs/trainer-0.log" ||
  fail "(a) the trainers' group did not form again after trainer 1 was killed"
echo "(a) trainer 1 killed: $(grep -o "formed again as generation 1 [0-9.]* s after it failed" \
  "$work/solve/logs/trainer-0.log")"
check_crash_ledger "$s"
steps=$(sort -u <<< "$seen" | grep -v '^$')
echo "(a) steps seen in squeue -s:" $(tr '\n' ';' <<< "$steps")
used=$(awk '$2 ~ /^gbn/ {print $2}' <<< "$steps" | sort -u | wc -l)
[ "$used" -gt 1 ] || fail "(a) every step ran on one node: $steps"
logs=$work/solve/logs
for k in $(seq 0 $((nodes - 1))); do
  node=$(node_of "$k")
  grep -qx "relay-$k $node" <<< "$steps" || fail "(a) squeue -s never showed relay-$k on $node"
  grep -qx "policy-$k $node" <<< "$steps" || fail "(a) squeue -s never showed policy-$k on $node"
  grep -q "relay: serving host '$node'" "$logs/relay-$k.log" ||
    fail "(a) relay-$k did not serve $node: $(grep relay: "$logs/relay-$k.log")"
  grep -q "policy: parameters from relay/$node/pub" "$logs/policy-$k.log" ||
    fail "(a) policy-$k did not subscribe to $node's relay:" \
      "$(grep 'parameters from' "$logs/policy-$k.log")"
done
# the two trainers: trainer k on node k (trainer i on node i mod nodes), each with its
# collectives on its own node's address, met through a file store on the shared run directory,
# and their replicas stayed equal
for k in 0 1; do
  node=$(node_of $((k % nodes)))
  grep -qx "trainer-$k $node" <<< "$steps" || fail "(a) squeue -s never showed trainer-$k on $node"
  grep -q "rank $k of 2 trainers (file rendezvous at .*, collectives on $net\.$((k % nodes + 2))," \
    "$logs/trainer-$k.log" ||
    fail "(a) trainer-$k's collectives not on $node's address: $(grep rank "$logs/trainer-$k.log")"
  # the checks both made since the group formed again (the killed one may have missed one)
  sed -n "/rank $k of 2 trainers.*generation 1,/,\$p" "$logs/trainer-$k.log" |
    grep -o "step [0-9]* parameter checksum [0-9a-f]*" > "$work/sums-$k"
done
[ "$(wc -l < "$work/sums-0")" -ge 2 ] && cmp -s "$work/sums-0" "$work/sums-1" ||
  fail "(a) the trainers' parameter checksums differ or are missing"
echo "(a) trainers on $(node_of 0) and $(node_of $((1 % nodes))): parameters equal at" \
  "$(wc -l < "$work/sums-0") checks"
# each version left the parameter service once a relay: its subscribers were the NODES relays
# (every policy worker took its node's relay), and its bytes per version are NODES x the blob a
# relay sends its one policy worker per version
line=$(grep "params: stopping" "$logs/params-0.log") ||
  fail "(a) the parameter service did not stop cleanly"
echo "(a) $line"
pat='.*: \([0-9]*\) versions, \([0-9]*\) parameter bytes sent to at most \([0-9]*\) subscribers.*'
read -r pv pbytes peers < <(sed -n "s/$pat/\\1 \\2 \\3/p" <<< "$line")
[ "${peers:-0}" -eq "$nodes" ] ||
  fail "(a) the parameter service had ${peers:-?} subscribers, not the $nodes relays"
rbytes=0 rversions=0
for k in $(seq 0 $((nodes - 1))); do
  l=$(grep "relay: stopping" "$logs/relay-$k.log") || fail "(a) relay-$k did not stop cleanly"
  echo "(a) relay-$k: $l"
  rversions=$((rversions + $(sed -n 's/.*: \([0-9]*\) versions relayed.*/\1/p' <<< "$l")))
  rbytes=$((rbytes + $(sed -n 's/.* \([0-9]*\) parameter bytes sent to this host.*/\1/p' <<< "$l")))
done
python3 - "$nodes" "$pv" "$pbytes" "$rversions" "$rbytes" <<'PY' || fail "(a) bytes per version"
import sys
nodes, pv, pbytes, rv, rbytes = map(int, sys.argv[1:])
assert pv > 1 and rv > 1, (pv, rv)
blob = rbytes / rv                # what a relay sends its one subscriber per version
per_version = pbytes / pv         # what the service sent per version
ratio = per_version / blob
print(f"(a) service: {per_version:.0f} bytes/version over {pv} versions; relays: {blob:.0f} "
      f"bytes/version to one policy worker each; ratio {ratio:.2f} (nodes {nodes})")
assert nodes - 0.5 <= ratio <= nodes + 0.5, ratio
PY
no_jobs || fail "(a) the job is still in squeue after the run"
no_workers "$work/solve" || fail "(a) workers left after the run"

# --- (b) a relay killed comes back on its node; then SIGTERM to the launcher ------------------
last=$((nodes - 1)) node=$(node_of $((nodes - 1)))
launch "$work/term" --set experiment.target_return=1e9 --set experiment.max_env_steps=0 \
  --set experiment.max_seconds=120 --set launch.progress=off --set trainer.count=2 \
  --set trainer.replay.min_size=16 --set trainer.replay.capacity=16 \
  --set launch.heartbeat_timeout_s=5 > "$work/term.log" 2>&1 &
launcher=$!
rlog=$work/term/logs/relay-$last.log
wait_for_log "$rlog" "relay: serving host" 60 ||
  { cat "$work/term.log"; fail "(b) the run did not start"; }
wait_for_log "$work/term/logs/actor-0.log" "actor: " 60 || fail "(b) actor-0 did not start"
victim=$(pgrep -f -- "^$gearbox worker --role relay --index $last --run-dir $work/term" | head -1)
[ -n "$victim" ] || fail "(b) relay-$last's worker process not found"
kill -KILL "$victim"
wait_for_log "$work/term/logs/launcher.log" "worker relay-$last .*restarted it" 30 ||
  fail "(b) relay-$last was not restarted"
for _ in $(seq 100); do
  [ "$(grep -c "relay: serving host '$node'" "$rlog")" -ge 2 ] && break; sleep 0.2
done
[ "$(grep -c "relay: serving host '$node'" "$rlog")" -ge 2 ] ||
  fail "(b) the restarted relay-$last does not serve $node: $(grep 'relay:' "$rlog")"
where=$(ctl squeue -s -h -o '%j %N' | awk -v j="relay-$last" '$1 == j {print $2}')
echo "(b) relay-$last killed and restarted: its step runs on ${where:-?}"
[ "$where" = "$node" ] || fail "(b) the restarted relay-$last runs on '$where', not $node"
# trainer 1 (on the second node) killed: its step is started again there and the two trainers
# form their group again (generation 1) over the network
tnode=$(node_of $((1 % nodes)))
tlog0=$work/term/logs/trainer-0.log
wait_for_log "$tlog0" "rank 0 of 2 trainers" 60 || fail "(b) the trainers did not meet"
victim=$(pgrep -f -- "^$gearbox worker --role trainer --index 1 --run-dir $work/term" | head -1)
[ -n "$victim" ] || fail "(b) trainer-1's worker process not found"
kill -KILL "$victim"
wait_for_log "$tlog0" "formed again as generation 1" 30 ||
  { tail -5 "$tlog0"; fail "(b) the trainers' group did not form again"; }
where=$(ctl squeue -s -h -o '%j %N' | awk '$1 == "trainer-1" {print $2}')
echo "(b) trainer-1 killed: $(grep -o "formed again as generation 1 [0-9.]* s after it failed" \
  "$tlog0"); its step runs on ${where:-?} again"
[ "$where" = "$tnode" ] || fail "(b) the restarted trainer-1 runs on '$where', not $tnode"
[ -n "$(workers_of "$work/term")" ] || fail "(b) no workers found"
t=$SECONDS
kill -TERM "$launcher"
wait "$launcher"; status=$?
launcher=""
echo "(b) launcher exited with $status $((SECONDS - t)) s after SIGTERM"
[ "$status" -ne 0 ] || fail "(b) an interrupted run exited 0"
[ "$(json_get "$work/term/summary.json" exit_reason)" = interrupted ] || fail "(b) exit_reason"
check_crash_ledger "$work/term/summary.json"
no_jobs || fail "(b) the job is still in squeue after SIGTERM"
no_workers "$work/term" || fail "(b) workers left after SIGTERM"

echo "2 passed, 0 failed"
