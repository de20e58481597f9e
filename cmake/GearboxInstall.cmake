# Install rules: the gearbox command, public headers under include/gearbox/, a CMake package
# (find_package(gearbox) -> gearbox::env) and a pkg-config file (pkg-config --cflags gearbox),
# so that users can build environment plugins against an installed gearbox (both give include/,
# for #include <gearbox/envs/env.h>, and include/gearbox/, for the headers' own includes), and
# the shipped configs in share/gearbox/configs.
include(CMakePackageConfigHelpers)

foreach(dir runtime envs replay kernels workers)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gearbox/${dir}
          FILES_MATCHING PATTERN "*.h" PATTERN "examples" EXCLUDE PATTERN "torch" EXCLUDE
          PATTERN "python" EXCLUDE
          # private to their folder (shared by the .c files of one module), never included by a
          # public header
          PATTERN "*internal.h" EXCLUDE)
endforeach()

# gearbox_env: the header-only environment ABI (envs/env.h), the one thing a plugin needs.
if(NOT TARGET gearbox_env)
  add_library(gearbox_env INTERFACE)
  target_include_directories(gearbox_env INTERFACE
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/gearbox>)
endif()
set_target_properties(gearbox_env PROPERTIES EXPORT_NAME env)
install(TARGETS gearbox_env EXPORT gearboxTargets)
install(EXPORT gearboxTargets NAMESPACE gearbox:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gearbox)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/gearboxConfig.cmake.in
  ${PROJECT_BINARY_DIR}/gearboxConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gearbox)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/gearboxConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/gearboxConfig.cmake ${PROJECT_BINARY_DIR}/gearboxConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gearbox)

configure_file(${PROJECT_SOURCE_DIR}/cmake/gearbox.pc.in ${PROJECT_BINARY_DIR}/gearbox.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/gearbox.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The shipped configs, to start from (`gearbox check --explain KEY` documents every key).
# corridor_plugin.yaml is installed by envs/examples (its plugin path rewritten for the install).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/configs/ DESTINATION ${CMAKE_INSTALL_DATADIR}/gearbox/configs
        FILES_MATCHING PATTERN "*.yaml" PATTERN "corridor_plugin.yaml" EXCLUDE)
