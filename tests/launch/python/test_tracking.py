"""tests/launch/python/test_tracking.py: gearbox.to_mlflow writes a live CartPole PPO run to
MLflow's local file store as it goes (its rows at step env_steps, the config as params, the
summary as tags and summary.* metrics, config.yaml and summary.json as artifacts, the MLflow run
FINISHED), and the same run directory afterwards gives the same metric histories; a stopped run
ends KILLED. gearbox.to_wandb writes the run offline into its run directory (W&B's run file holds
the rows' values, the config and the summary; W&B 0.31 has no reader of it in Python). Exits 77
(skipped) when MLflow or wandb is not installed.
Usage: test_tracking.py GEARBOX SOURCE_ROOT WORK_DIR (the package is SOURCE_ROOT/launch/python)"""
import glob
import json
import math
import os
import sys

from harness import check, finish, setup

GEARBOX, SRC, WORK = setup()
try:
    import mlflow  # noqa: F401
    import wandb  # noqa: F401
except ImportError as e:
    print(f"{e.name} is not installed (launch/python-requirements.txt): skipped")
    sys.exit(77)
import gearbox  # noqa: E402



store = os.path.join(WORK, "mlruns")
config = os.path.join(SRC, "configs", "cartpole_ppo.yaml")
r = gearbox.run(config, overrides={"experiment.max_seconds": 120},
                run_dir=os.path.join(WORK, "run"), wait=False)
live_id = gearbox.to_mlflow(r, tracking_uri=store)
client = mlflow.MlflowClient(tracking_uri=store)
summary, rows = gearbox.read_run(r.run_dir, as_frame=False)
check(summary["solved"] is True, "the run solved")
got = client.get_run(live_id)
check(got.info.status == "FINISHED", f"the MLflow run is {got.info.status}")
check(got.data.params.get("trainer.algorithm.lr") == "0.002", "the config's keys are params")
check(got.data.tags.get("gearbox.exit_reason") == "solved", "exit_reason is a tag")
check(got.data.metrics.get("summary.env_steps") == summary["env_steps"], "summary metrics")
expected = [(int(row["env_steps"]), row["return_mean_100"]) for row in rows
            if not math.isnan(row["return_mean_100"])]
# (MLflow orders a step's values by their timestamps, which rows logged within a millisecond share)
history = sorted((m.step, m.value) for m in client.get_metric_history(live_id, "return_mean_100"))
check(history == sorted(expected),
      f"return_mean_100 at each row's env_steps: {len(history)} of {len(expected)} rows")
check(all(not math.isnan(m.value) for m in client.get_metric_history(live_id, "loss")),
      "empty cells are not logged")
arts = {a.path for a in client.list_artifacts(live_id)}
check({"config.yaml", "summary.json"} <= arts, f"artifacts {sorted(arts)}")

after_id = gearbox.to_mlflow(r.run_dir, tracking_uri=store, experiment="afterwards")
for key in ("return_mean_100", "env_steps", "loss"):
    a = sorted((m.step, m.value) for m in client.get_metric_history(live_id, key))
    b = sorted((m.step, m.value) for m in client.get_metric_history(after_id, key))
    check(a == b and a, f"{key}: the run directory afterwards gives the live history "
          f"({len(b)} of {len(a)} values)")
check(client.get_run(after_id).info.experiment_id != got.info.experiment_id,
      "experiment= names the MLflow experiment")

os.environ["WANDB_SILENT"] = "true"
folder = gearbox.to_wandb(r.run_dir)
wandb.teardown()  # W&B's service writes the run file after finish() returned: wait for it
files = glob.glob(os.path.join(r.run_dir, "wandb", "offline-run-*", "run-*.wandb"))
check(len(files) == 1 and os.path.dirname(files[0]) == folder,
      f"W&B's offline run in the run directory: {folder}")
with open(files[0], "rb") as f:
    blob = f.read()
print(f"W&B's run file: {len(blob)} bytes")
last = [row for row in rows if not math.isnan(row["return_mean_100"])][-1]


def wandb_number(v):
    """A float as W&B's run file writes it: the shortest form, without ".0" (487.0 is "487")."""
    return str(int(v)) if float(v).is_integer() else json.dumps(v)


for what, text in (("a metrics column", "return_mean_100"),
                   ("the last row's return", wandb_number(last["return_mean_100"])),
                   ("the last row's step", str(int(last["env_steps"]))),
                   ("a config key", "gae_lambda"), ("the summary", "summary.exit_reason"),
                   ("its value", '"solved"')):
    check(text.encode() in blob, f"W&B's run file holds {what} ({text})")

r = gearbox.run(config, overrides={"experiment.target_return": 1e9},
                run_dir=os.path.join(WORK, "stopped"), wait=False)
for row in r.rows():
    if row["train_steps"] >= 5:
        break
r.stop(timeout=60)
stopped_id = gearbox.to_mlflow(r.run_dir, tracking_uri=store)
check(client.get_run(stopped_id).info.status == "KILLED", "a stopped run ends KILLED")

finish()
