"""gearbox: drive the gearbox reinforcement-learning command from Python.

    import gearbox
    r = gearbox.run("configs/cartpole_ppo.yaml", overrides={"trainer.algorithm.lr": 1e-3})
    print(r.summary["solved"], r.summary["wall_seconds"])
    summary, rows = gearbox.read_run(r.run_dir)
    r = gearbox.run("configs/recall_lstm.yaml", model=MyGRUPolicy())  # a torch.nn.Module
    policy = gearbox.load_policy(r.run_dir)   # the trained policy, a torch.nn.Module

The command is GEARBOX_BIN, else `gearbox` on PATH; importing checks that its version is this
package's (ImportError when not). Without a command, import works (read_run does not need one)
and what needs it raises CommandNotFound saying how to get it."""
from gearbox._version import package_version
from gearbox.command import (CommandNotFound, RunFailed, check_version, command_version,
                             find_command)
from gearbox.metrics import RunData, read_metrics, read_run, read_summary
from gearbox.models import ModelMismatch, export_model
from gearbox.policy import (PolicyFileError, env_spec, load_policy, read_model_file,
                            read_policy_file)
from gearbox.configs import check_config
from gearbox.runs import Run, evaluate, resume, run
from gearbox.sweeps import sweep
from gearbox.tracking import to_mlflow, to_wandb

__version__ = package_version()

__all__ = ["CommandNotFound", "ModelMismatch", "PolicyFileError", "Run", "RunData", "RunFailed",
           "__version__", "check_config", "command_version", "env_spec", "evaluate",
           "export_model", "find_command", "load_policy", "read_metrics", "read_model_file",
           "read_policy_file", "read_run", "read_summary", "resume", "run", "sweep", "to_mlflow",
           "to_wandb"]


def _check_command_at_import():
    try:
        path = find_command()
    except CommandNotFound:
        return  # said when something needs it
    check_version(path)


_check_command_at_import()

