#!/usr/bin/env python3
"""launch/bench/mujoco_peers.py: MuJoCo steps/s per core of gearbox's C environments beside
Gymnasium's Python environments and EnvPool's, in one run on the same machine (issue #32).

usage: mujoco_peers.py GEARBOX [--seconds S]
Runs `GEARBOX bench envs --env NAME --json` (one copy, and a ring of 256, on one core), then in
this interpreter Gymnasium's gym.make(NAME) stepped in a Python loop and, when the envpool
package imports, EnvPool with 1 and 8 environments on 1 thread; random actions in [-1, 1],
resets included. Prints a table and the ratios gearbox / peer. EnvPool is not one of gearbox's
dependencies: run this with a Python that has it (pip install envpool; gymnasium too).
"""
import json
import os
import subprocess
import sys
import time

if __name__ == "__main__" and (len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help")):
    print(__doc__)
    sys.exit(0 if len(sys.argv) >= 2 else 2)

import numpy as np  # noqa: E402 (after --help, which needs nothing)

ENVS = ["Hopper-v5", "HalfCheetah-v5", "Walker2d-v5", "Ant-v5"]


def timed(step, n, seconds):
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        step()
        steps += n
    return steps / (time.perf_counter() - t0)


def gymnasium_rate(name, seconds):
    import gymnasium as gym
    had_log = os.path.exists("MUJOCO_LOG.TXT")
    env = gym.make(name)
    env.reset(seed=1)
    rng = np.random.default_rng(0)

    def step():
        _, _, term, trunc, _ = env.step(rng.uniform(-1, 1, env.action_space.shape))
        if term or trunc:
            env.reset()
    rate = timed(step, 1, seconds)
    if not had_log and os.path.exists("MUJOCO_LOG.TXT"):  # MuJoCo's warnings (settotalmass)
        os.remove("MUJOCO_LOG.TXT")  # written to the working folder: a checkout's root
    return rate


def envpool_rate(name, n, seconds):
    import envpool
    env = envpool.make_gymnasium(name, num_envs=n, batch_size=n, num_threads=1, seed=1)
    env.reset()
    rng = np.random.default_rng(0)
    shape = (n,) + env.action_space.shape
    return timed(lambda: env.step(rng.uniform(-1, 1, shape).astype(np.float32)), n, seconds)


def gearbox_rates(gearbox, name, seconds):
    out = subprocess.run([gearbox, "bench", "envs", "--env", name, "--seconds", str(seconds),
                          "--json"], check=True, capture_output=True, text=True).stdout
    rates = {}
    for line in out.splitlines():  # one JSON object a measurement
        row = json.loads(line)
        rates[row["mode"]] = row["steps_per_s"]
    return rates["single"], rates["ring"]


def main():
    gearbox = sys.argv[1]
    seconds = float(sys.argv[sys.argv.index("--seconds") + 1]) if "--seconds" in sys.argv else 3
    try:
        import envpool  # noqa: F401
        have_envpool = True
    except ImportError:
        have_envpool = False
    print(f"{'environment':16} {'gearbox 1':>10} {'gearbox 256':>11} {'gymnasium':>10} "
          f"{'envpool 1':>10} {'envpool 8':>10} {'vs envpool':>10}  (steps/s, one core)")
    for name in ENVS:
        single, ring = gearbox_rates(gearbox, name, seconds)
        gym_rate = gymnasium_rate(name, seconds)
        ep1 = envpool_rate(name, 1, seconds) if have_envpool else float("nan")
        ep8 = envpool_rate(name, 8, seconds) if have_envpool else float("nan")
        best_gb, best_ep = max(single, ring), max(ep1, ep8)
        print(f"{name:16} {single:10.0f} {ring:11.0f} {gym_rate:10.0f} {ep1:10.0f} {ep8:10.0f} "
              f"{best_gb / best_ep:10.2f}", flush=True)


if __name__ == "__main__":
    main()
