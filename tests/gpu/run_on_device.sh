#!/usr/bin/env bash
# tests/gpu/run_on_device.sh STAGE...: every device run of the GPU issue, on a machine with a GPU,
# from the project root, in stages that each fit one device command (10 minutes):
#   build  configure and build gearbox (Release, libtorch, CUDA_ARCH or sm_90) in build-gpu
#   tests  the GPU tests (ctest label gpu, but the learning runs) and the kernels' CPU references
#   learn  PPO, DQN and SAC with trainer and policy on cuda to their cpu thresholds (run_gpu_*)
#   bench  gearbox bench kernels --json; gearbox bench replay --case global_select --json
#   ppo    configs/cartpole_ppo.yaml to solve, on the cpu, then trainer and policy on cuda
#   breakout  configs/breakout_dqn.yaml for BREAKOUT_S seconds (default 150) with a replay of
#          95000 chunks (10.7 GB of frames), on the cpu, then with cuda
#   atari  configs/atari_breakout_ppo.yaml (the ALE's Breakout, PPO with V-trace) for ATARI_S
#          seconds (default 240) with trainer and policy on cuda and 8 actors x 16 envs; the
#          ALE from the ale-py wheel in .device-kit/wheels (tests/gpu/kit_extras.sh)
# Everything goes to ${OUT:-build-gpu/out}: a log per stage, the JSON of the benches, the runs'
# summary.json and metrics.csv. Uses .device-kit/ (../shared/device-kit/prepare, plus
# tests/gpu/kit_extras.sh for the packages the kit lacks) when present.
set -uo pipefail
if [ $# -eq 0 ] || [ "$1" = --help ] || [ "$1" = -h ]; then
  sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'
  [ $# -eq 0 ] && exit 2 || exit 0
fi
for stage in "$@"; do
  case $stage in
    build|tests|learn|bench|ppo|breakout|atari) ;;
    *) echo "run_on_device.sh: no stage '$stage' (see --help)" >&2; exit 2 ;;
  esac
done
out=${OUT:-build-gpu/out}
mkdir -p "$out"
if [ -f .device-kit/env.sh ]; then source .device-kit/env.sh; fi
nproc=$(nproc)
rc=0

stage_build() {
  # c10d's ProcessGroupGloo header includes Gloo's: Debian's, only where the wheel has none
  local ti
  ti=$(python3 -c 'import torch.utils.cpp_extension as c; print(c.include_paths()[0])' 2>/dev/null)
  if [ -n "$ti" ] && [ ! -d "$ti/gloo" ] &&
     ls .device-kit/debs/fallback/libgloo-dev_*.deb >/dev/null 2>&1; then
    dpkg -x .device-kit/debs/fallback/libgloo-dev_*.deb /opt/gbgloo
    export CPATH=${CPATH:+$CPATH:}/opt/gbgloo/usr/include
    echo "build: Gloo's headers from Debian (none in $ti)"
  fi
  nvidia-smi --format=csv >"$out/device.txt" 2>&1 \
    --query-gpu=name,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current
  lscpu | grep -E "Model name|^CPU\(s\)" >>"$out/device.txt"
  # first without libtorch (the kernels, their tests and benches: what runs even if the
  # libtorch build below fails), then everything
  cmake -S . -B build-gpu-k -DCMAKE_BUILD_TYPE=Release -DGEARBOX_TORCH=OFF \
    -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" >"$out/configure-k.log" 2>&1 &&
    cmake --build build-gpu-k -j"$nproc" --target gearbox test_select_cpu test_gather_cpu \
      test_gather_plan test_kernels_nodevice test_gpu_kernels test_gpu_replay \
      >"$out/build-k.log" 2>&1 || { tail -30 "$out/configure-k.log" "$out/build-k.log"; rc=1; }
  cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" \
    >"$out/configure.log" 2>&1 || { tail -40 "$out/configure.log"; return 1; }
  cmake --build build-gpu -j"$nproc" >"$out/build.log" 2>&1 ||
    { grep -E "error|Error" "$out/build.log" | head -40; return 1; }
  echo "build: done"
}

# the full build's gearbox, else the kernels-only one
gb() {
  if [ -x build-gpu/gearbox ]; then build-gpu/gearbox "$@"; else build-gpu-k/gearbox "$@"; fi
}

stage_tests() {
  if [ ! -x build-gpu/gearbox ]; then # the libtorch build failed: the kernels' tests at least
    ctest --test-dir build-gpu-k --output-on-failure -V \
      -R 'test_(select_cpu|gather_cpu|gather_plan|kernels_nodevice|gpu_kernels|gpu_replay)$' \
      >"$out/tests-kernels.log" 2>&1 || rc=1
    grep -E "^ *[0-9]+/[0-9]+ Test|tests passed|tests failed|chi-square" "$out/tests-kernels.log"
    return 1
  fi
  ctest --test-dir build-gpu -L gpu -E '^run_gpu_' --output-on-failure -V \
    >"$out/tests-gpu.log" 2>&1 || rc=1
  ctest --test-dir build-gpu --output-on-failure \
    -R 'test_(select_cpu|gather_cpu|gather_plan|kernels_nodevice|learning_prefetch)$' \
    >"$out/tests-cpu-refs.log" 2>&1 || rc=1
  grep -E "^ *[0-9]+/[0-9]+ Test|tests passed|tests failed|apart against|ms/step|checks|skipped" \
    "$out/tests-gpu.log" "$out/tests-cpu-refs.log" | head -80
}

stage_learn() {
  ctest --test-dir build-gpu -R '^run_gpu_' --output-on-failure -V >"$out/tests-learn.log" 2>&1 ||
    rc=1
  grep -E "Test +#|exit [0-9]+, |passed|failed|skipped" "$out/tests-learn.log" | head -40
  mkdir -p "$out/learn-runs"
  for d in build-gpu/tests/gpu/runs/*/run; do
    n=$(basename "$(dirname "$d")")
    cp "$d/summary.json" "$out/learn-runs/$n-summary.json" 2>/dev/null
    cp "$d/metrics.csv" "$out/learn-runs/$n-metrics.csv" 2>/dev/null
  done
}

stage_bench() {
  gb bench kernels --json >"$out/bench-kernels.jsonl" 2>"$out/bench-kernels.log" || rc=1
  cat "$out/bench-kernels.jsonl"
  gb bench replay --case global_select --json >"$out/bench-global-select.jsonl" \
    2>"$out/bench-global-select.log" || rc=1
  cat "$out/bench-global-select.jsonl"
}

# run NAME CONFIG SETTINGS...: one gearbox run into /tmp/gbruns/NAME, timed from start to exit;
# its summary.json, metrics.csv and logs are copied to $out/runs/NAME (the checkpoints, which
# hold the replay, stay behind).
run() {
  local name=$1 config=$2; shift 2
  local dir="/tmp/gbruns/$name" sets=()
  for s in "$@"; do sets+=(--set "$s"); done
  rm -rf "$dir"; mkdir -p "$(dirname "$dir")"
  local t0=$(date +%s%N)
  build-gpu/gearbox run "$config" --run-dir "$dir" "${sets[@]}" >"$out/$name.log" 2>&1
  local code=$?
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  mkdir -p "$out/runs/$name"
  cp -r "$dir/summary.json" "$dir/metrics.csv" "$dir/config.yaml" "$dir/logs" "$out/runs/$name/" \
    2>/dev/null
  [ "$code" -eq 0 ] || rc=1
  local summary
  summary=$(python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1]))))' \
    "$dir/summary.json" 2>/dev/null || echo null)
  printf '{"run": "%s", "exit": %d, "process_ms": %d, "summary": %s}\n' "$name" "$code" \
    "$ms" "$summary" | tee -a "$out/runs.jsonl"
}

stage_ppo() {
  run ppo_cpu configs/cartpole_ppo.yaml
  run ppo_cuda configs/cartpole_ppo.yaml trainer.device=cuda policy.device=cuda
  run ppo_cuda_staged configs/cartpole_ppo.yaml trainer.device=cuda policy.device=cuda \
    trainer.collect=cpu_staged
}

stage_breakout() {
  local s=${BREAKOUT_S:-150}
  local common=(experiment.max_seconds=$s trainer.replay.capacity=95000 launch.stop_timeout_s=120
                trainer.checkpoint_every_s=0)
  run breakout_cpu configs/breakout_dqn.yaml "${common[@]}"
  run breakout_cuda configs/breakout_dqn.yaml "${common[@]}" trainer.device=cuda policy.device=cuda
  # collection against the training step, from the trainer's rows of metrics.csv
  for r in breakout_cpu breakout_cuda; do
    [ -s "$out/runs/$r/metrics.csv" ] || continue
    python3 - "$out/runs/$r/metrics.csv" "$r" <<'EOF' | tee -a "$out/runs.jsonl"
import csv, json, math, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r.get("collect_share")]
def col(k):
    v = [float(r[k]) for r in rows if r.get(k) not in (None, "") and not math.isnan(float(r[k]))]
    v.sort()
    return {"p50": v[len(v) // 2], "max": v[-1], "n": len(v)} if v else None
print(json.dumps({"run": sys.argv[2], "collect_ms": col("collect_ms"), "train_ms": col("train_ms"),
                  "collect_share": col("collect_share")}))
EOF
  done
}

# The ALE for gearbox's atari environment from ale-py's wheel, unpacked (a wheel is a zip): its
# library (GEARBOX_ALE_LIB; the ROMs lie beside it) and the Python library that the extension's
# symbols need (GEARBOX_ALE_PYLIB), which only a Python built as a shared library has.
ale_from_wheel() {
  local whl pylib
  whl=$(ls .device-kit/wheels/ale_py-*.whl 2>/dev/null | head -1)
  [ -n "$whl" ] || { echo "atari: no ale-py wheel in .device-kit/wheels (kit_extras.sh)"; return 1; }
  rm -rf /tmp/gbale && python3 -m zipfile -e "$whl" /tmp/gbale || return 1
  GEARBOX_ALE_LIB=$(ls /tmp/gbale/ale_py/_ale_py*.so | head -1)
  pylib=$(python3 -c 'import os, sysconfig as s; v = s.get_config_var
print(os.path.join(v("LIBDIR"), v("LDLIBRARY")) if v("Py_ENABLE_SHARED") else "")')
  [ -n "$pylib" ] && [ -f "$pylib" ] ||
    { echo "atari: $(python3 -V) is not built as a shared library: no libpython to load"; return 1; }
  export GEARBOX_ALE_LIB GEARBOX_ALE_PYLIB=$pylib
  echo "atari: ALE $GEARBOX_ALE_LIB, Python $GEARBOX_ALE_PYLIB"
}

stage_atari() {
  ale_from_wheel || return 1
  gb env check atari --args game=breakout --steps 2000 >"$out/atari_check.log" 2>&1 ||
    { tail -5 "$out/atari_check.log"; return 1; }
  run atari_cuda configs/atari_breakout_ppo.yaml experiment.max_seconds="${ATARI_S:-240}" \
    trainer.device=cuda policy.device=cuda actors.count=8 launch.stop_timeout_s=120
}

for stage in "$@"; do
  echo "== $stage"
  "stage_$stage" || rc=1
done
exit $rc
