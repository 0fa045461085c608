# SPDX-License-Identifier: Apache-2.0
# `cmake --install`: libraries, headers under include/anvil/, anvilConfig.cmake exporting
# anvil::anvil and the pkg-config file anvil.pc (see examples/ for a consumer and
# scripts/check_install.sh for the check). The build tree is a package too: find_package(anvil)
# with anvil_DIR (or CMAKE_PREFIX_PATH) set to the build folder.
#
# Layout under the prefix:
#   lib/libanvil.so*, lib/libanvil_cuda.so      the backend beside libanvil: the engine dlopen()s
#                                               <dir of libanvil>/libanvil_cuda.so
#   include/anvil/anvil.h                       umbrella: #include <anvil/anvil.h>
#   include/anvil/engine/**.h, models/*.h, data/*.h
#                                               the public headers, #include <anvil/data/idx.h>
#                                               (Note [Installed include prefix])
#   lib/cmake/anvil/anvilConfig.cmake (+ Version, Targets)
#   lib/pkgconfig/anvil.pc                      pkg-config --cflags --libs anvil
#   share/doc/anvil/LICENSE                     the Apache License 2.0; anvilConfig.cmake sets
#                                               anvil_LICENSE (SPDX id) and anvil_LICENSE_FILE
#
# Note [Installed include prefix]
# Inside the tree the headers include each other by source-relative path ("engine/core/tensor.h"),
# which needs the source root on the include path. Installed, that would make engine/, models/
# and data/ top-level include names of every consumer. So the installed copies are rewritten:
# an include of "engine/...", "models/..." or "data/..." becomes "anvil/engine/..." (and so on),
# and the package's only include directory is <prefix>/include. The internal headers (helpers
# shared by the kernels and the engine's own .cpp files, never included by a public header) are
# not installed; scripts/check_install.sh compiles every installed header alone, so a public
# header that includes an internal one fails there.
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
# Internal headers (Note [Installed include prefix]), each with what it is for.
set(_anvil_internal_headers
  engine/core/strided_loop.h           # the elementwise kernels' strided walk
  engine/dispatch/floating_variant.h   # a kernel registration helper
  engine/dispatch/gemm_call.h          # the GEMM call the ops and conv/LSTM kernels share
  engine/dispatch/trial_timer.h        # the autotune timer of the variant tables
  engine/optim/optimizer_state.h       # engine/optim's state readers and writers
  engine/optim/update_calls.h          # engine/optim's multi-tensor table calls
  engine/distributed/mpi/mpi_allreduce_thread.h)  # the MPI module's all-reduce thread
list(REMOVE_ITEM _anvil_public_headers ${_anvil_internal_headers})
list(APPEND _anvil_public_headers include/anvil/anvil.h)
set(ANVIL_PUBLIC_HEADERS ${_anvil_public_headers})  # also the API reference's input (AnvilApiDocs)
install(CODE "
  set(ANVIL_SOURCE_DIR \"${PROJECT_SOURCE_DIR}\")
  set(ANVIL_STAGE_DIR \"${PROJECT_BINARY_DIR}/install-headers\")
  set(ANVIL_HEADERS \"${_anvil_public_headers}\")
  set(ANVIL_INCLUDE_DIR \"${CMAKE_INSTALL_INCLUDEDIR}\")
  include(\"${PROJECT_SOURCE_DIR}/cmake/AnvilInstallHeaders.cmake\")")

# The build tree's <anvil/...> names (Note [Installed include prefix]): include-tree/anvil holds
# links to the source folders, so a consumer of the build tree includes <anvil/data/idx.h> as
# one of the install tree does.
set(_anvil_include_tree ${PROJECT_BINARY_DIR}/include-tree/anvil)
file(MAKE_DIRECTORY ${_anvil_include_tree})
foreach(_dir engine models data)
  file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${_dir} ${_anvil_include_tree}/${_dir} SYMBOLIC)
endforeach()
file(CREATE_LINK ${PROJECT_SOURCE_DIR}/include/anvil/anvil.h ${_anvil_include_tree}/anvil.h SYMBOLIC)

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

# The install tree's configuration is generated into cmake-install/ so that the build folder's
# own anvilConfig.cmake (below) is the one find_package sees there.
configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/anvilConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake-install/anvilConfig.cmake
  INSTALL_DESTINATION ${ANVIL_INSTALL_CMAKEDIR}
  PATH_VARS ANVIL_INSTALL_LICENSE_FILE)
# 0.x: minor versions may break the API.
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/anvilConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake-install/anvilConfig.cmake
              ${PROJECT_BINARY_DIR}/anvilConfigVersion.cmake
        DESTINATION ${ANVIL_INSTALL_CMAKEDIR})

# The build tree as a package: targets exported in place, a configuration whose prefix is the
# build folder and whose license file is the source tree's.
export(EXPORT anvilTargets NAMESPACE anvil:: FILE ${PROJECT_BINARY_DIR}/anvilTargets.cmake)
set(ANVIL_INSTALL_LICENSE_FILE ${PROJECT_SOURCE_DIR}/LICENSE)
configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/anvilConfig.cmake.in
  ${PROJECT_BINARY_DIR}/anvilConfig.cmake
  INSTALL_DESTINATION ${PROJECT_BINARY_DIR}
  INSTALL_PREFIX ${PROJECT_BINARY_DIR}
  PATH_VARS ANVIL_INSTALL_LICENSE_FILE)

# pkg-config: the prefix is found from the .pc file's own place (${pcfiledir}), so that the
# installed tree can move.
file(RELATIVE_PATH ANVIL_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
configure_file(${PROJECT_SOURCE_DIR}/cmake/anvil.pc.in ${PROJECT_BINARY_DIR}/cmake-install/anvil.pc
               @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/cmake-install/anvil.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
