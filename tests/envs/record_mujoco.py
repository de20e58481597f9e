#!/usr/bin/env python3
"""tests/envs/record_mujoco.py: records Gymnasium's own MuJoCo v5 transitions (Hopper, HalfCheetah,
Walker2d, Ant) as reference data for tests/envs/test_mujoco.c, which replays them with gearbox's
built-in environments (envs/mujoco) on the same MuJoCo build (PyPI's mujoco wheel).

Each episode makes the env with some constructor arguments, resets it with a seed and then,
for some episodes, sets an explicit start state (qpos, qvel) with set_state, and drives it with
a fixed action sequence (a seeded NumPy generator, a sinusoid, or actions beyond the bounds,
which MuJoCo clamps while the control cost sees them as given). An episode ends where Gymnasium
terminates it, or after the recorded number of steps. Since gearbox's PRNG differs from NumPy's,
the start state is recorded and set, not drawn.

Usage:  /opt/gearbox/python/bin/python tests/envs/record_mujoco.py tests/data/envs

File format (<env-id>.txt.gz, gzip-compressed text, whitespace-separated, floats exact):
    # comment lines
    env <id> <nq> <nv> <nu>
    episode <steps> <obs_dim> <nargs> <key=value>...   (values as gearbox's env.args text)
    start <qpos...> <qvel...> <obs...>
    step <action...> <qpos...> <qvel...> <qacc_warmstart...> <xpos of body 1 (3)> <obs...>
         <reward> <term> <trunc>
The state after each step carries what MuJoCo keeps from one step to the next beside qpos and
qvel, so that a step replayed from it is exact: qacc_warmstart, the constraint solver's starting
point, and the torso's (body 1, every recorded episode's main_body) xpos, which mj_step computed
before its last integration and from which Ant's next forward reward starts.
"""
import gzip
import os
import sys

import mujoco
import numpy as np
import gymnasium as gym


def g(x):
    return repr(float(x))


def text(v):
    """A Python argument as gearbox's env.args text."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, tuple):
        return ",".join(g(x) for x in v)
    return str(v)


def random_actions(nu, seed, bound=1.0):
    rng = np.random.default_rng(seed)
    return lambda t: rng.uniform(-bound, bound, nu).astype(np.float32)


def sine_actions(nu, _seed):
    return lambda t: np.array([0.9 * np.sin(0.15 * t + 1.3 * i) for i in range(nu)],
                              dtype=np.float32)


# id: [(kwargs, reset seed, start (qpos, qvel) or None, actions, steps cap), ...]
PLAN = {
    "Hopper-v5": [
        ({}, 1, None, random_actions, 200),
        ({}, 2, None, sine_actions, 200),
        ({"exclude_current_positions_from_observation": False, "ctrl_cost_weight": 0.01,
          "healthy_angle_range": (-0.5, 0.5), "frame_skip": 5, "forward_reward_weight": 2.0},
         3, ([0.3, 1.3, 0.05, -0.1, 0.2, 0.1], [0.5, 0.2, -0.3, 1.0, -1.0, 2.0]),
         lambda nu, s: random_actions(nu, s, 1.5), 100),
        ({"terminate_when_unhealthy": False, "healthy_state_range": (-5.0, 5.0)}, 4, None,
         random_actions, 120),
    ],
    "HalfCheetah-v5": [
        ({}, 1, None, random_actions, 120),
        ({"frame_skip": 2, "forward_reward_weight": 2.0, "reset_noise_scale": 0.5,
          "exclude_current_positions_from_observation": False}, 2, None,
         lambda nu, s: random_actions(nu, s, 1.5), 60),
        ({}, 3, None, sine_actions, 80),
    ],
    "Walker2d-v5": [
        ({}, 1, None, random_actions, 200),
        ({}, 2, None, sine_actions, 200),
        ({"healthy_z_range": (0.5, 2.5), "healthy_reward": 2.0, "ctrl_cost_weight": 0.1,
          "terminate_when_unhealthy": False}, 3,
         ([0.0, 1.25, 0.3, -0.5, 0.4, 0.2, 0.6, -0.3, 0.1], [1.0] * 9),
         lambda nu, s: random_actions(nu, s, 1.5), 60),
        ({"terminate_when_unhealthy": False}, 4, None, sine_actions, 100),
    ],
    "Ant-v5": [
        ({}, 1, None, random_actions, 60),
        ({"include_cfrc_ext_in_observation": False, "contact_cost_weight": 1e-3,
          "contact_force_range": (-0.5, 0.5), "main_body": "torso", "healthy_z_range": (0.3, 1.0),
          "reset_noise_scale": 0.2}, 2, None, lambda nu, s: random_actions(nu, s, 1.5), 60),
        ({}, 3, ([0.0, 0.0, 0.35, 1.0, 0.0, 0.0, 0.0, 0.0, 0.5, 0.0, -0.5, 0.0, -0.5, 0.0, 0.5],
                 [0.0] * 14), sine_actions, 60),
        ({}, 4, ([0.0, 0.0, 0.6, 1.0, 0.0, 0.0, 0.0, 0.0, 0.5, 0.0, -0.5, 0.0, -0.5, 0.0, 0.5],
                 [0.3, 0.0, 3.0] + [0.0] * 11), random_actions, 60),  # jumps above the range
    ],
}


def record(env_id, out_dir):
    lines = [f"# Gymnasium {gym.__version__}, MuJoCo {mujoco.__version__}, "
             f"NumPy {np.__version__}: {env_id}"]
    for ep, (kwargs, seed, start, actions, cap) in enumerate(PLAN[env_id]):
        env = gym.make(env_id, **kwargs)
        u = env.unwrapped
        m, d = u.model, u.data
        if ep == 0:
            lines.append(f"env {env_id} {m.nq} {m.nv} {m.nu}")
        obs, _ = env.reset(seed=seed)
        if start is not None:
            u.set_state(np.array(start[0]), np.array(start[1]))
            obs = u._get_obs()
        head = ["start"] + [g(x) for x in d.qpos] + [g(x) for x in d.qvel] + [g(x) for x in obs]
        act = actions(m.nu, 100 + ep)
        steps = []
        for t in range(cap):
            a = act(t)
            obs, r, term, trunc, _ = env.step(a)
            steps.append(" ".join(["step"] + [g(x) for x in a] + [g(x) for x in d.qpos] +
                                  [g(x) for x in d.qvel] + [g(x) for x in d.qacc_warmstart] +
                                  [g(x) for x in d.xpos[1]] +
                                  [g(x) for x in obs] + [g(r), str(int(term)), str(int(trunc))]))
            if term or trunc:
                break
        args = [f"{k}={text(v)}" for k, v in kwargs.items()]
        lines.append(" ".join(["episode", str(len(steps)), str(len(obs)), str(len(args))] + args))
        lines.append(" ".join(head))
        lines.extend(steps)
        print(f"{env_id}: episode {ep}: {len(steps)} steps, "
              f"{'terminated' if term else 'cut'}", file=sys.stderr)
        env.close()
    if os.path.exists("MUJOCO_LOG.TXT"):  # MuJoCo's warnings (HalfCheetah's settotalmass)
        os.remove("MUJOCO_LOG.TXT")
    path = os.path.join(out_dir, env_id + ".txt.gz")
    with gzip.GzipFile(path, "wb", mtime=0) as f:  # mtime 0: the same data gives the same file
        f.write(("\n".join(lines) + "\n").encode())


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "tests/data/envs"
    os.makedirs(out_dir, exist_ok=True)
    for env_id in PLAN:
        record(env_id, out_dir)


if __name__ == "__main__":
    main()
