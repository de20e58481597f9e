"""tests/launch/python/test_sweep.py: gearbox-sweep runs a 4-trial grid over
trainer.algorithm.lr on CartPole PPO (20k env steps each, whatever the load), 2 trials at a
time: every trial a run directory under the sweep's folder, the table (trials.csv, sweep.json,
printed) naming the trial with the best objective, and the plot (a PNG).
Usage: test_sweep.py GEARBOX SOURCE_ROOT WORK_DIR (the package is SOURCE_ROOT/launch/python)"""
import csv
import json
import os
import subprocess
import sys

import yaml
from harness import check, finish, setup

GEARBOX, SRC, WORK = setup()
PKG = os.path.join(SRC, "launch", "python")


spec = os.path.join(WORK, "lr.yaml")
LRS = [0.0003, 0.001, 0.002, 0.004]
with open(spec, "w", encoding="utf-8") as f:
    f.write(f"""name: lr_grid
base: {os.path.join(SRC, "configs", "cartpole_ppo.yaml")}
set: {{experiment.max_env_steps: 20000, experiment.max_seconds: 120, launch.progress: "off"}}
method: grid
parallel: 2
objective: {{key: episode_return_mean, direction: max}}
params:
  trainer.algorithm.lr: {LRS}
""")
out_dir = os.path.join(WORK, "sweep")
env = dict(os.environ, PYTHONPATH=PKG)
p = subprocess.run([sys.executable, "-c", "import sys, gearbox.sweeps as s; sys.exit(s.main())",
                    spec, "--dir", out_dir], env=env, capture_output=True, text=True,
                   check=False)
print(p.stdout)
print(p.stderr, file=sys.stderr)
check(p.returncode == 0, f"gearbox-sweep exit status {p.returncode}")

with open(os.path.join(out_dir, "trials.csv"), encoding="utf-8") as f:
    rows = list(csv.DictReader(f))
check(len(rows) == 4, f"trials.csv has the 4 trials: {len(rows)}")
check(sorted(float(r["trainer.algorithm.lr"]) for r in rows) == LRS, "one trial a grid value")
for r in rows:
    run_dir = r["run_dir"]
    check(r["status"] == "ok" and r["objective"] != "", f"{r['trial']}: {r['status']}")
    check(os.path.isfile(os.path.join(run_dir, "summary.json")) and
          os.path.isfile(os.path.join(run_dir, "metrics.csv")),
          f"{r['trial']} is a run directory {run_dir}")
    check(os.path.dirname(os.path.abspath(run_dir)) == os.path.abspath(out_dir),
          f"{r['trial']} lies in the sweep's folder")
    with open(os.path.join(run_dir, "config.yaml"), encoding="utf-8") as f:
        lr = yaml.safe_load(f)["trainer"]["algorithm"]["lr"]
    check(lr == float(r["trainer.algorithm.lr"]), f"{r['trial']}'s config has its lr {lr}")
    with open(os.path.join(run_dir, "summary.json"), encoding="utf-8") as f:
        s = json.load(f)
    check(abs(float(r["objective"]) - s["episode_return_mean"]) < 1e-3 * max(1, s[
        "episode_return_mean"]), f"{r['trial']}'s objective is its summary's field")

with open(os.path.join(out_dir, "sweep.json"), encoding="utf-8") as f:
    doc = json.load(f)
best = max(rows, key=lambda r: float(r["objective"]))
check(doc["best"] == best["trial"], f"sweep.json names the best trial {doc['best']}")
check(f"best: {best['trial']}" in p.stdout, "the printed table names the best trial")
check(all(r["trial"] in p.stdout for r in rows), "the printed table lists every trial")
with open(os.path.join(out_dir, "objective.png"), "rb") as f:
    png = f.read()
check(png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000, f"objective.png ({len(png)} bytes)")

finish()
