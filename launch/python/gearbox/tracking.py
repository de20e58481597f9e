"""gearbox/tracking.py: a run's metrics rows, config and summary written to MLflow (pip install
mlflow-skinny) or Weights & Biases (pip install wandb; offline by default), both optional: each
metrics.csv row's values at step env_steps, the resolved config.yaml as params or config, the
summary as tags/summary. From a finished run directory, or from a live Run, row by row as the
command writes them."""
import math
import os
import time

import yaml

from gearbox.command import RunFailed
from gearbox.metrics import read_metrics, read_summary

BATCH = 1000  # MLflow's limit of metrics in one log_batch
PARAMS_BATCH = 100  # and of params
FINISHED = ("solved", "max_env_steps", "max_seconds")  # the run ended (exit status 0)


def _flatten(tree, prefix=""):
    out = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(_flatten(value, name + "."))
        else:
            out[name] = value
    return out


def _row_metrics(row, metric_cls, now_ms):
    step = row.get("env_steps")
    step = int(step) if isinstance(step, float) and math.isfinite(step) else 0
    return [metric_cls(k, v, now_ms, step) for k, v in row.items()
            if isinstance(v, float) and math.isfinite(v)]


def _run_config(source):
    """(run directory, its resolved config.yaml as a dict) of a run directory or a live Run
    (waiting for the command to write config.yaml as it starts). Raises OSError without it."""
    live = not isinstance(source, (str, os.PathLike))
    run_dir = os.fspath(source.run_dir if live else source)
    while live and source.running() and not os.path.exists(os.path.join(run_dir, "config.yaml")):
        time.sleep(0.05)
    with open(os.path.join(run_dir, "config.yaml"), encoding="utf-8") as f:
        return run_dir, yaml.safe_load(f) or {}


def _mlflow(tracking_uri):
    try:
        import mlflow  # noqa: PLC0415 (optional)
        from mlflow.entities import Metric, Param, RunTag  # noqa: PLC0415
    except ImportError as e:
        raise ImportError("gearbox.to_mlflow needs MLflow (pip install mlflow-skinny; "
                          "launch/python-requirements.txt lists it)") from e
    if tracking_uri and (tracking_uri.startswith("file:") or "://" not in tracking_uri):
        # the local file store, asked for by name: MLflow 3 keeps it only on request
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    return mlflow, Metric, Param, RunTag


def to_mlflow(source, tracking_uri=None, experiment=None, run_name=None):
    """Writes a gearbox run to MLflow and returns the MLflow run's id. source: a run directory
    (a finished or stopped run) or a gearbox.Run (followed while it goes: rows are logged as they
    are written, then its summary). tracking_uri: MLflow's (a folder or file:PATH is the local
    file store, sqlite:///PATH.db a local database; default MLflow's own, MLFLOW_TRACKING_URI);
    experiment: default the config's experiment.name; run_name: default the run directory's
    name. The MLflow run ends FINISHED (the run ended), KILLED (interrupted) or FAILED. Raises
    ImportError without MLflow; a live Run's RunFailed after its rows and status are logged.
    Blocks until a live run ends."""
    mlflow, Metric, Param, RunTag = _mlflow(tracking_uri)
    run_dir, config = _run_config(source)
    client = mlflow.MlflowClient(tracking_uri=tracking_uri)
    name = experiment or (config.get("experiment") or {}).get("name") or "gearbox"
    found = client.get_experiment_by_name(name)
    exp_id = found.experiment_id if found else client.create_experiment(name)
    run_id = client.create_run(exp_id, run_name=run_name or os.path.basename(
        os.path.abspath(run_dir)), tags={"gearbox.run_dir": os.path.abspath(run_dir)}).info.run_id
    params = [Param(k, str(v)[:6000]) for k, v in _flatten(config).items()]
    for i in range(0, len(params), PARAMS_BATCH):
        client.log_batch(run_id, params=params[i:i + PARAMS_BATCH])
    summary, failed = _rows_then_summary(source, run_dir, lambda row: client.log_batch(
        run_id, metrics=_row_metrics(row, Metric, int(time.time() * 1000))))
    _finish(client, run_id, run_dir, summary, failed, Metric, RunTag)
    if failed:
        raise failed
    return run_id


def _finish(client, run_id, run_dir, summary, failed, Metric, RunTag):
    """Logs the summary (tags, summary.* metrics, artifacts) and ends the MLflow run."""
    now = int(time.time() * 1000)
    status = "FAILED" if failed else "FINISHED"
    if summary:
        tags = [RunTag(f"gearbox.{k}", str(summary[k]))
                for k in ("exit_reason", "solved", "solved_by", "mode") if k in summary]
        step = int(summary.get("env_steps") or 0)
        metrics = [Metric(f"summary.{k}", float(v), now, step) for k, v in summary.items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool)
                   and math.isfinite(v)]
        client.log_batch(run_id, metrics=metrics, tags=tags)
        reason = summary.get("exit_reason")
        if reason == "interrupted":
            status = "KILLED"
        elif reason not in FINISHED:
            status = "FAILED"
    elif not failed:
        status = "KILLED"  # no summary: the run had not ended
    for name in ("config.yaml", "summary.json"):
        path = os.path.join(run_dir, name)
        if os.path.exists(path):
            client.log_artifact(run_id, path)
    client.set_terminated(run_id, status=status)


def _rows_then_summary(source, run_dir, log_row):
    """Calls log_row(row) for each metrics row of source (a run directory, or a live Run
    followed to its end); returns (summary or None, the live run's RunFailed or None)."""
    if isinstance(source, (str, os.PathLike)):
        path = os.path.join(run_dir, "metrics.csv")
        for row in read_metrics(path) if os.path.exists(path) else []:
            log_row(row)
        return read_summary(run_dir), None
    for row in source.rows():
        log_row(row)
    try:
        return source.wait(), None
    except RunFailed as e:
        return read_summary(run_dir), e


def to_wandb(source, project=None, run_name=None, mode="offline", wandb_dir=None):
    """Writes a gearbox run to Weights & Biases and returns the W&B run's local folder. source:
    a run directory or a live gearbox.Run (followed to its end). mode: "offline" (default: no
    network; `wandb sync FOLDER` uploads it later) or "online"; project: default the config's
    experiment.name; wandb_dir: where W&B's wandb/ folder goes, default inside the run
    directory. Rows are logged at step env_steps (rows of one step merge), the resolved config
    is the W&B config, the summary goes into the W&B summary; the W&B run ends with exit code 0
    when the run ended, 1 otherwise. W&B's service may still be writing the run file when this
    returns (wandb.teardown() or this process's exit waits for it). Raises ImportError without
    wandb; a live Run's RunFailed after the W&B run is finished. Blocks until a live run ends."""
    try:
        import wandb  # noqa: PLC0415 (optional)
    except ImportError as e:
        raise ImportError("gearbox.to_wandb needs Weights & Biases (pip install wandb)") from e
    run_dir, config = _run_config(source)
    w = wandb.init(project=project or (config.get("experiment") or {}).get("name") or "gearbox",
                   name=run_name or os.path.basename(os.path.abspath(run_dir)), config=config,
                   dir=os.fspath(wandb_dir or run_dir), mode=mode)
    last = [-1]

    def log_row(row):
        step = row.get("env_steps")
        step = int(step) if isinstance(step, float) and math.isfinite(step) else 0
        step = max(step, last[0])  # W&B drops rows whose step goes back
        last[0] = step
        w.log({k: v for k, v in row.items() if isinstance(v, float) and math.isfinite(v)},
              step=step)

    summary, failed = None, None
    try:
        summary, failed = _rows_then_summary(source, run_dir, log_row)
        if summary:
            w.summary.update({f"summary.{k}": v for k, v in summary.items()
                              if isinstance(v, (int, float, str, bool))})
    finally:
        ended = summary is not None and summary.get("exit_reason") in FINISHED and not failed
        w.finish(exit_code=0 if ended else 1)
    if failed:
        raise failed
    return os.path.dirname(w.dir)
