"""gearbox/sweeps.py: runs a sweep (gearbox.sweep(), the gearbox-sweep command): every trial a
normal run directory <dir>/trial-NNN, up to `parallel` at once on this machine (or as one Slurm
job array: launch: slurm, gearbox/sweep_slurm.py); then the table
(trials.csv, printed), sweep.json and the plot (objective.png) naming the best trial. A failed
trial is recorded as failed with its exit status and last message, never dropped."""
import argparse
import concurrent.futures as cf
import json
import os
import sys
import threading
import time

from gearbox.command import CommandNotFound, RunFailed
from gearbox.metrics import read_summary
from gearbox.runs import run as start_run
from gearbox.sweep_slurm import run_array
from gearbox.sweep_report import best_trial, format_table, write_json, write_plot, write_table
from gearbox.sweep_spec import SweepError, load_sweep, summary_field


class _Trials:
    """The trials of one sweep: runs them and keeps their records; stop_all() stops live runs."""

    def __init__(self, sweep, sweep_dir):
        self.sweep, self.dir = sweep, sweep_dir
        self.records, self.live = [], {}
        self.lock = threading.Lock()
        self.stopping = False

    def new(self, params):
        with self.lock:
            n = len(self.records)
            rec = {"trial": f"trial-{n:03d}", "number": n, "status": "pending",
                   "exit_status": None, "exit_reason": None, "solved": None, "objective": None,
                   "params": dict(params), "wall_seconds": None, "env_steps": None,
                   "run_dir": os.path.join(self.dir, f"trial-{n:03d}"), "error": None}
            self.records.append(rec)
            return rec

    def run(self, rec):
        """Runs one trial to its end and fills rec; returns rec. Blocks."""
        if self.stopping:
            rec["status"] = "cancelled"
            return rec
        overrides = dict(self.sweep.fixed)
        overrides.update(rec["params"])
        rec["status"] = "running"
        summary = None
        try:
            r = start_run(self.sweep.base, overrides=overrides, run_dir=rec["run_dir"],
                          wait=False)
            with self.lock:
                self.live[rec["trial"]] = r
            try:
                summary = r.wait()
                rec["exit_status"] = r.returncode
            finally:
                with self.lock:
                    self.live.pop(rec["trial"], None)
        except RunFailed as e:
            rec["exit_status"] = e.status
            rec["error"] = next((ln for ln in reversed(e.log_tail) if ln.strip()), "")[-300:]
            summary = _summary_or_none(rec["run_dir"])
        except (OSError, RuntimeError) as e:
            rec["error"] = str(e)[-300:]
        if summary:
            rec["exit_reason"] = summary.get("exit_reason")
            rec["solved"] = summary.get("solved")
            rec["wall_seconds"] = summary_field(summary, "wall_seconds")
            rec["env_steps"] = summary_field(summary, "env_steps")
        if rec["exit_reason"] == "interrupted":
            rec["status"] = "interrupted"
        elif summary and rec["exit_status"] == 0:
            rec["status"] = "ok"
            rec["objective"] = summary_field(summary, self.sweep.objective_key)
        else:
            rec["status"] = "failed"
        return rec

    def stop_all(self):
        """Stops the live trials (SIGINT, as Ctrl-C) and cancels those not started."""
        self.stopping = True
        with self.lock:
            runs = list(self.live.values())
        for r in runs:
            r.interrupt()  # its thread waits for the end


def _summary_or_none(run_dir):
    try:
        return read_summary(run_dir)
    except (OSError, ValueError):
        return None


def _run_planned(trials, plan, parallel):
    with cf.ThreadPoolExecutor(max_workers=parallel) as pool:
        futures = [pool.submit(trials.run, trials.new(p)) for p in plan]
        try:
            for f in cf.as_completed(futures):
                f.result()
        except KeyboardInterrupt:
            trials.stop_all()
            raise


def _run_optuna(trials, sweep):
    try:
        import optuna  # noqa: PLC0415 (optional)
    except ImportError as e:
        raise SweepError(f"{sweep.where}: method optuna needs Optuna (pip install optuna; "
                         f"launch/python-requirements.txt lists it)") from e
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        direction="minimize" if sweep.direction == "min" else "maximize",
        sampler=optuna.samplers.TPESampler(seed=sweep.seed))
    asked = {}
    with cf.ThreadPoolExecutor(max_workers=sweep.parallel) as pool:
        running = set()
        try:
            while len(asked) < sweep.trials or running:
                while len(asked) < sweep.trials and len(running) < sweep.parallel:
                    ot = study.ask()
                    rec = trials.new({p.key: p.suggest(ot) for p in sweep.params})
                    fut = pool.submit(trials.run, rec)
                    asked[fut] = ot
                    running.add(fut)
                done, running = cf.wait(running, return_when=cf.FIRST_COMPLETED)
                for fut in done:
                    rec = fut.result()
                    if rec["status"] == "ok" and rec["objective"] is not None:
                        study.tell(asked[fut], rec["objective"])
                    else:
                        study.tell(asked[fut], state=optuna.trial.TrialState.FAIL)
        except KeyboardInterrupt:
            trials.stop_all()
            raise


def _default_dir(sweep):
    if sweep.dir:
        return str(sweep.dir)
    return os.path.join("sweeps", sweep.name, time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()))


def sweep(path, sweep_dir=None, parallel=None, trials=None, quiet=False):
    """Runs the sweep file at path (see gearbox/sweep_spec.py for its keys) into sweep_dir
    (default: its dir, else sweeps/<name>/<timestamp>); parallel and trials override the
    file's. Returns sweep.json's content as a dict (best: the best trial's name or None,
    trials: every trial's record). Raises SweepError for a bad sweep file. Blocks; Ctrl-C stops
    the live trials, records the rest and re-raises KeyboardInterrupt."""
    spec = load_sweep(path)
    for name, value in (("parallel", parallel), ("trials", trials)):
        if value is not None:
            if not isinstance(value, int) or value < 1:
                raise SweepError(f"{name}: expected a whole number of at least 1, got {value!r}")
            setattr(spec, name, value)
    sweep_dir = sweep_dir or _default_dir(spec)
    os.makedirs(sweep_dir, exist_ok=True)
    if os.path.exists(os.path.join(sweep_dir, "sweep.json")):
        raise SweepError(f"{sweep_dir} already holds a sweep (sweep.json): choose another dir")
    ts = _Trials(spec, sweep_dir)
    interrupted = None
    try:
        if spec.launch == "slurm":
            run_array(ts, spec, sweep_dir)
        elif spec.method == "optuna":
            _run_optuna(ts, spec)
        else:
            _run_planned(ts, spec.planned(), spec.parallel)
    except KeyboardInterrupt as e:
        interrupted = e
    return _report(spec, ts, sweep_dir, quiet, interrupted)


def _report(spec, ts, sweep_dir, quiet, interrupted):
    for rec in ts.records:
        if rec["status"] in ("pending", "running"):
            rec["status"] = "cancelled"
    keys = [p.key for p in spec.params]
    best = best_trial(ts.records, spec.direction)
    write_table(os.path.join(sweep_dir, "trials.csv"), ts.records, keys)
    write_json(os.path.join(sweep_dir, "sweep.json"), spec, ts.records, best)
    no_plot = write_plot(os.path.join(sweep_dir, "objective.png"), spec, ts.records, best)
    if not quiet:
        print(format_table(ts.records, keys, best, spec.objective_key))
        for t in ts.records:
            if t["status"] == "failed":
                print(f"{t['trial']} failed (exit status {t['exit_status']}): {t['error']}")
        failed = sum(1 for t in ts.records if t["status"] != "ok")
        print(f"{len(ts.records)} trials, {failed} failed or not run; table "
              f"{os.path.join(sweep_dir, 'trials.csv')}")
        if best:
            values = ", ".join(f"{k}={best['params'][k]!r}" for k in keys)
            print(f"best: {best['trial']} {spec.objective_key}={best['objective']:.6g} "
                  f"({values}) {best['run_dir']}")
        else:
            print("best: none (no trial ended with an objective)")
        print(f"plot: {os.path.join(sweep_dir, 'objective.png')}" if no_plot is None
              else f"plot: none ({no_plot})")
    if interrupted is not None:
        raise interrupted
    with open(os.path.join(sweep_dir, "sweep.json"), encoding="utf-8") as f:
        return json.load(f)


def main(argv=None):
    """The gearbox-sweep command. Exit status: 0 the sweep ran and names a best trial, 1 no
    trial ended with an objective (all failed) or the sweep failed, 2 usage or a bad sweep
    file, 130 Ctrl-C (the table holds what had ended)."""
    ap = argparse.ArgumentParser(
        prog="gearbox-sweep",
        description="Run a sweep of gearbox runs over config keys (grid, random or optuna), "
                    "each trial a run directory under the sweep's folder; print and write the "
                    "table of trials (trials.csv, sweep.json) and plot the objective against "
                    "each swept key (objective.png).",
        epilog="exit status: 0 a best trial was found, 1 every trial failed, 2 usage or sweep "
               "file error, 130 interrupted")
    ap.add_argument("sweep_file", metavar="SWEEP.yaml")
    ap.add_argument("--dir", help="the sweep's folder (default: the file's dir, else "
                                  "sweeps/<name>/<timestamp>)")
    ap.add_argument("--parallel", type=int, help="trials at once (overrides parallel:)")
    ap.add_argument("--trials", type=int, help="random/optuna trials (overrides trials:)")
    args = ap.parse_args(argv)
    try:
        result = sweep(args.sweep_file, sweep_dir=args.dir, parallel=args.parallel,
                       trials=args.trials)
    except SweepError as e:
        print(f"gearbox-sweep: {e}", file=sys.stderr)
        return 2
    except CommandNotFound as e:
        print(f"gearbox-sweep: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("gearbox-sweep: interrupted", file=sys.stderr)
        return 130
    return 0 if result["best"] else 1


if __name__ == "__main__":
    sys.exit(main())
