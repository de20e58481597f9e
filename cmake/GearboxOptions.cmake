# Compiler warnings, sanitizers and the CUDA architecture list, decided in one place.

# Warnings apply to gearbox's own targets only (libtorch's headers are not -Wextra clean). They
# are errors only with GEARBOX_WERROR (CI and development builds): a user's compiler, newer than
# the ones gearbox was tested with, may warn where they did not, and that must not stop a build.
set(GEARBOX_C_WARNINGS -Wall -Wextra -Wno-unused-parameter)
set(GEARBOX_CXX_WARNINGS -Wall -Wextra -Wno-unused-parameter)
# The CUDA kernels' device code (kernels/CMakeLists.txt): every warning an error, the same way.
set(GEARBOX_CUDA_WERROR "")
if(GEARBOX_WERROR)
  list(APPEND GEARBOX_C_WARNINGS -Werror)
  list(APPEND GEARBOX_CXX_WARNINGS -Werror)
  set(GEARBOX_CUDA_WERROR --Werror=all-warnings)
  message(STATUS "gearbox: warnings are errors (GEARBOX_WERROR)")
endif()

# Applies the project's warnings to a target; every gearbox target calls it.
function(gearbox_target_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:C>:${GEARBOX_C_WARNINGS}>
    $<$<COMPILE_LANGUAGE:CXX>:${GEARBOX_CXX_WARNINGS}>)
endfunction()

# The linker: LLVM's lld where the compiler can use it (GEARBOX_LINKER=auto), else the system's.
# Every test executable links libtorch: GNU ld takes about 2 s of CPU a link there, lld 0.25 s
# (about 60 such links a build with the tests). GEARBOX_LINKER=default keeps the system's.
set(GEARBOX_LINKER auto CACHE STRING "auto (lld when the compiler accepts -fuse-ld=lld) or default")
set_property(CACHE GEARBOX_LINKER PROPERTY STRINGS auto default)
if(GEARBOX_LINKER STREQUAL "auto")
  include(CheckLinkerFlag)
  check_linker_flag(C -fuse-ld=lld GEARBOX_C_LLD)
  check_linker_flag(CXX -fuse-ld=lld GEARBOX_CXX_LLD)
  if(GEARBOX_C_LLD AND GEARBOX_CXX_LLD)
    # C and C++ links only: nvcc, which links the CUDA test executables, takes no -fuse-ld
    add_link_options($<$<LINK_LANGUAGE:C,CXX>:-fuse-ld=lld>)
    message(STATUS "gearbox: linking with lld")
  endif()
elseif(NOT GEARBOX_LINKER STREQUAL "default")
  message(FATAL_ERROR "GEARBOX_LINKER is ${GEARBOX_LINKER}: auto or default")
endif()

if(GEARBOX_SANITIZE)
  set(_gb_san "-fsanitize=${GEARBOX_SANITIZE}")
  add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:${_gb_san}>
                      $<$<COMPILE_LANGUAGE:C,CXX>:-fno-omit-frame-pointer>)
  if(GEARBOX_SANITIZE MATCHES "undefined")
    add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-fno-sanitize-recover=undefined>)
  endif()
  add_link_options(${_gb_san})
  message(STATUS "gearbox: sanitizers ${GEARBOX_SANITIZE}")
endif()

# gearbox_hot_loops(SOURCE...), in the directory of the sources' target: files whose
# per-element loops (image preprocessing, gathers, chunk stacking, a test's reference draws) are
# most of the sanitizer tests' time. In a sanitized Debug build they compile at -O1, the level
# ASan's documentation recommends (the checks are the same); the rest stays at -O0. CI's ASan
# unit tests (clang, 2 cores): 287 CPU-s against 315 with the library files (the Atari
# wrappers' tests about 2x shorter, test_chunk_stack 23 s -> 9 s), test_gather_plan's own source
# then 17 s -> 1.6 s.
function(gearbox_hot_loops)
  if(GEARBOX_SANITIZE AND CMAKE_BUILD_TYPE STREQUAL "Debug")
    set_property(SOURCE ${ARGN} APPEND PROPERTY COMPILE_OPTIONS -O1)
  endif()
endfunction()

# CUDA: on when nvcc is found, unless -DGEARBOX_CUDA=OFF. Architectures, unless
# CMAKE_CUDA_ARCHITECTURES says (e.g. "80-real;90-real;90-virtual" for a cluster's mix of GPUs):
# the GPUs this machine has (nvidia-smi's compute capabilities), as real code, so a build for
# use compiles each kernel once; without a visible GPU (a login node, a container, CI), sm_80
# PTX only, which every GPU from Ampere on JIT-compiles at its first use (the driver caches it).
# Each architecture more is another device compile of every kernel.

# Sets OUT to the compute capabilities of this machine's GPUs as "<cc>-real", else "80-virtual".
function(gearbox_local_cuda_architectures out)
  set(archs "")
  find_program(GEARBOX_NVIDIA_SMI nvidia-smi)
  if(GEARBOX_NVIDIA_SMI)
    execute_process(COMMAND ${GEARBOX_NVIDIA_SMI} --query-gpu=compute_cap --format=csv,noheader
                    OUTPUT_VARIABLE caps RESULT_VARIABLE rc ERROR_QUIET TIMEOUT 20)
    if(rc EQUAL 0)
      string(REGEX MATCHALL "[0-9]+\\.[0-9]+" caps "${caps}")
      foreach(cap IN LISTS caps)
        string(REPLACE "." "" cap "${cap}")
        list(APPEND archs "${cap}-real")
      endforeach()
      list(REMOVE_DUPLICATES archs)
    endif()
  endif()
  if(NOT archs)
    set(archs "80-virtual")
  endif()
  set(${out} "${archs}" PARENT_SCOPE)
endfunction()

set(GEARBOX_HAVE_CUDA OFF)
if(GEARBOX_CUDA)
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      gearbox_local_cuda_architectures(CMAKE_CUDA_ARCHITECTURES)
    endif()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)
    find_package(CUDAToolkit REQUIRED)
    set(GEARBOX_HAVE_CUDA ON)
    message(STATUS "gearbox: CUDA ${CMAKE_CUDA_COMPILER_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES}")
  else()
    message(STATUS "gearbox: nvcc not found, building without CUDA")
  endif()
endif()
