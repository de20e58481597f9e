"""tests/launch/python/test_runs.py: the gearbox package's run API against the real command:
CartPole PPO started from a dict with overrides into the command's default run directory, its
metrics rows followed while it runs, its summary solved; read_run and evaluate of that run; a
bad config raising RunFailed with the command's message before any run directory exists; stop()
giving the summary with exit_reason "interrupted"; resume() continuing it to solved, its rows
the new segment's; a failing run raising RunFailed with status 1 and the log's end.
Usage: test_runs.py GEARBOX SOURCE_ROOT WORK_DIR (the package is SOURCE_ROOT/launch/python)"""
import atexit
import csv
import math
import os
import shutil
import tempfile

from harness import check, finish, setup

GEARBOX, SRC, WORK = setup()
import gearbox  # noqa: E402
import yaml  # noqa: E402



with open(os.path.join(SRC, "configs", "cartpole_ppo.yaml"), encoding="utf-8") as f:
    base = yaml.safe_load(f)
# the run root in a temporary folder, removed at exit
ROOT = tempfile.mkdtemp(prefix="gb-runs-")
atexit.register(shutil.rmtree, ROOT, True)
base["experiment"]["run_root"] = ROOT
base["experiment"]["max_seconds"] = 120

# a dict config, the default run directory, rows followed while the run goes
r = gearbox.run(base, overrides={"experiment.seed": 2, "experiment.name": "from_dict"},
                wait=False)
check(os.path.dirname(r.run_dir) == os.path.join(ROOT, "from_dict"),
      f"the default run directory is <run_root>/<name>/<stamp>: {r.run_dir}")
rows, live = [], 0
for row in r.rows():
    rows.append(row)
    live += r.running()
summary = r.wait()
print("summary:", {k: summary[k] for k in ("exit_reason", "env_steps", "wall_seconds")})
check(summary["solved"] is True and summary["exit_reason"] == "solved", "CartPole PPO solved")
check(r.summary is summary and r.returncode == 0, "run.summary and returncode after wait()")
check(len(rows) >= 2 and live >= 1, f"rows came while it ran ({live} of {len(rows)})")
check(all(isinstance(v, float) for v in rows[-1].values()), "rows are dicts of floats")
# every empty cell of metrics.csv is nan in the rows (a PPO run has no q_mean, epsilon, ...: those
# are empty in every row; the first row's return_mean_100 was too, until the trainer learned
# from its first chunk on and episodes ended before the first row)
with open(os.path.join(r.run_dir, "metrics.csv"), encoding="utf-8") as f:
    raw = list(csv.DictReader(f))
empty = [(i, k) for i, cells in enumerate(raw[:len(rows)]) for k, v in cells.items() if v == ""]
check(any(k == "q_mean" for _, k in empty) and all(math.isnan(rows[i][k]) for i, k in empty),
      f"an empty cell is nan ({len(empty)} empty cells)")
check(rows[-1]["env_steps"] == summary["env_steps"], "the last row holds the summary's steps")
env_steps = [row["env_steps"] for row in rows]
check(env_steps == sorted(env_steps), "rows in order")
with open(os.path.join(r.run_dir, "config.yaml"), encoding="utf-8") as f:
    check("seed: 2" in f.read(), "the overrides reached the run's config.yaml")

data = gearbox.read_run(r.run_dir)
got, got_rows = data
check(got == summary, "read_run's summary is summary.json")
check(len(got_rows) == len(rows), f"read_run's rows: {len(got_rows)} of {len(rows)}")
ev = gearbox.evaluate(r.run_dir, episodes=3, deterministic=True)
check(ev["episodes"] == 3 and ev["return_mean"] >= 400, f"evaluate: {ev['return_mean']}")

# a bad config raises with the command's message, before anything starts
try:
    gearbox.run(os.path.join(SRC, "configs", "cartpole_ppo.yaml"),
                overrides={"trainer.algorithm.lr": "fast"}, run_dir=os.path.join(WORK, "bad"))
    check(False, "a bad config raises RunFailed")
except gearbox.RunFailed as e:
    check(e.status == 2, f"a bad config: status {e.status}")
    check("trainer.algorithm.lr" in str(e) and "fast" in str(e), f"its message: {e}")
    check(not os.path.exists(os.path.join(WORK, "bad")), "no run directory for a bad config")

# stop() as Ctrl-C: the summary says interrupted; resume() goes on from its checkpoints
stop_dir = os.path.join(WORK, "stopped")
r = gearbox.run(base, overrides={"experiment.target_return": 1000}, run_dir=stop_dir,
                wait=False)
for row in r.rows():
    if row["train_steps"] >= 10:
        break
s = r.stop(timeout=60)
check(s["exit_reason"] == "interrupted" and r.returncode == 1,
      f"stop(): exit_reason {s['exit_reason']}, exit status {r.returncode}")
rows_before = len(gearbox.read_run(stop_dir).rows)
r2 = gearbox.resume(stop_dir, overrides={"experiment.target_return": 475})
check(r2.summary["exit_reason"] == "solved", f"resume(): {r2.summary['exit_reason']}")
check(r2.summary["env_steps"] > s["env_steps"], "resume() counted on from the stop")
new_rows = list(r2.rows())
check(new_rows and new_rows[0]["env_steps"] >= s["env_steps"] * 0.5,
      "resume()'s rows are the new segment's")
check(rows_before + len(new_rows) == len(gearbox.read_run(stop_dir).rows),
      "read_run has both segments' rows")

# a run that fails (launch.stop_timeout_s 0: every worker is killed at the stop) raises
# RunFailed with status 1 and the log's end; its summary says why
try:
    gearbox.run(base, overrides={"experiment.max_seconds": 2, "experiment.target_return": 1e9,
                                 "launch.stop_timeout_s": 0},
                run_dir=os.path.join(WORK, "fails"))
    check(False, "a failing run raises RunFailed")
except gearbox.RunFailed as e:
    print(e)
    check(e.status == 1 and e.log_tail, f"a failing run: status {e.status}, its log")
    check(e.run_dir == os.path.join(WORK, "fails"), "RunFailed names the run directory")
    s = gearbox.read_run(e.run_dir).summary
    check(s is not None and s["exit_reason"] == "worker_failed",
          f"its summary: {s and s['exit_reason']}")

finish()
