# tests/launch/netns_lib.sh: "hosts" for the tests of runs over several machines (sourced after
# run_lib.sh): each host a network namespace with its own address on a private bridge, which
# lives in a namespace of its own, so nothing is added to this machine's network.
#   netns_hosts "h1 h2 ...": makes them ($net.1, $net.2, ... in that order; the namespaces are
#     $pre-h1, ...), removed on exit whatever happens, with every pid in $pids killed first;
#     skips the test (exit 77) where namespaces cannot be made (not root, no `ip netns`, no
#     CAP_NET_ADMIN)
#   on HOST CMD...: runs CMD in HOST's namespace as this (sub)shell's process itself (exec), so
#     that $! of `on ... &` is CMD's pid: signals reach it, not a shell around it. GEARBOX_HOST
#     is the host's name (the per_host relays' key; the namespaces share this machine's name)
#   netns_bytes HOST: "TX RX", the bytes HOST's eth0 has sent and received so far
#   netns_start_run NAME HOST [--set ...]: `gearbox run $config` on HOST over tcp on HOST's
#     address (pid in $launcher, log $work/NAME.log, run directory $work/NAME), its registry in
#     $registry and its keys folder in $run_keys once they exist
#   netns_join NAME HOST ROLE COUNT [ARGS...]: `gearbox join` on HOST (pid in $joined, log
#     $work/NAME.log), with its own copy of the run's server and join keys, as a user copies
#     them to another machine: the run sends each slot its own key pair (the joined host holds
#     no other worker's)
netns_hosts() {
  hosts=$1
  [ "$(id -u)" = 0 ] || { echo "SKIP: needs root (network namespaces)"; exit 77; }
  ip netns list > /dev/null 2>&1 || { echo "SKIP: no 'ip netns'"; exit 77; }
  pre=gbn$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
  net=10.$((RANDOM % 200 + 20)).$((RANDOM % 250))
  pids=()
  trap netns_cleanup EXIT
  netns_bridge "$hosts"
}

# netns_bridge "NAMES": the bridge namespace $pre-br and a namespace $pre-NAME per name on it
# ($net.1, $net.2, ... in that order), for $pre and $net the caller set; skips (exit 77) where
# namespaces cannot be made. Removing them is the caller's (netns_cleanup).
netns_bridge() {
  ip netns add "$pre-br" 2> "$work/netns.err" ||
    { echo "SKIP: cannot create network namespaces: $(cat "$work/netns.err")"; exit 77; }
  ip -n "$pre-br" link add br0 type bridge || fail "bridge"
  ip -n "$pre-br" link set br0 up
  ip -n "$pre-br" link set lo up
  local i=0 h ns
  for h in $1; do
    i=$((i + 1))
    ns=$pre-$h
    ip netns add "$ns" || fail "ip netns add $ns"
    ip -n "$pre-br" link add "p$i" type veth peer name eth0 netns "$ns" || fail "veth $h"
    ip -n "$pre-br" link set "p$i" master br0 up
    ip -n "$ns" addr add "$net.$i/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
  done
  echo "hosts: $(for h in $1; do printf '%s ' "$pre-$h"; done)on $net.0/24"
}

netns_cleanup() {
  local p h
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  for h in $hosts; do ip netns del "$pre-$h" 2>/dev/null; done
  ip netns del "$pre-br" 2>/dev/null
}

on() { local h=$1; shift; exec ip netns exec "$pre-$h" env GEARBOX_HOST="$h" "$@"; }

netns_bytes() {
  ip netns exec "$pre-$1" cat /sys/class/net/eth0/statistics/tx_bytes \
    /sys/class/net/eth0/statistics/rx_bytes | tr '\n' ' '
}

netns_start_run() {
  local name=$1 host=$2 i=0 h addr=""; shift 2
  for h in $hosts; do i=$((i + 1)); [ "$h" = "$host" ] && addr=$net.$i; done
  (on "$host" "$gearbox" run "$config" --run-dir "$work/$name" --set streams.transport=tcp \
    --set streams.interface="$addr" --set launch.progress=plain \
    --set experiment.metrics_interval_s=0.5 "$@" > "$work/$name.log" 2>&1) &
  launcher=$!; pids+=("$launcher")
  local end=$((SECONDS + 20))
  while [ ! -s "$work/$name/registry" ]; do
    [ $SECONDS -lt $end ] && kill -0 "$launcher" 2>/dev/null ||
      { tail -20 "$work/$name.log"; fail "$name: no registry endpoint in $work/$name/registry"; }
    sleep 0.1
  done
  registry=$(cat "$work/$name/registry")
  run_keys=$work/$name/keys
  end=$((SECONDS + 10))
  while [ ! -s "$run_keys/identities" ]; do
    [ $SECONDS -lt $end ] || fail "$name: no CURVE keys in $run_keys (tcp runs use CURVE)"
    sleep 0.1
  done
  echo "$name: registry $registry"
  case "$registry" in tcp://$addr:*) ;; *) fail "registry endpoint $registry is not on $addr" ;; esac
}

netns_join() {
  local name=$1 host=$2 role=$3 count=$4; shift 4
  rm -rf "$work/keys-$name"; mkdir -m 700 "$work/keys-$name"
  cp -p "$run_keys/server.key" "$run_keys/client.key" "$work/keys-$name/"
  (on "$host" "$gearbox" join "$registry" --role "$role" --count "$count" \
    --keys "$work/keys-$name" "$@" > "$work/$name.log" 2>&1) &
  joined=$!; pids+=("$joined")
}
