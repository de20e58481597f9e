#!/usr/bin/env bash
# tests/gpu/build_for_device.sh: builds here, before a GPU machine is lent, what the GPU issue's
# plan (tests/gpu/run_on_device.sh) runs there, so that no device time goes to building: a
# Release build for sm_90 (CUDA_ARCH) against the device's own PyTorch build (PyPI's
# torch==TORCH_VERSION for Python PYVER, CUDA 13: the wheel is downloaded once into
# build-device/torch-wheel and its headers and libraries unpacked beside it), of only the
# targets the plan runs, without HDF5 (the device has no libhdf5). The test programs that link
# libtorch leave the wheel's own dependencies (the CUDA libraries of PyPI's nvidia-* packages,
# which the device's PyTorch has) to be resolved there (--allow-shlib-undefined). What travels
# is build-device/carry (name it in the device tool's carry): bin/ (gearbox,
# libgearbox-torch.so, the GPU tests and the kernels' CPU references), kit/ (the device kit:
# ../shared/device-kit/prepare and tests/gpu/kit_extras.sh, run here first when .device-kit/ is
# missing) and manifest.json (commit, versions, flags, each file's size and sha256, the newest
# glibc and libstdc++ symbol versions the binaries need). Run from the project root; package
# registries must be reachable the first time. Ends non-zero when a step fails or the carry
# exceeds the device tool's 64 MiB.
set -euo pipefail
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then
  sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
[ $# -eq 0 ] || { echo "build_for_device.sh: no arguments (see --help)" >&2; exit 2; }
torch_version=${TORCH_VERSION:-2.11.0}
pyver=${PYVER:-3.12}
arch=${CUDA_ARCH:-90}
dev=build-device
carry=$dev/carry
torch=$dev/torch-$torch_version/torch
# what the plan runs (tests/gpu/run_on_device.sh names the same list)
targets=(gearbox gearbox_torch_module test_gpu_kernels test_gpu_replay test_gpu_policy
         test_gpu_learning test_select_cpu test_gather_cpu test_gather_plan test_kernels_nodevice)

if [ ! -f .device-kit/env.sh ]; then
  ../shared/device-kit/prepare
  bash tests/gpu/kit_extras.sh
fi
if [ ! -f "$torch/share/cmake/Torch/TorchConfig.cmake" ]; then
  mkdir -p "$dev/torch-wheel"
  python3 -m pip download --quiet --disable-pip-version-check "torch==$torch_version" \
    --only-binary=:all: --no-deps --python-version "$pyver" --platform manylinux_2_28_x86_64 \
    -d "$dev/torch-wheel"
  python3 - "$dev/torch-wheel" "$dev/torch-$torch_version" <<'EOF'
import glob, sys, zipfile
wheel = zipfile.ZipFile(sorted(glob.glob(sys.argv[1] + "/torch-*.whl"))[-1])
keep = ("torch/include/", "torch/lib/", "torch/share/cmake/")
wheel.extractall(sys.argv[2], [n for n in wheel.namelist() if n.startswith(keep)])
EOF
fi

# TORCH_CUDA_ARCH_LIST: find_package(Torch) would otherwise add -gencode for 11 architectures;
# GEARBOX_LINKER=default: the system's linker, with which this plan's binaries were checked
cmake -S . -B "$dev" -DCMAKE_BUILD_TYPE=Release -DGEARBOX_TESTS=ON -DGEARBOX_LINKER=default \
  "-DCMAKE_PREFIX_PATH=$PWD/$torch;$PWD/$torch/share/cmake" \
  -DTORCH_CUDA_ARCH_LIST="$((arch / 10)).$((arch % 10))" -DCMAKE_CUDA_ARCHITECTURES="$arch" \
  -DCMAKE_EXE_LINKER_FLAGS=-Wl,--allow-shlib-undefined -DCMAKE_DISABLE_FIND_PACKAGE_HDF5=ON \
  >"$dev/configure.log"
grep -q "^TORCH_LIBRARY:.*=$PWD/$torch/lib/libtorch.so" "$dev/CMakeCache.txt" ||
  { echo "build_for_device.sh: CMake did not take the wheel's libtorch ($dev/CMakeCache.txt)" >&2
    exit 1; }
# the wheel exports its own Gloo (workers/torch/CMakeLists.txt): Debian's must not be linked
grep -q "^GB_TORCH_EXPORTS_GLOO:INTERNAL=1" "$dev/CMakeCache.txt" ||
  { echo "build_for_device.sh: the wheel's libtorch_cpu does not export Gloo" >&2; exit 1; }
cmake --build "$dev" -j"$(nproc)" --target "${targets[@]}"

rm -rf "$carry"
mkdir -p "$carry/bin" "$carry/kit"
for t in "${targets[@]}"; do
  [ "$t" = gearbox_torch_module ] && t=libgearbox-torch.so
  f=$(find "$dev" -path "$dev/carry" -prune -o -name "$t" -type f -print | head -1)
  [ -n "$f" ] || { echo "build_for_device.sh: $t was not built" >&2; exit 1; }
  cp "$f" "$carry/bin/"
done
strip --strip-debug "$carry"/bin/*
cp -r .device-kit/debs .device-kit/env.sh "$carry/kit/"
[ -d .device-kit/wheels ] && cp -r .device-kit/wheels "$carry/kit/"

python3 - "$carry" "$torch_version" "$pyver" "$arch" <<'EOF'
import hashlib, json, os, re, subprocess, sys
carry, torch, pyver, arch = sys.argv[1:]
def out(*cmd):
    return subprocess.run(cmd, capture_output=True, text=True).stdout
def newest(prefix, text):
    v = set(re.findall(prefix + r"_([0-9.]+)", text))
    return max(v, key=lambda s: [int(x) for x in s.split(".")]) if v else None
files, syms = {}, ""
for root, _, names in os.walk(carry):
    for n in sorted(names):
        p = os.path.join(root, n)
        files[os.path.relpath(p, carry)] = {
            "bytes": os.path.getsize(p),
            "sha256": hashlib.sha256(open(p, "rb").read()).hexdigest()}
        if os.path.basename(root) == "bin":
            syms += out("objdump", "-T", p)
cache = dict(l.split("=", 1) for l in open("build-device/CMakeCache.txt")
             if "=" in l and not l.startswith(("#", "//")))
flag = lambda k: cache.get(k, "").strip()
manifest = {
    "commit": out("git", "rev-parse", "HEAD").strip(),
    "dirty": bool(out("git", "status", "--porcelain", "--untracked-files=no").strip()),
    "built": out("date", "-u", "+%Y-%m-%dT%H:%M:%SZ").strip(),
    "torch": torch, "python": pyver, "cuda_arch": arch,
    "nvcc": out("nvcc", "--version").strip().splitlines()[-1],
    "cc": out("cc", "--version").splitlines()[0], "cxx": out("c++", "--version").splitlines()[0],
    "build_type": flag("CMAKE_BUILD_TYPE:STRING"),
    "flags": {k: flag(k + ":STRING") for k in ("CMAKE_C_FLAGS_RELEASE", "CMAKE_CXX_FLAGS_RELEASE",
                                               "CMAKE_CUDA_FLAGS_RELEASE")},
    "needs": {"GLIBC": newest("GLIBC", syms), "GLIBCXX": newest("GLIBCXX", syms),
              "CXXABI": newest("CXXABI", syms)},
    "files": files,
    "total_bytes": sum(f["bytes"] for f in files.values()),
}
json.dump(manifest, open(os.path.join(carry, "manifest.json"), "w"), indent=1)
print("build_for_device: %d files, %.1f MiB; needs glibc %s, libstdc++ %s" % (
    len(files), manifest["total_bytes"] / 2**20, manifest["needs"]["GLIBC"],
    manifest["needs"]["GLIBCXX"]))
EOF
size=$(du -sb "$carry" | cut -f1)
[ "$size" -le $((64 * 1024 * 1024)) ] ||
  { echo "build_for_device.sh: $carry is $size bytes, over the carry's 64 MiB" >&2; exit 1; }
echo "build_for_device: carry $carry to the device; there: tests/gpu/run_on_device.sh call1"
