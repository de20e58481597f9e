#!/usr/bin/env bash
# tests/launch/run_slurm.sh: `gearbox run --backend slurm` on a real one-node Slurm cluster made
# from Debian's packages (munge, slurmctld, slurmd, slurm-client; launch/install-deps.sh installs
# them) with every file in a temporary directory: munged with its own key and socket, slurm.conf
# found through SLURM_CONF, state/spool/logs in the directory; nothing in /etc is read or changed,
# every daemon is stopped and the directory removed on exit. Then:
#  (a) CartPole PPO solves (exit 0, summary.json solved true, mode slurm), with tcp endpoints for
#      the registry and metrics; squeue shows the job (gearbox:<name>) and its steps (params-0,
#      trainer-0, policy-0, actor-0, actor-1) while it runs, nothing once it ended;
#  (b) SIGTERM to the launcher mid-run: it exits (interrupted), squeue is empty and no
#      `gearbox worker` of the run is left;
#  (c) a step that fails (actor-0 SIGKILLed, no restarts allowed): a non-zero exit naming
#      actor-0, with its log tail, and nothing left in squeue;
#  (d) the same with restarts allowed: the watchdog starts a new step for actor-0, the run solves;
#  (e) a job Slurm refuses (a partition that does not exist): a non-zero exit with salloc's
#      reason;
#  (f) SIGTERM while the job is pending behind another: the launcher says Slurm's reason
#      (Resources) and the pending job is cancelled;
#  (g) a job no node can ever run (more CPUs than the node has): refused within seconds with
#      Slurm's reason (PartitionConfig) and the settings to change, nothing left in squeue.
# Skipped (exit 77) where no cluster can be made: not root, or Slurm/munge not installed.
# usage: run_slurm.sh GEARBOX CONFIG WORK_DIR
set -u
gearbox=$(readlink -f "$1") config=$(readlink -f "$2") work=$3
. "$(dirname "$0")/run_lib.sh"
. "$(dirname "$0")/slurm_lib.sh"

[ "$(id -u)" -eq 0 ] || { echo "SKIP: a test Slurm cluster needs root"; exit 77; }
for tool in munged munge slurmctld slurmd salloc srun squeue scancel sinfo; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "SKIP: $tool not installed (launch/install-deps.sh installs Slurm and munge)"; exit 77; }
done

rm -rf "$work"; mkdir -p "$work"
work=$(readlink -f "$work")
D=$(mktemp -d /tmp/gbslurm.XXXXXX)
pids=()
launcher=""
cleanup() {
  # a launcher a failed check left running stops first (it cancels its own job)
  if [ -n "$launcher" ] && kill -TERM "$launcher" 2>/dev/null; then wait "$launcher"; fi
  slurm_stop
  rm -rf "$D"
}
trap cleanup EXIT
trap 'exit 1' TERM INT # the EXIT trap runs on a timeout's SIGTERM too

# --- the cluster -------------------------------------------------------------------------------
slurm_start_one_node gbtest
echo "cluster up: $(sinfo -h -o '%P %D %C %t')"

job_name=gearbox:$(sed -n 's/^  name: *//p' "$config" | head -1) # experiment.name
no_jobs() { # waits up to 10 s for squeue to be empty
  for _ in $(seq 50); do [ -z "$(squeue -h -o %A)" ] && return 0; sleep 0.2; done
  squeue; return 1
}
workers_of() { pgrep -f -- "^$gearbox worker .*--run-dir $1" || true; }
no_workers() {
  for _ in $(seq 50); do [ -z "$(workers_of "$1")" ] && return 0; sleep 0.2; done
  ps -o pid,args -p "$(workers_of "$1" | tr '\n' ,)"; return 1
}

# --- (a) PPO solves ------------------------------------------------------------------------------
start=$SECONDS
"$gearbox" run "$config" --backend slurm --run-dir "$work/solve" --set actors.count=2 \
  --set streams.transport=tcp --set launch.progress=plain > "$work/solve.log" 2>&1 &
launcher=$!
seen_job="" seen_steps=""
while kill -0 "$launcher" 2>/dev/null; do
  seen_job+=$(squeue -h -o '%j' 2>/dev/null)$'\n'
  seen_steps+=$(squeue -s -h -o '%j' 2>/dev/null)$'\n'
  sleep 0.5
done
wait "$launcher"; status=$?
echo "(a) launcher exited with $status after $((SECONDS - start)) s"
tail -n 5 "$work/solve.log"
[ "$status" -eq 0 ] || { cat "$work/solve.log"; fail "(a) the slurm run exited $status"; }
s=$work/solve/summary.json
[ "$(json_get "$s" solved)" = True ] || fail "(a) not solved: $(cat "$s")"
[ "$(json_get "$s" mode)" = slurm ] || fail "(a) summary.json mode $(json_get "$s" mode)"
echo "(a) solved in $(json_get "$s" wall_seconds) s of run time"
grep -qx "$job_name" <<< "$seen_job" || fail "(a) squeue never showed job $job_name: $seen_job"
for step in params-0 trainer-0 policy-0 actor-0 actor-1; do
  grep -qx "$step" <<< "$seen_steps" || fail "(a) squeue -s never showed step $step"
done
# workers on other nodes reach the launcher: its registry (RUN_DIR/registry) is on tcp
grep -q '^tcp://' "$work/solve/registry" ||
  fail "(a) the registry was not on tcp: $(cat "$work/solve/registry" 2>&1)"
no_jobs || fail "(a) the job is still in squeue after the run"
no_workers "$work/solve" || fail "(a) workers left after the run"

# --- (b) SIGTERM to the launcher -----------------------------------------------------------------
"$gearbox" run "$config" --backend slurm --run-dir "$work/term" \
  --set experiment.target_return=1e9 --set experiment.max_seconds=120 \
  --set launch.progress=off > "$work/term.log" 2>&1 &
launcher=$!
wait_for_log "$work/term/logs/actor-0.log" "actor: " 60 || { cat "$work/term.log"; fail "(b) the run did not start"; }
sleep 2
[ -n "$(squeue -h -o %A)" ] || fail "(b) no job in squeue while the run runs"
[ -n "$(workers_of "$work/term")" ] || fail "(b) no workers found"
t=$SECONDS
kill -TERM "$launcher"
wait "$launcher"; status=$?
echo "(b) launcher exited with $status $((SECONDS - t)) s after SIGTERM"
[ "$status" -ne 0 ] || fail "(b) an interrupted run exited 0"
[ "$(json_get "$work/term/summary.json" exit_reason)" = interrupted ] || fail "(b) exit_reason"
no_jobs || fail "(b) the job is still in squeue after SIGTERM"
no_workers "$work/term" || fail "(b) workers left after SIGTERM"

# --- (c) a step that fails ----------------------------------------------------------------------
"$gearbox" run "$config" --backend slurm --run-dir "$work/fail" \
  --set experiment.target_return=1e9 --set experiment.max_seconds=120 \
  --set launch.restart.max_restarts=0 --set launch.progress=off > "$work/fail.log" 2>&1 &
launcher=$!
wait_for_log "$work/fail/logs/actor-0.log" "actor: " 60 || { cat "$work/fail.log"; fail "(c) the run did not start"; }
sleep 1
victim=$(pgrep -f -- "^$gearbox worker --role actor --index 0 --run-dir $work/fail" | head -1)
[ -n "$victim" ] || fail "(c) actor-0's worker process not found"
kill -KILL "$victim"
wait "$launcher"; status=$?
echo "(c) launcher exited with $status after actor-0 was killed; its output:"
sed 's/^/    /' "$work/fail.log" | tail -n 30
[ "$status" -ne 0 ] || fail "(c) a run whose step failed exited 0"
grep -q 'actor-0' "$work/fail.log" || fail "(c) the failing step is not named"
grep -q '^    | ' "$work/fail.log" || fail "(c) no log tail of the failing step"
no_jobs || fail "(c) the job is still in squeue after the failure"
no_workers "$work/fail" || fail "(c) workers left after the failure"

# --- (d) a step that fails with restarts allowed: a new step replaces it and the run solves ------
# The config solves in about 1.5 s, and a CI run once solved before the kill (no actor-0 left to
# kill): a tenth of its learning rate takes 5-12 s
slow=trainer.algorithm.lr=0.0002
"$gearbox" run "$config" --backend slurm --run-dir "$work/restart" --set "$slow" \
  --set launch.progress=off > "$work/restart.log" 2>&1 &
launcher=$!
wait_for_log "$work/restart/logs/actor-0.log" "actor: " 60 || { cat "$work/restart.log"; fail "(d) the run did not start"; }
# at once: the kill must come before the run solves ($slow: 5-12 s of learning)
victim=$(pgrep -f -- "^$gearbox worker --role actor --index 0 --run-dir $work/restart" | head -1)
[ -n "$victim" ] || fail "(d) actor-0's worker process not found"
kill -KILL "$victim"
wait "$launcher"; status=$?
echo "(d) launcher exited with $status after actor-0 was killed with restarts allowed"
[ "$status" -eq 0 ] || { cat "$work/restart.log"; fail "(d) the run did not go on after the restart"; }
grep -q 'worker actor-0 .*restarted it' "$work/restart.log" || fail "(d) actor-0 was not restarted"
[ "$(json_get "$work/restart/summary.json" solved)" = True ] || fail "(d) not solved"
no_jobs || fail "(d) the job is still in squeue after the run"
no_workers "$work/restart" || fail "(d) workers left after the run"

# --- (e) a job Slurm refuses (no such partition): salloc's reason is the error ------------------
"$gearbox" run "$config" --backend slurm --run-dir "$work/refused" \
  --set launch.slurm.partition=nosuch --set launch.progress=off > "$work/refused.log" 2>&1
status=$?
echo "(e) launcher exited with $status for partition nosuch: $(grep -m1 'salloc exited' "$work/refused.log")"
[ "$status" -ne 0 ] || fail "(e) a refused job exited 0"
grep -q 'salloc exited with status .*before the job was granted.*[Pp]artition' "$work/refused.log" ||
  fail "(e) salloc's refusal not reported"
no_jobs || fail "(e) a job is left in squeue"

# --- (f) SIGTERM while the job is pending (another job holds every CPU): it is cancelled --------
salloc --no-shell --job-name=blocker --cpus-per-task=16 > "$work/blocker.log" 2>&1 ||
  fail "(f) the blocking job was not granted: $(cat "$work/blocker.log")"
"$gearbox" run "$config" --backend slurm --run-dir "$work/pending" --set launch.progress=off \
  > "$work/pending.log" 2>&1 &
launcher=$!
wait_for_log "$work/pending/logs/launcher.log" "is pending (Reason=" 30 ||
  fail "(f) the job did not pend, or its reason was not said"
grep -m1 "is pending (Reason=" "$work/pending/logs/launcher.log"
kill -TERM "$launcher"
wait "$launcher"; status=$?
echo "(f) launcher exited with $status after SIGTERM while pending"
[ "$status" -ne 0 ] || fail "(f) an interrupted run exited 0"
for _ in $(seq 50); do [ "$(squeue -h -o %j)" = blocker ] && break; sleep 0.2; done
[ "$(squeue -h -o %j)" = blocker ] || fail "(f) squeue holds more than the blocking job: $(squeue)"
scancel --name=blocker
no_jobs || fail "(f) the blocking job is left"

# --- (g) a job no node can run (64 CPUs for the trainer, 16 on the node): refused at once ------
t=$SECONDS
"$gearbox" run "$config" --backend slurm --run-dir "$work/never" --set launch.slurm.trainer.cpus=64 \
  --set launch.progress=off > "$work/never.log" 2>&1
status=$?
echo "(g) launcher exited with $status after $((SECONDS - t)) s:"
grep -m1 "never start\|salloc exited" "$work/never.log"
[ "$status" -ne 0 ] || fail "(g) a job that can never start exited 0"
[ $((SECONDS - t)) -le 30 ] || fail "(g) the launcher waited $((SECONDS - t)) s on a hopeless job"
grep -q "never start.*Reason=PartitionConfig.*launch.slurm.<role>.cpus" "$work/never.log" ||
  fail "(g) neither Slurm's reason nor the settings to change were said: $(cat "$work/never.log")"
no_jobs || fail "(g) the job is left in squeue"

echo "7 passed, 0 failed"
