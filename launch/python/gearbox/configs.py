"""gearbox/configs.py: configs as the command takes them: a file's path or a dict (written to a
temporary YAML file), overrides as --set arguments, and `gearbox check` of both."""
import json
import math
import os
import shutil
import tempfile

import yaml

from gearbox.command import run_short


def yaml_value(value):
    """A Python value as the YAML text of one --set override (JSON is YAML's flow style)."""
    if isinstance(value, float) and not math.isfinite(value):
        return ".nan" if math.isnan(value) else (".inf" if value > 0 else "-.inf")
    return json.dumps(value)


def set_args(overrides):
    """--set key=value arguments for a dict {dotted.key: value}."""
    args = []
    for key, value in (overrides or {}).items():
        args += ["--set", f"{key}={yaml_value(value)}"]
    return args


def config_file(config):
    """(path, temp_dir): config's path, or a dict written as YAML to a new temporary folder
    (removed when the run ends)."""
    if isinstance(config, dict):
        temp_dir = tempfile.mkdtemp(prefix="gearbox-config-")
        path = os.path.join(temp_dir, "config-from-dict.yaml")
        with open(path, "w", encoding="utf-8") as f:
            yaml.safe_dump(config, f, sort_keys=False)
        return path, temp_dir
    path = os.fspath(config)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"gearbox.run: no config file {path}")
    return path, None


def check_config(config, overrides=None):
    """`gearbox check` of config (a YAML file's path or a dict) with overrides: the resolved
    config as a dict. Raises RunFailed (status 2, the message naming the key) when the command
    refuses it. Blocks for the check."""
    path, temp_dir = config_file(config)
    try:
        return yaml.safe_load(run_short(["check", path] + set_args(overrides),
                                        "gearbox check")) or {}
    finally:
        if temp_dir:
            shutil.rmtree(temp_dir, ignore_errors=True)
