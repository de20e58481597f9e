"""gearbox/metrics.py: reads a run directory's files as plain Python data: metrics.csv rows
(dicts of floats), summary.json, and both at once (read_run)."""
import collections
import csv
import json
import math
import os

RunData = collections.namedtuple("RunData", ["summary", "rows"])


def parse_value(text):
    """A metrics.csv cell as a float: "" (no value this interval) is nan; a cell that is not a
    number stays a string."""
    if text == "":
        return math.nan
    try:
        return float(text)
    except ValueError:
        return text


def parse_row(header, line):
    """One metrics.csv data line (without its newline) as a dict keyed by the header's names."""
    cells = next(csv.reader([line]))
    return {name: parse_value(cell) for name, cell in zip(header, cells)}


def parse_header(line):
    """metrics.csv's header line as a list of column names."""
    return next(csv.reader([line.rstrip("\r\n")]))


def read_metrics(path):
    """Every row of the metrics.csv at path as a list of dicts of floats (a resumed run's
    repeated header lines are skipped). Raises OSError when it cannot be read."""
    rows = []
    with open(path, encoding="utf-8", newline="") as f:
        first = f.readline()
        if not first:
            return rows
        header = parse_header(first)
        for line in f:
            line = line.rstrip("\r\n")
            if line and line != first.rstrip("\r\n"):
                rows.append(parse_row(header, line))
    return rows


def read_summary(run_dir):
    """summary.json of run_dir as a dict, or None when the run has not ended (no file).
    Raises ValueError when the file is not JSON."""
    path = os.path.join(run_dir, "summary.json")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not JSON: {e}") from e


def read_run(run_dir, as_frame=None):
    """The run directory's summary (summary.json as a dict, None while it runs) and rows
    (metrics.csv: a pandas DataFrame when pandas is importable and as_frame is not False, else a
    list of dicts of floats; empty when there is no metrics.csv yet). Raises FileNotFoundError
    when run_dir is not a run directory (no config.yaml)."""
    if not os.path.isfile(os.path.join(run_dir, "config.yaml")):
        raise FileNotFoundError(f"{run_dir} is not a gearbox run directory (no config.yaml)")
    summary = read_summary(run_dir)
    path = os.path.join(run_dir, "metrics.csv")
    rows = read_metrics(path) if os.path.exists(path) else []
    if as_frame is not False:
        try:
            import pandas  # noqa: PLC0415 (optional)
        except ImportError:
            if as_frame:
                raise
        else:
            rows = pandas.DataFrame(rows)
    return RunData(summary, rows)
