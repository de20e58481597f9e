"""tests/envs/gymnasium/reference.py: steps a Gymnasium environment directly in Python, the
reference test_gymnasium.c compares the gymnasium plugin with. Usage: reference.py ID SEED STEPS
[KEY=VALUE...] (kwargs as Python literals). Discrete actions come from a fixed LCG; after an
episode ends the environment is reset without a seed, as gearbox's ring does. Prints one line a
reset ("reset obs...") and a step ("step ACTION REWARD TERMINATED TRUNCATED obs..."), floats as
repr of float32 values so that C reads them back exactly."""
import ast
import sys

import gymnasium as gym
import numpy as np

env_id, seed, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
kwargs = {k: ast.literal_eval(v) for k, v in (a.split("=", 1) for a in sys.argv[4:])}
env = gym.make(env_id, max_episode_steps=-1, **kwargs)


def f32(x):
    return " ".join(repr(float(v)) for v in np.asarray(x, dtype=np.float32).reshape(-1))


obs, _ = env.reset(seed=seed)
print("reset", f32(obs))
state = 12345
for t in range(steps):
    state = (state * 1103515245 + 12345) % (1 << 31)
    action = (state >> 16) % env.action_space.n
    obs, reward, terminated, truncated, _ = env.step(action)
    print("step", action, repr(float(np.float32(reward))), int(terminated), int(truncated), f32(obs))
    if terminated or truncated:
        obs, _ = env.reset()
        print("reset", f32(obs))
