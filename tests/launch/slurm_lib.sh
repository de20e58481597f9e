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

# Makes and starts a one-node cluster NAME (partition NAME, 16 CPUs) on this host: munged, the
# slurm.conf in $D (SLURM_CONF exported), slurmctld and slurmd; waits until the node is idle.
# usage: slurm_start_one_node NAME
slurm_start_one_node() {
  local name=$1 node port up=0
  mkdir -p "$D/spool"
  slurm_start_munge
  node=$(hostname -s)
  port=$((20000 + RANDOM % 20000))
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
  pids+=($!)
  slurmd -D > "$D/log/slurmd.out" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do
    [ "$(sinfo -h -N -o %t 2>/dev/null)" = idle ] && { up=1; break; }
    sleep 0.2
  done
  [ $up = 1 ] || { tail -n 20 "$D"/log/*; fail "the test cluster did not come up"; }
}
