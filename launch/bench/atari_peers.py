#!/usr/bin/env python3
"""launch/bench/atari_peers.py: Atari frames/s per core of gearbox's environment (envs/atari,
ale-py's ALE called from C, under gearbox's preprocessing wrappers) beside ale-py's own vector
environment and EnvPool's, in one run on the same machine (issue #37).

usage: atari_peers.py GEARBOX [--seconds S] [--games pong,breakout] [--envpool-python PY]

Every side does the same work per step: sticky actions 0.25, 4 frames with a max over the last
two, an 84x84 grey frame, a stack of 4, up to 30 no-ops at reset, rewards clipped, random
actions, resets included; frames/s = steps/s x 4. gearbox: `GEARBOX bench envs --env atari
--args game=G --wrap ... --json` (one copy, and a ring of 16, one core). ale-py:
ale_py.vector_env.AtariVectorEnv with 1 and 16 environments on 1 thread. EnvPool (not one of
gearbox's dependencies): envpool.make_gymnasium("<Game>-v5") with 1 and 16 environments on 1
thread, in this interpreter when envpool imports here, else in --envpool-python PY. Also
Gymnasium's AtariPreprocessing and FrameStackObservation over gym.make("ALE/<Game>-v5",
frameskip=1) stepped in a Python loop, the usual single-environment setup. Prints a table and
gearbox's best over each peer's best. Rates are per CPU second (of the stepping thread for
gearbox, of the whole process, every thread, for the others): per core, and steady on a machine
that other work loads, where wall-clock rates swing.
"""
import json
import subprocess
import sys
import time

if __name__ == "__main__" and (len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help")):
    print(__doc__)
    sys.exit(0 if len(sys.argv) >= 2 else 2)

import numpy as np  # noqa: E402 (after --help, which needs nothing)

SKIP, STACK, SIZE, NOOPS, STICKY = 4, 4, 84, 30, 0.25
WRAP = [f"frame_skip={SKIP}", f"screen_size={SIZE}", f"frame_stack={STACK}",
        f"noop_max={NOOPS}", "clip_reward=true"]


def camel(game):
    return "".join(w.capitalize() for w in game.split("_"))


def timed(step, n, seconds):
    """Steps per CPU second of this process (all its threads), over `seconds` of wall time."""
    steps, t0, c0 = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - t0 < seconds:
        step()
        steps += n
    return steps / (time.process_time() - c0)


def vector_rate(make, n, seconds):
    env = make(n)
    env.reset(seed=1)
    rng = np.random.default_rng(0)
    k = env.single_action_space.n
    return timed(lambda: env.step(rng.integers(0, k, n)), n, seconds) * SKIP


def ale_vector_rate(game, n, seconds):
    from ale_py.vector_env import AtariVectorEnv
    return vector_rate(lambda m: AtariVectorEnv(
        game, m, num_threads=1, repeat_action_probability=STICKY, frameskip=SKIP,
        stack_num=STACK, img_height=SIZE, img_width=SIZE, noop_max=NOOPS,
        reward_clipping=True, use_fire_reset=False), n, seconds)


def envpool_rate(game, n, seconds):
    import envpool
    return vector_rate(lambda m: envpool.make_gymnasium(
        f"{camel(game)}-v5", num_envs=m, batch_size=m, num_threads=1, seed=1,
        repeat_action_probability=STICKY, frame_skip=SKIP, stack_num=STACK, img_height=SIZE,
        img_width=SIZE, noop_max=NOOPS, reward_clip=True, use_fire_reset=False), n, seconds)


def gymnasium_rate(game, seconds):
    import ale_py
    import gymnasium as gym
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation
    gym.register_envs(ale_py)
    env = FrameStackObservation(AtariPreprocessing(
        gym.make(f"ALE/{camel(game)}-v5", frameskip=1, repeat_action_probability=STICKY),
        noop_max=NOOPS, frame_skip=SKIP, screen_size=SIZE), STACK)
    env.reset(seed=1)
    rng = np.random.default_rng(0)
    k = env.action_space.n

    def step():
        _, _, term, trunc, _ = env.step(int(rng.integers(k)))
        if term or trunc:
            env.reset()
    return timed(step, 1, seconds) * SKIP


def gearbox_rates(gearbox, game, seconds):
    out = subprocess.run([gearbox, "bench", "envs", "--env", "atari", "--args", f"game={game}",
                          "--wrap", *WRAP, "--ring", "16", "--seconds", str(seconds), "--json"],
                         check=True, capture_output=True, text=True).stdout
    rates = {}
    for line in out.splitlines():  # one JSON object a measurement
        row = json.loads(line)
        rates[row["mode"]] = row["steps_per_cpu_s"] * SKIP
    return rates["single"], rates["ring"]


def envpool_rates(game, seconds, python):
    """EnvPool with 1 and 16 environments: here, or in python's interpreter (nan when none)."""
    try:
        import envpool  # noqa: F401
        return envpool_rate(game, 1, seconds), envpool_rate(game, 16, seconds)
    except ImportError:
        pass
    if not python:
        return float("nan"), float("nan")
    out = subprocess.run([python, __file__, "--envpool-only", game, str(seconds)], check=True,
                         capture_output=True, text=True).stdout.split()
    return float(out[0]), float(out[1])


def option(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def main():
    if sys.argv[1] == "--envpool-only":  # the child of envpool_rates
        game, seconds = sys.argv[2], float(sys.argv[3])
        print(envpool_rate(game, 1, seconds), envpool_rate(game, 16, seconds))
        return
    gearbox = sys.argv[1]
    seconds = float(option("--seconds", 3))
    games = option("--games", "pong,breakout").split(",")
    python = option("--envpool-python", "")
    print(f"{'game':10} {'gearbox 1':>10} {'gearbox 16':>10} {'ale-py 1':>9} {'ale-py 16':>9} "
          f"{'envpool 1':>9} {'envpool 16':>10} {'gymnasium':>9} {'vs ale-py':>9} "
          f"{'vs envpool':>10}  (frames per CPU second)")
    for game in games:
        single, ring = gearbox_rates(gearbox, game, seconds)
        ale1, ale16 = ale_vector_rate(game, 1, seconds), ale_vector_rate(game, 16, seconds)
        ep1, ep16 = envpool_rates(game, seconds, python)
        gym_rate = gymnasium_rate(game, seconds)
        best = max(single, ring)
        print(f"{game:10} {single:10.0f} {ring:10.0f} {ale1:9.0f} {ale16:9.0f} {ep1:9.0f} "
              f"{ep16:10.0f} {gym_rate:9.0f} {best / max(ale1, ale16):9.2f} "
              f"{best / max(ep1, ep16):10.2f}", flush=True)


if __name__ == "__main__":
    main()
