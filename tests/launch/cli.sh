#!/usr/bin/env bash
# tests/launch/cli.sh: the gearbox command's contract: --help for every subcommand, --version,
# exit status 0 / 2 (usage or config) / 1 (runtime), `gearbox check` output that loads again,
# check's environment validation (unknown name, missing or broken plugin, bad env.args) and
# `gearbox check --explain [KEY]`.
# usage: cli.sh GEARBOX SOURCE_DIR
set -u
gearbox=$1 src=$2
passed=0 failed=0
expect() { # expect STATUS DESCRIPTION COMMAND...
  local want=$1 what=$2; shift 2
  "$@" >/tmp/gb_cli_out.$$ 2>&1
  local rc=$?
  if [ "$rc" -eq "$want" ]; then passed=$((passed + 1));
  else failed=$((failed + 1)); echo "FAIL $what: exit $rc, expected $want"; head -5 /tmp/gb_cli_out.$$; fi
}
expect 0 "--help" "$gearbox" --help
expect 0 "--version" "$gearbox" --version
grep -q '^gearbox [0-9]' /tmp/gb_cli_out.$$ || { failed=$((failed + 1)); echo "FAIL --version text"; }
expect 2 "no command" "$gearbox"
expect 2 "unknown command" "$gearbox" frobnicate
for cmd in run serve check bench env worker eval; do
  expect 0 "$cmd --help" "$gearbox" "$cmd" --help
  grep -qi 'usage' /tmp/gb_cli_out.$$ || { failed=$((failed + 1)); echo "FAIL $cmd --help has no usage"; }
done
expect 2 "check without config" "$gearbox" check
expect 2 "check unknown option" "$gearbox" check "$src/configs/cartpole_ppo.yaml" --frob
expect 2 "check two configs" "$gearbox" check a.yaml b.yaml
expect 2 "check missing file" "$gearbox" check /nonexistent/x.yaml
expect 2 "bench without name" "$gearbox" bench
# Where there is no CUDA device (or no CUDA in the build): refused up front, before any worker
# or the run directory, not silently run on the cpu.
if ! nvidia-smi -L >/dev/null 2>&1; then
  expect 2 "run trainer.device=cuda" "$gearbox" run "$src/configs/cartpole_ppo.yaml" \
    --set trainer.device=cuda --set launch.mode=local --run-dir /tmp/gb_cli_run.$$
  want='trainer.device: cuda: (no CUDA device is visible here|this gearbox was built without CUDA)'
  grep -Eq "$want" /tmp/gb_cli_out.$$ ||
    { failed=$((failed + 1)); echo "FAIL run trainer.device=cuda: no message naming the key"; }
  [ ! -e /tmp/gb_cli_run.$$ ] ||
    { failed=$((failed + 1)); echo "FAIL a refused run made its run directory"; }
fi
for b in $("$gearbox" bench --help | awk '/^benchmarks:/ {on = 1; next} on && NF {print $1}'); do
  expect 0 "bench $b --help" "$gearbox" bench "$b" --help
  grep -q "usage: gearbox bench $b" /tmp/gb_cli_out.$$ ||
    { failed=$((failed + 1)); echo "FAIL bench $b --help has no usage"; }
  expect 2 "bench $b unknown option" "$gearbox" bench "$b" --frob
done
# `bench learner` names what computed the network's forward and backward (trainer.kernels)
for k in "gearbox|gearbox C" "libtorch|libtorch autograd"; do
  expect 0 "bench learner kernels ${k%%|*}" "$gearbox" bench learner --json --quick \
    "$src/configs/cartpole_dqn.yaml" --set trainer.kernels="${k%%|*}"
  grep -q "\"kernels\": \"${k#*|}\"" /tmp/gb_cli_out.$$ ||
    { failed=$((failed + 1)); echo "FAIL bench learner: no kernels ${k#*|}"
      head -3 /tmp/gb_cli_out.$$; }
done
# ... and the BLAS libtorch's products run on: OpenBLAS and its kernels, or another
grep -Eq '"blas": "(OpenBLAS [A-Za-z0-9_]+|not OpenBLAS)"' /tmp/gb_cli_out.$$ ||
  { failed=$((failed + 1)); echo "FAIL bench learner: no blas"; head -3 /tmp/gb_cli_out.$$; }
# `check` loads the environment and creates one copy: an unknown name, a missing or broken
# plugin and bad env.args fail there (exit 2, the cause named), not only at `run`.
minimal=$src/tests/data/configs/good/minimal.yaml
expect_check_env() { # DESCRIPTION PATTERN --set ARGS...
  local what=$1 pat=$2; shift 2
  expect 2 "check $what" "$gearbox" check "$minimal" "$@"
  grep -q -- "$pat" /tmp/gb_cli_out.$$ ||
    { failed=$((failed + 1)); echo "FAIL check $what: no '$pat' in:"; head -3 /tmp/gb_cli_out.$$; }
}
expect_check_env "unknown env" "^--set\[1\]:1:10: env.name: unknown environment 'NoSuchEnv-v0'" \
  --set env.name=NoSuchEnv-v0
expect_check_env "missing plugin" "environment plugin /nonexistent/env.so: No such file" \
  --set env.name=plugin --set env.plugin=/nonexistent/env.so
echo "not a shared library" > /tmp/gb_cli_broken.$$.so
expect_check_env "broken plugin" "environment plugin /tmp/gb_cli_broken.$$.so: cannot load" \
  --set env.name=plugin --set env.plugin=/tmp/gb_cli_broken.$$.so
rm -f /tmp/gb_cli_broken.$$.so
expect_check_env "bad env.args" "sutton_barto_reward must be 0 or 1" \
  --set env.args.sutton_barto_reward=5
expect_check_env "unknown env.args key" "CartPole-v1" --set env.args.gravity=3
# `gearbox env check` with --args the environment refuses: exit 2 (it was 1, as for a
# misbehaving environment)
expect 2 "env check bad --args" "$gearbox" env check CartPole-v1 --args sutton_barto_reward=5
grep -q "sutton_barto_reward must be 0 or 1" /tmp/gb_cli_out.$$ ||
  { failed=$((failed + 1)); echo "FAIL env check bad --args: the cause is not said"; }
expect 0 "env check good --args" "$gearbox" env check CartPole-v1 --args sutton_barto_reward=1 \
  --steps 200 --seconds 0.05
# the memory tasks: Recall-v0's delay and symbols, CartPoleNoVel-v1's arguments
for bad in "Recall-v0 delay=0|delay must be an integer in \[1, 100000\]" \
           "Recall-v0 symbols=1|symbols must be an integer in \[2, 64\]" \
           "Recall-v0 delay=x|delay must be an integer" \
           "CartPoleNoVel-v1 sutton_barto_reward=5|CartPoleNoVel-v1: sutton_barto_reward must be"; do
  set -- ${bad%%|*}
  expect 2 "env check $1 --args $2" "$gearbox" env check "$1" --args "$2"
  grep -q "${bad#*|}" /tmp/gb_cli_out.$$ ||
    { failed=$((failed + 1)); echo "FAIL env check $1 --args $2: the cause is not said"; }
done
expect 0 "env check Recall-v0 delay=20" "$gearbox" env check Recall-v0 --args delay=20 symbols=3 \
  --steps 2000 --seconds 0.05
# `gearbox env spec`: the networks' spaces as JSON (a box's bounds), a missing config exit 2
expect 0 "env spec pendulum" "$gearbox" env spec "$src/configs/pendulum_sac.yaml"
grep -q '"action": {"kind": "box", "dim": 1, "low": \[-2\], "high": \[2\]}' /tmp/gb_cli_out.$$ ||
  { failed=$((failed + 1)); echo "FAIL env spec pendulum:"; cat /tmp/gb_cli_out.$$; }
expect 2 "env spec missing config" "$gearbox" env spec /nonexistent/config.yaml
# --explain: one key, a section, every key; an unknown key is a usage error.
expect 0 "check --explain key" "$gearbox" check --explain experiment.eval_every
grep -q '^experiment.eval_every  (int; default 0; range \[0, 2^53\])' /tmp/gb_cli_out.$$ &&
  grep -q 'RUN_DIR/videos' /tmp/gb_cli_out.$$ ||
  { failed=$((failed + 1)); echo "FAIL check --explain experiment.eval_every:"; cat /tmp/gb_cli_out.$$; }
expect 0 "check --explain section" "$gearbox" check --explain trainer.replay
[ "$(grep -c '^trainer\.replay\.' /tmp/gb_cli_out.$$)" -ge 8 ] &&
  ! grep -q '^experiment\.' /tmp/gb_cli_out.$$ ||
  { failed=$((failed + 1)); echo "FAIL check --explain trainer.replay: not just that section"; }
expect 0 "check --explain all" "$gearbox" check --explain
grep -q '^launch.mode  (choice; default local; one of local | slurm | inline)' /tmp/gb_cli_out.$$ &&
  [ "$(grep -c '^[a-z_]*\.[a-z_.]*  (' /tmp/gb_cli_out.$$)" -ge 100 ] ||
  { failed=$((failed + 1)); echo "FAIL check --explain: not every key"; }
expect 2 "check --explain unknown" "$gearbox" check --explain trainer.nosuchkey
grep -q 'no key or section "trainer.nosuchkey"' /tmp/gb_cli_out.$$ ||
  { failed=$((failed + 1)); echo "FAIL check --explain unknown: message"; }
# The shipped configs check (their environments included) and resolve to a fixed point. The
# plugin config names its library relative to the repository root: here, the build's own.
build=$(dirname "$gearbox")
for f in "$src"/configs/*.yaml; do
  sets=()
  # the gymnasium plugin is not built in sanitizer builds (CPython's leaks): its config then
  # has no environment to check
  if grep -q '^  name: gymnasium' "$f" && [ ! -f "$build/lib/gearbox/envs/gearbox_env_gymnasium.so" ]; then
    echo "skip $f: no gymnasium plugin in this build"
    continue
  fi
  grep -q '^  name: plugin' "$f" && sets=(--set "env.plugin=$build/envs/examples/corridor_env.so")
  expect 0 "check $f" "$gearbox" check "$f" "${sets[@]}"
  cp /tmp/gb_cli_out.$$ /tmp/gb_cli_resolved.$$.yaml
  expect 0 "check resolved $f" "$gearbox" check /tmp/gb_cli_resolved.$$.yaml
  if ! diff <(tail -n +2 /tmp/gb_cli_resolved.$$.yaml) <(tail -n +2 /tmp/gb_cli_out.$$) >/dev/null; then
    failed=$((failed + 1)); echo "FAIL resolved output of $f is not a fixed point"
  fi
done
# the command copied where no libtorch module lies beside it: a plain MLP's inline run needs none
# and solves (workers/roles/learning.h, "The learning without libtorch"); one on libtorch's
# learner (trainer.kernels libtorch) fails (exit 1), and the reason from the first place tried
# is readable (it once printed garbage: dlerror's buffer reused by the second dlopen)
lone=$(mktemp -d /tmp/gb_cli_lone.XXXXXX)
cp "$gearbox" "$lone/gearbox"
(cd "$lone" && env -u GEARBOX_TORCH_MODULE ./gearbox run "$src/configs/cartpole_ppo.yaml" \
  --set launch.mode=inline --run-dir "$lone/plain" >/tmp/gb_cli_out.$$ 2>&1)
rc=$?
if [ "$rc" -eq 0 ] && grep -q '"solved": true' "$lone/plain/summary.json"; then
  passed=$((passed + 1))
else
  failed=$((failed + 1)); echo "FAIL no module, plain MLP: exit $rc"; tail -3 /tmp/gb_cli_out.$$
fi
(cd "$lone" && env -u GEARBOX_TORCH_MODULE ./gearbox run "$src/configs/cartpole_ppo.yaml" \
  --set launch.mode=inline --set trainer.kernels=libtorch --run-dir "$lone/run" \
  >/tmp/gb_cli_out.$$ 2>&1)
rc=$?
why="$lone/libgearbox-torch.so ($lone/libgearbox-torch.so: cannot open shared object file"
if [ "$rc" -eq 1 ] && grep -qF "libtorch module $why" /tmp/gb_cli_out.$$; then
  passed=$((passed + 1))
else
  failed=$((failed + 1)); echo "FAIL no module: exit $rc"; grep -i "libtorch module" /tmp/gb_cli_out.$$
fi
rm -rf "$lone"
rm -f /tmp/gb_cli_out.$$ /tmp/gb_cli_resolved.$$.yaml
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
