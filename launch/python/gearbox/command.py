"""gearbox/command.py: finds the gearbox command this package drives (GEARBOX_BIN, else PATH),
checks that its version is the package's, and runs its short subcommands (check, eval)."""
import os
import shutil
import subprocess

from gearbox._version import package_version

HOW_TO_GET = ("build it from the source tree (README, Quick start, command 1: "
              "launch/install-deps.sh && cmake -S . -B build ... && cmake --build build) and "
              "either set GEARBOX_BIN=/path/to/build/gearbox or put it on PATH "
              "(cmake --install build --prefix PREFIX installs PREFIX/bin/gearbox)")


class CommandNotFound(RuntimeError):
    """The gearbox command is neither GEARBOX_BIN nor on PATH."""


class RunFailed(RuntimeError):
    """The gearbox command exited non-zero. status: its exit status (2: usage or config
    error, 1: the run failed); run_dir: the run directory (None when none was made);
    log_tail: the last lines it printed or logged."""

    def __init__(self, what, status, log_tail, run_dir=None):
        self.status = status
        self.log_tail = log_tail
        self.run_dir = run_dir
        kind = {2: "usage or config error", 1: "failure"}.get(status, "failure")
        where = f" (run directory {run_dir})" if run_dir else ""
        tail = "\n".join(log_tail)
        super().__init__(f"{what} exited with status {status} ({kind}){where}:\n{tail}")


def find_command():
    """The path of the gearbox command: $GEARBOX_BIN when set (it must be an executable file),
    else `gearbox` on PATH. Raises CommandNotFound saying how to get it. Does not block."""
    env = os.environ.get("GEARBOX_BIN")
    if env:
        if os.path.isfile(env) and os.access(env, os.X_OK):
            return os.path.abspath(env)
        raise CommandNotFound(f"GEARBOX_BIN={env} is not an executable file; " + HOW_TO_GET)
    found = shutil.which("gearbox")
    if found:
        return found
    raise CommandNotFound("the gearbox command is not on PATH and GEARBOX_BIN is not set; "
                          + HOW_TO_GET)


def command_version(path):
    """The version `path --version` prints ("gearbox X.Y.Z"). Raises RuntimeError when it
    cannot be run or prints something else. Blocks for the command (milliseconds)."""
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60,
                             check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RuntimeError(f"{path} --version: {e}") from e
    words = out.stdout.split()
    if out.returncode != 0 or len(words) != 2 or words[0] != "gearbox":
        raise RuntimeError(f"{path} --version: exit status {out.returncode}, printed "
                           f"{out.stdout.strip()!r} {out.stderr.strip()!r}; is it gearbox?")
    return words[1]


def check_version(path):
    """Raises ImportError when the command at path is not this package's version."""
    theirs = command_version(path)
    ours = package_version()
    if theirs != ours:
        raise ImportError(f"gearbox: the command {path} is version {theirs} but this Python "
                          f"package is {ours}: install the package from the same source tree "
                          f"(pip install --no-build-isolation ./launch/python) or point "
                          f"GEARBOX_BIN at the matching command")


def run_short(args, what):
    """Runs `gearbox ARGS` to its end and returns its stdout. Raises RunFailed (with the end of
    its stderr) when it exits non-zero, CommandNotFound without a command. Blocks."""
    cmd = [find_command()] + list(args)
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        lines = (out.stderr or out.stdout).strip().splitlines()[-20:]
        raise RunFailed(what, out.returncode, lines)
    return out.stdout
