"""gearbox/sweep_spec.py: a sweep file (SWEEP.yaml) read and checked, and the trials' values it
asks for: every combination (grid), independent draws (random), or Optuna's suggestions.

    name: cartpole_lr                     # default: the file's name without .yaml
    base: configs/cartpole_ppo.yaml       # the config every trial starts from (or a mapping)
    set: {experiment.max_seconds: 30}     # overrides every trial gets
    method: grid                          # grid | random | optuna
    trials: 16                            # random, optuna: how many (grid: every combination)
    seed: 0                               # of the random draws and of Optuna's sampler
    parallel: 2                           # trials run at once on this machine
    objective: {key: wall_seconds, direction: min}   # a summary.json field (a.b for nested)
    params:                               # the swept config keys
      trainer.algorithm.lr: [0.001, 0.002]              # values (random, optuna: a choice)
      trainer.algorithm.ppo.entropy_coef: {uniform: [0.0, 0.01]}
      trainer.algorithm.lr: {log_uniform: [1.0e-4, 1.0e-2]}
      policy.model.activation: {choice: [tanh, relu]}
    dir: sweeps/cartpole_lr               # default sweeps/<name>/<YYYYmmddTHHMMSSZ>
    launch: local                         # local (this machine) | slurm (one job array)
    slurm_args: [--partition=cpu]         # with slurm: more sbatch arguments

Paths (base, dir) are relative to the current directory, as the gearbox command's are."""
import itertools
import math
import os
import random
import re

import yaml

METHODS = ("grid", "random", "optuna")
DISTRIBUTIONS = ("uniform", "log_uniform", "choice")
KEYS = ("name", "base", "set", "method", "trials", "seed", "parallel", "objective", "params",
        "dir", "launch", "slurm_args")
LAUNCHES = ("local", "slurm")


class SweepError(ValueError):
    """A sweep file that cannot be used; the message names the file and the key."""


class Param:
    """One swept key: kind "values" (a list), "choice", "uniform" or "log_uniform"."""

    def __init__(self, key, kind, values=None, low=None, high=None):
        self.key, self.kind, self.values, self.low, self.high = key, kind, values, low, high

    def draw(self, rng):
        """A random value of this parameter (random search)."""
        if self.kind in ("values", "choice"):
            return rng.choice(self.values)
        if self.kind == "uniform":
            return rng.uniform(self.low, self.high)
        return math.exp(rng.uniform(math.log(self.low), math.log(self.high)))

    def suggest(self, trial):
        """Optuna's value for this parameter in trial (an optuna.Trial)."""
        if self.kind in ("values", "choice"):
            return trial.suggest_categorical(self.key, self.values)
        return trial.suggest_float(self.key, self.low, self.high,
                                   log=self.kind == "log_uniform")

    def log_scale(self):
        """True when the plot should show this key on a log axis."""
        if self.kind == "log_uniform":
            return True
        if self.kind == "uniform":
            return False
        nums = [v for v in self.values if isinstance(v, (int, float))
                and not isinstance(v, bool)]
        return (len(nums) == len(self.values) and nums and min(nums) > 0
                and max(nums) / min(nums) >= 10)


def _param(where, key, spec):
    if isinstance(spec, list):
        if not spec:
            raise SweepError(f"{where}: params.{key}: an empty list of values")
        return Param(key, "values", values=spec)
    if not isinstance(spec, dict) or len(spec) != 1:
        raise SweepError(f"{where}: params.{key}: expected a list of values or one of "
                         f"{{uniform: [low, high]}}, {{log_uniform: [low, high]}}, "
                         f"{{choice: [values]}}; got {spec!r}")
    (kind, arg), = spec.items()
    if kind not in DISTRIBUTIONS:
        raise SweepError(f"{where}: params.{key}: unknown distribution {kind!r} "
                         f"(expected one of {', '.join(DISTRIBUTIONS)})")
    if kind == "choice":
        if not isinstance(arg, list) or not arg:
            raise SweepError(f"{where}: params.{key}.choice: expected a non-empty list")
        return Param(key, "choice", values=arg)
    ok = (isinstance(arg, list) and len(arg) == 2
          and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in arg))
    if not ok or not arg[0] < arg[1]:
        raise SweepError(f"{where}: params.{key}.{kind}: expected [low, high] with low < high, "
                         f"got {arg!r}")
    if kind == "log_uniform" and arg[0] <= 0:
        raise SweepError(f"{where}: params.{key}.log_uniform: low must be above 0, got {arg[0]}")
    return Param(key, kind, low=float(arg[0]), high=float(arg[1]))


def _positive_int(where, spec, key, default):
    value = spec.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise SweepError(f"{where}: {key}: expected a whole number of at least 1, got {value!r}")
    return value


class Sweep:
    """A checked sweep file: name, base (a path or a dict), fixed (overrides), method, trials,
    seed, parallel, objective_key, direction ("min" or "max"), params (list of Param), dir,
    launch ("local" or "slurm"), slurm_args."""

    def __init__(self, spec, where):
        unknown = sorted(set(spec) - set(KEYS))
        if unknown:
            raise SweepError(f"{where}: unknown key {unknown[0]!r} (expected {', '.join(KEYS)})")
        self.where = where
        stem = os.path.splitext(os.path.basename(where))[0]
        self.name = str(spec.get("name") or stem)
        self.base = spec.get("base")
        if isinstance(self.base, str):
            if not os.path.isfile(self.base):
                raise SweepError(f"{where}: base: no config file {self.base} (relative to the "
                                 f"current directory {os.getcwd()})")
        elif not isinstance(self.base, dict):
            raise SweepError(f"{where}: base: expected a config file's path or a mapping")
        self.fixed = spec.get("set") or {}
        if not isinstance(self.fixed, dict):
            raise SweepError(f"{where}: set: expected a mapping of config keys to values")
        self.method = spec.get("method", "grid")
        if self.method not in METHODS:
            raise SweepError(f"{where}: method: expected one of {', '.join(METHODS)}, "
                             f"got {self.method!r}")
        self.trials = _positive_int(where, spec, "trials", 16)
        self.seed = spec.get("seed", 0)
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise SweepError(f"{where}: seed: expected a whole number, got {self.seed!r}")
        self.parallel = _positive_int(where, spec, "parallel", 1)
        self._objective(spec.get("objective"))
        params = spec.get("params")
        if not isinstance(params, dict) or not params:
            raise SweepError(f"{where}: params: expected a mapping of config keys to values or "
                             f"distributions (at least one)")
        self.params = [_param(where, str(k), v) for k, v in params.items()]
        if self.method == "grid":
            drawn = [p.key for p in self.params if p.kind in ("uniform", "log_uniform")]
            if drawn:
                raise SweepError(f"{where}: params.{drawn[0]}: method grid needs a list of "
                                 f"values (a distribution is for random or optuna)")
        self.dir = spec.get("dir")
        self.launch = spec.get("launch", "local")
        if self.launch not in LAUNCHES:
            raise SweepError(f"{where}: launch: expected local or slurm, got {self.launch!r}")
        self.slurm_args = spec.get("slurm_args") or []
        if not isinstance(self.slurm_args, list) or (self.slurm_args and self.launch != "slurm"):
            raise SweepError(f"{where}: slurm_args: a list of sbatch arguments, with launch: "
                             f"slurm")
        if self.launch == "slurm" and self.method == "optuna":
            raise SweepError(f"{where}: launch: slurm runs trials known in advance (method "
                             f"grid or random); optuna picks each from the results before it")

    def _objective(self, obj):
        where = self.where
        if not isinstance(obj, dict) or not isinstance(obj.get("key"), str):
            raise SweepError(f"{where}: objective: expected {{key: SUMMARY_FIELD, direction: "
                             f"min|max}} (e.g. key: wall_seconds, direction: min)")
        unknown = sorted(set(obj) - {"key", "direction"})
        if unknown:
            raise SweepError(f"{where}: objective: unknown key {unknown[0]!r}")
        self.objective_key = obj["key"]
        self.direction = obj.get("direction", "min")
        if self.direction not in ("min", "max"):
            raise SweepError(f"{where}: objective.direction: expected min or max, "
                             f"got {self.direction!r}")

    def planned(self):
        """The trials' values, as a list of dicts {key: value}, for grid and random (optuna
        asks as it goes: None)."""
        if self.method == "grid":
            combos = itertools.product(*[p.values for p in self.params])
            return [dict(zip([p.key for p in self.params], c)) for c in combos]
        if self.method == "random":
            rng = random.Random(self.seed)
            return [{p.key: p.draw(rng) for p in self.params} for _ in range(self.trials)]
        return None


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader reading numbers as YAML 1.2 (and gearbox's libyaml configs) do:
    1.0e9 and 1e-4 are floats (YAML 1.1 wants a dot and a signed exponent: 1.0e+9)."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                   |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
                   |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
                   |[-+]?\.(?:inf|Inf|INF)
                   |\.(?:nan|NaN|NAN))$""", re.X),
    list("-+0123456789."))


def load_sweep(path):
    """Reads and checks the sweep file at path. Raises SweepError naming the file and key."""
    try:
        with open(path, encoding="utf-8") as f:
            spec = yaml.load(f, Loader=_Loader)  # noqa: S506 (a SafeLoader)
    except OSError as e:
        raise SweepError(f"{path}: {e.strerror}") from e
    except yaml.YAMLError as e:
        raise SweepError(f"{path}: not YAML: {e}") from e
    if not isinstance(spec, dict):
        raise SweepError(f"{path}: expected a mapping (name, base, method, objective, params)")
    return Sweep(spec, path)


def summary_field(summary, key):
    """summary.json's field key ("a.b" for nested) as a float, or None when it is missing or
    not a number (bools count as 0 and 1)."""
    value = summary
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None
