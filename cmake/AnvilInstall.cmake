# SPDX-License-Identifier: Apache-2.0
# `cmake --install`: libraries, headers under include/anvil/, and anvilConfig.cmake exporting
# anvil::anvil (see examples/ for a consumer and scripts/check_install.sh for the check).
#
# Layout under the prefix:
#   lib/libanvil.so*, lib/libanvil_cuda.so      the backend beside libanvil: the engine dlopen()s
#                                               <dir of libanvil>/libanvil_cuda.so
#   include/anvil/anvil.h                       umbrella (include/anvil/anvil.h in the source tree):
#                                               #include <anvil/anvil.h>
#   include/anvil/engine/**.h, models/*.h, data/*.h
#                                               the public headers at their source-relative
#                                               paths, which is how they include each other
#                                               ("engine/core/tensor.h") given include/anvil
#   lib/cmake/anvil/anvilConfig.cmake (+ Version, Targets)
#   share/doc/anvil/LICENSE                     the Apache License 2.0; anvilConfig.cmake sets
#                                               anvil_LICENSE (SPDX id) and anvil_LICENSE_FILE
include(CMakePackageConfigHelpers)

set(ANVIL_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/anvil)
# The license, as an SPDX identifier for the package configuration and as the file itself.
set(ANVIL_LICENSE "Apache-2.0")
set(ANVIL_INSTALL_LICENSE_FILE ${CMAKE_INSTALL_DOCDIR}/LICENSE)
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR})

install(TARGETS anvil EXPORT anvilTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET anvil_cuda)
  # A dlopen()ed module, not part of the export: consumers never link it.
  install(TARGETS anvil_cuda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()

# Public headers, globbed (CONFIGURE_DEPENDS: a new header re-runs CMake on the next build).
file(GLOB_RECURSE _anvil_public_headers CONFIGURE_DEPENDS
  RELATIVE ${PROJECT_SOURCE_DIR}
  ${PROJECT_SOURCE_DIR}/engine/*.h
  ${PROJECT_SOURCE_DIR}/models/*.h
  ${PROJECT_SOURCE_DIR}/data/*.h)
foreach(_header IN LISTS _anvil_public_headers)
  get_filename_component(_dir ${_header} DIRECTORY)
  install(FILES ${PROJECT_SOURCE_DIR}/${_header}
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/anvil/${_dir})
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/include/anvil/anvil.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/anvil)

install(EXPORT anvilTargets
  NAMESPACE anvil::
  FILE anvilTargets.cmake
  DESTINATION ${ANVIL_INSTALL_CMAKEDIR})

# Dependencies that leak into the export. anvil links its dependencies PRIVATE and is a shared
# library, so normally none do; a static build (or a PUBLIC link added later) puts
# $<LINK_ONLY:Pkg::target> into anvilTargets.cmake, and then the consumer must find Pkg.
get_target_property(_anvil_iface_libs anvil INTERFACE_LINK_LIBRARIES)
get_target_property(_anvil_type anvil TYPE)
if(_anvil_type STREQUAL "STATIC_LIBRARY")
  get_target_property(_anvil_link_libs anvil LINK_LIBRARIES)
  list(APPEND _anvil_iface_libs ${_anvil_link_libs})
endif()
set(ANVIL_CONFIG_DEPENDENCIES "")
foreach(_pair "OpenMP::=OpenMP" "Threads::=Threads" "DNNL::=dnnl" "Eigen3::=Eigen3 3.4 NO_MODULE"
              "fmt::=fmt" "nlohmann_json::=nlohmann_json" "ZLIB::=ZLIB")
  string(REPLACE "=" ";" _pair "${_pair}")
  list(GET _pair 0 _prefix)
  list(GET _pair 1 _find_args)
  if(_anvil_iface_libs MATCHES "${_prefix}")
    string(APPEND ANVIL_CONFIG_DEPENDENCIES "find_dependency(${_find_args})\n")
  endif()
endforeach()

set(ANVIL_CONFIG_HAS_CUDA OFF)
if(TARGET anvil_cuda)
  set(ANVIL_CONFIG_HAS_CUDA ON)
endif()

configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/anvilConfig.cmake.in
  ${PROJECT_BINARY_DIR}/anvilConfig.cmake
  INSTALL_DESTINATION ${ANVIL_INSTALL_CMAKEDIR}
  PATH_VARS ANVIL_INSTALL_LICENSE_FILE)
# 0.x: minor versions may break the API.
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/anvilConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/anvilConfig.cmake ${PROJECT_BINARY_DIR}/anvilConfigVersion.cmake
        DESTINATION ${ANVIL_INSTALL_CMAKEDIR})
