#!/usr/bin/env bash
# tests/workers/server/test_record_bc.sh: an online run becomes an offline dataset, and behaviour
# cloning from it works: `gearbox run configs/cartpole_ppo.yaml --record DIR` (until solved, at most
# 150 s), `gearbox serve configs/offline_server.yaml` on that DIR (newest 2000 chunks), then
# workers/server/client/python/examples/offline_bc.py must reach a mean return >= 400 on
# CartPole-v1.
# Usage: test_record_bc.sh GEARBOX SOURCE_DIR PYTHON TMPDIR. Exit 77 (skip) without torch.
set -euo pipefail
gearbox=$1 src=$2 py=$3 tmp=$4/record_bc
"$py" -c "import zmq, msgpack, numpy, torch" 2>/dev/null || { echo "skip: $py lacks pyzmq/msgpack/numpy/torch"; exit 77; }
rm -rf "$tmp" && mkdir -p "$tmp"
"$gearbox" run "$src/configs/cartpole_ppo.yaml" --record "$tmp/data" --run-dir "$tmp/run" \
  --set experiment.max_seconds=150 --set launch.progress=off
ls -l "$tmp/data"
grep -q '"solved": true' "$tmp/run/summary.json" || echo "note: the run did not solve CartPole; cloning it anyway"
"$gearbox" serve "$src/configs/offline_server.yaml" --set "server.dataset=$tmp/data" \
  --set 'server.endpoint="tcp://127.0.0.1:0"' > "$tmp/serve.out" 2> "$tmp/serve.err" &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  grep -q "serving" "$tmp/serve.out" 2>/dev/null && break
  kill -0 $server 2>/dev/null || { cat "$tmp/serve.err"; exit 1; }
  sleep 0.1
done
endpoint=$(awk '/serving/ {print $NF}' "$tmp/serve.out")
[ -n "$endpoint" ] || { echo "server did not start"; cat "$tmp/serve.err"; exit 1; }
grep -q "serving 2000 items" "$tmp/serve.out" || { echo "expected 2000 items:"; cat "$tmp/serve.out"; exit 1; }
"$py" "$src/workers/server/client/python/examples/offline_bc.py" --endpoint "$endpoint" \
  --min-return 400
kill $server
wait $server
