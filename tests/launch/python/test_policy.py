"""tests/launch/python/test_policy.py: gearbox.load_policy (launch/python/gearbox/policy.py) plays a
run's trained policy in Python as gearbox's own C plays it. Short runs of PPO (CartPole: solved;
Hopper: a box, normalised observations), DQN (CartPole) and SAC (Pendulum: squashed, scaled to
the bounds); for each, 256 random observations through the Python module and through
policy_reference (the C model `gearbox eval` plays): the same greedy actions (discrete: where
the two best logits are not within float rounding), log-probabilities and values, and for a
box the same actions and log-probabilities for the same standard-normal draws. The solved
CartPole policy balances Gymnasium's CartPole-v1 for 500 steps (when Gymnasium is installed).
A damaged policy file is refused naming why.
usage: test_policy.py GEARBOX SOURCE_ROOT WORK_DIR POLICY_REFERENCE"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

gearbox_bin, src, work = harness.setup()
reference = sys.argv[4]
check = harness.check

try:
    import numpy as np
    import torch
except ImportError:
    print("skipped: numpy and PyTorch (python3-torch) are not installed")
    sys.exit(77)
import gearbox  # noqa: E402


def train(name, config, *sets):
    run_dir = os.path.join(work, name)
    cmd = [gearbox_bin, "run", os.path.join(src, "configs", config), "--run-dir", run_dir,
           "--set", "launch.progress=off", "--set", "experiment.eval_every=0"]
    for s in sets:
        cmd += ["--set", s]
    p = subprocess.run(cmd, capture_output=True, text=True)
    check(p.returncode == 0, f"{name}: gearbox run exited {p.returncode}")
    return run_dir if p.returncode == 0 else None


def reference_outputs(run_dir, policy_path, obs, noise):
    o, z, out = (os.path.join(work, f) for f in ("obs.f32", "noise.f32", "out.f32"))
    obs.astype(np.float32).tofile(o)
    noise.astype(np.float32).tofile(z)
    p = subprocess.run([reference, os.path.join(run_dir, "config.yaml"), policy_path, o, z, out],
                       capture_output=True, text=True)
    check(p.returncode == 0, f"policy_reference ran {p.stderr.strip()}")
    return np.fromfile(out, dtype=np.float32)


def close(a, b, tol):
    return a.shape == b.shape and bool(np.all(np.abs(a - b) <= tol * (1 + np.abs(b))))


def compare(name, run_dir):
    policy = gearbox.load_policy(run_dir)
    rng = np.random.default_rng(7)
    shape = policy.spec["observation"]["shape"]
    n = 256
    obs = (rng.standard_normal((n, *shape)) * 1.5).astype(np.float32)
    k = 1 if policy.discrete else policy.spec["action"]["dim"]
    noise = rng.standard_normal((n, k)).astype(np.float32)
    ref = reference_outputs(run_dir, policy.path, obs, noise if not policy.discrete else noise[:0])
    want = n * (k + 2) + (0 if policy.discrete else n * (k + 1))
    check(ref.size == want, f"{name}: the reference wrote {ref.size} floats ({want} expected)")
    if ref.size != want:
        return policy
    c_act, c_logp, c_value = ref[:n * k].reshape(n, k), ref[n * k:n * (k + 1)], \
        ref[n * (k + 1):n * (k + 2)]
    a, logp, value = (t.numpy() for t in policy.act(obs, deterministic=True))
    if policy.discrete:
        with torch.no_grad():
            out = policy(torch.from_numpy(obs))
        scores = (out[0] if isinstance(out, tuple) else out).numpy()
        top2 = np.sort(scores, axis=1)[:, -2:]
        clear = top2[:, 1] - top2[:, 0] > 1e-4
        same = a[clear] == c_act[clear, 0].astype(np.int64)
        check(bool(same.all()) and clear.sum() > n // 2,
              f"{name}: greedy actions equal ({int(same.sum())} of {int(clear.sum())} clear "
              f"rows)")
    else:
        check(close(a, c_act, 1e-4), f"{name}: mean actions equal to float rounding "
              f"(largest gap {float(np.abs(a - c_act).max()):.2g})")
    check(close(logp, c_logp, 1e-4), f"{name}: log-probabilities equal "
          f"(largest gap {float(np.abs(logp - c_logp).max()):.2g})")
    check(close(value, c_value, 1e-4), f"{name}: values equal "
          f"(largest gap {float(np.abs(value - c_value).max()):.2g})")
    if not policy.discrete:
        z_act = ref[n * (k + 2):n * (2 * k + 2)].reshape(n, k)
        z_logp = ref[n * (2 * k + 2):]
        a, logp, _ = (t.numpy() for t in policy.act(obs, deterministic=False, noise=noise))
        check(close(a, z_act, 1e-4), f"{name}: actions for the same draws equal "
              f"(largest gap {float(np.abs(a - z_act).max()):.2g})")
        check(close(logp, z_logp, 1e-3), f"{name}: their log-probabilities equal "
              f"(largest gap {float(np.abs(logp - z_logp).max()):.2g})")
    return policy


runs = [("cartpole_ppo", "cartpole_ppo.yaml"),
        ("cartpole_dqn", "cartpole_dqn.yaml", "experiment.max_env_steps=20000"),
        ("pendulum_sac", "pendulum_sac.yaml", "experiment.max_env_steps=3000"),
        ("hopper_ppo", "hopper_ppo.yaml", "experiment.max_env_steps=6000")]
for name, config, *sets in runs:
    run_dir = train(name, config, *sets)
    if not run_dir:
        continue
    policy = compare(name, run_dir)
    if name == "hopper_ppo":
        check(policy.normalized, "hopper_ppo: the observations are normalised by the run's "
              "statistics")
        obs = np.random.default_rng(3).standard_normal((64, 11)).astype(np.float32)
        with torch.no_grad():  # means pushed past the bounds [-1, 1] on two dimensions
            policy.pi.bias += torch.tensor([5.0, -5.0, 0.0])
        mean = policy.act(obs)[0].numpy()
        got = policy.predict(obs)
        check(bool(np.all(got == np.clip(mean, -1, 1))) and bool(np.all(got[:, 0] == 1)) and
              bool(np.all(got[:, 1] == -1)),
              "hopper_ppo: predict clips the actions to the bounds, as the actor does")
    if name == "cartpole_ppo":
        one = policy.predict(np.zeros(4, dtype=np.float32))
        check(np.ndim(one) == 0 and int(one) in (0, 1), "predict of one observation: one action")
        try:
            import gymnasium as gym
        except ImportError:
            gym = None
            print("skipped: Gymnasium is not installed (CartPole-v1 episodes)")
        if gym:
            env = gym.make("CartPole-v1")
            returns = []
            for seed in range(3):
                o, _ = env.reset(seed=seed)
                total, done = 0.0, False
                while not done:
                    o, r, term, trunc, _ = env.step(int(policy.predict(o)))
                    total += r
                    done = term or trunc
                returns.append(total)
            check(min(returns) >= 475, f"Gymnasium's CartPole-v1 with the policy: {returns}")
        good = policy.path
        raw = open(good, "rb").read()
        for what, data, why in [("a flipped byte", raw[:-3] + bytes([raw[-3] ^ 1]) + raw[-2:],
                                 "a CRC does not match"),
                                ("a cut file", raw[:-8], "its size does not match"),
                                ("another file", b"PK\x03\x04" + raw[4:], "not a gearbox")]:
            bad = os.path.join(work, "bad.policy")
            open(bad, "wb").write(data)
            try:
                gearbox.load_policy(run_dir, checkpoint=bad)
                check(False, f"{what}: refused")
            except gearbox.PolicyFileError as e:
                check(why in str(e), f"{what}: refused ({e})")

harness.finish()
