#!/usr/bin/env bash
# tests/launch/run_enospc.sh: the run directory's disk fills up mid-run (a small tmpfs the test
# mounts, then filled): the run ends with a non-zero exit status and says why ("No space left
# on device") where the user sees it, instead of running on with its logs, metrics.csv and tb/
# silently cut (it once did, and exited 0). Skipped (exit 77) where mounting is not permitted
# (not root, a container without CAP_SYS_ADMIN).
# usage: run_enospc.sh GEARBOX CONFIG WORK_DIR
set -u
gearbox=$1 config=$2 work=$3
. "$(dirname "$0")/run_lib.sh"
mnt="$work/mnt"
mountpoint -q "$mnt" 2>/dev/null && umount "$mnt"
rm -rf "$work"; mkdir -p "$mnt"
if ! mount -t tmpfs -o size=4m tmpfs "$mnt" 2>"$work/mount.err"; then
  echo "SKIP: cannot mount a tmpfs here: $(cat "$work/mount.err")"; exit 77
fi
launcher=
cleanup() { [ -n "$launcher" ] && kill -KILL "$launcher" 2>/dev/null; umount -l "$mnt"; }
trap cleanup EXIT
export GEARBOX_RUN_TABLE="$work/table"

"$gearbox" run "$config" --run-dir "$mnt/run" --set experiment.max_seconds=60 \
  --set experiment.target_return=1e9 --set experiment.max_env_steps=1000000000 \
  --set experiment.metrics_interval_s=0.05 --set launch.progress=off > "$work/out.log" 2>&1 &
launcher=$!
wait_for_log "$mnt/run/logs/actor-0.log" "actor: " 60 || { cat "$work/out.log"; fail "the run did not start"; }
wait_for_log "$mnt/run/metrics.csv" "^[0-9]" 30 || fail "no metrics row"
dd if=/dev/zero of="$mnt/filler" bs=64k 2>/dev/null  # until the disk is full
start=$SECONDS
wait "$launcher"; status=$?; launcher=
echo "launcher exited with $status $((SECONDS - start)) s after the disk filled"
tail -5 "$work/out.log"
[ "$status" -ne 0 ] || fail "a run whose disk filled up exited 0"
[ $((SECONDS - start)) -le 20 ] || fail "the run went on for $((SECONDS - start)) s on a full disk"
grep -Eq "ERROR launcher (metrics|logs/launcher.log): .*No space left on device" "$work/out.log" ||
  fail "the launcher did not end the run saying the disk is full"
grep -q "summary.json not written" "$work/out.log" || fail "stderr does not say summary.json is missing"
[ -z "$(run_processes "$mnt/run")" ] || fail "workers still running"
echo "1 passed, 0 failed"
