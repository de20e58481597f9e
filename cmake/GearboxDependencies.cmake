# Outside libraries: ZeroMQ, msgpack-c, libyaml through pkg-config; libtorch through find_package.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
pkg_check_modules(ZMQ REQUIRED IMPORTED_TARGET libzmq>=4.3)
pkg_search_module(MSGPACK REQUIRED IMPORTED_TARGET msgpack-c msgpack)
pkg_check_modules(YAML REQUIRED IMPORTED_TARGET yaml-0.1)

set(GEARBOX_HAVE_TORCH OFF)
if(GEARBOX_TORCH)
  find_package(Torch REQUIRED)
  set(GEARBOX_HAVE_TORCH ON)
  message(STATUS "gearbox: libtorch ${Torch_VERSION}")
endif()
