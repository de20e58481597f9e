#!/usr/bin/env bash
# tests/runtime/streams/relay_hosts.sh: parameter relays across 3 "hosts" (network namespaces on a
# private bridge, tcp over veth): 16 subscribers a host, first through one relay a host
# (parameters.relay: per_host), then straight from the service, in the same run. Checks that
# through relays the service sends each version 3 times (its own count and the kernel's count of
# its veth's bytes), straight 48 times, and that every subscriber applies every version in order
# with the right bytes. Needs root and iproute2: skipped (77) otherwise.
# usage: relay_hosts.sh RELAY_PROBE
set -u
probe=$1
if [ "$(id -u)" != 0 ] || ! command -v ip > /dev/null || ! ip netns list > /dev/null 2>&1; then
  echo "SKIP: needs root and ip netns"; exit 77
fi
BYTES=262144 VERSIONS=20 PER_HOST=16
sfx=$(printf '%04x' $((RANDOM % 65536)))
pre=gbr$sfx
sw=$pre-sw            # the namespace holding the bridge: nothing touches the root namespace
nets=("$pre-s" "$pre-h1" "$pre-h2" "$pre-h3")
net="10.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1))"
addr=("$net.1" "$net.11" "$net.12" "$net.13")
dir=$(mktemp -d /tmp/gbr-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null; done
  wait 2> /dev/null
  for n in "${nets[@]}" "$sw"; do ip netns del "$n" 2> /dev/null; done
  rm -rf "$dir"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$dir"/*.log; do [ -s "$f" ] && { echo "== $f"; tail -5 "$f"; }; done
  exit 1
}

ip netns add "$sw" || fail "ip netns add"
ip -n "$sw" link add br0 type bridge && ip -n "$sw" link set br0 up && ip -n "$sw" link set lo up \
  || fail "bridge"
for i in 0 1 2 3; do
  n=${nets[$i]}
  ip netns add "$n" || fail "ip netns add $n"
  ip -n "$n" link set lo up
  ip link add "${pre}v$i" type veth peer name "${pre}p$i" || fail "veth"
  ip link set "${pre}v$i" netns "$n" && ip link set "${pre}p$i" netns "$sw" || fail "veth move"
  ip -n "$n" link set "${pre}v$i" name eth0
  ip -n "$n" addr add "${addr[$i]}/24" dev eth0
  ip -n "$n" link set eth0 up
  ip -n "$sw" link set "${pre}p$i" master br0
  ip -n "$sw" link set "${pre}p$i" up
done

# wait_for FILE...: until every file exists (bounded; a process that died is reported).
wait_for() {
  for _ in $(seq 600); do
    local all=1
    for f in "$@"; do [ -e "$dir/$f" ] || all=0; done
    [ $all = 1 ] && return 0
    for p in "${pids[@]}"; do
      kill -0 "$p" 2> /dev/null || fail "a probe process died waiting for $*"
    done
    sleep 0.1
  done
  fail "timed out waiting for $*"
}

# phase MODE: relay (3 relays, 16 subscribers each) or direct (48 subscribers on the service).
phase() {
  local mode=$1 peers
  rm -f "$dir"/*.ready "$dir"/*.stats "$dir"/go "$dir"/first "$dir"/subs-*
  pids=()
  [ "$mode" = relay ] && peers=3 || peers=$((3 * PER_HOST))
  ip netns exec "${nets[0]}" "$probe" service "$dir" "${addr[0]}" $peers $BYTES $VERSIONS eth0 \
    2> "$dir/service-$mode.log" &
  local svc=$!
  pids+=($svc)
  local relays=() subs=() ready=(service.ready)
  for i in 1 2 3; do
    if [ "$mode" = relay ]; then
      ip netns exec "${nets[$i]}" "$probe" relay "$dir" h$i "${addr[0]}" "${addr[$i]}" $PER_HOST \
        2> "$dir/relay-h$i.log" &
      relays+=($!); pids+=($!)
      ready+=(relay-h$i.ready)
      ip netns exec "${nets[$i]}" "$probe" subs "$dir" h$i "${addr[$i]}" 7201 $PER_HOST $BYTES \
        $VERSIONS 2> "$dir/subs-h$i-$mode.log" &
    else
      ip netns exec "${nets[$i]}" "$probe" subs "$dir" h$i "${addr[0]}" 7102 $PER_HOST $BYTES \
        $VERSIONS 2> "$dir/subs-h$i-$mode.log" &
    fi
    subs+=($!); pids+=($!)
    ready+=(subs-h$i.ready)
  done
  wait_for "${ready[@]}"
  touch "$dir/go"
  local bad=0
  for p in "${subs[@]}"; do wait "$p" || bad=1; done
  cat "$dir"/subs-h? > "$dir/subs-$mode.txt" 2> /dev/null
  for p in "${relays[@]}" $svc; do kill -TERM "$p"; wait "$p"; done
  pids=()
  if [ $bad != 0 ]; then
    grep -v ' ok ' "$dir/subs-$mode.txt" | head -5
    fail "$mode: a subscriber missed a version or saw one out of order"
  fi
  [ "$(grep -c ' ok applied='$VERSIONS' ' "$dir/subs-$mode.txt")" = $((3 * PER_HOST)) ] \
    || fail "$mode: not every one of $((3 * PER_HOST)) subscribers reported ok"
  read -r versions sent tx _ fetches < "$dir/service.stats"
  local x_sent x_tx
  x_sent=$(python3 -c "print(round($sent / $VERSIONS / $BYTES, 2))")
  x_tx=$(python3 -c "print(round($tx / $VERSIONS / $BYTES, 2))")
  echo "$mode: service: $versions versions, sent $sent parameter bytes ($x_sent x the blob a" \
       "version), veth tx $tx bytes ($x_tx x), $fetches fetches"
  eval "${mode}_sent=$sent ${mode}_tx=$tx"
  if [ "$mode" = relay ]; then
    for i in 1 2 3; do
      echo "relay h$i (forwarded sent fetched applied): $(cat "$dir/relay-h$i.stats")"
    done
  fi
  echo "$mode: every one of $((3 * PER_HOST)) subscribers applied each of the $VERSIONS" \
       "versions in order, bytes checked"
}

phase relay
phase direct
python3 - "$relay_sent" "$relay_tx" "$direct_sent" "$direct_tx" $BYTES $VERSIONS <<'PY' || fail "bytes"
import sys
rs, rt, ds, dt, blob, n = map(int, sys.argv[1:])
per = lambda x: x / n / blob
# the service's own count: exactly one copy of each chunk per relay (or subscriber), no fetch
assert rs == 3 * blob * n, "through relays the service counted %.2f x the blob a version, not 3" % per(rs)
assert ds == 48 * blob * n, "straight the service counted %.2f x the blob a version, not 48" % per(ds)
# the kernel's: what left the service's host; headers (ZMTP, TCP/IP) and requests add a little
assert 3 <= per(rt) < 3.3, "through relays the service's veth sent %.2f x the blob a version" % per(rt)
assert 48 <= per(dt) < 48 * 1.1, "straight the service's veth sent %.2f x the blob a version" % per(dt)
print("bytes the service sent a version: %.2f x the blob through 3 relays, %.2f x straight to 48 (kernel: %.2f x, %.2f x)" % (per(rs), per(ds), per(rt), per(dt)))
PY
echo "1 passed, 0 failed"
