#!/usr/bin/env bash
# tests/ci/extra.sh: the checks .ci/run adds to the main and sanitizer test runs:
#  - ThreadSanitizer, one build (build-tsan) with libtorch on, so the workers are instrumented too:
#    - the replay's concurrency tests (the replay does not use ZeroMQ) and the fork-join team
#      (runtime/base/team.h): no suppressions;
#    - the stream tests (the pipelined inference server's threads; the sample stream's counters
#      read while another thread receives) with tests/runtime/streams/tsan.supp: Debian's libzmq
#      is not instrumented, so reports with a libzmq frame in a racing stack are its internals,
#      not ours;
#    - the workers: the torch bridge's tests, PPO's C learner with a core on threads
#      (test_ppo_core), an inline run of its env-step budget (PPO on
#      CartPole, 30k env steps, 58 training steps: the threads' interplay; the learning itself
#      is the release build's test_inline_learn), and a real multi-process run
#      (gearbox run configs/cartpole_ppo.yaml: actor, policy, trainer and parameter service
#      processes, each with its threads) with tests/ci/tsan_workers.supp (libzmq, libtorch,
#      libgomp, BLAS: not instrumented). Every process inherits TSAN_OPTIONS: a race in our code
#      makes the worker exit with status 66 and the run fail;
#  - a bounded libFuzzer run (8M inputs, at most 240 s) of the wire header decoder, beside the
#    TSan ctest tests.
# usage: tests/ci/extra.sh [build|test|quiet|tail]: build only, test only (what was built), or
# both (default). The tests are two parts: quiet (the TSan ctest tests but the timed ones, and the
# fuzzer), which .ci/run runs at the lowest CPU priority beside its main tests, and tail (the
# timed TSan tests and the real run, which need the cores), which it runs after them; test is
# quiet then tail.
# .ci/run builds while its main tests run (the fuzz target, one clang call, is built by the quiet
# part). On 2 cores the builds take about 10 minutes with a cold ccache (mostly the instrumented
# libtorch bridge).
set -euo pipefail
cd "$(dirname "$0")/../.."
what=${1:-all}
case "$what" in build|test|quiet|tail|all) ;; *) echo "usage: $0 [build|test|quiet|tail]" >&2
  exit 2 ;; esac
jobs=$(nproc)
tsan() { # tsan SUPPRESSIONS_FILE|- COMMAND...: runs COMMAND with fatal TSan reports
  local supp=$1
  shift
  local opts="halt_on_error=1 exitcode=66 second_deadlock_stack=1"
  [ "$supp" = - ] || opts="$opts suppressions=$PWD/$supp"
  TSAN_OPTIONS="$opts" "$@"
}
replay_tests="test_replay_concurrency test_replay_basic test_replay_ratelimit test_replay_checkpoint
  test_replay_remote test_replay_selectors test_replay_shard_ops test_team"
stream_tests="test_inference test_inference_pipelined test_sample test_malformed_peer test_registry
  test_runctl"
worker_tests="test_torch_model test_torch_losses test_inline_learn test_ppo_core"
if [ "$what" = build ] || [ "$what" = all ]; then
  # line tables only (-g1), as .ci/run's ASan build: reports keep file and line, a third less CPU
  cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGEARBOX_SANITIZE=thread \
    -DGEARBOX_CUDA=OFF -DGEARBOX_TORCH=ON -DGEARBOX_TESTS=ON -DGEARBOX_WERROR=ON \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG"
  # shellcheck disable=SC2086
  cmake --build build-tsan -j"$jobs" --target gearbox $replay_tests $stream_tests $worker_tests
fi
[ "$what" != build ] || exit 0
re() { echo "^($(echo "$@" | tr ' ' '|'))$"; }
if [ "$what" != tail ]; then
  # The fuzzer (one process, one core) runs beside the TSan unit and integration tests (one at a
  # time), its output to a log shown when it fails; not beside the real run below, whose workers
  # under TSan need the cores to drain their chunks within the launcher's stop. Bounded by inputs
  # (8M; 60 s of a whole core of the 2-core AMD EPYC made 8.8M), with 240 s at most, since
  # .ci/run gives it only the idle CPU.
  mkdir -p build-fuzz
  tests/fuzz/run_fuzz.sh 240 build-fuzz 8000000 > build-fuzz/fuzz.log 2>&1 &
  fuzz=$!
  # shellcheck disable=SC2086
  tsan - ctest --test-dir build-tsan --output-on-failure -LE '^timed$' -R "$(re $replay_tests)"
  # shellcheck disable=SC2086
  tsan tests/runtime/streams/tsan.supp ctest --test-dir build-tsan --output-on-failure \
    -LE '^timed$' -R "$(re $stream_tests)"
  # shellcheck disable=SC2086
  tsan tests/ci/tsan_workers.supp ctest --test-dir build-tsan --output-on-failure -LE '^timed$' \
    -R "$(re $worker_tests)" -E '^test_inline_learn'
  mkdir -p build-tsan/inline-budget
  tsan tests/ci/tsan_workers.supp build-tsan/tests/workers/test_inline_learn \
    tests/workers/ppo_cartpole.yaml build-tsan/inline-budget experiment.target_return=null \
    experiment.max_env_steps=30000
  if ! wait "$fuzz"; then
    tail -n 60 build-fuzz/fuzz.log
    echo "extra.sh: the fuzz run failed (the end of build-fuzz/fuzz.log is above)" >&2
    exit 1
  fi
  grep -E "^(Done|stat::)" build-fuzz/fuzz.log || tail -n 3 build-fuzz/fuzz.log
fi
[ "$what" != quiet ] || exit 0
# The timed ones of those tests (label timed: test_runctl), at the cores' normal priority.
# shellcheck disable=SC2086
tsan tests/runtime/streams/tsan.supp ctest --test-dir build-tsan --output-on-failure -L '^timed$' \
  -R "$(re $replay_tests $stream_tests $worker_tests)"
# A real distributed run under TSan: small budget (TSan slows libtorch's callers 5-15x); any
# return counts, the point is that every process runs and stops without a report.
tsan tests/ci/tsan_workers.supp tests/launch/run_learns.sh build-tsan/gearbox \
  configs/cartpole_ppo.yaml build-tsan/tsan-run 0 100000
