#!/usr/bin/env bash
# tests/launch/bench/bench_json.sh: a benchmark runs to the end in its short mode: exit status 0,
# and its --json output is one valid JSON object per line (at least one). No timing is asserted.
# usage: bench_json.sh GEARBOX NAME [OPTIONS...]   (runs `gearbox bench NAME --json OPTIONS...`)
set -u
gearbox=$1 name=$2
shift 2
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
"$gearbox" bench "$name" --json "$@" > "$out" 2> "$err"
status=$?
tail -3 "$err"
if [ "$status" -ne 0 ]; then
  echo "FAIL: gearbox bench $name exited with $status"; exit 1
fi
python3 - "$out" "$name" <<'PY' || exit 1
import json, sys
lines = [l for l in open(sys.argv[1]) if l.strip()]
if not lines:
    sys.exit("FAIL: gearbox bench %s printed no JSON" % sys.argv[2])
for i, l in enumerate(lines, 1):
    try:
        if not isinstance(json.loads(l), dict):
            raise ValueError("not an object")
    except ValueError as e:
        sys.exit("FAIL: line %d is not a JSON object (%s): %s" % (i, e, l.strip()))
print("gearbox bench %s: %d JSON lines" % (sys.argv[2], len(lines)))
PY
echo "1 passed, 0 failed"
