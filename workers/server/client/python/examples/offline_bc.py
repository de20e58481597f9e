"""Behaviour cloning from a gearbox data server, in PyTorch.

Trains a policy on the (obs, action) rows of a dataset served by `gearbox serve` (for example
one recorded by `gearbox run configs/cartpole_ppo.yaml --record DIR`, served with
configs/offline_server.yaml), then evaluates it greedily on CartPole-v1 (a numpy copy of the
Gymnasium dynamics, so nothing beyond numpy and torch is needed).

    gearbox serve configs/offline_server.yaml --set server.dataset=DIR &
    python3 workers/server/client/python/examples/offline_bc.py --endpoint tcp://127.0.0.1:5555

A python3 without numpy, torch, pyzmq or msgpack runs it again with gearbox's Python
(/opt/gearbox/python/bin/python, or $GEARBOX_PYTHON); without that either, it exits 2 saying
what to run.

With --loader N the batches come through gearbox_torch.GearboxDataset in a PyTorch DataLoader
with N worker processes (each its own connection, several requests in flight); --loader 0 uses
the plain client in this process.

Rows with valid = 0 (the reset rows between episodes inside a chunk) are masked out of the
loss. Prints one JSON line with the evaluation's mean return; exits 1 when --min-return is
given and not reached.
"""

import argparse
import json
import math
import os
import shlex
import sys
import time

# The Python that has what this example needs: gearbox's own environment, made by
# launch/install-deps.sh (Debian's numpy, torch, pyzmq and msgpack visible in it), unless
# $GEARBOX_PYTHON names another.
GEARBOX_PYTHON = os.environ.get("GEARBOX_PYTHON") or "/opt/gearbox/python/bin/python"
NEEDS = ("numpy", "torch", "zmq", "msgpack")
PIP_NAMES = "numpy torch pyzmq msgpack"


def _python_with_packages():
    """Returns when this Python has NEEDS; otherwise runs this script again with GEARBOX_PYTHON
    (once), or exits 2 saying exactly what to run."""
    try:
        for name in NEEDS:
            __import__(name)
        return
    except ImportError as e:
        missing = e
    again = os.environ.get("GEARBOX_OFFLINE_BC_REEXEC") == "1"
    if not again and os.access(GEARBOX_PYTHON, os.X_OK):
        os.environ["GEARBOX_OFFLINE_BC_REEXEC"] = "1"
        os.execv(GEARBOX_PYTHON, [GEARBOX_PYTHON, os.path.abspath(__file__)] + sys.argv[1:])
    script = " ".join(shlex.quote(a) for a in [os.path.abspath(__file__)] + sys.argv[1:])
    here = shlex.quote(sys.executable or "python3")
    state = "lacks them too" if again else "is not there"
    print("offline_bc.py: %s: %s (it needs %s). Run it with gearbox's Python:\n"
          "    %s %s\n"
          "(%s %s: `sudo bash launch/install-deps.sh` in gearbox's source tree makes "
          "/opt/gearbox/python; GEARBOX_PYTHON=PATH names another), or install them into this "
          "Python:\n"
          "    %s -m pip install %s"
          % (sys.executable, missing, PIP_NAMES.replace(" ", ", "), shlex.quote(GEARBOX_PYTHON),
             script, GEARBOX_PYTHON, state, here, PIP_NAMES), file=sys.stderr)
    sys.exit(2)


_python_with_packages()
import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from gearbox_client import Client  # noqa: E402


class CartPole:
    """CartPole-v1 as Gymnasium defines it (Euler integration, 500-step limit)."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def reset(self):
        self.s = self.rng.uniform(-0.05, 0.05, size=4)
        self.t = 0
        return self.s.astype(np.float32)

    def step(self, action):
        x, x_dot, th, th_dot = self.s
        force = 10.0 if action == 1 else -10.0
        cos, sin = math.cos(th), math.sin(th)
        temp = (force + 0.05 * th_dot * th_dot * sin) / 1.1
        th_acc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos * cos / 1.1))
        x_acc = temp - 0.05 * th_acc * cos / 1.1
        x, x_dot = x + 0.02 * x_dot, x_dot + 0.02 * x_acc
        th, th_dot = th + 0.02 * th_dot, th_dot + 0.02 * th_acc
        self.s = np.array([x, x_dot, th, th_dot])
        self.t += 1
        terminated = abs(x) > 2.4 or abs(th) > 12 * 2 * math.pi / 360
        return self.s.astype(np.float32), 1.0, terminated, self.t >= 500


def evaluate(policy, episodes, seed):
    env = CartPole(seed)
    returns = []
    with torch.no_grad():
        for _ in range(episodes):
            obs, total, done = env.reset(), 0.0, False
            while not done:
                a = int(policy(torch.from_numpy(obs)[None]).argmax(-1))
                obs, r, term, trunc = env.step(a)
                total += r
                done = term or trunc
            returns.append(total)
    return float(np.mean(returns))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--endpoint", default="tcp://127.0.0.1:5555")
    ap.add_argument("--steps", type=int, default=1500, help="gradient steps")
    ap.add_argument("--batch", type=int, default=64, help="items (chunks) per step")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--eval-episodes", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--min-return", type=float, default=None)
    ap.add_argument("--loader", type=int, default=None, metavar="WORKERS",
                    help="batches from a DataLoader over gearbox_torch with WORKERS processes")
    ap.add_argument("--prefetch", type=int, default=4, help="--loader: requests in flight")
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    client = Client(args.endpoint, timeout_ms=30000)
    info = client.info()
    obs_dtype, obs_shape, _ = info["columns"]["obs"]
    n_obs = int(np.prod(obs_shape))
    print("dataset: %d items of %d steps, columns %s" % (info["size"], info["steps"],
                                                          list(info["columns"])), file=sys.stderr)
    policy = torch.nn.Sequential(torch.nn.Linear(n_obs, 64), torch.nn.Tanh(),
                                 torch.nn.Linear(64, 64), torch.nn.Tanh(), torch.nn.Linear(64, 2))
    opt = torch.optim.Adam(policy.parameters(), lr=args.lr)
    t0 = time.time()
    batches = None
    if args.loader is not None:
        from gearbox_torch import GearboxDataset
        workers = max(args.loader, 0)
        per = -(-args.steps // max(workers, 1))  # each worker's share, rounded up
        ds = GearboxDataset(args.endpoint, args.batch, columns=["obs", "action", "valid"],
                            batches=per, prefetch=args.prefetch,
                            client_kwargs={"timeout_ms": 30000})
        batches = iter(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers))
    for step in range(args.steps):
        if batches is not None:
            b = next(batches)
        else:
            b = client.sample(args.batch, columns=["obs", "action", "valid"], torch=True)
        obs = b["obs"].reshape(-1, n_obs).float()
        act = b["action"].reshape(-1).long()
        valid = b["valid"].reshape(-1).float()
        loss = torch.nn.functional.cross_entropy(policy(obs), act, reduction="none")
        loss = (loss * valid).sum() / valid.sum().clamp(min=1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 500 == 0:
            print("step %d loss %.4f" % (step, float(loss)), file=sys.stderr)
    train_s = time.time() - t0
    mean = evaluate(policy, args.eval_episodes, args.seed + 1)
    print(json.dumps({"example": "offline_bc", "steps": args.steps, "batch": args.batch,
                      "train_seconds": round(train_s, 2), "final_loss": float(loss),
                      "eval_episodes": args.eval_episodes, "mean_return": mean}))
    client.close()
    if args.min_return is not None and mean < args.min_return:
        sys.exit(1)


if __name__ == "__main__":
    main()
