# SPDX-License-Identifier: Apache-2.0
# The API reference (Doxygen) of the installed headers: docs/Doxyfile.in configured into
# <build>/docs/Doxyfile over ANVIL_PUBLIC_HEADERS (cmake/AnvilInstall.cmake), read through the
# build tree's <anvil/...> names (include-tree/anvil, links to the source folders) so that the
# pages say #include <anvil/engine/nn/layers.h>. The HTML goes to <build>/docs/api/html.
# Target anvil_api_docs builds it; CTest docs_api_reference (below) fails on any warning
# (docs/library.md).
set(ANVIL_API_DOCS_DIR ${PROJECT_BINARY_DIR}/docs/api)
set(_anvil_doxygen_headers ${ANVIL_PUBLIC_HEADERS})
list(SORT _anvil_doxygen_headers)
set(ANVIL_DOXYGEN_INPUT "")
foreach(_header ${_anvil_doxygen_headers})
  # include/anvil/anvil.h is include-tree/anvil/anvil.h; engine/... is include-tree/anvil/engine/...
  string(REGEX REPLACE "^include/anvil/" "" _header "${_header}")
  string(APPEND ANVIL_DOXYGEN_INPUT " \\\n    \"${PROJECT_BINARY_DIR}/include-tree/anvil/${_header}\"")
endforeach()
configure_file(${PROJECT_SOURCE_DIR}/docs/Doxyfile.in ${PROJECT_BINARY_DIR}/docs/Doxyfile @ONLY)

find_program(ANVIL_DOXYGEN doxygen)
if(ANVIL_DOXYGEN)
  add_custom_target(anvil_api_docs
    COMMAND ${ANVIL_DOXYGEN} Doxyfile
    WORKING_DIRECTORY ${PROJECT_BINARY_DIR}/docs
    COMMENT "API reference: ${ANVIL_API_DOCS_DIR}/html/index.html"
    VERBATIM)
endif()

# The reference with every warning an error, the output checked and a planted bad comment seen
# failing (tests/docs/test_api_reference.py). Here rather than in tests/ because it needs the
# header list above. A missing doxygen fails it, naming the package.
if(ANVIL_BUILD_TESTS)
  add_test(NAME docs_api_reference
           COMMAND python3 ${PROJECT_SOURCE_DIR}/tests/docs/test_api_reference.py
                   ${ANVIL_DOXYGEN} ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
  set_tests_properties(docs_api_reference PROPERTIES TIMEOUT 900)
endif()
