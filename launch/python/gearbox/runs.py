"""gearbox/runs.py: starts `gearbox run` from Python (a config file or a dict, with overrides),
follows its metrics rows, stops it as Ctrl-C does, waits for its summary, resumes and evaluates
runs. Exit status rules are the command's: 0 the run ended (summary.json says how), 2 usage or
config error, 1 failure; anything but 0 raises RunFailed (a stop() asked for is not a failure)."""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

import yaml

from gearbox.command import RunFailed, find_command, run_short
from gearbox.configs import config_file, check_config, set_args
from gearbox.metrics import parse_header, parse_row, read_summary

CONSOLE = os.path.join("logs", "console.log")  # the command's stdout and stderr, in the run
TAIL_LINES = 20


def _tail(path, n=TAIL_LINES):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return [line.rstrip("\n") for line in f.readlines()[-n:]]
    except OSError:
        return []


def _free_run_dir(resolved):
    """Reserves the run directory the command would choose by itself (launch.run_dir, else
    <run_root>/<name>/<YYYYmmddTHHMMSSZ>[-N], runtime/run/rundir.c) by creating it, so runs
    started together (a sweep) never pick the same one. Returns its path."""
    explicit = (resolved.get("launch") or {}).get("run_dir") or ""
    if explicit:
        return explicit
    exp = resolved.get("experiment") or {}
    parent = os.path.join(exp.get("run_root", "runs"), exp.get("name", "run"))
    os.makedirs(parent, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    for k in range(1000):
        path = os.path.join(parent, stamp if k == 0 else f"{stamp}-{k}")
        try:
            os.mkdir(path)
            return path
        except FileExistsError:
            continue
    raise RuntimeError(f"too many runs named {exp.get('name')} in this second under {parent}")


class RowFollower:
    """metrics.csv's rows followed while a run goes: for classes with run_dir,
    _metrics_offset (bytes of metrics.csv before this segment) and running()."""

    def rows(self, poll_s=0.2):
        """Yields metrics.csv's rows (dicts of floats, nan for an empty cell) as they are
        written: follows the file while the command lives, then yields what is left and ends.
        A resumed run yields the rows of this segment only. Blocks between rows."""
        path = os.path.join(self.run_dir, "metrics.csv")
        while not os.path.exists(path):
            if not self.running():
                return
            time.sleep(poll_s)
        with open(path, encoding="utf-8", newline="") as f:
            header_line = ""
            while not header_line.endswith("\n"):
                header_line += f.readline()
                if not header_line.endswith("\n"):
                    if not self.running():
                        return
                    time.sleep(poll_s)
            header = parse_header(header_line)
            f.seek(max(self._metrics_offset, f.tell()))
            yield from self._follow(f, header, header_line.rstrip("\r\n"), poll_s)

    def _follow(self, f, header, header_text, poll_s):
        pending = ""
        while True:
            ended = not self.running()  # read once more after the end: the last rows
            chunk = f.readline()
            while chunk:
                pending += chunk
                if pending.endswith("\n"):
                    line = pending.rstrip("\r\n")
                    pending = ""
                    if line and line != header_text:
                        yield parse_row(header, line)
                chunk = f.readline()
            if ended:
                return
            time.sleep(poll_s)


class Run(RowFollower):
    """One `gearbox run` process and its run directory. run_dir: the folder; summary: the
    summary.json dict once wait() returned; returncode: the exit status once it ended."""

    def __init__(self, args, run_dir, metrics_offset=0, temp_dir=None):
        self.run_dir = run_dir
        self.args = args
        self.summary = None
        self._stop_requested = False
        self._metrics_offset = metrics_offset
        self._temp_dir = temp_dir
        os.makedirs(os.path.join(run_dir, "logs"), exist_ok=True)
        self.console_path = os.path.join(run_dir, CONSOLE)
        self._console = open(self.console_path, "a", encoding="utf-8")
        try:
            self._proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self._console,
                                          stderr=subprocess.STDOUT)
        except OSError:
            self._console.close()
            raise

    @property
    def pid(self):
        """The process id of the gearbox command (its launcher)."""
        return self._proc.pid

    @property
    def returncode(self):
        """The exit status, or None while the command runs. Does not block."""
        return self._proc.poll()

    def running(self):
        """True while the command runs. Does not block."""
        return self._proc.poll() is None

    def interrupt(self):
        """Sends SIGINT (as Ctrl-C) when the command still runs and returns at once; wait()
        then returns the summary ("interrupted") rather than raising."""
        if self.running():
            self._stop_requested = True
            try:
                self._proc.send_signal(signal.SIGINT)
            except OSError:
                pass

    def stop(self, timeout=None):
        """Asks the run to stop as Ctrl-C does (SIGINT): the workers stop, the summary is written
        with exit_reason "interrupted". Returns wait()'s summary; raises RunFailed when the run
        failed otherwise, subprocess.TimeoutExpired after timeout seconds. Blocks."""
        self.interrupt()
        return self.wait(timeout)

    def wait(self, timeout=None):
        """Waits for the command to end and returns summary.json as a dict. Raises RunFailed
        (status, the log's last lines) when it exited non-zero, unless stop() asked for the end
        and the summary says "interrupted"; subprocess.TimeoutExpired after timeout seconds (the
        run goes on). A KeyboardInterrupt while it waits (Jupyter's interrupt reaches only this
        process) stops the run, waits for its end and is raised again. Blocks."""
        try:
            rc = self._proc.wait(timeout)
        except KeyboardInterrupt:
            self.interrupt()
            self._proc.wait()
            raise
        if not self._console.closed:
            self._console.close()
        if self._temp_dir:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
            self._temp_dir = None
        try:
            summary = read_summary(self.run_dir)
        except ValueError:
            summary = None
        stopped = (self._stop_requested and summary is not None
                   and summary.get("exit_reason") == "interrupted")
        if rc != 0 and not stopped:
            raise RunFailed("gearbox run", rc, self.log_tail(), self.run_dir)
        if summary is None:
            raise RunFailed("gearbox run", rc, self.log_tail() + ["(no summary.json)"],
                            self.run_dir)
        self.summary = summary
        return summary

    def log_tail(self, n=TAIL_LINES):
        """The last n lines the command printed; for an inline run (which logs to its file) also
        the last lines of logs/inline-0.log."""
        lines = _tail(self.console_path, n)
        inline = os.path.join(self.run_dir, "logs", "inline-0.log")
        if os.path.exists(inline):
            lines += _tail(inline, n)
        return lines

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if self.running():
            try:
                self.stop()
            except RunFailed:
                if exc_type is None:
                    raise
        return False

    def __repr__(self):
        state = "running" if self.running() else f"ended {self._proc.returncode}"
        return f"<gearbox.Run {self.run_dir} pid {self.pid} {state}>"


def _with_model(path, overrides, model, temp_dir):
    """run()'s model=: the module exported into a temporary file, the config checked with it
    (ModelMismatch naming the module); run() then moves the file into the run directory.
    Returns (the resolved config, the overrides with the model's keys, the file's temporary
    path, the temporary folder to remove afterwards or None when it is temp_dir)."""
    from gearbox import models  # noqa: PLC0415 (needs torch: imported only for a model)
    folder = temp_dir or tempfile.mkdtemp(prefix="gearbox-model-")
    exported, size = models.save(model, os.path.join(folder, "model.pt"))
    sets = {**(overrides or {}), **models.model_overrides(exported, size)}
    try:
        resolved = models.checked(model, lambda: yaml.safe_load(
            run_short(["check", path] + set_args(sets), "gearbox check")) or {})
    except BaseException:
        if not temp_dir:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    return resolved, sets, exported, (None if temp_dir else folder)


def run(config, overrides=None, run_dir=None, wait=True, backend=None, record=None,
        model=None):
    """Starts `gearbox run` on config (a YAML file's path, or a dict of the same content) with
    overrides ({"trainer.algorithm.lr": 1e-3}: --set), into run_dir (default: the command's own
    choice, <experiment.run_root>/<name>/<timestamp>). The config is checked first (gearbox
    check): a bad one raises RunFailed (status 2, the message naming the key) before anything
    starts. model: a torch.nn.Module (gearbox.models) to run as the policy's model: exported to
    TorchScript as RUN_DIR/model.pt, policy.model set to it (type torchscript, its state_size as
    torchscript_state, no built-in core); the check runs it on the environment's observations
    first and raises ModelMismatch (a RunFailed naming the module and the shapes) when its
    outputs do not fit. Returns the Run; with wait=True, after it ended (run.summary holds
    summary.json) and raising RunFailed when it failed. Blocks for the check, and for the run
    when wait."""
    path, temp_dir = config_file(config)
    model_dir = None
    try:
        if model is None:
            sets = overrides
            resolved = yaml.safe_load(run_short(["check", path] + set_args(sets),
                                                "gearbox check")) or {}
        else:
            resolved, sets, exported, model_dir = _with_model(path, overrides, model, temp_dir)
        if run_dir is None:
            run_dir = _free_run_dir(resolved)
        if model is not None:  # the model lives with its run (resume, eval)
            os.makedirs(run_dir, exist_ok=True)
            final = os.path.join(os.path.abspath(os.fspath(run_dir)), "model.pt")
            shutil.move(exported, final)
            sets["policy.model.torchscript"] = final
        sets = set_args(sets)
        args = [find_command(), "run", path] + sets + ["--run-dir", os.fspath(run_dir)]
        if backend:
            args += ["--backend", backend]
        if record:
            args += ["--record", os.fspath(record)]
        r = Run(args, os.fspath(run_dir), temp_dir=temp_dir)
    except BaseException:
        if temp_dir:
            shutil.rmtree(temp_dir, ignore_errors=True)
        raise
    finally:
        if model_dir:
            shutil.rmtree(model_dir, ignore_errors=True)
    if wait:
        r.wait()
    return r


def resume(run_dir, overrides=None, wait=True):
    """Continues a stopped, crashed or ended run from its checkpoints (gearbox run --resume),
    with overrides (raise the budgets here). Returns the Run as run() does; its rows() are the
    new segment's. Blocks for the run when wait."""
    run_dir = os.fspath(run_dir)
    if not os.path.isfile(os.path.join(run_dir, "config.yaml")):
        raise FileNotFoundError(f"gearbox.resume: {run_dir} is not a run directory "
                                "(no config.yaml)")
    metrics = os.path.join(run_dir, "metrics.csv")
    offset = os.path.getsize(metrics) if os.path.exists(metrics) else 0
    args = [find_command(), "run", "--resume", run_dir] + set_args(overrides)
    r = Run(args, run_dir, metrics_offset=offset)
    if wait:
        r.wait()
    return r


def evaluate(run_dir, episodes=10, deterministic=False, checkpoint=None, seed=None):
    """Plays episodes with the policy the run delivered (its last checkpoint, or the policy
    its deciding evaluation played when it ended solved by one), or with checkpoint (a set name:
    "trainer-0" the last, "solved"; or a .model path), in this process (gearbox eval
    --json) and returns its JSON as a dict: return_mean, return_std, returns, lengths,
    checkpoint, ... Raises RunFailed when the command fails (2: not a run directory or no
    checkpoint). Blocks."""
    args = ["eval", os.fspath(run_dir), "--json", "--episodes", str(int(episodes))]
    if deterministic:
        args.append("--deterministic")
    if checkpoint:
        args += ["--checkpoint", os.fspath(checkpoint)]
    if seed is not None:
        args += ["--seed", str(int(seed))]
    return json.loads(run_short(args, "gearbox eval"))
