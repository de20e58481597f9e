"""gearbox/follow.py: the tracker follower that `gearbox run` starts beside a run whose config
lists experiment.trackers, one process a tracker:

    python -m gearbox.follow RUN_DIR mlflow|wandb [--mlflow-uri URI]

It writes the run to the tracker (gearbox.tracking: to_mlflow into MLflow's local store at URI,
to_wandb offline into RUN_DIR/wandb) from the run directory's metrics rows as the launcher
writes them, then the summary. The launcher holds the follower's stdin open while the run goes
and closes it once summary.json is written (or by dying): the follower then logs the rows left
and the summary and exits 0, or 1 with "gearbox tracker NAME failed: ..." as the last line of
its stderr (the launcher's logs/tracker-NAME.log), which the launcher puts into summary.json.

    python -m gearbox.follow --probe mlflow wandb

exits 0 when this Python has the package and the trackers' packages (`gearbox check` asks it),
else 3 naming what is missing."""
import argparse
import importlib.util
import os
import sys
import threading

from gearbox.metrics import read_summary
from gearbox.runs import RowFollower

PACKAGES = {"mlflow": "mlflow", "wandb": "wandb"}
HOW = {"mlflow": "pip install mlflow-skinny", "wandb": "pip install wandb"}


class RunDirectory(RowFollower):
    """A run directory written by a launcher this process does not own, as tracking's live
    source: it runs until `ended` (an Event: set when the launcher closes our stdin)."""

    def __init__(self, run_dir, ended):
        self.run_dir = run_dir
        self._metrics_offset = 0
        self._ended = ended

    def running(self):
        """True until the launcher said the run ended. Does not block."""
        return not self._ended.is_set()

    def wait(self, timeout=None):
        """Waits for the end; returns summary.json as a dict, or None when the run left none.
        Blocks."""
        self._ended.wait(timeout)
        try:
            return read_summary(self.run_dir)
        except (OSError, ValueError):
            return None


def _watch_stdin(ended):
    """Sets ended when stdin reaches its end (the launcher closed it, or died)."""
    def reader():
        try:
            while sys.stdin.buffer.read(4096):
                pass
        finally:
            ended.set()
    threading.Thread(target=reader, daemon=True).start()


def probe(trackers):
    """The missing packages of trackers ("mlflow (pip install mlflow-skinny)"), [] when none."""
    return [f"{t} ({HOW[t]})" for t in trackers if importlib.util.find_spec(PACKAGES[t]) is None]


def main(argv=None):
    """The follower's command line (see the module). Returns its exit status."""
    p = argparse.ArgumentParser(prog="python -m gearbox.follow", description=__doc__)
    p.add_argument("--probe", nargs="+", choices=sorted(PACKAGES), metavar="TRACKER")
    p.add_argument("run_dir", nargs="?")
    p.add_argument("tracker", nargs="?", choices=sorted(PACKAGES))
    p.add_argument("--mlflow-uri", default=None)
    args = p.parse_args(argv)
    if args.probe:
        missing = probe(args.probe)
        if missing:
            print(f"{sys.executable} lacks " + ", ".join(missing), file=sys.stderr)
            return 3
        return 0
    if not args.run_dir or not args.tracker:
        p.error("RUN_DIR and TRACKER are needed (or --probe)")
    from gearbox import tracking  # noqa: PLC0415 (after --probe, which needs no tracker)
    ended = threading.Event()
    _watch_stdin(ended)
    source = RunDirectory(os.path.abspath(args.run_dir), ended)
    try:
        if args.tracker == "mlflow":
            run_id = tracking.to_mlflow(source, tracking_uri=args.mlflow_uri)
            print(f"gearbox tracker mlflow: run {run_id} in {args.mlflow_uri}", file=sys.stderr)
        else:
            os.environ.setdefault("WANDB_SILENT", "true")
            folder = tracking.to_wandb(source, mode="offline")
            print(f"gearbox tracker wandb: offline run in {folder}", file=sys.stderr)
    except BaseException as e:  # noqa: BLE001 (any failure is reported, then the status)
        why = " ".join(f"{type(e).__name__}: {e}".split())
        print(f"gearbox tracker {args.tracker} failed: {why}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
