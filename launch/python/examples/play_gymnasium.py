"""launch/python/examples/play_gymnasium.py: train with gearbox, then play the trained policy in
your own loop: CartPole-v1 with PPO (configs/cartpole_ppo.yaml, about a second), then its greedy
policy on Gymnasium's CartPole-v1 through gearbox.load_policy. From the source tree's root, with
the gearbox command built and Gymnasium installed (launch/install-deps.sh gymnasium):

    GEARBOX_BIN=build/gearbox PYTHONPATH=launch/python \\
        /opt/gearbox/python/bin/python launch/python/examples/play_gymnasium.py

--run-dir plays an existing run instead (any config whose environment is a Gymnasium one or
has Gymnasium's twin: CartPole-v1, Pendulum-v1, Hopper-v5, ...); --env names the Gymnasium
environment to play it on."""
import argparse

import gymnasium as gym

import gearbox


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run-dir", help="a finished run to play (default: train one first)")
    ap.add_argument("--env", default="CartPole-v1", help="the Gymnasium environment")
    ap.add_argument("--episodes", type=int, default=3)
    args = ap.parse_args()
    run_dir = args.run_dir
    if run_dir is None:
        r = gearbox.run("configs/cartpole_ppo.yaml")
        print(f"trained in {r.wait()['wall_seconds']:.1f} s: {r.run_dir}")
        run_dir = r.run_dir
    policy = gearbox.load_policy(run_dir)
    env = gym.make(args.env)
    for episode in range(args.episodes):
        obs, _ = env.reset(seed=episode)
        state, start, total, done = None, True, 0.0, False
        while not done:
            action, state = policy.predict(obs, state=state, episode_start=[start])
            obs, reward, terminated, truncated, _ = env.step(action)
            total += reward
            start, done = False, terminated or truncated
        print(f"episode {episode}: return {total:g}")


if __name__ == "__main__":
    main()
