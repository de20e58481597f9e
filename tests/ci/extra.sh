#!/usr/bin/env bash
# tests/ci/extra.sh: the checks .ci/run adds after the main and sanitizer test runs:
#  - ThreadSanitizer on the replay's concurrency tests (the replay does not use ZeroMQ), and on
#    the inference stream tests (the pipelined server's request and inference threads) with
#    tests/streams/tsan.supp: Debian's libzmq is not instrumented, so reports with a libzmq
#    frame in a racing stack are its internals, not ours;
#  - a bounded libFuzzer run (60 s) of the wire header decoder.
set -euo pipefail
cd "$(dirname "$0")/../.."
jobs=$(nproc)
tsan_tests="test_replay_concurrency test_replay_basic test_replay_ratelimit test_replay_checkpoint test_replay_remote
  test_replay_selectors"
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGEARBOX_SANITIZE=thread \
  -DGEARBOX_CUDA=OFF -DGEARBOX_TORCH=OFF
# shellcheck disable=SC2086
cmake --build build-tsan -j"$jobs" --target $tsan_tests
TSAN_OPTIONS=halt_on_error=1 ctest --test-dir build-tsan --output-on-failure \
  -R "^($(echo $tsan_tests | tr ' ' '|'))$"
stream_tsan_tests="test_inference test_inference_pipelined"
# shellcheck disable=SC2086
cmake --build build-tsan -j"$jobs" --target $stream_tsan_tests
TSAN_OPTIONS="halt_on_error=1 suppressions=$PWD/tests/streams/tsan.supp" \
  ctest --test-dir build-tsan --output-on-failure -R "^($(echo $stream_tsan_tests | tr ' ' '|'))$"
tests/fuzz/run_fuzz.sh 60 build-fuzz
