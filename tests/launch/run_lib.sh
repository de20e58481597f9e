# tests/launch/run_lib.sh: helpers for the tests that start real runs (sourced).
# json_get FILE KEY: prints the value of "KEY" in FILE (a JSON object, nested keys allowed).
json_get() {
  python3 -c 'import json,sys
d=json.load(open(sys.argv[1]))
def find(o,k):
    if isinstance(o,dict):
        if k in o: return o[k]
        for v in o.values():
            r=find(v,k)
            if r is not None: return r
    return None
v=find(d,sys.argv[2]); print("null" if v is None else v)' "$1" "$2"
}

# run_processes DIR: the pids of processes whose command line mentions DIR (a run's workers).
run_processes() { pgrep -f -- "--run-dir $1" || true; }

# wait_for_log FILE PATTERN SECONDS: waits until FILE holds PATTERN; fails after SECONDS.
wait_for_log() {
  local end=$((SECONDS + $3))
  while [ $SECONDS -lt $end ]; do
    grep -q -- "$2" "$1" 2>/dev/null && return 0
    sleep 0.2
  done
  echo "timed out waiting for '$2' in $1"; return 1
}

fail() { echo "FAIL: $*"; exit 1; }

# worker_pids LOG: the pids of a worker's processes, oldest first, from its log (LOG: a worker's
# log file under the run's logs/)
worker_pids() { sed -n 's/.*worker started (pid \([0-9]*\)).*/\1/p' "$1"; }

# check_crash_ledger SUMMARY: a run whose workers were killed: its sample ledger balances
# exactly (sent = received + lost_in_crash, lost 0, never null) and nothing was dropped.
check_crash_ledger() {
  local sent got crash lost dropped
  sent=$(json_get "$1" chunks_sent) got=$(json_get "$1" chunks_received)
  crash=$(json_get "$1" lost_in_crash) lost=$(json_get "$1" lost) dropped=$(json_get "$1" dropped)
  echo "sample ledger: sent $sent, received $got, lost_in_crash $crash, lost $lost," \
    "dropped $dropped"
  [ "$lost" = 0 ] && [ "$dropped" = 0 ] && [ "$sent" -eq $((got + crash)) ] ||
    fail "the sample ledger does not balance"
}

# read_summary RUN: reads RUN/summary.json (fails without one) into s (its path), reason
# (exit_reason), solved, refused (reports_rejected), rejected (samples.rejected: chunks),
# env_steps and received (chunks_received).
read_summary() {
  s="$1/summary.json"
  [ -s "$s" ] || fail "no summary.json"
  reason=$(json_get "$s" exit_reason) solved=$(json_get "$s" solved)
  refused=$(json_get "$s" reports_rejected) rejected=$(json_get "$s" rejected)
  env_steps=$(json_get "$s" env_steps) received=$(json_get "$s" chunks_received)
}

# check_ledger SUMMARY: the sample stream lost nothing: every chunk an actor sent reached a
# trainer (samples.lost = 0, sent = received) and none was dropped.
check_ledger() {
  local sent got lost dropped
  sent=$(json_get "$1" chunks_sent) got=$(json_get "$1" chunks_received)
  lost=$(json_get "$1" lost) dropped=$(json_get "$1" dropped)
  echo "sample ledger: sent $sent, received $got, lost $lost, dropped $dropped"
  [ "$sent" != null ] && [ "$sent" -gt 0 ] || fail "no chunks_sent in $1"
  [ "$lost" = 0 ] && [ "$sent" = "$got" ] ||
    fail "sample chunks lost: sent $sent, received $got, lost $lost"
  [ "$dropped" = 0 ] || fail "$dropped chunks dropped"
  # a resumed run may first draw chunks its restored replay already held: more than it received
  local trained resumed
  trained=$(json_get "$1" chunks_trained)
  resumed=$(python3 -c 'import json, sys
print(int(bool(json.load(open(sys.argv[1])).get("resumed"))))' "$1")
  echo "chunks trained: $trained of $got received"
  [ "$trained" != null ] && [ "$trained" -ge 0 ] || fail "chunks_trained $trained"
  [ "$resumed" = 1 ] || [ "$trained" -le "$got" ] ||
    fail "chunks_trained $trained is more than the $got chunks received"
}

# check_restarts SUMMARY WORKER...: summary.json's restarts are these workers', in this order
# (none: no argument after SUMMARY).
check_restarts() {
  local s=$1; shift
  python3 - "$s" "$@" <<'PY' || fail "restarts in summary.json: expected [$*]"
import json, sys
r = [x["worker"] for x in json.load(open(sys.argv[1]))["restarts"]]
print("restarts:", r)
sys.exit(0 if r == sys.argv[2:] else 1)
PY
}
