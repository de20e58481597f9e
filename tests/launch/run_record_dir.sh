#!/usr/bin/env bash
# tests/launch/run_record_dir.sh: `gearbox run --record DIR` into a folder that does not exist
# yet (the README's own command on a fresh clone) creates it with its parents and records; one
# that cannot be made (under a file) is refused before any worker starts: exit 2, the cause on
# stderr, no run directory. Both once ended worker_died after three trainer restarts.
# usage: run_record_dir.sh GEARBOX CONFIG WORK_DIR
set -u
gearbox=$1 config=$2 work=$3
. "$(dirname "$0")/run_lib.sh"
rm -rf "$work"; mkdir -p "$work"
common=(--set experiment.max_env_steps=3000 --set experiment.target_return=1e9
        --set launch.progress=off)

"$gearbox" run "$config" --run-dir "$work/ok" --record "$work/not/yet/there" "${common[@]}" \
  > "$work/ok.out" 2>&1 || { tail "$work/ok.out"; fail "recording into a new folder failed"; }
[ -s "$work/not/yet/there/trainer-0.gbds" ] || fail "no recording in $work/not/yet/there"

touch "$work/a_file"
start=$SECONDS
"$gearbox" run "$config" --run-dir "$work/refused" --record "$work/a_file/sub" "${common[@]}" \
  > "$work/refused.out" 2>&1
status=$?
[ "$status" -eq 2 ] || { cat "$work/refused.out"; fail "exit status $status, expected 2"; }
grep -q -- "--record $work/a_file/sub" "$work/refused.out" ||
  { cat "$work/refused.out"; fail "the cause is not said"; }
[ ! -e "$work/refused" ] || fail "a run directory was made for a refused run"
[ $((SECONDS - start)) -lt 10 ] || fail "the refusal took $((SECONDS - start)) s"
echo "run_record_dir: ok"
