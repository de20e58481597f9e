#!/bin/sh
# tests/fuzz/run_fuzz.sh SECONDS [BUILD_DIR [RUNS]]: builds the wire header fuzz target with clang
# (-fsanitize=fuzzer,address,undefined) and fuzzes it for SECONDS (or until RUNS inputs, when
# given and reached first), starting from the committed seed corpus (tests/fuzz/corpus/wire,
# read-only here; new inputs go to BUILD_DIR/corpus).
# Exits non-zero when libFuzzer finds a crash, leak or abort; the input is left in BUILD_DIR.
set -eu
secs=${1:?usage: run_fuzz.sh SECONDS [BUILD_DIR [RUNS]]}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${2:-$root/build-fuzz}
runs=${3:--1}
cc=${CC_FUZZ:-clang}
mkdir -p "$out/corpus" "$out/artifacts"
# shellcheck disable=SC2046
"$cc" -g -O1 -std=c11 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined \
    -fno-sanitize-recover=undefined -I"$root" \
    "$here/fuzz_wire.c" "$root/runtime/streams/wire.c" "$root/runtime/streams/wire_decode.c" \
    "$root/runtime/streams/wire_attr.c" "$root/runtime/streams/wire_schema.c" \
    "$root/runtime/streams/wire_messages.c" \
    "$root/runtime/base/dtype.c" "$root/runtime/base/error.c" \
    $(pkg-config --cflags --libs libzmq msgpack) -o "$out/fuzz_wire"
"$out/fuzz_wire" -max_total_time="$secs" -runs="$runs" -print_final_stats=1 -max_len=9000 \
    -artifact_prefix="$out/artifacts/" "$out/corpus" "$here/corpus/wire"
