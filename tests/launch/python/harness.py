"""tests/launch/python/harness.py: what the Python package's tests share: their arguments
(GEARBOX SOURCE_ROOT WORK_DIR), the command as GEARBOX_BIN, the package (SOURCE_ROOT/launch/python)
on sys.path, a new work folder, and check()/finish()."""
import os
import shutil
import sys

failures = []


def setup():
    """(gearbox command, source root, an emptied work folder) from the test's arguments."""
    gearbox_bin, src, work = sys.argv[1:4]
    os.environ["GEARBOX_BIN"] = gearbox_bin
    sys.path.insert(0, os.path.join(src, "launch", "python"))
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    return gearbox_bin, src, work


def check(cond, what):
    """Records and prints one check ("ok:" on stdout, "FAIL:" on stderr)."""
    print(("ok:   " if cond else "FAIL: ") + what, file=sys.stderr if not cond else sys.stdout)
    if not cond:
        failures.append(what)


def finish():
    """Exits 1 when a check failed, else 0."""
    if failures:
        print(f"{len(failures)} checks failed", file=sys.stderr)
        sys.exit(1)
    print("all checks passed")
    sys.exit(0)
