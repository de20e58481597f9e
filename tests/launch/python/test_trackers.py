"""tests/launch/python/test_trackers.py: experiment.trackers, the config key: `gearbox check`
refuses a tracker named twice, a missing Python and a Python without the tracker's package
(status 2, the key named); `gearbox run` of CartPole PPO with [mlflow, wandb] feeds both from
its followers (MLflow's store under run_root holds the run's rows and a FINISHED run, W&B's
offline run is in the run directory) and summary.json says both were ok; the same in inline
mode; a tracker that fails at run time (an MLflow store it cannot write) fails the command
(status 1), summary.json names it and why, stderr says how to export afterwards, and the run
itself ended as usual.
Usage: test_trackers.py GEARBOX SOURCE_ROOT WORK_DIR (exits 77, skipped, without MLflow or W&B)"""
import glob
import json
import os
import subprocess
import sys

from harness import check, finish, setup

GEARBOX, SRC, WORK = setup()
try:
    import mlflow
    import wandb  # noqa: F401
except ImportError as e:
    print(f"{e.name} is not installed (launch/python-requirements.txt): skipped")
    sys.exit(77)

CONFIG = os.path.join(SRC, "configs", "cartpole_ppo.yaml")
BASE = ["--set", f"experiment.run_root={WORK}", "--set", "experiment.max_seconds=120"]


def gearbox(*args):
    p = subprocess.run([GEARBOX] + list(args), capture_output=True, text=True, check=False)
    return p.returncode, p.stdout, p.stderr


def summary_of(run_dir):
    with open(os.path.join(run_dir, "summary.json"), encoding="utf-8") as f:
        return json.load(f)


# refused before anything starts
rc, _, err = gearbox("check", CONFIG, "--set", "experiment.trackers=[mlflow, mlflow]")
check(rc == 2 and "experiment.trackers" in err and "twice" in err, f"a tracker twice: {err}")
rc, _, err = gearbox("check", CONFIG, "--set", "experiment.trackers=[wandb]",
                     "--set", "experiment.trackers_python=/nonexistent/python")
check(rc == 2 and "experiment.trackers_python" in err and "/nonexistent/python" in err,
      f"a missing Python: {err.strip()}")
rc, _, err = gearbox("check", CONFIG, "--set", "experiment.trackers=[mlflow]",
                     "--set", "experiment.trackers_python=/usr/bin/python3")
check(rc == 2 and "lacks mlflow" in err and "pip install mlflow-skinny" in err,
      f"a Python without MLflow (Debian's): {err.strip()}")
rc, out, err = gearbox("check", CONFIG, "--set", "experiment.trackers=[mlflow, wandb]")
check(rc == 0 and "trackers: [mlflow, wandb]" in out, f"both in gearbox's Python: {err}")

# a run fed to both, then the same inline
os.environ["WANDB_SILENT"] = "true"
os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 keeps it on request
client = mlflow.MlflowClient(tracking_uri=os.path.join(WORK, "mlruns"))
for mode in ("local", "inline"):
    run_dir = os.path.join(WORK, mode)
    rc, out, err = gearbox("run", CONFIG, *BASE, "--set", "experiment.trackers=[mlflow, wandb]",
                           "--set", f"launch.mode={mode}", "--run-dir", run_dir)
    s = summary_of(run_dir)
    check(rc == 0 and s["exit_reason"] in ("solved", "max_seconds"),
          f"{mode}: ended, status {rc}: {err[-300:]}")
    check(s.get("trackers", {}).get("mlflow", {}).get("ok") is True
          and s["trackers"].get("wandb", {}).get("ok") is True,
          f"{mode}: summary.json says both trackers were ok: {s.get('trackers')}")
    runs = [r for r in client.search_runs(
        [e.experiment_id for e in client.search_experiments()])
        if r.data.tags.get("gearbox.run_dir") == os.path.abspath(run_dir)]
    check(len(runs) == 1 and runs[0].info.status == "FINISHED",
          f"{mode}: one FINISHED MLflow run in <run_root>/mlruns")
    if runs:
        with open(os.path.join(run_dir, "metrics.csv"), encoding="utf-8") as f:
            n_rows = sum(1 for _ in f) - 1
        steps = client.get_metric_history(runs[0].info.run_id, "env_steps")
        check(len(steps) == n_rows and n_rows > 1,
              f"{mode}: MLflow has every metrics row ({len(steps)} of {n_rows})")
    files = glob.glob(os.path.join(run_dir, "wandb", "offline-run-*", "run-*.wandb"))
    check(len(files) == 1, f"{mode}: W&B's offline run in the run directory")

# a tracker that fails while the run goes: the run ends as usual, the command does not pass
run_dir = os.path.join(WORK, "failing")
rc, out, err = gearbox("run", CONFIG, *BASE, "--set", "experiment.trackers=[mlflow]",
                       "--set", "experiment.mlflow_uri=/proc/no/mlruns", "--run-dir", run_dir)
s = summary_of(run_dir)
t = s.get("trackers", {}).get("mlflow", {})
print("failing tracker:", t)
check(rc == 1, f"a failed tracker fails the command: status {rc}")
check(s["exit_reason"] == "solved", "the run itself ended as usual")
check(t.get("ok") is False and "/proc/no" in (t.get("error") or ""),
      "summary.json names the tracker and why it failed (MLflow's own error)")
check("tracker mlflow failed" in err and f'gearbox.to_mlflow("{run_dir}")' in err,
      f"stderr says how to export afterwards: {err.strip().splitlines()[-1] if err else ''}")
finish()
