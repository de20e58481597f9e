# Outside libraries: ZeroMQ, msgpack-c, libyaml, protobuf-c, Jansson through pkg-config; libtorch
# through find_package.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
pkg_check_modules(ZMQ REQUIRED IMPORTED_TARGET libzmq>=4.3)
pkg_search_module(MSGPACK REQUIRED IMPORTED_TARGET msgpack-c msgpack)
pkg_check_modules(YAML REQUIRED IMPORTED_TARGET yaml-0.1)
# TensorBoard event files (runtime/run/tensorboard.proto): protobuf-c's library and its compiler
pkg_check_modules(PROTOBUF_C REQUIRED IMPORTED_TARGET libprotobuf-c)
find_program(GEARBOX_PROTOC_C protoc-c REQUIRED)
# JSON that gearbox reads back (summaries, benchmark results, eval reports): Jansson, a strict
# parser with line and column in its errors
pkg_check_modules(JANSSON REQUIRED IMPORTED_TARGET jansson>=2.13)

set(GEARBOX_HAVE_TORCH OFF)
if(GEARBOX_TORCH)
  find_package(Torch REQUIRED)
  set(GEARBOX_HAVE_TORCH ON)
  message(STATUS "gearbox: libtorch ${Torch_VERSION}")
endif()

# The Python that features and tests needing PyPI packages run (launch/python-requirements.txt):
# gearbox's own virtual environment made by launch/install-deps.sh, else Debian's python3.
set(GEARBOX_PYTHON_VENV "/opt/gearbox/python" CACHE PATH
    "gearbox's Python virtual environment (launch/install-deps.sh makes it)")
if(EXISTS "${GEARBOX_PYTHON_VENV}/bin/python")
  set(GEARBOX_PYTHON "${GEARBOX_PYTHON_VENV}/bin/python")
else()
  set(GEARBOX_PYTHON "/usr/bin/python3")
endif()
message(STATUS "gearbox: Python ${GEARBOX_PYTHON}")
