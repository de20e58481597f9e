"""tests/launch/python/test_policy.py: gearbox.load_policy (launch/python/gearbox/policy.py) plays a
run's trained policy in Python as gearbox plays it. Short runs of PPO (CartPole: solved; Hopper: a
box, normalised observations; Breakout84: the Nature CNN on uint8 frames; Recall: an LSTM core, a
GRU and a gated transformer), DQN (CartPole; Recall with an LSTM core: R2D2), SAC (Pendulum:
squashed, scaled to the bounds) and TorchScript models of one's own (CartPole PPO with a buffer,
Pendulum SAC's actor with one log_std, Recall with a GRU cell's state for PPO and for DQN:
launch/python/examples/recall_gru.py); for each, 256 random observations (and states) through the
Python module and through policy_reference (a plain MLP's policy file on the C model `gearbox eval`
plays, else the model file on the bridge's model): the same greedy actions (discrete: where the two
best scores are not within float rounding), log-probabilities, values and next states, and for a
box the same actions and log-probabilities for the same standard-normal draws. The solved CartPole
policy balances Gymnasium's CartPole-v1 for 500 steps (when Gymnasium is installed). A set replaced
while it is read (a live run's) is read again, a file that stays gone is an error; a damaged policy
file is refused naming why.
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


sys.path.insert(0, os.path.join(src, "launch", "python", "examples"))
from recall_gru import GRUPolicy, GRUQ  # noqa: E402


class CartPoleAC(torch.nn.Module):
    """A stateless actor-critic of one's own, with a buffer the trainers keep as it is."""

    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(4, 32), torch.nn.Tanh())
        self.pi = torch.nn.Linear(32, 2)
        self.v = torch.nn.Linear(32, 1)
        self.register_buffer("scale", torch.full((4,), 0.5))

    def forward(self, obs: torch.Tensor):
        h = self.body(obs * self.scale)
        return self.pi(h), self.v(h)


class PendulumActor(torch.nn.Module):
    """SAC's actor of one's own: a mean per row and one log_std [A] for every row."""

    def __init__(self):
        super().__init__()
        self.mean = torch.nn.Sequential(torch.nn.Linear(3, 32), torch.nn.ReLU(),
                                        torch.nn.Linear(32, 1))
        self.log_std = torch.nn.Parameter(torch.full((1,), -0.5))

    def forward(self, obs: torch.Tensor):
        return self.mean(obs), self.log_std


def script_sets(module, name):
    """The --set values that make a config train module (exported to WORK/name.pt)."""
    torch.manual_seed(1)
    sets = gearbox.export_model(module, os.path.join(work, name + ".pt"))
    return [f"{k}={v}" for k, v in sets.items()]


def train(name, config, *sets):
    run_dir = os.path.join(work, name)
    cmd = [gearbox_bin, "run", os.path.join(src, "configs", config), "--run-dir", run_dir,
           "--set", "launch.progress=off", "--set", "experiment.eval_every=0"]
    for s in sets:
        cmd += ["--set", s]
    p = subprocess.run(cmd, capture_output=True, text=True)
    check(p.returncode == 0, f"{name}: gearbox run exited {p.returncode}")
    return run_dir if p.returncode == 0 else None


def reference_outputs(run_dir, checkpoint, obs, noise, state):
    o, z, st, out = (os.path.join(work, f) for f in ("obs.bin", "noise.f32", "state.f32",
                                                     "out.f32"))
    obs.tofile(o)
    noise.astype(np.float32).tofile(z)
    state.astype(np.float32).tofile(st)
    p = subprocess.run([reference, os.path.join(run_dir, "config.yaml"), checkpoint, o, z, st,
                        out], capture_output=True, text=True)
    check(p.returncode == 0, f"policy_reference ran {p.stderr.strip()}")
    return np.fromfile(out, dtype=np.float32)


def close(a, b, tol):
    return a.shape == b.shape and bool(np.all(np.abs(a - b) <= tol * (1 + np.abs(b))))


def gap(a, b):
    return f"largest gap {float(np.abs(a - b).max()) if a.size else 0:.2g}"


def compare(name, run_dir):
    policy = gearbox.load_policy(run_dir)
    rng = np.random.default_rng(7)
    shape = policy.spec["observation"]["shape"]
    n, S = 256, policy.state_size
    if policy.spec["observation"]["dtype"] == "uint8":
        obs = rng.integers(0, 256, (n, *shape), dtype=np.uint8)
    else:
        obs = (rng.standard_normal((n, *shape)) * 1.5).astype(np.float32)
    k = 1 if policy.discrete else policy.spec["action"]["dim"]
    noise = rng.standard_normal((n, k)).astype(np.float32)
    state = (rng.standard_normal((n, S)) * 0.5).astype(np.float32)
    ref = reference_outputs(run_dir, policy.path, obs, noise if not policy.discrete else
                            noise[:0], state)
    want = n * (k + 2 + S) + (0 if policy.discrete else n * (k + 1))
    check(ref.size == want, f"{name}: the reference wrote {ref.size} floats ({want} expected)")
    if ref.size != want:
        return policy
    at = np.cumsum([0, n * k, n, n, n * S])
    c_act, c_logp, c_value, c_next = (ref[at[i]:at[i + 1]] for i in range(4))
    c_act, c_next = c_act.reshape(n, k), c_next.reshape(n, S)
    st = torch.from_numpy(state) if S else None
    a, logp, value, nxt = policy.act(obs, st, deterministic=True)
    a, logp, value = a.numpy(), logp.numpy(), value.numpy()
    if policy.discrete:
        with torch.no_grad():
            out = policy(torch.from_numpy(obs), st)
        scores = (out[0] if isinstance(out, tuple) else out).numpy()
        top2 = np.sort(scores, axis=1)[:, -2:]
        clear = top2[:, 1] - top2[:, 0] > 1e-4
        same = a[clear] == c_act[clear, 0].astype(np.int64)
        check(bool(same.all()) and clear.sum() > n // 2,
              f"{name}: greedy actions equal ({int(same.sum())} of {int(clear.sum())} clear "
              f"rows)")
    else:
        check(close(a, c_act, 1e-4), f"{name}: mean actions equal to float rounding "
              f"({gap(a, c_act)})")
    check(close(logp, c_logp, 1e-4), f"{name}: log-probabilities equal ({gap(logp, c_logp)})")
    check(close(value, c_value, 1e-4), f"{name}: values equal ({gap(value, c_value)})")
    if S:
        nxt = nxt.numpy()
        check(close(nxt, c_next, 1e-4), f"{name}: next states equal ({gap(nxt, c_next)})")
    if not policy.discrete:
        z_act = ref[at[4]:at[4] + n * k].reshape(n, k)
        z_logp = ref[at[4] + n * k:]
        a, logp, _, _ = policy.act(obs, st, deterministic=False, noise=noise)
        a, logp = a.numpy(), logp.numpy()
        check(close(a, z_act, 1e-4), f"{name}: actions for the same draws equal "
              f"({gap(a, z_act)})")
        check(close(logp, z_logp, 1e-3), f"{name}: their log-probabilities equal "
              f"({gap(logp, z_logp)})")
    return policy


runs = [("cartpole_ppo", "cartpole_ppo.yaml"),
        ("cartpole_dqn", "cartpole_dqn.yaml", "experiment.max_env_steps=20000"),
        ("pendulum_sac", "pendulum_sac.yaml", "experiment.max_env_steps=3000"),
        ("hopper_ppo", "hopper_ppo.yaml", "experiment.max_env_steps=6000"),
        ("breakout_ppo", "breakout_ppo.yaml", "experiment.max_env_steps=3000"),
        ("recall_lstm", "recall_lstm.yaml", "experiment.max_env_steps=5000"),
        ("recall_gru", "recall_lstm.yaml", "experiment.max_env_steps=5000",
         "policy.model.core=gru"),
        ("recall_r2d2", "recall_r2d2.yaml", "experiment.max_env_steps=5000"),
        ("recall_transformer", "recall_transformer.yaml", "experiment.max_env_steps=5000"),
        ("script_ppo", "cartpole_ppo.yaml", "experiment.max_env_steps=5000",
         *script_sets(CartPoleAC(), "script_ppo")),
        ("script_sac", "pendulum_sac.yaml", "experiment.max_env_steps=3000",
         *script_sets(PendulumActor(), "script_sac")),
        ("script_gru", "recall_lstm.yaml", "experiment.max_env_steps=5000",
         *script_sets(GRUPolicy(), "script_gru")),
        ("script_gru_q", "recall_r2d2.yaml", "experiment.max_env_steps=5000",
         *script_sets(GRUQ(), "script_gru_q"))]
for name, config, *sets in runs:
    run_dir = train(name, config, *sets)
    if not run_dir:
        continue
    policy = compare(name, run_dir)
    if name == "recall_lstm":  # SB3's recurrent predict: the state out, reset at a start
        o = np.zeros(policy.spec["observation"]["shape"], dtype=np.float32)
        a0, s0 = policy.predict(o)
        a1, s1 = policy.predict(o, state=s0)
        a2, s2 = policy.predict(o, state=s1, episode_start=np.array([True]))
        check(s0.shape == (policy.state_size,) and np.array_equal(s2, s0) and a2 == a0 and
              not np.array_equal(s1, s0), "recall_lstm: predict carries the state and resets "
              "it at an episode's start")
    if name.startswith("script_"):  # the trained tensors, not the exported ones
        first = torch.jit.load(os.path.join(work, name + ".pt"))
        moved = [k for k, t in first.named_parameters()
                 if not torch.equal(t, dict(policy.script.named_parameters())[k])]
        check(len(moved) > 0, f"{name}: the checkpoint's parameters replaced the export's "
              f"({len(moved)} tensors moved)")
        if name == "script_ppo":
            check(torch.equal(policy.script.scale, torch.full((4,), 0.5)),
                  "script_ppo: its buffer came back as the run kept it")
    if name == "hopper_ppo":
        check(policy.normalized, "hopper_ppo: the observations are normalised by the run's "
              "statistics")
        obs = np.random.default_rng(3).standard_normal((64, 11)).astype(np.float32)
        with torch.no_grad():  # means pushed past the bounds [-1, 1] on two dimensions
            policy.pi.bias += torch.tensor([5.0, -5.0, 0.0])
        mean = policy.act(obs)[0].numpy()
        got, none = policy.predict(obs)
        check(bool(np.all(got == np.clip(mean, -1, 1))) and bool(np.all(got[:, 0] == 1)) and
              bool(np.all(got[:, 1] == -1)) and none is None,
              "hopper_ppo: predict clips the actions to the bounds, as the actor does")
    if name == "cartpole_ppo":
        one, none = policy.predict(np.zeros(4, dtype=np.float32))
        check(np.ndim(one) == 0 and int(one) in (0, 1) and none is None,
              "predict of one observation: one action, no state")
        try:
            import gymnasium as gym
        except ImportError:
            gym = None
            print("skipped: Gymnasium is not installed (CartPole-v1 episodes)")
        if gym:
            env = gym.make("CartPole-v1")
            returns = []
            for seed in range(10):
                o, _ = env.reset(seed=seed)
                total, done = 0.0, False
                while not done:
                    o, r, term, trunc, _ = env.step(int(policy.predict(o)[0]))
                    total += r
                    done = term or trunc
                returns.append(total)
            # solved as an evaluation judges it (the mean of its episodes), not every episode
            check(sum(returns) / len(returns) >= 475,
                  f"Gymnasium's CartPole-v1 with the policy: mean of {returns} >= 475")
            example = os.path.join(src, "launch", "python", "examples", "play_gymnasium.py")
            p = subprocess.run([sys.executable, example, "--run-dir", run_dir, "--episodes", "2"],
                               capture_output=True, text=True,
                               env=dict(os.environ, PYTHONPATH=os.path.join(src, "launch",
                                                                            "python")))
            # the greedy policy on the same seeds: the same returns as the loop above
            want = "".join(f"episode {i}: return {r:g}\n" for i, r in enumerate(returns[:2]))
            check(p.returncode == 0 and p.stdout == want,
                  f"examples/play_gymnasium.py plays the run as above: {p.stdout.strip()} "
                  f"{p.stderr.strip()[-300:]}")
        # a live run's trainer replaces its set while load_policy reads: a file gone after the
        # manifest named it is looked up again (through the manifest), a few times at most
        import gearbox.policy as gp
        real, calls = gp._checkpoint_files, []

        def replaced(run, ckpt):
            calls.append(ckpt)
            pol, mod, step = real(run, None)
            gone = os.path.join(work, "removed.step1.policy")
            return (gone, mod, step) if len(calls) == 1 or ckpt == "gone" else (pol, mod, step)
        gp._checkpoint_files = replaced
        try:
            again = gearbox.load_policy(run_dir)
            check(len(calls) == 2 and again.path == policy.path,
                  f"a set replaced while it was read: read again ({len(calls)} lookups)")
            calls.clear()
            try:
                gearbox.load_policy(run_dir, checkpoint="gone")
                check(False, "a file that stays gone is an error")
            except FileNotFoundError:
                check(len(calls) == 4, f"a file that stays gone: FileNotFoundError after "
                      f"{len(calls)} lookups")
        finally:
            gp._checkpoint_files = real
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
