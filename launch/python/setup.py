# launch/python/setup.py: gives the package the version of the gearbox command it belongs with,
# read from the source tree's CMakeLists.txt (project(gearbox VERSION x.y.z)) by
# gearbox/_version.py, and records it in the built package as gearbox/_built_version.py (an
# installed package has no tree to read).
import importlib.util
import os

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
CMAKE_LISTS = os.path.join(HERE, "..", "..", "CMakeLists.txt")


def tree_version():
    """The tree's project VERSION; stops the build with the reason when it cannot be read."""
    spec = importlib.util.spec_from_file_location(
        "gearbox_version", os.path.join(HERE, "gearbox", "_version.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    try:
        return mod.read_cmake_version(CMAKE_LISTS)
    except (OSError, ValueError) as e:
        raise SystemExit(f"gearbox: cannot read the version: {e} (build the package from "
                         "gearbox's source tree)")


class BuildPyWithVersion(build_py):
    """build_py that also writes gearbox/_built_version.py into the build folder."""

    def run(self):
        super().run()
        target = os.path.join(self.build_lib, "gearbox", "_built_version.py")
        with open(target, "w", encoding="utf-8") as f:
            f.write("# written by setup.py from CMakeLists.txt's project VERSION\n")
            f.write(f"VERSION = {tree_version()!r}\n")


setup(version=tree_version(), cmdclass={"build_py": BuildPyWithVersion})
