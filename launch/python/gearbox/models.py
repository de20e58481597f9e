"""gearbox/models.py: a user's torch.nn.Module as the policy's model. It is exported to
TorchScript (torch.jit.script) with the signature the workers expect (workers/torch/bridge.h,
"TorchScript contract"), and the command checks it before any worker starts: `gearbox check`
loads the file as the policy workers will and runs it on a batch of the environment's own
observations (launch/model_check.c); outputs that do not fit the action space, or a next state
of another size, are refused there, and here as ModelMismatch naming the module.

The forward takes a float batch obs [N, *obs_shape] and returns, for PPO with discrete actions,
(logits [N, n], value [N] or [N, 1]); continuous: (mean [N, A], log_std [N, A] or [A], value);
DQN: q [N, n]; SAC's actor: (mean, log_std). A module with recurrent state declares an integer
attribute state_size = S; its forward then takes (obs, state [N, S]) (zeros at an episode's
start) and returns its outputs followed by the next state [N, S] (PPO and DQN)."""
import inspect
import os

from gearbox.command import RunFailed
from gearbox.configs import check_config

MODEL_KEY = "policy.model.torchscript"


class ModelMismatch(RunFailed):
    """The command refused the exported module (status 2): its outputs on the environment's
    observations do not fit the action space or its declared state, or the config's algorithm
    cannot take it. module: the module's class name; the message names it, the shapes the
    environment needs and the ones the module returned."""

    def __init__(self, module_name, failed):
        self.module = module_name
        lines = [f"the module {module_name} does not fit this config's environment:"]
        lines += failed.log_tail
        super().__init__("gearbox check", failed.status, lines, failed.run_dir)


def _torch():
    try:
        import torch  # noqa: PLC0415 (only custom models need it)
    except ImportError as e:
        raise ImportError(
            "gearbox: custom models need PyTorch in this Python: Debian's python3-torch "
            "(launch/install-deps.sh python installs it; gearbox's venv sees Debian's "
            "packages), the same 1.13 as the libtorch the workers load: a TorchScript file "
            f"from another PyTorch may not load there ({e})") from e
    return torch


def module_name(module):
    """The name errors give a module: its class's qualified name."""
    return type(module).__qualname__


def state_size(module):
    """The floats of recurrent state a row the module declares (its integer attribute
    state_size; 0 without one). Raises TypeError for a state_size that is not an integer >= 0."""
    s = getattr(module, "state_size", 0)
    if isinstance(s, bool) or not isinstance(s, int) or s < 0:
        raise TypeError(f"{module_name(module)}.state_size must be an integer >= 0 (floats of "
                        f"recurrent state a row), not {s!r}")
    return s


def _check_signature(module, s):
    """A stateful module's forward takes (obs, state); a stateless one's (obs)."""
    try:
        params = [p for p in inspect.signature(module.forward).parameters.values()
                  if p.default is inspect.Parameter.empty
                  and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return  # a scripted module's forward: the command checks it
    want = 2 if s else 1
    if len(params) != want:
        what = ("forward(obs, state) returning its outputs and then the next state"
                if s else "forward(obs)")
        raise TypeError(f"{module_name(module)}: state_size is {s}, so the module needs "
                        f"{what}; its forward takes {len(params)} arguments "
                        f"({', '.join(p.name for p in params)})")


def script(module):
    """The module as TorchScript (torch.jit.script; an already scripted module as it is).
    Raises TypeError saying what TorchScript refused, or what the module lacks."""
    torch = _torch()
    if isinstance(module, torch.jit.ScriptModule):
        return module
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"gearbox: a model is a torch.nn.Module, not {type(module).__name__}")
    s = state_size(module)
    _check_signature(module, s)
    try:
        scripted = torch.jit.script(module)
    except Exception as e:  # TorchScript's compiler raises several kinds
        raise TypeError(f"gearbox: torch.jit.script could not compile {module_name(module)} "
                        f"(the workers run TorchScript: annotate the forward's arguments, "
                        f"declare `state_size: int` on the class): {e}") from e
    if s and (not hasattr(scripted, "state_size") or scripted.state_size != s):
        raise TypeError(f"{module_name(module)}: state_size {s} did not survive "
                        "torch.jit.script; declare it on the class (`state_size: int`)")
    return scripted


def model_overrides(path, size):
    """The --set keys that make a config run the TorchScript file at path carrying size floats
    of state a row: the module is the whole policy (no built-in core)."""
    return {"policy.model.type": "torchscript", MODEL_KEY: os.path.abspath(os.fspath(path)),
            "policy.model.torchscript_state": int(size), "policy.model.core": "none"}


def save(module, path):
    """Scripts module and writes it to path (its folder made). Returns (path, state size)."""
    scripted = script(module)
    path = os.fspath(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    scripted.save(path)
    size = int(scripted.state_size) if hasattr(scripted, "state_size") else 0
    return path, size


def checked(module, fn):
    """fn() (a gearbox check with the module's file), its RunFailed about the model raised
    again as ModelMismatch naming the module."""
    try:
        return fn()
    except RunFailed as e:
        if e.status == 2 and any("policy.model" in line for line in e.log_tail):
            raise ModelMismatch(module_name(module), e) from None
        raise


def export_model(module, path, config=None, overrides=None):
    """Exports module (a torch.nn.Module, with state_size for recurrent state) to TorchScript at
    path. With config (a YAML file's path or a dict), also checks it against that config's
    environment as `gearbox check` does before a run: raises ModelMismatch (the module's name,
    the expected and the actual shapes) when it does not fit. Returns the --set overrides that
    run it ({"policy.model.type": "torchscript", ...}). Blocks (the check loads libtorch:
    about a second)."""
    path, size = save(module, path)
    sets = model_overrides(path, size)
    if config is not None:
        checked(module, lambda: check_config(config, {**(overrides or {}), **sets}))
    return sets
