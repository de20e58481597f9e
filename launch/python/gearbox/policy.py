"""gearbox.policy: a run's trained policy in your own Python program, as a torch.nn.Module.

A plain MLP's checkpoint set holds a policy file (workers/roles/policy_file.h: the parameters as
the policy workers get them, CRC-checked); load_policy() reads it with the run's config.yaml and
the spaces its environment gives the networks (`gearbox env spec`), and builds the network the
bridge builds (workers/torch/network.cpp: PPO's actor-critic, DQN's Q network, SAC's actor;
the same parameter names, so state_dict() is theirs) with the same action rules as gearbox's
own C (workers/roles/policy_mlp.c, workers/torch/sampling.c): greedy or mean actions, PPO's
Gaussian, SAC's squashed Gaussian scaled to the bounds, DQN's epsilon-greedy, normalised
observations with the run's statistics. tanh is PyTorch's where gearbox's is a minimax
approximation within 4e-7 of it: outputs agree to float rounding (test_policy.py holds them
against the C). Models with a core, CNNs and TorchScript models have no policy file: refused.

    import gearbox
    policy = gearbox.load_policy("runs/cartpole_ppo")
    action = policy.predict(obs)                      # greedy, as SB3's predict
    action, logp, value = policy.act(obs_batch, deterministic=False)
"""
import json
import math
import os
import struct
import subprocess

from gearbox.command import RunFailed, find_command

MAGIC = b"GBPOLICY"
HEADER_BYTES = 40
RECORD_BYTES = 208
DTYPES = {0: "<f4", 1: "<f8", 2: "i1", 3: "<i2", 4: "<i4", 5: "<i8", 6: "u1", 7: "<u2", 8: "u1"}
LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


class PolicyFileError(ValueError):
    """A policy file that is not one, or is damaged (the message names the file and why)."""


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = None


def crc32c(data):
    """CRC-32C (Castagnoli) of bytes, as runtime/base/crc32c.h computes it."""
    global _CRC_TABLE
    if _CRC_TABLE is None:
        _CRC_TABLE = _crc32c_table()
    t, c = _CRC_TABLE, 0xFFFFFFFF
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def read_policy_file(path):
    """(version, {name: numpy array}) of a policy file; PolicyFileError when it is damaged."""
    import numpy as np
    with open(path, "rb") as f:
        raw = f.read()

    def bad(why):
        return PolicyFileError(f"policy file {path} is corrupt: {why}")
    if len(raw) < HEADER_BYTES or raw[:8] != MAGIC:
        raise bad("not a gearbox policy file")
    fmt, count, version, nbytes, crc_data, crc_layout = struct.unpack("<IIQQII", raw[8:40])
    if fmt != 1:
        raise bad("a format this gearbox does not read")
    layout_end = HEADER_BYTES + count * RECORD_BYTES
    if len(raw) != layout_end + nbytes:
        raise bad("its size does not match its header")
    records, data = raw[HEADER_BYTES:layout_end], raw[layout_end:]
    if crc32c(records) != crc_layout or crc32c(data) != crc_data:
        raise bad("a CRC does not match")
    params = {}
    for i in range(count):
        r = records[i * RECORD_BYTES:(i + 1) * RECORD_BYTES]
        name = r[:128].split(b"\0", 1)[0].decode()
        dtype, rank = struct.unpack("<II", r[128:136])
        shape = struct.unpack("<8q", r[136:200])[:rank]
        (offset,) = struct.unpack("<Q", r[200:208])
        if dtype not in DTYPES or rank > 8 or any(d < 0 for d in shape):
            raise bad(f"entry {name!r} has a dtype or shape it cannot have")
        dt = np.dtype(DTYPES[dtype])
        size = dt.itemsize * int(np.prod(shape, dtype=np.int64))
        if offset + size > nbytes:
            raise bad(f"entry {name!r} ends past the data")
        params[name] = np.frombuffer(data, dtype=dt, count=size // dt.itemsize,
                                     offset=offset).reshape(shape).copy()
    return version, params


def _policy_path(run_dir, checkpoint):
    """The policy file of a run's checkpoint as `gearbox eval` picks it: checkpoint None is the
    policy the run delivered (checkpoints/solved when an evaluation solved it, else trainer-0's
    last), a name is checkpoints/NAME.checkpoint, a path ending in .policy is that file."""
    if checkpoint and (checkpoint.endswith(".policy") or os.sep in checkpoint):
        return checkpoint, None
    name = checkpoint
    if name is None:
        name = "trainer-0"
        try:
            with open(os.path.join(run_dir, "summary.json")) as f:
                s = json.load(f)
            solved = s.get("exit_reason") == "solved" and s.get("solved_by") == "evaluation"
            if solved and os.path.exists(os.path.join(run_dir, "checkpoints", "solved.checkpoint")):
                name = "solved"
        except (OSError, ValueError):
            pass
    manifest = os.path.join(run_dir, "checkpoints", name + ".checkpoint")
    try:
        with open(manifest) as f:
            lines = f.read().split("\n")
    except OSError as e:
        raise FileNotFoundError(f"{run_dir} has no checkpoint {name} ({manifest}): {e.strerror}")
    entries = dict(line.split(" ", 1) for line in lines[1:] if " " in line)
    if lines[0] != "gearbox-checkpoint 1" or "step" not in entries:
        raise PolicyFileError(f"checkpoint manifest {manifest} is malformed")
    if "policy" not in entries:
        raise PolicyFileError(
            f"checkpoint {name} of {run_dir} has no policy file: only a plain MLP's has one "
            "(a core, a CNN or a TorchScript model plays through `gearbox eval`)")
    return os.path.join(run_dir, "checkpoints", entries["policy"]), int(entries["step"])


def env_spec(config):
    """The spaces a config's (or run directory's) environment gives the networks, from
    `gearbox env spec`: {"env", "agents", "observation": {"dtype", "shape"}, "action": {"kind":
    "discrete", "n"} or {"kind": "box", "dim", "low", "high"}}."""
    cmd = [find_command(), "env", "spec", os.fspath(config)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RunFailed("gearbox env spec", p.returncode, p.stderr.strip().splitlines())
    return json.loads(p.stdout)


def _run_config(run_dir):
    import yaml
    with open(os.path.join(run_dir, "config.yaml")) as f:
        return yaml.safe_load(f)


def load_policy(run_dir, checkpoint=None):
    """The policy of a run (a run directory) as a Policy module (torch.nn.Module); checkpoint as
    `gearbox eval --checkpoint`: None the policy the run delivered, a name, or a .policy path."""
    path, step = _policy_path(os.fspath(run_dir), checkpoint)
    version, params = read_policy_file(path)
    cfg = _run_config(run_dir)
    spec = env_spec(run_dir)
    return build_policy(cfg, spec, params, version=version, step=step, path=path)


def build_policy(cfg, spec, params, version=0, step=None, path=None):
    """The module of a run's config (a dict), its spaces (env_spec) and parameters
    (read_policy_file's); a function, so that importing gearbox does not import torch."""
    import torch
    return _policy_class(torch)(cfg, spec, params, version, step, path)


_CLASS = None


def _policy_class(torch):
    global _CLASS
    if _CLASS is not None:
        return _CLASS
    nn = torch.nn

    def torso(hidden, features, act):
        layers = []
        for h in hidden:
            layers += [nn.Linear(features, h), nn.Tanh() if act == "tanh" else nn.ReLU()]
            features = h
        return nn.Sequential(*layers), features

    class GearboxPolicy(nn.Module):
        """A gearbox run's plain-MLP policy (gearbox.policy). forward(obs) returns the heads as
        the bridge's model (PPO discrete: logits, value; PPO box: mean, log_std [A], value;
        DQN: q; SAC: mean, log_std squashed into [-5, 2]); act() draws actions as gearbox's C
        does; predict() is the greedy action of one observation or a batch, as numpy."""

        def __init__(self, cfg, spec, params, version, step, path):
            super().__init__()
            model = cfg.get("policy", {}).get("model", {})
            self.algorithm = cfg["trainer"]["algorithm"]["name"]
            self.version, self.step, self.path, self.spec = version, step, path, spec
            act = model.get("activation", "tanh")
            hidden = list(model.get("hidden", []))
            obs = spec["observation"]
            if obs["dtype"] != "float32" or model.get("type", "mlp") != "mlp":
                raise PolicyFileError(f"{path}: not a plain MLP on float32 observations")
            features = int(math.prod(obs["shape"]))
            a = spec["action"]
            self.discrete = a["kind"] == "discrete"
            outs = a["n"] if self.discrete else a["dim"]
            self.torso, width = torso(hidden, features, act)
            if self.algorithm == "ppo":
                if not model.get("shared", False):
                    self.critic_torso, cw = torso(hidden, features, act)
                self.pi = nn.Linear(width, outs)
                self.v = nn.Linear(cw if not model.get("shared", False) else width, 1)
                if not self.discrete:
                    self.log_std = nn.Parameter(torch.zeros(outs))
            elif self.algorithm == "dqn":
                self.q = nn.Linear(width, outs)
            elif self.algorithm == "sac":
                self.mean = nn.Linear(width, outs)
                self.log_std = nn.Linear(width, outs)
            else:
                raise PolicyFileError(f"{path}: algorithm {self.algorithm} has no policy here")
            if not self.discrete:  # the bounds: SAC scales to them, the actor clips to them
                lo = torch.tensor(a["low"], dtype=torch.float32)
                hi = torch.tensor(a["high"], dtype=torch.float32)
                self.register_buffer("act_low", lo)
                self.register_buffer("act_high", hi)
                self.register_buffer("act_scale", 0.5 * (hi - lo))
                self.register_buffer("act_bias", 0.5 * (hi + lo))
            self.normalized = "obs_mean" in params
            self.obs_clip = float(model.get("obs_clip", 10.0))
            if self.normalized:  # as policy_mlp.c: the mean and (var + 1e-8)^-1/2 as floats
                import numpy as np
                self.register_buffer("obs_mean", torch.tensor(
                    params["obs_mean"].astype(np.float32)))
                self.register_buffer("obs_rstd", torch.tensor(
                    (1.0 / np.sqrt(params["obs_var"] + 1e-8)).astype(np.float32)))
            own = self.state_dict()
            buffers = ("act_low", "act_high", "act_scale", "act_bias", "obs_mean", "obs_rstd")
            names = [k for k in own if k not in buffers]
            missing = [k for k in names if k not in params]
            extra = [k for k in params if k not in names and not k.startswith("obs_")]
            if missing or extra:
                raise PolicyFileError(
                    f"{path} does not fit the run's config: missing {missing}, unknown {extra}")
            for k in names:
                if tuple(params[k].shape) != tuple(own[k].shape):
                    raise PolicyFileError(f"{path}: {k} is {tuple(params[k].shape)}, the "
                                          f"config's network has {tuple(own[k].shape)}")
            self.load_state_dict({k: torch.from_numpy(params[k]) for k in names}, strict=False)
            self.eval()

        def _x(self, obs):
            x = torch.as_tensor(obs, dtype=torch.float32)
            if self.normalized:
                x = ((x - self.obs_mean) * self.obs_rstd).clamp(-self.obs_clip, self.obs_clip)
            return x

        def forward(self, obs):
            x = self._x(obs)
            h = self.torso(x)
            if self.algorithm == "ppo":
                c = self.critic_torso(x) if hasattr(self, "critic_torso") else h
                value = self.v(c)
                if self.discrete:
                    return self.pi(h), value
                return self.pi(h), self.log_std, value
            if self.algorithm == "dqn":
                return self.q(h)
            return self.mean(h), -5.0 + 3.5 * (torch.tanh(self.log_std(h)) + 1.0)

        @torch.no_grad()
        def act(self, obs, deterministic=True, noise=None, epsilon=0.0, generator=None):
            """(actions, logp, value) of a batch obs [N, *shape], as gearbox's C draws them:
            deterministic greedy or mean actions; else PPO's categorical or Gaussian, SAC's
            squashed Gaussian (noise: [N, A] standard-normal draws, else the generator's),
            DQN's epsilon-greedy. logp is the action's log-probability (DQN: 0), value PPO's
            value or DQN's largest Q (SAC: 0)."""
            x = torch.as_tensor(obs, dtype=torch.float32)
            n = x.shape[0]
            out = self.forward(x)
            zeros = torch.zeros(n)
            if self.algorithm == "dqn":
                q = out
                value, a = q.max(dim=1)
                if not deterministic and epsilon > 0:
                    explore = torch.rand(n, generator=generator) < epsilon
                    rand = torch.randint(q.shape[1], (n,), generator=generator)
                    a = torch.where(explore, rand, a)
                return a, zeros, value
            if self.algorithm == "ppo" and self.discrete:
                logits, value = out
                lp = torch.log_softmax(logits.double(), dim=1)
                a = logits.argmax(dim=1) if deterministic else torch.multinomial(
                    lp.exp(), 1, generator=generator).squeeze(1)
                return a, lp.gather(1, a[:, None]).squeeze(1).float(), value.squeeze(1)
            mean, log_std = out[0], out[1].expand_as(out[0])
            z = None
            if not deterministic:
                z = torch.as_tensor(noise, dtype=torch.float32) if noise is not None else \
                    torch.randn(mean.shape, generator=generator)
            u = mean if z is None else mean + torch.exp(log_std) * z
            zd = (u.double() - mean.double()) * torch.exp(-log_std.double())
            lp = (-0.5 * zd * zd - log_std.double() - LOG_SQRT_2PI).sum(dim=1)
            if self.algorithm == "ppo":
                return u, lp.float(), out[2].squeeze(1)
            ud = u.double()
            lp = lp - (2.0 * (math.log(2.0) - ud - nn.functional.softplus(-2.0 * ud))).sum(1)
            lp = lp - torch.log(self.act_scale.double()).sum()
            return torch.tanh(u) * self.act_scale + self.act_bias, lp.float(), zeros

        def predict(self, obs, deterministic=True):
            """The action the environment gets for one observation (or a batch), as numpy:
            greedy by default; a box's clipped to its bounds (NaN to 0 first), as gearbox's
            actor does (workers/roles/acting.c)."""
            x = torch.as_tensor(obs, dtype=torch.float32)
            one = x.dim() == len(self.spec["observation"]["shape"])
            a = self.act(x[None] if one else x, deterministic=deterministic)[0]
            if not self.discrete:
                a = torch.nan_to_num(a, nan=0.0)
                a = torch.maximum(torch.minimum(a, self.act_high), self.act_low)
            a = a.numpy()
            return a[0] if one else a

    _CLASS = GearboxPolicy
    return _CLASS
