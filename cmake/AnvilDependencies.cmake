# SPDX-License-Identifier: Apache-2.0
# Third-party dependencies, all from Debian packages (see docs/spec/toolchain.md and
# scripts/install_deps.sh). Only the files named in DESIGN.md's layering rules may use them.
find_package(OpenMP REQUIRED)
find_package(Eigen3 3.4 REQUIRED NO_MODULE)
find_package(dnnl REQUIRED)
find_package(fmt REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(ZLIB REQUIRED)
find_package(CLI11 REQUIRED)
if(ANVIL_BUILD_TESTS)
  find_package(Catch2 2 REQUIRED)
endif()
if(ANVIL_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
