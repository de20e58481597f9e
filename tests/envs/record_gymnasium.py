#!/usr/bin/env python3
"""tests/envs/record_gymnasium.py: records Gymnasium's own transitions for gearbox's built-in
classic-control environments, as reference data for tests/envs/test_dynamics.c.

Each episode starts from a state Gymnasium's reset() drew (or one set explicitly, for edge
cases), recorded exactly, and is driven by a fixed action sequence (a seeded NumPy generator or
a simple controller), since gearbox's PRNG differs from NumPy's. For every step the file holds
the action, the unwrapped state after the step (float64 text, exact), the observation, the
reward, and the terminated and truncated flags as the registered env (with its TimeLimit)
returns them. The C test replays each step from the recorded previous state, and also whole
episodes from the start state through the environment ring.

Usage:  python3 -m venv /tmp/venv && /tmp/venv/bin/pip install gymnasium numpy
        /tmp/venv/bin/python tests/envs/record_gymnasium.py tests/data/envs

File format (one file per environment, <env-id>.txt, whitespace-separated):
    # comment lines
    env <id> <state_dim> <obs_dim> <action_dim> <action_kind: discrete|box>
    episode <steps> <state_is_float32 0|1> <start state...> <start obs...>
    <action...> <state after...> <obs...> <reward> <terminated> <truncated>     (steps lines)
"""
import sys
import os
import math

import numpy as np
import gymnasium as gym

DIMS = {  # id: (state_dim, obs_dim, action_dim, kind)
    "CartPole-v1": (4, 4, 1, "discrete"),
    "Acrobot-v1": (4, 6, 1, "discrete"),
    "MountainCar-v0": (2, 2, 1, "discrete"),
    "MountainCarContinuous-v0": (2, 2, 1, "box"),
    "Pendulum-v1": (2, 3, 1, "box"),
}


def g(x):
    return repr(float(x))


def cartpole_policy(kind, rng):
    if kind == "random":
        return lambda s, t: int(rng.integers(2))
    # a PD balancer: long episodes that end by truncation at 500
    return lambda s, t: int(s[2] + 0.5 * s[3] + 0.01 * s[0] + 0.1 * s[1] > 0)


def acrobot_policy(kind, rng):
    if kind == "random":
        return lambda s, t: int(rng.integers(3))
    # energy pumping: torque along the second joint's velocity; terminates
    return lambda s, t: 2 if s[3] > 0 else 0


def mountain_car_policy(kind, rng):
    if kind == "random":
        return lambda s, t: int(rng.integers(3))
    return lambda s, t: 2 if s[1] >= 0 else 0


def mountain_car_continuous_policy(kind, rng):
    if kind == "random":  # beyond the bounds on purpose: the env clips the force
        return lambda s, t: np.array([rng.uniform(-1.5, 1.5)], dtype=np.float32)
    return lambda s, t: np.array([1.0 if s[1] >= 0 else -1.0], dtype=np.float32)


def pendulum_policy(kind, rng):
    if kind == "random":  # beyond [-2, 2] on purpose: the env clips the torque
        return lambda s, t: np.array([rng.uniform(-3.0, 3.0)], dtype=np.float32)
    return lambda s, t: np.array([np.clip(-2.0 * s[0] - 0.5 * s[1], -2, 2)], dtype=np.float32)


PLAN = {  # id: (policy maker, [(policy kind, reset seed, explicit start state or None), ...])
    "CartPole-v1": (cartpole_policy, [("random", 1, None), ("random", 2, None),
                                      ("random", 3, None), ("pd", 4, None), ("pd", 5, None),
                                      ("random", 6, [0.0, 0.0, 0.2, 0.5])]),
    "Acrobot-v1": (acrobot_policy, [("random", 1, None), ("pump", 2, None), ("pump", 3, None),
                                    ("pump", 4, None)]),
    "MountainCar-v0": (mountain_car_policy, [("random", 1, None), ("energy", 2, None),
                                             ("energy", 3, None),
                                             ("random", 4, [-1.19, -0.02])]),
    "MountainCarContinuous-v0": (mountain_car_continuous_policy,
                                 [("random", 1, None), ("energy", 2, None), ("energy", 3, None),
                                  ("energy", 4, [-1.19, -0.05])]),
    "Pendulum-v1": (pendulum_policy, [("random", 1, None), ("random", 2, None),
                                      ("pd", 3, None), ("random", 4, [math.pi, 0.0]),
                                      ("random", 5, [-math.pi, 7.9])]),
}


def record(env_id, out_dir):
    state_dim, obs_dim, action_dim, kind = DIMS[env_id]
    maker, episodes = PLAN[env_id]
    env = gym.make(env_id)
    lines = [f"# Gymnasium {gym.__version__}, NumPy {np.__version__}: {env_id}",
             f"env {env_id} {state_dim} {obs_dim} {action_dim} {kind}"]
    for ep, (policy_kind, seed, start) in enumerate(episodes):
        rng = np.random.default_rng(1000 + 17 * ep)
        policy = maker(policy_kind, rng)
        obs, _ = env.reset(seed=seed)
        u = env.unwrapped
        if start is not None:
            dtype = np.asarray(u.state).dtype  # keep the type reset() gives the state
            u.state = np.array(start, dtype=dtype)
            obs = u._get_ob() if hasattr(u, "_get_ob") else (
                u._get_obs() if hasattr(u, "_get_obs") else np.array(u.state, dtype=np.float32))
        state = np.asarray(u.state)
        steps = []
        s_for_policy = np.array(state, dtype=np.float64)
        t = 0
        while True:
            a = policy(s_for_policy, t)
            obs2, r, term, trunc, _ = env.step(a)
            st = np.asarray(u.state)
            acts = [a] if np.isscalar(a) or isinstance(a, int) else list(np.asarray(a).ravel())
            steps.append(" ".join([g(x) for x in acts] + [g(x) for x in np.ravel(st)] +
                                  [g(x) for x in np.ravel(obs2)] +
                                  [g(r), str(int(term)), str(int(trunc))]))
            s_for_policy = np.array(st, dtype=np.float64)
            t += 1
            if term or trunc:
                break
        is_f32 = int(state.dtype == np.float32)
        lines.append(" ".join(["episode", str(len(steps)), str(is_f32)] +
                              [g(x) for x in np.ravel(state)] + [g(x) for x in np.ravel(obs)]))
        lines.extend(steps)
        print(f"{env_id}: episode {ep} ({policy_kind}): {len(steps)} steps, "
              f"ended by {'termination' if term else 'truncation'}", file=sys.stderr)
    with open(os.path.join(out_dir, env_id + ".txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "tests/data/envs"
    os.makedirs(out_dir, exist_ok=True)
    for env_id in DIMS:
        record(env_id, out_dir)


if __name__ == "__main__":
    main()
