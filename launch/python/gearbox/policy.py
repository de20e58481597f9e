"""gearbox.policy: a run's trained policy in your own Python program, as a torch.nn.Module.

load_policy() reads a checkpoint's parameters (a plain MLP's policy file,
workers/roles/policy_file.h, CRC-checked; else libtorch's model checkpoint, through torch.jit.load),
the run's config.yaml and the spaces its environment gives the networks (`gearbox env spec`), and
builds the network the bridge builds (workers/torch/network.cpp: PPO's actor-critic, DQN's Q
network, SAC's actor; MLP or Nature-CNN torsos, layer norm, an LSTM, GRU or gated transformer core;
the same parameter names, so state_dict() is theirs) with the same action rules as gearbox's own C
(workers/roles/policy_mlp.c, workers/torch/sampling.c): greedy or mean actions, PPO's Gaussian,
SAC's squashed Gaussian scaled to the bounds, DQN's epsilon-greedy, normalised observations with the
run's statistics. tanh is PyTorch's where gearbox's is a minimax approximation within 4e-7 of it:
outputs agree to float rounding (test_policy.py holds them against gearbox's). A TorchScript
model's run gives its own module (policy.model.torchscript, torch.jit.load) with the trained
parameters and buffers, its outputs shaped as the bridge takes them, behind the same act() and
predict().

    import gearbox
    policy = gearbox.load_policy("runs/cartpole_ppo")
    action, state = policy.predict(obs)          # greedy, as SB3's predict
    actions, logp, value, state = policy.act(obs_batch, state, deterministic=False)
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
LEARNER_MAGIC = b"GBLEARNR"
LEARNER_HEADER_BYTES = 96
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


def _layout(records, count, bad):
    """[(name, dtype, shape, offset)] of count layout records (runtime/streams/params.h)."""
    out = []
    for i in range(count):
        r = records[i * RECORD_BYTES:(i + 1) * RECORD_BYTES]
        name = r[:128].split(b"\0", 1)[0].decode()
        dtype, rank = struct.unpack("<II", r[128:136])
        shape = struct.unpack("<8q", r[136:200])[:rank]
        if dtype not in DTYPES or rank > 8 or any(d < 0 for d in shape):
            raise bad(f"entry {name!r} has a dtype or shape it cannot have")
        out.append((name, dtype, shape, struct.unpack("<Q", r[200:208])[0]))
    return out


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
    for name, dtype, shape, offset in _layout(records, count, bad):
        dt = np.dtype(DTYPES[dtype])
        size = dt.itemsize * int(np.prod(shape, dtype=np.int64))
        if offset + size > nbytes:
            raise bad(f"entry {name!r} ends past the data")
        params[name] = np.frombuffer(data, dtype=dt, count=size // dt.itemsize,
                                     offset=offset).reshape(shape).copy()
    return version, params


def _checkpoint_files(run_dir, checkpoint):
    """(policy file or None, model file or None, step) of a run's checkpoint as `gearbox eval`
    picks it: checkpoint None is the policy the run delivered (checkpoints/solved when an
    evaluation solved it, else trainer-0's last), a name is checkpoints/NAME.checkpoint, a path
    ending in .policy or .model is that file."""
    if checkpoint and (checkpoint.endswith(".policy") or checkpoint.endswith(".model")
                       or os.sep in checkpoint):
        if checkpoint.endswith(".policy"):
            return checkpoint, None, None
        return None, checkpoint, None
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
    if lines[0] != "gearbox-checkpoint 1" or "step" not in entries or "model" not in entries:
        raise PolicyFileError(f"checkpoint manifest {manifest} is malformed")
    folder = os.path.join(run_dir, "checkpoints")
    policy = os.path.join(folder, entries["policy"]) if "policy" in entries else None
    return policy, os.path.join(folder, entries["model"]), int(entries["step"])


def read_learner_file(path):
    """(version, {name: numpy array}) of the acting network in gearbox's learner file (the model
    file a trainer learning in C writes, workers/roles/learner_file.h): its parameters, laid
    out one entry after another in the layout's order."""
    import numpy as np
    with open(path, "rb") as f:
        raw = f.read()

    def bad(why):
        return PolicyFileError(f"learner file {path} is corrupt: {why}")
    if len(raw) < LEARNER_HEADER_BYTES or raw[:8] != LEARNER_MAGIC:
        raise bad("not a gearbox learner file")
    fmt, count = struct.unpack("<II", raw[8:16])
    n, target_n, _, _, version, _ = struct.unpack("<QQqqQQ", raw[32:80])
    crc_layout, crc_arrays = struct.unpack("<II", raw[80:88])
    if fmt != 1:
        raise bad("a format this gearbox does not read")
    layout_end = LEARNER_HEADER_BYTES + count * RECORD_BYTES
    if len(raw) != layout_end + (3 * n + target_n) * 4:
        raise bad("its size does not match its header")
    records, arrays = raw[LEARNER_HEADER_BYTES:layout_end], raw[layout_end:]
    if crc32c(records) != crc_layout or crc32c(arrays) != crc_arrays:
        raise bad("a CRC does not match")
    flat = np.frombuffer(arrays, dtype="<f4", count=n)
    params, at = {}, 0
    for name, dtype, shape, _ in _layout(records, count, bad):
        size = int(np.prod(shape, dtype=np.int64))
        if DTYPES[dtype] != "<f4" or at + size > n:
            raise bad(f"entry {name!r} is not float32 or ends past the parameters")
        params[name] = flat[at:at + size].reshape(shape).copy()
        at += size
    return version, params


def read_model_file(path):
    """(version, {name: numpy array}) of the acting network in a checkpoint's model file:
    gearbox's learner file (a trainer that learned in C), or libtorch's model checkpoint (a
    learner's, workers/torch/learner.cpp), read through torch.jit.load."""
    torch = _torch()
    with open(path, "rb") as f:
        if f.read(8) == LEARNER_MAGIC:
            return read_learner_file(path)
    try:
        archive = torch.jit.load(path, map_location="cpu")
    except (RuntimeError, ValueError) as e:
        raise PolicyFileError(f"model file {path} is not libtorch's checkpoint: {e}")
    params, version = {}, 0
    for name, t in archive.named_parameters():
        if name.startswith("model__"):
            params[name[len("model__"):].replace("__", ".")] = t.detach().numpy().copy()
        elif name == "version":
            version = int(t.reshape(-1)[0])
    if not params:
        raise PolicyFileError(f"model file {path} holds no model tensors")
    return version, params


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
    `gearbox eval --checkpoint`: None the policy the run delivered, a name, or a .policy or
    .model path."""
    for attempt in range(4):
        # a live run's trainer replaces its set (the new one written, then the old files
        # removed) while we read: a file gone after the manifest named it is looked up again
        policy, model, step = _checkpoint_files(os.fspath(run_dir), checkpoint)
        try:
            version, params = read_policy_file(policy) if policy else read_model_file(model)
            break
        except FileNotFoundError:
            if step is None or attempt == 3:
                raise
    cfg = _run_config(run_dir)
    spec = env_spec(run_dir)
    return build_policy(cfg, spec, params, version=version, step=step, path=policy or model)


def _torch():
    import torch
    return torch


def build_policy(cfg, spec, params, version=0, step=None, path=None):
    """The module of a run's config (a dict), its spaces (env_spec) and parameters
    (read_policy_file's); a function, so that importing gearbox does not import torch."""
    return _policy_class(_torch())(cfg, spec, params, version, step, path)


_CLASS = None


def _policy_class(torch):
    global _CLASS
    if _CLASS is not None:
        return _CLASS
    nn = torch.nn
    acts = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU, "gelu": nn.GELU}

    def torso(model, shape, cnn):
        """network.cpp's make_torso: Nature-CNN convolutions or nothing, then the hidden
        Linear layers, each with its layer norm and activation."""
        layers, features = [], int(math.prod(shape))
        if cnn:
            c, h, w = shape
            for out, k, st in ((32, 8, 4), (64, 4, 2), (64, 3, 1)):
                layers += [nn.Conv2d(c, out, k, st), nn.ReLU()]
                c, h, w = out, (h - k) // st + 1, (w - k) // st + 1
            layers.append(nn.Flatten())
            features = c * h * w
        for width in model.get("hidden", []):
            layers.append(nn.Linear(features, width))
            if model.get("layer_norm", False):
                layers.append(nn.LayerNorm(width))
            layers.append(acts[model.get("activation", "tanh")]())
            features = width
        return nn.Sequential(*layers) if layers else nn.Sequential(nn.Identity()), features

    class Core(nn.Module):
        """core.cpp's LSTM (state [h, c]) or GRU cell, libtorch's gate order and equations."""

        def __init__(self, kind, features, size):
            super().__init__()
            self.kind, self.size = kind, size
            gates = 4 if kind == "lstm" else 3
            self.ih = nn.Linear(features, gates * size)
            self.hh = nn.Linear(size, gates * size)

        def state_size(self):
            return 2 * self.size if self.kind == "lstm" else self.size

        def forward(self, x, state):
            H = self.size
            if self.kind == "lstm":
                h, c = state[:, :H], state[:, H:]
                i, f, g, o = (self.ih(x) + self.hh(h)).chunk(4, 1)
                c2 = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
                h2 = torch.sigmoid(o) * torch.tanh(c2)
                return h2, torch.cat([h2, c2], 1)
            gi, gh = self.ih(x).chunk(3, 1), self.hh(state).chunk(3, 1)
            r = torch.sigmoid(gi[0] + gh[0])
            z = torch.sigmoid(gi[1] + gh[1])
            n = torch.tanh(gi[2] + r * gh[2])
            h2 = n + z * (state - n)
            return h2, h2

    class Gate(nn.Module):
        """transformer.cpp's GTrXL gate in place of a residual connection (update gate -2)."""

        def __init__(self, d):
            super().__init__()
            self.wr, self.wz, self.wg = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
            self.ur = nn.Linear(d, d, bias=False)
            self.uz = nn.Linear(d, d, bias=False)
            self.ug = nn.Linear(d, d, bias=False)

        def forward(self, x, y):
            r = torch.sigmoid(self.wr(y) + self.ur(x))
            z = torch.sigmoid(self.wz(y) + self.uz(x) - 2.0)
            h = torch.tanh(self.wg(y) + self.ug(r * x))
            return (1.0 - z) * x + z * h

    class Block(nn.Module):
        """transformer.cpp's GTrXL block: gated attention with a bias per head and distance,
        then a gated feed-forward network of 4d units, layer norm before each."""

        def __init__(self, d, heads, memory):
            super().__init__()
            self.d, self.heads = d, heads
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
            self.ff1, self.ff2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
            self.g1, self.g2 = Gate(d), Gate(d)
            self.rel_bias = nn.Parameter(torch.zeros(heads, memory + 1))

        def forward(self, h, keys, dist, allowed):
            B, Tq, Tk, dh = h.shape[0], h.shape[1], keys.shape[1], self.d // self.heads
            qn, kn = self.ln1(h), self.ln1(keys)
            Q = self.q(qn).view(B, Tq, self.heads, dh).transpose(1, 2)
            K = self.k(kn).view(B, Tk, self.heads, dh).transpose(1, 2)
            V = self.v(kn).view(B, Tk, self.heads, dh).transpose(1, 2)
            logits = torch.matmul(Q, K.transpose(-2, -1)) / math.sqrt(dh)
            logits = logits + self.rel_bias[:, dist].unsqueeze(0)
            logits = logits.masked_fill(allowed.logical_not(), float("-inf"))
            y = torch.matmul(torch.softmax(logits, -1), V)
            y = self.o(y.transpose(1, 2).reshape(B, Tq, self.d))
            x = self.g1(h, torch.relu(y))
            return self.g2(x, torch.relu(self.ff2(torch.relu(self.ff1(self.ln2(x))))))

    class Transformer(nn.Module):
        """transformer.cpp's core, one step: the state is each layer's inputs at the last M
        steps ([M, d], oldest first), then M flags of the slots holding a step."""

        def __init__(self, features, d, layers, heads, memory):
            super().__init__()
            self.d, self.layers, self.memory = d, layers, memory
            self.add_module("in", nn.Linear(features, d))  # (the bridge's name: a keyword)
            self.blocks = nn.ModuleList(Block(d, heads, memory) for _ in range(layers))
            self.out_norm = nn.LayerNorm(d)

        def state_size(self):
            return self.layers * self.memory * self.d + self.memory

        def forward(self, x, state):
            N, M, d = x.shape[0], self.memory, self.d
            span = M * d
            dist = torch.arange(M, -1, -1).view(1, M + 1)
            valid = state[:, self.layers * span:]
            allowed = torch.cat([valid > 0.5, torch.ones(N, 1, dtype=torch.bool)], 1)
            allowed = allowed.view(N, 1, 1, M + 1)
            h = getattr(self, "in")(x).unsqueeze(1)
            nxt = []
            for i, block in enumerate(self.blocks):
                mem = state[:, i * span:(i + 1) * span].reshape(N, M, d)
                keys = torch.cat([mem, h], 1)
                nxt.append(keys[:, 1:].reshape(N, span))
                h = block(h, keys, dist, allowed)
            nxt += [valid[:, 1:], torch.ones(N, 1)]
            return self.out_norm(h.squeeze(1)), torch.cat(nxt, 1)

    class GearboxPolicy(nn.Module):
        """A gearbox run's policy (gearbox.policy). forward(obs, state=None) returns the heads as
        the bridge's model (PPO discrete: logits, value; PPO box: mean, log_std [A], value;
        DQN: q; SAC: mean, log_std squashed into [-5, 2]), then the next state with a core;
        act() draws actions as gearbox's C does; predict() is SB3's: (action, state)."""

        def __init__(self, cfg, spec, params, version, step, path):
            super().__init__()
            model = cfg.get("policy", {}).get("model", {})
            self.algorithm = cfg["trainer"]["algorithm"]["name"]
            self.version, self.step, self.path, self.spec = version, step, path, spec
            obs = spec["observation"]
            kind = model.get("type", "mlp")
            core = model.get("core", "none")
            a = spec["action"]
            self.discrete = a["kind"] == "discrete"
            self.script = None
            if kind == "torchscript":
                self._load_script(model, a, params, path)
                return
            if kind not in ("mlp", "cnn"):
                raise PolicyFileError(f"{path}: a {kind} model: load_policy builds the "
                                      "built-in MLP and CNN models and TorchScript ones")
            cnn = kind == "cnn"
            self.scale_u8 = cnn and obs["dtype"] == "uint8"
            outs = a["n"] if self.discrete else a["dim"]
            self.torso, width = torso(model, obs["shape"], cnn)
            if core == "transformer":
                self.core = Transformer(width, int(model["core_size"]),
                                        int(model.get("core_layers", 1)),
                                        int(model.get("core_heads", 1)),
                                        int(model.get("core_memory", 1)))
                width = int(model["core_size"])
            elif core != "none":
                self.core = Core(core, width, int(model["core_size"]))
                width = int(model["core_size"])
            self.state_size = self.core.state_size() if core != "none" else 0
            if self.algorithm == "ppo":
                cw = width
                if not model.get("shared", False) and core == "none":
                    self.critic_torso, cw = torso(model, obs["shape"], cnn)
                self.pi = nn.Linear(width, outs)
                self.v = nn.Linear(cw, 1)
                if not self.discrete:
                    self.log_std = nn.Parameter(torch.zeros(outs))
            elif self.algorithm == "dqn":
                self.q = nn.Linear(width, outs)
            elif self.algorithm == "sac":
                self.mean = nn.Linear(width, outs)
                self.log_std = nn.Linear(width, outs)
            else:
                raise PolicyFileError(f"{path}: algorithm {self.algorithm} has no policy here")
            self._bounds(a)
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

        def _bounds(self, a):
            if not self.discrete:  # the bounds: SAC scales to them, the actor clips to them
                lo = torch.tensor(a["low"], dtype=torch.float32)
                hi = torch.tensor(a["high"], dtype=torch.float32)
                self.register_buffer("act_low", lo)
                self.register_buffer("act_high", hi)
                self.register_buffer("act_scale", 0.5 * (hi - lo))
                self.register_buffer("act_bias", 0.5 * (hi + lo))

        def _load_script(self, model, a, params, path):
            """The run's TorchScript module with the checkpoint's tensors in place."""
            file = model.get("torchscript", "")
            try:
                self.script = torch.jit.load(file, map_location="cpu")
            except (RuntimeError, ValueError, OSError) as e:
                raise PolicyFileError(f"{path}: the run's TorchScript model {file!r} cannot be "
                                      f"loaded: {e}") from None
            self.state_size = int(model.get("torchscript_state", 0))
            self.normalized, self.scale_u8 = False, False
            self._bounds(a)
            own = dict(self.script.named_parameters())
            own.update(dict(self.script.named_buffers()))
            missing = [k for k in own if k not in params]
            extra = [k for k in params if k not in own]
            if missing or extra:
                raise PolicyFileError(f"{path} does not fit the TorchScript model {file}: "
                                      f"missing {missing}, unknown {extra}")
            with torch.no_grad():
                for k, t in own.items():
                    if tuple(params[k].shape) != tuple(t.shape):
                        raise PolicyFileError(f"{path}: {k} is {tuple(params[k].shape)}, "
                                              f"{file}'s is {tuple(t.shape)}")
                    t.copy_(torch.from_numpy(params[k]))
            self.eval()

        def _script_forward(self, obs, state):
            """The module's outputs shaped as the built-in forward's: values [N, 1], log_std
            [N, A]; then the next state when it carries one."""
            x = torch.as_tensor(obs).to(torch.float32)
            if self.state_size:
                if state is None:
                    raise ValueError("the model carries state: pass each row's state "
                                     "(initial_state(n) at an episode's start)")
                out = self.script(x, torch.as_tensor(state, dtype=torch.float32))
                out, state_out = tuple(out[:-1]), out[-1]
            else:
                out, state_out = self.script(x), None
                out = tuple(out) if isinstance(out, (tuple, list)) else (out,)
            n = x.shape[0]
            if self.algorithm == "ppo":
                v = out[-1].reshape(n, 1)
                out = (out[0], v) if self.discrete else \
                    (out[0], out[1].expand_as(out[0]), v)
            elif self.algorithm == "sac":
                out = (out[0], out[1].expand_as(out[0]))
            if self.state_size:
                return out + (state_out,)
            return out if len(out) > 1 else out[0]

        def initial_state(self, n):
            """The state of n rows at an episode's start: zeros [n, state_size]."""
            return torch.zeros(n, self.state_size)

        def _x(self, obs):
            x = torch.as_tensor(obs).to(torch.float32)
            if self.scale_u8:
                x = x * (1.0 / 255.0)
            if self.normalized:
                x = ((x.flatten(1) - self.obs_mean) * self.obs_rstd).clamp(
                    -self.obs_clip, self.obs_clip).view(x.shape)
            return x if hasattr(self.torso[0], "kernel_size") else x.flatten(1)

        def forward(self, obs, state=None):
            if self.script is not None:
                return self._script_forward(obs, state)
            x = self._x(obs)
            h = self.torso(x)
            state_out = None
            if self.state_size:
                if state is None:
                    raise ValueError("the model has a core: pass each row's state "
                                     "(initial_state(n) at an episode's start)")
                h, state_out = self.core(h, torch.as_tensor(state, dtype=torch.float32))
            if self.algorithm == "ppo":
                c = self.critic_torso(x) if hasattr(self, "critic_torso") else h
                value = self.v(c)
                out = (self.pi(h), value) if self.discrete else (self.pi(h), self.log_std, value)
            elif self.algorithm == "dqn":
                out = (self.q(h),)
            else:
                out = (self.mean(h), -5.0 + 3.5 * (torch.tanh(self.log_std(h)) + 1.0))
            if self.state_size:
                return out + (state_out,)
            return out if len(out) > 1 else out[0]

        @torch.no_grad()
        def act(self, obs, state=None, deterministic=True, noise=None, epsilon=0.0,
                generator=None):
            """(actions, logp, value, next state) of a batch obs [N, *shape] (state [N, S]
            with a core, else None, and None back), as gearbox's C draws them: deterministic
            greedy or mean actions; else PPO's categorical or Gaussian, SAC's squashed
            Gaussian (noise: [N, A] standard-normal draws, else the generator's), DQN's
            epsilon-greedy. logp is the action's log-probability (DQN: 0), value PPO's value
            or DQN's largest Q (SAC: 0)."""
            out = self.forward(obs, state)
            if not isinstance(out, tuple):
                out = (out,)
            state_out = out[-1] if self.state_size else None
            if self.state_size:
                out = out[:-1]
            n = out[0].shape[0]
            zeros = torch.zeros(n)
            if self.algorithm == "dqn":
                q = out[0]
                value, a = q.max(dim=1)
                if not deterministic and epsilon > 0:
                    explore = torch.rand(n, generator=generator) < epsilon
                    rand = torch.randint(q.shape[1], (n,), generator=generator)
                    a = torch.where(explore, rand, a)
                return a, zeros, value, state_out
            if self.algorithm == "ppo" and self.discrete:
                logits, value = out
                lp = torch.log_softmax(logits.double(), dim=1)
                a = logits.argmax(dim=1) if deterministic else torch.multinomial(
                    lp.exp(), 1, generator=generator).squeeze(1)
                return a, lp.gather(1, a[:, None]).squeeze(1).float(), value.squeeze(1), \
                    state_out
            mean, log_std = out[0], out[1].expand_as(out[0])
            z = None
            if not deterministic:
                z = torch.as_tensor(noise, dtype=torch.float32) if noise is not None else \
                    torch.randn(mean.shape, generator=generator)
            u = mean if z is None else mean + torch.exp(log_std) * z
            zd = (u.double() - mean.double()) * torch.exp(-log_std.double())
            lp = (-0.5 * zd * zd - log_std.double() - LOG_SQRT_2PI).sum(dim=1)
            if self.algorithm == "ppo":
                return u, lp.float(), out[2].squeeze(1), state_out
            ud = u.double()
            lp = lp - (2.0 * (math.log(2.0) - ud - nn.functional.softplus(-2.0 * ud))).sum(1)
            lp = lp - torch.log(self.act_scale.double()).sum()
            return torch.tanh(u) * self.act_scale + self.act_bias, lp.float(), zeros, state_out

        def predict(self, obs, state=None, episode_start=None, deterministic=True):
            """SB3's predict: (the action the environment gets, the next state) for one
            observation or a batch, as numpy: greedy by default; a box's clipped to its bounds
            (NaN to 0 first), as gearbox's actor does (workers/roles/acting.c). With a core,
            state (None: an episode's start) is each row's, and episode_start [N] zeros the
            rows whose episode starts now; without one the state is None."""
            x = torch.as_tensor(obs)
            one = x.dim() == len(self.spec["observation"]["shape"])
            x = x[None] if one else x
            s = None
            if self.state_size:
                s = self.initial_state(x.shape[0]) if state is None else \
                    torch.as_tensor(state, dtype=torch.float32).reshape(x.shape[0], -1)
                if episode_start is not None:
                    keep = 1.0 - torch.as_tensor(episode_start, dtype=torch.float32)
                    s = s * keep.reshape(-1, 1)
            a, _, _, s = self.act(x, s, deterministic=deterministic)
            if not self.discrete:
                a = torch.nan_to_num(a, nan=0.0)
                a = torch.maximum(torch.minimum(a, self.act_high), self.act_low)
            a = a.numpy()
            s = s.numpy() if s is not None else None
            if one:
                return a[0], (s[0] if s is not None else None)
            return a, s

    _CLASS = GearboxPolicy
    return _CLASS
