# Compiler warnings, sanitizers and the CUDA architecture list, decided in one place.

# Warnings apply to gearbox's own targets only (libtorch's headers are not -Wextra clean).
set(GEARBOX_C_WARNINGS -Wall -Wextra -Werror -Wno-unused-parameter)
set(GEARBOX_CXX_WARNINGS -Wall -Wextra -Werror -Wno-unused-parameter)

# Applies the project's warnings to a target; every gearbox target calls it.
function(gearbox_target_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:C>:${GEARBOX_C_WARNINGS}>
    $<$<COMPILE_LANGUAGE:CXX>:${GEARBOX_CXX_WARNINGS}>)
endfunction()

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

# CUDA: on when nvcc is found, unless -DGEARBOX_CUDA=OFF. Default architectures: Ampere (sm_80)
# and Hopper (sm_90) as real code, plus sm_90 PTX so newer GPUs JIT-compile it.
set(GEARBOX_HAVE_CUDA OFF)
if(GEARBOX_CUDA)
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES "80-real;90-real;90-virtual")
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
