#!/usr/bin/env bash
# tests/gpu/kit_extras.sh: adds to .device-kit/debs (made by ../shared/device-kit/prepare) the
# Debian packages gearbox's build needs that the shared device kit does not carry: protobuf-c
# (the TensorBoard event writer's library and its compiler, which the build runs) and what
# protoc-c links, and Jansson (the JSON gearbox reads back); in debs/fallback/ (not unpacked by
# env.sh), Gloo's headers, for a build on the device where PyTorch's libtorch ships none
# (2.11.0's wheel ships none); and in wheels/, ale-py's wheel for the device's Python (3.12, or
# PYVER), which the plan's atari step unpacks for its ALE library and ROMs. Run here (package
# registries reachable; build_for_device.sh runs it when .device-kit/ is missing); env.sh
# unpacks every deb in debs/ there. CMake finds protoc-c through CMAKE_PREFIX_PATH (the kit's
# prefix), the loader its libraries through LD_LIBRARY_PATH.
set -euo pipefail
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then
  sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
kit=.device-kit/debs
[ -d "$kit" ] || { echo "kit_extras: no $kit: run ../shared/device-kit/prepare first" >&2; exit 1; }
cd "$kit"
apt-get download libprotobuf-c-dev libprotobuf-c1 protobuf-c-compiler libprotoc32 libprotobuf32 \
  libjansson4 libjansson-dev >/dev/null
ls -l ./*protobuf* ./*protoc* ./*jansson* | awk '{print "kit_extras:", $5, $9}'
mkdir -p fallback
(cd fallback && apt-get download libgloo-dev >/dev/null &&
  ls -l ./*.deb | awk '{print "kit_extras:", $5, "fallback/" $9}')
mkdir -p ../wheels
python3 -m pip download --quiet "ale-py==0.12.1" --only-binary=:all: --no-deps \
  --python-version "${PYVER:-3.12}" --platform manylinux_2_28_x86_64 -d ../wheels
ls -l ../wheels/ale_py-*.whl | awk '{print "kit_extras:", $5, "wheels/" $9}'
