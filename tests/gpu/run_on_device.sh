#!/usr/bin/env bash
# tests/gpu/run_on_device.sh call1|call2|all [--dry-run]: the GPU issue's plan, run on the GPU
# machine from the project root with what tests/gpu/build_for_device.sh built here (BIN, default
# build-device/carry/bin; its kit and manifest beside it), in one device call (all: call1 then
# call2, about 5 min on the H200 of 2026-12-04) or two:
#   call1  (86 s on the H200) the kernels' CPU references and GPU tests; gearbox bench kernels; the
#          GPU learner against the CPU learner (test_gpu_learning) and the GPU policy worker
#          against the CPU one (test_gpu_policy); CartPole PPO to solve on the cpu, then with
#          trainer and policy on cuda; gearbox bench replay --case global_select (4 ranks)
#   call2  (about 4 min; Breakout DQN's part 93 s on the H200) Breakout DQN on cuda for 90 s
#          with a replay of 95000 chunks (10.7 GB pinned): collect_share p50 and max, env
#          steps/s; then the ALE's Breakout with PPO on cuda (ATARI_S seconds, default 120)
# Every step has a time cap and is skipped, with a line saying so, when its cap no longer fits
# the call's deadline (DEADLINE_S after the start, default 560). Every step writes one JSON line
# to $OUT/steps.jsonl (step, status ok|failed|timeout|skipped, seconds, what it measured); logs,
# runs' summaries and metrics go into $OUT/logs.tar.gz, the manifest to $OUT/manifest.json:
# three files, within what the device tool brings back. When the module built here cannot be
# loaded there, the plan builds everything there first (ninja or make on every core) and says
# so. --dry-run, or a machine without a GPU: every CUDA step reports skipped and every other
# step runs, with quick sizes (CI runs call1 so, tests/gpu/CMakeLists.txt: a renamed target,
# binary or flag fails there, not on the GPU). Exit status 0 when no step failed.
set -uo pipefail
usage() { sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; }
case "${1:-}" in
  call1|call2|all) ;;
  -h|--help) usage; exit 0 ;;
  *) usage >&2; exit 2 ;;
esac
call=$1
dry=0
[ "${2:-}" = --dry-run ] && dry=1
[ $# -le $((1 + dry)) ] || { echo "run_on_device.sh: unknown argument '${2:-}'" >&2; exit 2; }
bin=$(cd "${BIN:-build-device/carry/bin}" 2>/dev/null && pwd) ||
  { echo "run_on_device.sh: no ${BIN:-build-device/carry/bin} (build_for_device.sh)" >&2; exit 2; }
out=${OUT:-build-device/out}
mkdir -p "$out"
logs=$(mktemp -d /tmp/gbplan.XXXXXX)
results=$out/steps.jsonl
: >"$results"
start=$(date +%s)
deadline=$((start + ${DEADLINE_S:-560}))
gpu=0
if [ $dry = 0 ] && nvidia-smi -L >"$logs/gpu.txt" 2>&1; then gpu=1; fi
# the kit's libraries, and the libtorch inside the machine's PyTorch, for the binaries built here
if [ -f "$bin/../kit/env.sh" ]; then
  source "$bin/../kit/env.sh" >"$logs/kit.log" 2>&1
  tl=$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))' \
    2>/dev/null) && export LD_LIBRARY_PATH=$tl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
{ nvidia-smi --format=csv --query-gpu=name,driver_version,memory.total,pcie.link.gen.current,\
pcie.link.width.current; lscpu | grep -E "Model name|^CPU\(s\)"; python3 -c \
  'import torch; print("torch", torch.__version__, torch.version.cuda)'; } >"$logs/device.txt" 2>&1
export GB="$bin/gearbox" LOGS=$logs
rc=0

# step NAME CAP gpu|cpu COMMAND...: runs COMMAND (a program or a function below) with its cap in
# seconds, its output in $logs/NAME.log; a command may leave one JSON value in
# $logs/NAME.result.json, which the step's line carries as "result".
step() {
  local name=$1 cap=$2 needs=$3 now status code t0 ms extra=""
  shift 3
  now=$(date +%s)
  if [ "$needs" = gpu ] && [ $gpu = 0 ]; then
    extra=", \"why\": \"no GPU$([ $dry = 1 ] && echo ' (dry run)')\""
    status=skipped ms=0
  elif [ $((now + cap)) -gt $deadline ]; then
    extra=", \"why\": \"its cap of $cap s does not fit the $((deadline - now)) s left\""
    status=skipped ms=0
  else
    t0=$(date +%s%N)
    timeout -k 10 "$cap" bash -c '"$@"' _ "$@" >"$logs/$name.log" 2>&1
    code=$?
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    case $code in
      0) status=ok ;;
      124|137) status=timeout; rc=1 ;;
      *) status=failed; rc=1 ;;
    esac
    extra=", \"exit\": $code"
    [ -s "$logs/$name.result.json" ] && extra="$extra, \"result\": $(cat "$logs/$name.result.json")"
  fi
  printf '{"step": "%s", "status": "%s", "seconds": %d.%03d%s}\n' "$name" "$status" \
    $((ms / 1000)) $((ms % 1000)) "$extra" | tee -a "$results"
}

# Every binary the plan names is there (before anything runs: a missing one is a build's fault).
binaries() {
  local missing=0
  for b in gearbox libgearbox-torch.so test_gpu_kernels test_gpu_replay test_gpu_policy \
           test_gpu_learning test_select_cpu test_gather_cpu test_gather_plan \
           test_kernels_nodevice; do
    [ -e "$BIN_DIR/$b" ] || { echo "missing: $BIN_DIR/$b"; missing=1; }
  done
  return $missing
}

# run_gb NAME CONFIG SETTINGS...: one gearbox run into /tmp/gbruns/NAME; its summary.json and
# metrics.csv go to the logs, the summary's main figures to the step's result.
run_gb() {
  local name=$1 config=$2 dir=/tmp/gbruns/$1 sets=() code
  shift 2
  for s in "$@"; do sets+=(--set "$s"); done
  rm -rf "$dir"
  "$GB" run "$config" --run-dir "$dir" "${sets[@]}"
  code=$?
  mkdir -p "$LOGS/runs/$name"
  cp -r "$dir/summary.json" "$dir/metrics.csv" "$dir/logs" "$LOGS/runs/$name/" 2>/dev/null
  python3 - "$dir" >"$LOGS/$name.result.json" <<'EOF'
import csv, json, math, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
r = {k: s.get(k) for k in ("solved", "exit_reason", "wall_seconds", "env_steps", "train_steps",
                          "episode_return_mean")}
rows = [x for x in csv.DictReader(open(sys.argv[1] + "/metrics.csv")) if x.get("collect_share")]
for k in ("collect_share", "collect_ms", "train_ms", "env_steps_per_s"):
    v = sorted(float(x[k]) for x in rows if x.get(k) not in (None, "") and
               not math.isnan(float(x[k])))
    if v:
        r[k] = {"p50": v[len(v) // 2], "max": v[-1]}
print(json.dumps(r))
EOF
  return $code
}

# bench_json NAME ARGS...: gearbox bench ARGS --json; its JSON lines are the step's result.
bench_json() {
  local name=$1
  shift
  "$GB" bench "$@" --json >"$LOGS/$name.out" || return
  python3 -c 'import json, sys; print(json.dumps([json.loads(l) for l in open(sys.argv[1])
    if l.startswith("{")]))' "$LOGS/$name.out" >"$LOGS/$name.result.json"
}

# test_kernels_nodevice checks the kernels' answers without a device: where one is, it says so
# and exits 77 (ctest's skip), which is no failure here.
kernels_cpu() {
  local code
  for t in test_select_cpu test_gather_cpu test_gather_plan test_kernels_nodevice; do
    "$BIN_DIR/$t"
    code=$?
    [ $code = 0 ] || { [ $t = test_kernels_nodevice ] && [ $code = 77 ]; } || return $code
  done
}

# The module built here loads on this machine (an inline CartPole run of 2 s needs it).
module() {
  rm -rf /tmp/gbruns/module
  "$GB" run configs/cartpole_ppo.yaml --run-dir /tmp/gbruns/module --set launch.mode=inline \
    --set experiment.max_seconds=2
}

# The fallback: everything the plan runs, built here against this machine's PyTorch.
build_here() {
  local gen=() tp ti
  command -v ninja >/dev/null && gen=(-G Ninja)
  tp=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
  # c10d's ProcessGroupGloo header includes Gloo's: Debian's, where the wheel has none
  ti=$(python3 -c 'import torch.utils.cpp_extension as c; print(c.include_paths()[0])')
  if [ ! -d "$ti/gloo" ] && ls "$BIN_DIR"/../kit/debs/fallback/libgloo-dev_*.deb >/dev/null; then
    dpkg -x "$BIN_DIR"/../kit/debs/fallback/libgloo-dev_*.deb /opt/gbgloo
    export CPATH=${CPATH:+$CPATH:}/opt/gbgloo/usr/include
  fi
  cmake -S . -B build-gpu "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DGEARBOX_TESTS=ON \
    "-DCMAKE_PREFIX_PATH=${CMAKE_PREFIX_PATH:-};$tp" -DTORCH_CUDA_ARCH_LIST=9.0 \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_DISABLE_FIND_PACKAGE_HDF5=ON &&
    cmake --build build-gpu -j"$(nproc)" --target gearbox gearbox_torch_module test_gpu_kernels \
      test_gpu_replay test_gpu_policy test_gpu_learning test_select_cpu test_gather_cpu \
      test_gather_plan test_kernels_nodevice || return
  mkdir -p build-gpu/bin
  find build-gpu -path build-gpu/bin -prune -o -type f \( -name gearbox -o -name 'test_*' -o \
    -name libgearbox-torch.so \) -perm -u+x -exec cp {} build-gpu/bin/ \;
}

# The ALE from ale-py's wheel in the kit, unpacked (a wheel is a zip): its library
# (GEARBOX_ALE_LIB; the ROMs lie beside it) and the Python library that the extension's symbols
# need (GEARBOX_ALE_PYLIB), which only a Python built as a shared library has.
atari() {
  local whl pylib
  whl=$(ls "$BIN_DIR"/../kit/wheels/ale_py-*.whl 2>/dev/null | head -1)
  [ -n "$whl" ] || { echo "no ale-py wheel in the kit (tests/gpu/kit_extras.sh)"; return 1; }
  rm -rf /tmp/gbale && python3 -m zipfile -e "$whl" /tmp/gbale || return
  pylib=$(python3 -c 'import os, sysconfig as s; v = s.get_config_var
print(os.path.join(v("LIBDIR"), v("LDLIBRARY")) if v("Py_ENABLE_SHARED") else "")')
  [ -n "$pylib" ] && [ -f "$pylib" ] ||
    { echo "$(python3 -V) is not built as a shared library: no libpython to load"; return 1; }
  export GEARBOX_ALE_LIB GEARBOX_ALE_PYLIB=$pylib
  GEARBOX_ALE_LIB=$(ls /tmp/gbale/ale_py/_ale_py*.so | head -1)
  "$GB" env check atari --args game=breakout --steps 2000 || return
  run_gb atari configs/atari_breakout_ppo.yaml experiment.max_seconds="${ATARI_S:-120}" \
    trainer.device=cuda policy.device=cuda actors.count=8 launch.stop_timeout_s=60
}

export BIN_DIR=$bin
export -f binaries run_gb bench_json kernels_cpu module build_here atari
quick=()
[ $gpu = 1 ] || quick=(--quick)
if [ $call != call2 ]; then
  step binaries 10 cpu binaries
  step module 60 cpu module
  if tail -1 "$results" | grep -q '"status": "failed"' && [ $gpu = 1 ]; then
    step build_here 300 gpu build_here
    if tail -1 "$results" | grep -q '"status": "ok"'; then
      bin=$PWD/build-gpu/bin
      export GB=$bin/gearbox BIN_DIR=$bin
    fi
  fi
  step kernels_cpu 60 cpu kernels_cpu
  step kernels_gpu 60 gpu "$bin/test_gpu_kernels"
  step replay_gpu 60 gpu "$bin/test_gpu_replay"
  step bench_kernels 90 cpu bench_json bench_kernels kernels "${quick[@]}"
  step learner 90 gpu "$bin/test_gpu_learning" tests/workers/dqn_cartpole.yaml \
    tests/workers/ppo_cartpole.yaml configs/pendulum_sac.yaml configs/breakout_dqn.yaml \
    tests/gpu/ppo_lstm.yaml tests/gpu/dqn_r2d2.yaml tests/gpu/ppo_framestack.yaml
  step policy 60 gpu "$bin/test_gpu_policy"
  step ppo_cpu 60 cpu run_gb ppo_cpu configs/cartpole_ppo.yaml
  step ppo_cuda 90 gpu run_gb ppo_cuda configs/cartpole_ppo.yaml trainer.device=cuda \
    policy.device=cuda
  step transformer_config 20 cpu "$GB" check tests/gpu/ppo_transformer_large.yaml
  step transformer_large 75 gpu bench_json transformer_large learner \
    tests/gpu/ppo_transformer_large.yaml --seconds 20 --set trainer.device=cuda
  step global_select 60 cpu bench_json global_select replay --case global_select "${quick[@]}"
fi
if [ $call != call1 ]; then
  step breakout_dqn 150 gpu run_gb breakout_dqn configs/breakout_dqn.yaml \
    experiment.max_seconds=90 trainer.replay.capacity=95000 launch.stop_timeout_s=60 \
    trainer.checkpoint_every_s=0 trainer.device=cuda policy.device=cuda
  step atari $((${ATARI_S:-120} + 50)) gpu atari
fi
cp "$bin/../manifest.json" "$out/manifest.json" 2>/dev/null
tar czf "$out/logs.tar.gz" -C "$logs" . && rm -rf "$logs"
echo "run_on_device: $(grep -c . "$results") steps, exit $rc; $out: steps.jsonl logs.tar.gz"
exit $rc
