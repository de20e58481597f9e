"""gearbox/sweep_slurm.py: a sweep's trials as one Slurm job array (`launch: slurm` in the sweep
file): every trial one array task running `gearbox run BASE --set ... --run-dir DIR/trial-NNN`
(launch.mode as the config says: the trial's workers run inside its task), at most `parallel`
at once (sbatch --array=0-N%parallel), its output in the trial's logs/console.log. This process
submits the array (sbatch), follows it (squeue) until no task is left, then reads each trial's
summary.json as a local sweep does. Ctrl-C cancels the array (scancel: the running trials stop
as interrupted runs). The trials' values are known before the array starts, so grid and random
only (Optuna's next trial depends on the results before it). The gearbox command, the base
config and the sweep's folder must be reachable at the same paths from the nodes (a shared file
system), as for `gearbox run --backend slurm`."""
import os
import shlex
import shutil
import subprocess
import time

import yaml

from gearbox.command import find_command
from gearbox.metrics import read_summary
from gearbox.configs import set_args
from gearbox.sweep_spec import SweepError, summary_field

FINISHED = ("solved", "max_env_steps", "max_seconds")  # the run ended: gearbox run exits 0
POLL_S = 1.0


def _tool(name, where):
    path = shutil.which(name)
    if not path:
        raise SweepError(f"{where}: launch: slurm needs Slurm's {name} on PATH")
    return path


def job_script(trials, command, base):
    """The array job's script: task i runs trial i's gearbox run. trials: the records."""
    lines = ["#!/bin/bash", "# written by gearbox-sweep: one gearbox run an array task",
             'case "$SLURM_ARRAY_TASK_ID" in']
    for i, rec in enumerate(trials):
        args = [command, "run", base] + set_args(rec["params_all"]) + ["--run-dir",
                                                                       rec["run_dir"]]
        lines.append(f"  {i}) exec {shlex.join(args)} ;;")
    lines += ['  *) echo "no trial for array task $SLURM_ARRAY_TASK_ID" >&2; exit 2 ;;', "esac"]
    return "\n".join(lines) + "\n"


def _base_path(sweep, sweep_dir):
    """The base config as a file the nodes can read: its path, or a mapping written into the
    sweep's folder."""
    if isinstance(sweep.base, str):
        return os.path.abspath(sweep.base)
    path = os.path.abspath(os.path.join(sweep_dir, "base.yaml"))
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(sweep.base, f, sort_keys=False)
    return path


def _submit(sweep, sweep_dir, records):
    """Writes the job script and submits the array. Returns the job id."""
    sbatch = _tool("sbatch", sweep.where)
    base = _base_path(sweep, sweep_dir)
    for rec in records:
        rec["run_dir"] = os.path.abspath(rec["run_dir"])
        rec["params_all"] = {**sweep.fixed, **rec["params"]}
        os.makedirs(os.path.join(rec["run_dir"], "logs"), exist_ok=True)
    script = os.path.abspath(os.path.join(sweep_dir, "slurm_array.sh"))
    with open(script, "w", encoding="utf-8") as f:
        f.write(job_script(records, find_command(), base))
    for rec in records:
        del rec["params_all"]
    last = len(records) - 1
    args = [sbatch, "--parsable", f"--array=0-{last}%{sweep.parallel}",
            f"--job-name=gearbox-sweep:{sweep.name}", "--chdir", os.getcwd(),
            "--output", os.path.join(os.path.abspath(sweep_dir), "trial-%3a", "logs",
                                     "console.log")]
    args += [str(a) for a in sweep.slurm_args] + [script]
    out = subprocess.run(args, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SweepError(f"{sweep.where}: sbatch refused the array: "
                         f"{(out.stderr or out.stdout).strip()}")
    return out.stdout.strip().split(";")[0]


def _tasks_left(job):
    """The array's tasks Slurm still holds (pending or running)."""
    out = subprocess.run(["squeue", "-h", "-r", "-j", job, "-o", "%i %T"], capture_output=True,
                         text=True, check=False)
    if out.returncode != 0:
        return [] if "Invalid job id" in out.stderr else None  # None: ask again
    return [ln for ln in out.stdout.splitlines() if ln.strip()]


def _wait(job):
    """Blocks until no task of the array is left; Ctrl-C cancels it, waits, re-raises."""
    try:
        while _tasks_left(job) != []:
            time.sleep(POLL_S)
    except KeyboardInterrupt:
        subprocess.run(["scancel", job], check=False)
        while _tasks_left(job) != []:
            time.sleep(POLL_S)
        raise


def _fill(rec, sweep):
    """rec from its run directory once its task ended."""
    try:
        summary = read_summary(rec["run_dir"])
    except (OSError, ValueError):
        summary = None
    console = os.path.join(rec["run_dir"], "logs", "console.log")
    try:
        with open(console, encoding="utf-8", errors="replace") as f:
            tail = [ln.strip() for ln in f.readlines()[-20:] if ln.strip()]
    except OSError:
        tail = []
    if summary:
        rec["exit_reason"] = summary.get("exit_reason")
        rec["solved"] = summary.get("solved")
        rec["wall_seconds"] = summary_field(summary, "wall_seconds")
        rec["env_steps"] = summary_field(summary, "env_steps")
    reason = rec["exit_reason"]
    trackers_ok = all(t.get("ok") for t in ((summary or {}).get("trackers") or {}).values())
    if reason == "interrupted":
        rec["status"] = "interrupted"
    elif summary and reason in FINISHED and trackers_ok:  # what gearbox run exits 0 on
        rec["status"], rec["exit_status"] = "ok", 0
        rec["objective"] = summary_field(summary, sweep.objective_key)
    elif summary or tail:
        rec["status"], rec["exit_status"] = "failed", 1
        rec["error"] = (tail[-1] if tail else f"exit_reason {reason}")[-300:]
    else:
        rec["status"], rec["error"] = "cancelled", "its array task did not run"


def run_array(trials, sweep, sweep_dir):
    """Runs sweep's planned trials (a _Trials) as one Slurm array and fills their records.
    Raises SweepError (no Slurm, sbatch refused); KeyboardInterrupt after cancelling. Blocks."""
    _tool("squeue", sweep.where)
    records = [trials.new(p) for p in sweep.planned()]
    job = _submit(sweep, sweep_dir, records)
    print(f"gearbox-sweep: Slurm job {job}, {len(records)} array tasks, at most "
          f"{sweep.parallel} at once")
    for rec in records:
        rec["status"] = "running"
    try:
        _wait(job)
    finally:
        for rec in records:
            _fill(rec, sweep)
