#!/usr/bin/env bash
# tests/launch/run_validate.sh: `gearbox run` and `gearbox check` validate a config the same way
# (launch/validate.h): for an unknown environment name, a plugin path that resolves from
# nowhere, cuda without a CUDA device and a good config, both give the same exit status and
# the same first error line, and a refused run starts no worker and makes no run directory, in
# every launch mode (local, inline, slurm: refused before Slurm is asked). Before, run started
# the workers, restarted them three times and exited 1 where check said 2, and check accepted a
# cuda trainer on a machine without a GPU. Also: a relative env.plugin is found beside the config
# file from any folder, and the resolved config names it absolutely; and `gearbox join` refuses a
# run whose environment this host lacks, before starting any worker.
# usage: run_validate.sh GEARBOX SOURCE_DIR WORK_DIR CORRIDOR_PLUGIN.so
set -u
gearbox=$1 src=$2 work=$3 corridor=$4
. "$(dirname "$0")/run_lib.sh"
rm -rf "$work"; mkdir -p "$work/elsewhere"
cd "$work/elsewhere" || fail "cannot enter $work/elsewhere"
passed=0
quick=(--set experiment.max_env_steps=20000 --set experiment.max_seconds=120
       --set experiment.target_return=1e9
       --set launch.progress=off --set "experiment.run_root=$work/runs")

# same CASE WANT CONFIG ARGS...: check and run (in a run directory of its own) give exit status
# WANT and the same first line on stderr; a refused run leaves no run directory, no run_root.
same() {
  local what=$1 want=$2; shift 2
  "$gearbox" check "$@" "${quick[@]}" > "$work/$what.check.out" 2> "$work/$what.check.err"
  local crc=$?
  local start=$SECONDS
  "$gearbox" run "$@" "${quick[@]}" --run-dir "$work/run_$what" > "$work/$what.run.out" \
    2> "$work/$what.run.err"
  local rrc=$?
  local cline rline
  cline=$(head -1 "$work/$what.check.err") rline=$(head -1 "$work/$what.run.err")
  [ "$crc" -eq "$want" ] ||
    { cat "$work/$what.check.err"; fail "$what: check exited $crc, not $want"; }
  [ "$rrc" -eq "$want" ] ||
    { tail "$work/$what.run.err"; fail "$what: run exited $rrc, not $want"; }
  if [ "$want" -ne 0 ]; then
    [ -n "$cline" ] && [ "$cline" = "$rline" ] ||
      fail "$what: first error lines differ:"$'\n'"  check: $cline"$'\n'"  run:   $rline"
    [ ! -e "$work/run_$what" ] && [ ! -e "$work/runs" ] ||
      fail "$what: a refused run made its run directory"
    ! grep -q "started .* workers\|restarted" "$work/$what.run.err" ||
      fail "$what: a refused run started workers"
    [ $((SECONDS - start)) -lt 10 ] || fail "$what: the refusal took $((SECONDS - start)) s"
  fi
  echo "$what: check and run exit $want${cline:+: $cline}" | cut -c1-200
  passed=$((passed + 1))
}
cartpole=$src/configs/cartpole_ppo.yaml

# 1. an unknown environment name, in each launch mode; the message names the key, where it was
# set, the valid names and the one meant
same bad_name 2 "$cartpole" --set env.name=CartPole-v2
grep -q "^--set\[1\]:1:10: env.name: unknown environment 'CartPole-v2' (did you mean CartPole-v1?" \
  "$work/bad_name.run.err" || fail "bad_name: the message: $(head -1 "$work/bad_name.run.err")"
same bad_name_inline 2 "$cartpole" --set env.name=CartPole-v2 --set launch.mode=inline
"$gearbox" run "$cartpole" --backend slurm --set env.name=CartPole-v2 "${quick[@]}" \
  --run-dir "$work/run_slurm" 2> "$work/slurm.err"
[ $? -eq 2 ] && [ "$(head -1 "$work/slurm.err")" = "$(head -1 "$work/bad_name.check.err")" ] &&
  [ ! -e "$work/run_slurm" ] ||
    { cat "$work/slurm.err"; fail "run --backend slurm: not refused alike"; }
passed=$((passed + 1))

# 2. a plugin config used from outside its project (as configs/corridor_plugin.yaml was from
# outside the repository root): its relative env.plugin is found neither beside the config nor
# here; the message names both paths tried
mkdir -p "$work/proj/configs" "$work/proj/lib"
sed 's|^  plugin: .*|  plugin: build/envs/examples/corridor_env.so|' \
  "$src/configs/corridor_plugin.yaml" > "$work/proj/configs/bad_plugin.yaml"
same bad_plugin 2 "$work/proj/configs/bad_plugin.yaml"
tried="tried $work/proj/configs/build/envs/examples/corridor_env.so (beside the config file)"
tried+=" and $work/elsewhere/build/envs/examples/corridor_env.so (the current folder)"
want_msg="env.plugin: no file build/envs/examples/corridor_env.so: $tried"
grep -q "bad_plugin.yaml:[0-9]*:[0-9]*: $want_msg" "$work/bad_plugin.run.err" ||
  fail "bad_plugin: the message: $(head -1 "$work/bad_plugin.run.err")"

# 3. a cuda trainer (or policy worker) where no CUDA device is visible: refused by both
if ! nvidia-smi -L > /dev/null 2>&1; then
  same cuda_trainer 2 "$cartpole" --set trainer.device=cuda
  no_cuda="(no CUDA device is visible here|this gearbox was built without CUDA)"
  grep -Eq "^--set\[1\]:1:16: trainer.device: cuda: $no_cuda" \
    "$work/cuda_trainer.run.err" || fail "cuda_trainer: the message"
  same cuda_trainer_inline 2 "$cartpole" --set trainer.device=cuda --set launch.mode=inline
else
  echo "skip cuda cases: a CUDA device is visible here"
fi

# 4. good configs pass both and run: a built-in, and a config elsewhere naming its plugin
# relative to its own folder, used from a third folder
same good 0 "$cartpole"
cp "$corridor" "$work/proj/lib/corridor_env.so"
sed 's|^  plugin: .*|  plugin: ../lib/corridor_env.so|' "$src/configs/corridor_plugin.yaml" \
  > "$work/proj/configs/corridor.yaml"
same good_plugin 0 "$work/proj/configs/corridor.yaml"
grep -q "^  plugin: \"$work/proj/lib/corridor_env.so\"" "$work/good_plugin.check.out" ||
  fail "check does not print the plugin's absolute path:" \
    "$(grep plugin: "$work/good_plugin.check.out")"
grep -q "^  plugin: \"$work/proj/lib/corridor_env.so\"" "$work/run_good_plugin/config.yaml" ||
  fail "the run's config.yaml does not name the plugin absolutely"
# a --set path is typed where gearbox runs: found from the current folder
(cd "$work/proj" && "$gearbox" check "$work/proj/configs/corridor.yaml" \
  --set env.plugin=lib/corridor_env.so > /dev/null) || fail "--set env.plugin relative to here"
passed=$((passed + 1))

# 5. gearbox join validates the run's config for its role on the joining host: a plugin this host
# lacks (here: moved away after the run loaded it) is refused with exit 2 before any worker
# starts, and takes one slot, not --count of them
cp "$corridor" "$work/proj/lib/joined_env.so"
"$gearbox" run "$work/proj/configs/corridor.yaml" --run-dir "$work/run_join" \
  --set env.plugin="$work/proj/lib/joined_env.so" --set streams.transport=tcp \
  --set streams.interface=127.0.0.1 --set actors.join_max=4 --set experiment.max_seconds=60 \
  --set launch.progress=off > "$work/join_run.out" 2>&1 &
launcher=$!
wait_for_log "$work/run_join/logs/actor-0.log" "actor: " 60 || fail "join: the run did not start"
mv "$work/proj/lib/joined_env.so" "$work/proj/lib/joined_env.so.gone"
"$gearbox" join "$(cat "$work/run_join/registry")" --role actor --count 3 \
  --keys "$work/run_join/keys" > "$work/join.out" 2>&1
jrc=$?
kill -TERM "$launcher"; wait "$launcher"
[ "$jrc" -eq 2 ] || { cat "$work/join.out"; fail "join: exit $jrc, expected 2"; }
grep -q "env.plugin: environment plugin $work/proj/lib/joined_env.so: No such file" \
  "$work/join.out" ||
  fail "join: the message: $(cat "$work/join.out")"
! grep -q "workers (index" "$work/join.out" || fail "join: workers were started"
[ "$(json_get "$work/run_join/summary.json" joined)" -le 1 ] ||
  fail "join: $(json_get "$work/run_join/summary.json" joined) slots taken by a refused join"
echo "join: refused on this host with exit 2: $(head -1 "$work/join.out" | cut -c1-150)"
passed=$((passed + 1))
echo "$passed passed, 0 failed"
