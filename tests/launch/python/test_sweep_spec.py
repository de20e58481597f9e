"""tests/launch/python/test_sweep_spec.py: sweep files that cannot be used are refused with the
file and the key named (gearbox-sweep exits 2, nothing runs); grid, random and log-uniform
values are what the file asks for; a sweep whose every trial fails (a value `gearbox check`
refuses) records each trial as failed with its exit status and message, still writes the
table, and exits 1.
Usage: test_sweep_spec.py GEARBOX SOURCE_ROOT WORK_DIR (the package is SOURCE_ROOT/launch/python)"""
import csv
import io
import math
import os
from contextlib import redirect_stderr, redirect_stdout

from harness import check, finish, setup

GEARBOX, SRC, WORK = setup()
from gearbox.sweep_spec import SweepError, load_sweep  # noqa: E402
from gearbox.sweeps import main  # noqa: E402

BASE = os.path.join(SRC, "configs", "cartpole_ppo.yaml")


def write(name, text):
    path = os.path.join(WORK, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def cli(args):
    """gearbox-sweep's exit status, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = main(args)
    return rc, out.getvalue(), err.getvalue()


HEAD = f"base: {BASE}\nobjective: {{key: wall_seconds, direction: min}}\n"
BAD = {
    "unknown_key.yaml": (HEAD + "params: {a: [1]}\nparalel: 2\n", "'paralel'"),
    "no_params.yaml": (HEAD, "params"),
    "grid_dist.yaml": (HEAD + "params: {x: {uniform: [0, 1]}}\n", "params.x: method grid"),
    "bad_dist.yaml": (HEAD + "method: random\nparams: {x: {normal: [0, 1]}}\n",
                      "unknown distribution 'normal'"),
    "bad_bounds.yaml": (HEAD + "method: random\nparams: {x: {log_uniform: [0, 1]}}\n",
                        "params.x.log_uniform"),
    "bad_dir.yaml": (HEAD.replace("direction: min", "direction: down") + "params: {x: [1]}\n",
                     "objective.direction"),
    "bad_parallel.yaml": (HEAD + "parallel: 0\nparams: {x: [1]}\n", "parallel"),
    "no_base.yaml": ("base: /nonexistent.yaml\nobjective: {key: x}\nparams: {x: [1]}\n",
                     "base: no config file /nonexistent.yaml"),
    "bad_method.yaml": (HEAD + "method: bayes\nparams: {x: [1]}\n", "method"),
}
for name, (text, needle) in BAD.items():
    path = write(name, text)
    rc, _, err = cli([path, "--dir", os.path.join(WORK, "out_" + name)])
    check(rc == 2 and path in err and needle in err, f"{name}: exit {rc}, {err.strip()}")
    check(not os.path.exists(os.path.join(WORK, "out_" + name)), f"{name}: nothing ran")

# the values each method asks for
grid = load_sweep(write("grid.yaml", HEAD + "params: {a: [1, 2, 3], b: [x, y]}\n"))
plan = grid.planned()
check(len(plan) == 6 and {(p["a"], p["b"]) for p in plan} ==
      {(a, b) for a in (1, 2, 3) for b in ("x", "y")}, "grid: every combination once")
rnd = load_sweep(write("random.yaml", HEAD + "method: random\ntrials: 200\nseed: 3\nparams:\n"
                       "  lr: {log_uniform: [1.0e-4, 1.0e-2]}\n  ent: {uniform: [0, 0.5]}\n"
                       "  act: {choice: [tanh, relu]}\n  n: [1, 2]\n"))
plan = rnd.planned()
lrs = [p["lr"] for p in plan]
check(len(plan) == 200 and all(1e-4 <= v <= 1e-2 for v in lrs), "log_uniform within bounds")
below = sum(1 for v in lrs if v < 1e-3) / len(lrs)
check(0.35 < below < 0.65, f"log_uniform: half the draws in the lower decade ({below:.2f})")
check(all(0 <= p["ent"] <= 0.5 for p in plan), "uniform within bounds")
check({p["act"] for p in plan} == {"tanh", "relu"} and {p["n"] for p in plan} == {1, 2},
      "choice and value lists draw from their values")
check(rnd.planned() == plan, "the same seed draws the same trials")
check(math.isclose(rnd.params[0].low, 1e-4), "bounds kept")
nums = load_sweep(write("numbers.yaml", HEAD + "set: {experiment.target_return: 1.0e9}\n"
                        "params: {trainer.algorithm.lr: [1e-3, 3.0e-4, .5]}\n"))
check(nums.fixed["experiment.target_return"] == 1e9 and nums.params[0].values == [1e-3, 3e-4, .5],
      "1.0e9 and 1e-3 are numbers, as in gearbox's configs (YAML 1.1 read them as strings)")
try:
    load_sweep(write("notmap.yaml", "- 1\n"))
    check(False, "a sweep file that is not a mapping is refused")
except SweepError as e:
    check("notmap.yaml" in str(e), f"not a mapping: {e}")

# every trial refused by gearbox check: recorded as failed, the table written, exit status 1
path = write("all_fail.yaml", f"base: {BASE}\nparallel: 2\nobjective: {{key: wall_seconds}}\n"
             "params:\n  trainer.algorithm.lr: [fast, slow]\n")
out = os.path.join(WORK, "all_fail")
rc, stdout, err = cli([path, "--dir", out])
print(stdout)
check(rc == 1, f"every trial failed: exit status {rc}")
with open(os.path.join(out, "trials.csv"), encoding="utf-8") as f:
    rows = list(csv.DictReader(f))
check(len(rows) == 2 and all(r["status"] == "failed" and r["exit_status"] == "2"
                             for r in rows), "both trials recorded as failed, status 2")
check(all("trainer.algorithm.lr" in r["error"] for r in rows), "with the command's message")
check("best: none" in stdout and "failed (exit status 2)" in stdout, "said when printed")
check("trial-000" in open(os.path.join(out, "sweep.json"), encoding="utf-8").read(),
      "sweep.json lists the failed trials")
rc, _, err = cli([path, "--dir", out])
check(rc == 2 and "already holds a sweep" in err, f"a used sweep folder is refused: {err}")

finish()
