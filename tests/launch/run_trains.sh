#!/usr/bin/env bash
# tests/launch/run_trains.sh: a rate-limited run keeps collecting and training for SECONDS: env
# steps, inserts and train steps all advance past the replay's min_size, nothing is dropped or
# rejected, and every worker stops cleanly (this once deadlocked: see workers/trainer.c ingest).
# usage: run_trains.sh GEARBOX CONFIG WORK_DIR SECONDS
set -u
gearbox=$1 config=$2 work=$3 secs=$4
. "$(dirname "$0")/run_lib.sh"
rm -rf "$work"; mkdir -p "$work"
"$gearbox" run "$config" --run-dir "$work/run" --set experiment.max_seconds="$secs" \
  --set launch.progress=plain > "$work/out.log" 2>&1
status=$?
tail -3 "$work/out.log"
s="$work/run/summary.json"
[ "$status" -eq 0 ] || fail "exit status $status"
[ "$(json_get "$s" exit_reason)" = max_seconds ] || fail "exit_reason $(json_get "$s" exit_reason)"
python3 - "$work/run/metrics.csv" <<'PY' || fail "the run did not keep training"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
last, mid = rows[-1], rows[len(rows) // 2]
f = lambda r, k: float(r[k] or 0)
ok = (f(last, "train_steps") > f(mid, "train_steps") > 0 and
      f(last, "env_steps") > f(mid, "env_steps") and f(last, "episodes") > 0 and
      f(last, "sample_drops") == 0 and f(last, "chunks_rejected") == 0)
print("mid", {k: mid[k] for k in ("env_steps", "train_steps")},
      "last", {k: last[k] for k in ("env_steps", "train_steps", "replay_size")})
sys.exit(0 if ok else 1)
PY
grep -l "ERROR" "$work"/run/logs/*.log && fail "errors in the worker logs"
echo "1 passed, 0 failed"
