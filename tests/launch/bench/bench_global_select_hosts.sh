#!/usr/bin/env bash
# tests/launch/bench/bench_global_select_hosts.sh: `gearbox bench replay --case global_select` on
# one host (4 forked ranks, Gloo on 127.0.0.1) beside the same 4 ranks as 2 "hosts" x 2 ranks
# (network namespaces on a private bridge, ../netns_lib.sh: ranks 0 and 1 in h1, 2 and 3 in h2,
# each started as a user would on its machine, rank 0's TCPStore on h1's address): prints both
# p50s of each part side by side with their ratio. Asserts only that both ran and produced
# numbers (no timing: on one machine the veth is no real network).
# usage: bench_global_select_hosts.sh GEARBOX WORK_DIR [OPTIONS...]  (OPTIONS for both runs,
# default --quick; root and `ip netns` needed, else skipped: 77)
set -u
gearbox=$1 work=$2
shift 2
[ $# -gt 0 ] || set -- --quick
. "$(dirname "$0")/../run_lib.sh"
. "$(dirname "$0")/../netns_lib.sh"
rm -rf "$work"; mkdir -p "$work"
netns_hosts "h1 h2"

"$gearbox" bench replay --case global_select --json "$@" > "$work/one.json" 2> "$work/one.err"
status=$?
[ $status = 0 ] || { tail -5 "$work/one.err"; fail "the one-host run exited with $status"; }

# rank R [OPTIONS...]: rank R of 4 in its host's namespace, its Gloo device on that host's address
rank() {
  local r=$1 host=h$(($1 / 2 + 1)) addr=$net.$(($1 / 2 + 1))
  shift
  (on "$host" "$gearbox" bench replay --case global_select --json --ranks 4 --rank "$r" \
    --store "tcp://$net.1:29500" --interface "$addr" "$@" > "$work/rank$r.out" \
    2> "$work/rank$r.err") &
  rank_pids+=($!); pids+=($!)
}
rank_pids=()
read -r tx0 rx0 < <(netns_bytes h2)
for r in 0 1 2 3; do rank "$r" "$@"; done
for r in 0 1 2 3; do
  wait "${rank_pids[$r]}"; status=$?
  [ $status = 0 ] || { tail -5 "$work/rank$r.err"; fail "rank $r exited with $status"; }
done
for r in 1 2 3; do
  [ ! -s "$work/rank$r.out" ] || fail "rank $r printed results (only rank 0 prints)"
done
read -r tx1 rx1 < <(netns_bytes h2)
echo "h2's veth over the tcp run: sent $((tx1 - tx0)) B, received $((rx1 - rx0)) B"

python3 - "$work/one.json" "$work/rank0.out" <<'PY' || exit 1
import json, sys
def parts(path, hosts):
    rows = {}
    for line in open(path):
        if line.strip():
            d = json.loads(line)
            if d.get("case") != "global_select" or d.get("hosts") != hosts or d.get("ranks") != 4:
                sys.exit("FAIL: %s: not 4 ranks on hosts '%s': %s" % (path, hosts, line.strip()))
            rows[d["part"]] = d
    if set(rows) != {"weighted", "remote_collect"}:
        sys.exit("FAIL: %s: parts %s" % (path, sorted(rows)))
    return rows
one, tcp = parts(sys.argv[1], "one"), parts(sys.argv[2], "tcp")
keys = {"weighted": ["p50_us", "agree_select_p50_us", "collectives_p50_us"],
        "remote_collect": ["select_p50_us", "gbps", "alltoall_gbps"]}
print("global_select, 4 ranks: one host (forked) | 2 namespaces x 2 ranks over tcp (veth)")
print("%-15s %-22s %12s %12s %8s" % ("part", "figure", "one host", "2 hosts", "ratio"))
for part, names in keys.items():
    for k in names:
        a, b = one[part][k], tcp[part][k]
        if not all(isinstance(v, (int, float)) and v > 0 for v in (a, b)):
            sys.exit("FAIL: %s %s is not a positive number: %r, %r" % (part, k, a, b))
        print("%-15s %-22s %12.1f %12.1f %8.2f" % (part, k, a, b, b / a) if "us" in k else
              "%-15s %-22s %12.3f %12.3f %8.2f" % (part, k, a, b, b / a))
PY
echo "1 passed, 0 failed"
