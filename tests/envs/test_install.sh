#!/bin/sh
# tests/envs/test_install.sh: installs gearbox into a temporary prefix and builds the example
# environment plugin out of the tree against it, both ways envs/README.md describes: CMake
# find_package(gearbox) -> gearbox::env, and pkg-config --cflags gearbox. Then the installed
# gearbox checks both plugins, one of the installed configs, and explains a key. From a folder
# outside the repository: the installed corridor config (its env.plugin the installed example
# plugin's absolute path) checks and runs a few thousand steps; the three installed Python
# modules import; the installed offline_bc.py started by a Python without numpy runs again with
# gearbox's Python (PYTHON), or, without that one either, exits 2 saying what to run.
# usage: test_install.sh BUILD_DIR SOURCE_DIR CMAKE C_COMPILER PYTHON
set -eu
build=$1 src=$2 cmake=$3 cc=$4 python=$5
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gearbox-install-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
prefix=$tmp/prefix

"$cmake" --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 || {
    cat "$tmp/install.log"; echo "FAIL: cmake --install"; exit 1; }
test -f "$prefix/include/gearbox/envs/env.h" || { echo "FAIL: env.h not installed"; exit 1; }

# 1. CMake: find_package(gearbox) from the installed package config.
"$cmake" -S "$src/envs/examples" -B "$tmp/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_C_COMPILER="$cc" >"$tmp/configure.log" 2>&1 || {
    cat "$tmp/configure.log"; echo "FAIL: configuring the example against the install"; exit 1; }
"$cmake" --build "$tmp/cmake-build" >"$tmp/build.log" 2>&1 || {
    cat "$tmp/build.log"; echo "FAIL: building the example against the install"; exit 1; }

# 2. pkg-config (--define-prefix: the prefix is where the .pc file lies, since this install was
#    relocated with --prefix).
pcdir=$(dirname "$(find "$prefix" -name gearbox.pc | head -n 1)")
cflags=$(PKG_CONFIG_PATH=$pcdir pkg-config --define-prefix --cflags gearbox)
"$cc" -std=c99 -Wall -Wextra -Werror -O2 -shared -fPIC $cflags \
    "$src/envs/examples/corridor.c" -o "$tmp/corridor_pc.so"

# 3. The installed command checks both builds.
for so in "$tmp/cmake-build/corridor_env.so" "$tmp/corridor_pc.so"; do
    "$prefix/bin/gearbox" env check "$so" --args length=12 --steps 1000 --seconds 0.05 \
        >"$tmp/check.log" 2>&1 || { cat "$tmp/check.log"; echo "FAIL: env check $so"; exit 1; }
    tail -n 1 "$tmp/check.log"
done
# 4. The shipped configs are installed, check with the installed command (their environment
#    loaded too), and the schema's documentation is reachable from the install.
test -f "$prefix/share/gearbox/configs/cartpole_ppo.yaml" || { echo "FAIL: configs not installed"; exit 1; }
"$prefix/bin/gearbox" check "$prefix/share/gearbox/configs/cartpole_ppo.yaml" >"$tmp/check.log" 2>&1 || {
    cat "$tmp/check.log"; echo "FAIL: gearbox check of the installed cartpole_ppo.yaml"; exit 1; }
"$prefix/bin/gearbox" check --explain trainer.checkpoint_every_s >"$tmp/explain.log" 2>&1 &&
    grep -q '^trainer.checkpoint_every_s  (float; default 300' "$tmp/explain.log" || {
    cat "$tmp/explain.log"; echo "FAIL: gearbox check --explain from the install"; exit 1; }
# 5. Shipped plugins are installed where the installed command looks for them by name.
if [ -f "$build/lib/gearbox/envs/gearbox_env_gymnasium.so" ]; then
    test -f "$prefix/lib/gearbox/envs/gearbox_env_gymnasium.so" ||
        test -n "$(find "$prefix" -path '*/gearbox/envs/gearbox_env_gymnasium.so')" ||
        { echo "FAIL: the gymnasium plugin was not installed"; exit 1; }
fi
# 6. The installed corridor config names the installed plugin, and the installed command runs
#    it from a folder outside the repository.
cd "$tmp"
conf=$prefix/share/gearbox/configs/corridor_plugin.yaml
grep -q "^  plugin: \"$prefix/lib[^\"]*/gearbox/examples/corridor_env.so\"\$" "$conf" || {
    grep -n plugin "$conf"
    echo "FAIL: the installed corridor_plugin.yaml does not name the installed plugin"; exit 1; }
"$prefix/bin/gearbox" check "$conf" >"$tmp/check.log" 2>&1 || {
    cat "$tmp/check.log"; echo "FAIL: gearbox check of the installed corridor config"; exit 1; }
"$prefix/bin/gearbox" run "$conf" --run-dir "$tmp/run" --set experiment.max_env_steps=3000 \
    --set launch.progress=off >"$tmp/run.log" 2>&1 || {
    tail -n 20 "$tmp/run.log"; echo "FAIL: gearbox run of the installed corridor config"; exit 1; }
grep -q '"exit_reason": "max_env_steps"' "$tmp/run/summary.json" || {
    cat "$tmp/run/summary.json"; echo "FAIL: the installed corridor run fell short"; exit 1; }
echo "installed corridor_plugin.yaml: check, and a run of" \
    "$(grep -o '"env_steps": [0-9]*' "$tmp/run/summary.json")"

# 7. The installed Python modules import (with the packages they need: gearbox's Python).
pydir=$prefix/share/gearbox/python
for m in gearbox_client gearbox_torch gearbox_shards; do
    test -f "$pydir/$m.py" || { echo "FAIL: $m.py not installed"; exit 1; }
done
PYTHONPATH=$pydir "$python" -c "import gearbox_client, gearbox_torch, gearbox_shards" || {
    echo "FAIL: importing the installed Python modules with $python"; exit 1; }

# 8. offline_bc.py under a Python without numpy: it runs again with gearbox's Python (argument
#    parsing answers --help), or says what to run when that Python is not there.
bc=$pydir/examples/offline_bc.py
/usr/bin/python3 -m venv --without-pip "$tmp/bare" || { echo "FAIL: making a bare venv"; exit 1; }
"$tmp/bare/bin/python" -c "import numpy" 2>/dev/null &&
    { echo "FAIL: the bare venv has numpy"; exit 1; }
GEARBOX_PYTHON=$python "$tmp/bare/bin/python" "$bc" --help >"$tmp/bc.out" 2>&1 &&
    grep -q "^usage: offline_bc.py" "$tmp/bc.out" || {
    cat "$tmp/bc.out"; echo "FAIL: offline_bc.py did not run with gearbox's Python"; exit 1; }
rc=0
GEARBOX_PYTHON=$tmp/no-python "$tmp/bare/bin/python" "$bc" --steps 3 >"$tmp/bc.out" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q "No module named 'numpy'" "$tmp/bc.out" &&
    grep -qF "    $tmp/no-python $bc --steps 3" "$tmp/bc.out" &&
    grep -qF "    $tmp/bare/bin/python -m pip install numpy torch pyzmq msgpack" "$tmp/bc.out" || {
    cat "$tmp/bc.out"; echo "FAIL: offline_bc.py without numpy: exit $rc or the message"; exit 1; }
echo "installed Python modules import; offline_bc.py finds gearbox's Python or says what to run"

echo "installed gearbox: example plugin (#include <gearbox/envs/env.h>) built with"
echo "find_package(gearbox) and with pkg-config; configs in share/gearbox/configs; --explain works;"
echo "shipped environment plugins in lib/gearbox/envs"
