"""tests/envs/atari/atari_reference.py: records ale-py's own Atari environment, stepped with
random actions from a given ALE seed, for test_env_atari to replay on gearbox's (envs/atari and
the wrappers of envs/wrap.h) and compare byte for byte.

    python atari_reference.py GAME ALE_SEED STEPS VARIANT OUT

VARIANT raw: gymnasium.make("ALE/<Game>-v5", frameskip=1, obs_type="grayscale"), the 210x160
screens. VARIANT pre: the same under AtariPreprocessing(noop_max=0, frame_skip=4,
screen_size=84, grayscale_obs=True) and FrameStackObservation(stack_size=4), 4x84x84.
Sticky actions (0.25) are on in both: ALE draws them from its random_seed, which both sides set.
OUT: records of int32 action (-1: a reset), float32 reward, uint8 terminated, uint8 truncated,
two zero bytes, then the observation's bytes. Exits 77 when ale_py, gymnasium or cv2 is
missing."""
import struct
import sys

try:
    import ale_py
    import gymnasium as gym
    import numpy as np
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation
    import cv2  # noqa: F401 (AtariPreprocessing needs it)
except ImportError as e:
    print(f"skip: {e}", file=sys.stderr)
    sys.exit(77)


def main():
    game, seed, steps, variant, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
        sys.argv[4], sys.argv[5]
    gym.register_envs(ale_py)
    env = gym.make(f"ALE/{game}-v5", frameskip=1, obs_type="grayscale",
                   repeat_action_probability=0.25)
    # ALE's own seed, as gearbox sets it (the seed's low 31 bits), instead of the SeedSequence
    # that reset(seed=...) derives; load_game makes the emulator read it
    env.unwrapped.ale.setInt("random_seed", seed)
    env.unwrapped.load_game()
    if variant == "pre":
        env = FrameStackObservation(
            AtariPreprocessing(env, noop_max=0, frame_skip=4, screen_size=84,
                               grayscale_obs=True, terminal_on_life_loss=False), stack_size=4)
    rng = np.random.default_rng(seed)
    n = env.action_space.n
    with open(out, "wb") as f:
        def record(action, obs, reward=0.0, term=False, trunc=False):
            f.write(struct.pack("<ifBBxx", action, reward, int(term), int(trunc)))
            f.write(np.ascontiguousarray(obs, dtype=np.uint8).tobytes())

        obs, _ = env.reset()
        record(-1, obs)
        for _ in range(steps):
            a = int(rng.integers(n))
            obs, reward, term, trunc, _ = env.step(a)
            record(a, obs, float(reward), term, trunc)
            if term or trunc:
                obs, _ = env.reset()
                record(-1, obs)


if __name__ == "__main__":
    main()
