#!/bin/sh
# tests/gpu/run_on_device.sh: the GPU runs of the kernels issue, on a machine with a GPU, from the
# project root: build the kernels, their tests and the gearbox command (Release, sm_90 unless
# CUDA_ARCH says otherwise, no libtorch), run the CPU-reference and GPU tests, then
# `gearbox bench kernels --json`. Figures go to ${OUT:-build-gpu}/kernels-bench.jsonl, the test
# log to kernels-tests.log beside it. Uses ../shared/device-kit's .device-kit/ when present.
set -eu
out=${OUT:-build-gpu}
mkdir -p "$out"
if [ -f .device-kit/env.sh ]; then . .device-kit/env.sh; fi
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DGEARBOX_TORCH=OFF \
  -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" >"$out/kernels-configure.log" 2>&1 ||
  { tail -40 "$out/kernels-configure.log"; exit 1; }
cmake --build build-gpu -j"$(nproc)" --target gearbox test_select_cpu test_gather_cpu \
  test_gather_plan test_kernels_nodevice test_gpu_kernels test_gpu_replay
nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current \
  --format=csv >"$out/kernels-device.txt" 2>&1 || true
rc=0
ctest --test-dir build-gpu -R 'test_(select_cpu|gather_cpu|gather_plan|kernels_nodevice|gpu_kernels|gpu_replay)$' \
  --output-on-failure -V >"$out/kernels-tests.log" 2>&1 || rc=$?
grep -E "^[0-9]+/[0-9]+ Test|tests passed|checks|boundary|chi-square" "$out/kernels-tests.log" || true
build-gpu/gearbox bench kernels --json | tee "$out/kernels-bench.jsonl"
exit $rc
