# tests/launch/slurm_lib.sh: what the test Slurm clusters share (run_slurm.sh and
# python/test_sweep_slurm.sh: one node, slurm_start_one_node; run_slurm_nodes.sh: nodes that
# are namespaces): munged with its own key and socket in the
# cluster's folder, and the slurm.conf settings both use. Sourced after run_lib.sh, with D (the
# cluster's folder, removed by the caller) and pids (the daemons the caller stops) set.

# Starts munged on $D/munge/socket with a fresh key and waits until it answers.
slurm_start_munge() {
  # munged wants its key private and every folder above its socket searchable by all
  chmod 755 "$D"
  mkdir -p "$D/munge" "$D/key" "$D/state" "$D/log"
  chmod 700 "$D/key"
  head -c 1024 /dev/urandom > "$D/key/munge.key"; chmod 400 "$D/key/munge.key"
  munged --foreground --key-file="$D/key/munge.key" --socket="$D/munge/socket" \
    --pid-file="$D/munge/pid" --seed-file="$D/munge/seed" --log-file="$D/munge/log" \
    > "$D/munge/out" 2>&1 &
  pids+=($!)
  for _ in $(seq 50); do [ -S "$D/munge/socket" ] && break; sleep 0.1; done
  munge -S "$D/munge/socket" -n | unmunge -S "$D/munge/socket" >/dev/null ||
    fail "munged does not answer on $D/munge/socket"
}

# Prints the slurm.conf lines every test cluster has: munge authentication on that socket,
# root daemons, files in $D (SUFFIX, e.g. "%n", tells several slurmd apart), no accounting, no
# cgroups, cores as the consumable, nodes back in service by themselves.
# usage: slurm_conf_common [SUFFIX]
slurm_conf_common() {
  local sfx=${1:-} dash=${1:+-}
  cat <<EOF
AuthType=auth/munge
AuthInfo=socket=$D/munge/socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool${sfx:+/$sfx}
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd$dash$sfx.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd$dash$sfx.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=5
EOF
}

# Prints a port P such that P and P + 1 are free now (slurmctld's and slurmd's): a port picked
# at random once collided with another test's socket, and slurmctld died at its start.
slurm_free_ports() {
  python3 - <<'PY'
import random, socket
for _ in range(500):
    p, held = random.randrange(20000, 40000), []
    try:
        for q in (p, p + 1):
            s = socket.socket()
            held.append(s)
            s.bind(("", q))
        print(p)
        break
    except OSError:
        pass
    finally:
        for s in held:
            s.close()
PY
}

# Makes and starts a one-node cluster NAME (partition NAME, 16 CPUs) on this host: munged, the
# slurm.conf in $D (SLURM_CONF exported), slurmctld and slurmd; waits until the node is idle, at
# most 40 s, and fails at once with the logs when slurmctld dies first.
# usage: slurm_start_one_node NAME
slurm_start_one_node() {
  local name=$1 node port ctld up=0
  mkdir -p "$D/spool"
  slurm_start_munge
  node=$(hostname -s)
  port=$(slurm_free_ports)
  [ -n "$port" ] || fail "no two free ports for slurmctld and slurmd"
  cat > "$D/slurm.conf" <<EOF
ClusterName=$name
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
EOF
  slurm_conf_common >> "$D/slurm.conf"
  cat >> "$D/slurm.conf" <<EOF
NodeName=$node NodeAddr=127.0.0.1 CPUs=16 State=UNKNOWN
PartitionName=$name Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
  export SLURM_CONF=$D/slurm.conf
  slurmctld -D -i > "$D/log/slurmctld.out" 2>&1 &
  ctld=$!
  pids+=($ctld)
  slurmd -D > "$D/log/slurmd.out" 2>&1 &
  pids+=($!)
  local end=$((SECONDS + 40))
  while [ $SECONDS -lt $end ] && kill -0 "$ctld" 2>/dev/null; do
    [ "$(timeout 5 sinfo -h -N -o %t 2>/dev/null)" = idle ] && { up=1; break; }
    sleep 0.2
  done
  [ $up = 1 ] || { tail -n 20 "$D"/log/*; fail "the test cluster did not come up"; }
}

# A test's cleanup of the cluster it started: cancels the jobs a failed check left (while slurmd
# can still kill their steps) and waits up to 10 s for them to go, then stops the daemons in
# pids. usage: slurm_stop [WRAPPER] (a command that runs squeue and scancel against the test's
# cluster, as run_slurm_nodes.sh's ctl; without it, the cluster of $SLURM_CONF)
slurm_stop() {
  local run=${1:-} ids
  if { [ -n "$run" ] || [ -n "${SLURM_CONF:-}" ]; } && [ -s "$D/slurmctld.pid" ]; then
    ids=$($run squeue -h -o %A 2>/dev/null)
    [ -z "$ids" ] || $run scancel $ids 2>/dev/null
    for _ in $(seq 50); do [ -z "$($run squeue -h -o %A 2>/dev/null)" ] && break; sleep 0.2; done
  fi
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
}
