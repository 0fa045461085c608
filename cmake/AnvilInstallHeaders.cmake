# SPDX-License-Identifier: Apache-2.0
# Install step of the public headers (Note [Installed include prefix] in AnvilInstall.cmake):
# each header's includes of "engine/...", "models/..." and "data/..." are rewritten to
# "anvil/engine/..." and so on, the copy is staged under ANVIL_STAGE_DIR and installed to
# <prefix>/ANVIL_INCLUDE_DIR/anvil/<its source-relative folder> (include/anvil/anvil.h to
# include/anvil/). Run by `cmake --install` with ANVIL_SOURCE_DIR, ANVIL_STAGE_DIR, ANVIL_HEADERS
# (a list of source-relative paths) and ANVIL_INCLUDE_DIR set.
foreach(_header IN LISTS ANVIL_HEADERS)
  file(READ "${ANVIL_SOURCE_DIR}/${_header}" _text)
  string(REGEX REPLACE "#include \"(engine|models|data)/" "#include \"anvil/\\1/" _text "${_text}")
  if(_header STREQUAL "include/anvil/anvil.h")
    set(_dest "anvil")
  else()
    get_filename_component(_dir "${_header}" DIRECTORY)
    set(_dest "anvil/${_dir}")
  endif()
  get_filename_component(_name "${_header}" NAME)
  set(_staged "${ANVIL_STAGE_DIR}/${_dest}/${_name}")
  # file(CONFIGURE) would expand @VAR@; write the text as it is, only when it changed.
  set(_old "")
  if(EXISTS "${_staged}")
    file(READ "${_staged}" _old)
  endif()
  if(NOT _old STREQUAL _text)
    file(WRITE "${_staged}" "${_text}")
  endif()
  file(INSTALL DESTINATION "${CMAKE_INSTALL_PREFIX}/${ANVIL_INCLUDE_DIR}/${_dest}" TYPE FILE
       FILES "${_staged}")
endforeach()
