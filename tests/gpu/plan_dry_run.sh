#!/usr/bin/env bash
# tests/gpu/plan_dry_run.sh WORKDIR BINARY...: the GPU plan's dry run (tests/gpu/run_on_device.sh
# all --dry-run) on the binaries of this build, gathered as build_for_device.sh gathers them
# (links in WORKDIR/bin): every CUDA step must report skipped, every other step ok, and the
# call must leave its three files. Run from the project root (ctest's WORKING_DIRECTORY).
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: tests/gpu/plan_dry_run.sh WORKDIR BINARY..." >&2; exit 2; }
work=$1
shift
rm -rf "$work"
mkdir -p "$work/bin" "$work/out"
for f in "$@"; do ln -s "$(realpath "$f")" "$work/bin/"; done
BIN=$work/bin OUT=$work/out DEADLINE_S=400 tests/gpu/run_on_device.sh all --dry-run
echo "run_on_device.sh exited $?"
python3 - "$work/out" <<'PY'
import json, os, sys
gpu = {"kernels_gpu", "replay_gpu", "learner", "policy", "ppo_cuda", "transformer_large",
       "breakout_dqn", "atari"}
cpu = {"binaries", "module", "kernels_cpu", "bench_kernels", "ppo_cpu", "transformer_config",
       "global_select"}
steps = [json.loads(l) for l in open(os.path.join(sys.argv[1], "steps.jsonl"))]
seen = {s["step"]: s for s in steps}
bad = [s for s in steps if s["status"] != ("skipped" if s["step"] in gpu else "ok")]
bad += [{"step": n, "status": "absent"} for n in sorted((gpu | cpu) - set(seen))]
assert os.path.getsize(os.path.join(sys.argv[1], "logs.tar.gz")) > 0
assert seen["ppo_cpu"].get("result", {}).get("solved") is True, seen["ppo_cpu"]
bench = seen["bench_kernels"].get("result", [])
assert any(r.get("case") == "weighted_select_cpu" for r in bench), seen["bench_kernels"]
for s in bad:
    print("plan_dry_run: unexpected", json.dumps(s))
print("plan_dry_run: %d steps, %d as expected" % (len(steps), len(steps) - len(bad)))
sys.exit(1 if bad else 0)
PY
