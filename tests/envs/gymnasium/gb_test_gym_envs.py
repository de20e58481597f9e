"""tests/envs/gymnasium/gb_test_gym_envs.py: tiny Gymnasium environments that test_gymnasium.c
loads through the gymnasium plugin as "gb_test_gym_envs:<id>" (the module registers them on
import): spaces the plugin must refuse with a clear error, and a float64 observation it casts."""
import gymnasium as gym
import numpy as np
from gymnasium import spaces


class DictObs(gym.Env):
    """A Dict observation space: unsupported."""
    observation_space = spaces.Dict({"pos": spaces.Box(-1, 1, (2,)), "id": spaces.Discrete(3)})
    action_space = spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, False, False, {}


class TupleAction(gym.Env):
    """A Box observation with a Tuple action space: unsupported."""
    observation_space = spaces.Box(-1, 1, (3,), dtype=np.float32)
    action_space = spaces.Tuple((spaces.Discrete(2), spaces.Discrete(3)))

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(3, np.float32), {}

    def step(self, action):
        return np.zeros(3, np.float32), 0.0, False, False, {}


class Float64Count(gym.Env):
    """float64 observations (cast to float32 by the plugin) counting steps; a `scale` kwarg;
    terminates after `length` steps and declares max_episode_steps 7 at registration."""

    def __init__(self, scale=1.0, length=5):
        self.observation_space = spaces.Box(-np.inf, np.inf, (2, 2), dtype=np.float64)
        self.action_space = spaces.Box(-2.0, 2.0, (2,), dtype=np.float32)
        self.scale, self.length, self.t = scale, length, 0

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(np.zeros(2)), {}

    def _obs(self, action):
        return np.array([[self.t * self.scale, 0.25], [action[0], action[1]]], dtype=np.float64)

    def step(self, action):
        self.t += 1
        return self._obs(action), float(self.t), self.t >= self.length, False, {}


gym.register("GbDictObs-v0", entry_point=DictObs)
gym.register("GbTupleAction-v0", entry_point=TupleAction)
gym.register("GbFloat64Count-v0", entry_point=Float64Count, max_episode_steps=7)
# Gymnasium's own CartPole under a name only a Python that imports this module knows (gearbox
# eval of a run must find the Python the run used: tests/launch/run_gym_eval.sh); it renders.
gym.register("GbCartPole-v0", entry_point="gymnasium.envs.classic_control.cartpole:CartPoleEnv",
             max_episode_steps=500)
