#!/bin/sh
# tests/envs/test_install.sh: installs gearbox into a temporary prefix and builds the example
# environment plugin out of the tree against it, both ways envs/README.md describes: CMake
# find_package(gearbox) -> gearbox::env, and pkg-config --cflags gearbox. Then the installed
# gearbox checks both plugins, one of the installed configs, and explains a key.
# usage: test_install.sh BUILD_DIR SOURCE_DIR CMAKE C_COMPILER
set -eu
build=$1 src=$2 cmake=$3 cc=$4
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
echo "installed gearbox: example plugin (#include <gearbox/envs/env.h>) built with"
echo "find_package(gearbox) and with pkg-config; configs in share/gearbox/configs; --explain works;"
echo "shipped environment plugins in lib/gearbox/envs"
