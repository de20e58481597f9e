"""gearbox/tracking.py: a run's metrics rows, config and summary written to MLflow (pip install
mlflow-skinny; optional): each metrics.csv row's values as metrics at step env_steps, the
resolved config.yaml as params (dotted keys), the summary as tags and summary.* metrics, and
config.yaml and summary.json as artifacts. From a finished run directory, or from a live Run,
row by row as the command writes them."""
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
    run_dir = source if isinstance(source, (str, os.PathLike)) else source.run_dir
    run_dir = os.fspath(run_dir)
    live = not isinstance(source, (str, os.PathLike))
    while live and source.running() and not os.path.exists(os.path.join(run_dir, "config.yaml")):
        time.sleep(0.05)  # the command writes it as it starts
    with open(os.path.join(run_dir, "config.yaml"), encoding="utf-8") as f:
        config = yaml.safe_load(f) or {}
    client = mlflow.MlflowClient(tracking_uri=tracking_uri)
    name = experiment or (config.get("experiment") or {}).get("name") or "gearbox"
    found = client.get_experiment_by_name(name)
    exp_id = found.experiment_id if found else client.create_experiment(name)
    run_id = client.create_run(exp_id, run_name=run_name or os.path.basename(
        os.path.abspath(run_dir)), tags={"gearbox.run_dir": os.path.abspath(run_dir)}).info.run_id
    params = [Param(k, str(v)[:6000]) for k, v in _flatten(config).items()]
    for i in range(0, len(params), PARAMS_BATCH):
        client.log_batch(run_id, params=params[i:i + PARAMS_BATCH])
    failed = None
    if not live:
        path = os.path.join(run_dir, "metrics.csv")
        rows = read_metrics(path) if os.path.exists(path) else []
        now = int(time.time() * 1000)
        metrics = [m for row in rows for m in _row_metrics(row, Metric, now)]
        for i in range(0, len(metrics), BATCH):
            client.log_batch(run_id, metrics=metrics[i:i + BATCH])
        summary = read_summary(run_dir)
    else:
        for row in source.rows():
            client.log_batch(run_id, metrics=_row_metrics(row, Metric, int(time.time() * 1000)))
        try:
            summary = source.wait()
        except RunFailed as e:
            failed, summary = e, read_summary(run_dir)
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
