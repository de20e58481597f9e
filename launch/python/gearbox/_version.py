"""gearbox/_version.py: the package's version, which is the gearbox command's: CMakeLists.txt's
project(gearbox VERSION x.y.z). setup.py loads this file on its own (no package import) to read
it from the tree and records it in the built package as _built_version.py; a package used from
the tree (PYTHONPATH=launch/python) reads the tree's CMakeLists.txt directly."""
import os
import re

_TREE_CMAKE_LISTS = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                 "..", "..", "..", "CMakeLists.txt")


def read_cmake_version(path):
    """The VERSION of project(gearbox VERSION ...) in the CMakeLists.txt at path.
    Raises OSError when the file cannot be read, ValueError when it names no version."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"project\(\s*gearbox\s+VERSION\s+([0-9][0-9A-Za-z.\-]*)", text)
    if not m:
        raise ValueError(f"{path} has no project(gearbox VERSION ...)")
    return m.group(1)


def package_version():
    """The version this package was built with, else the source tree's; raises ImportError
    when neither is known."""
    try:
        from gearbox._built_version import VERSION  # noqa: PLC0415 (written at build)
        return VERSION
    except ImportError:
        pass
    try:
        return read_cmake_version(_TREE_CMAKE_LISTS)
    except (OSError, ValueError) as e:
        raise ImportError(f"gearbox: the package's version is unknown: it was not built by "
                          f"setup.py and {e}") from e
