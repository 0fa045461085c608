# SPDX-License-Identifier: Apache-2.0
# House warning flags for every target of the tree (libraries, tools, tests, benchmarks, the CUDA
# backend): -Wall -Wextra -Wshadow plus a few the tree takes cheaply, for C++ and for nvcc's host
# compiler. ANVIL_WERROR (default OFF; scripts/test.sh turns it ON) makes them errors, so a new
# warning fails CI but a newer compiler's new warning never breaks a user's build.
option(ANVIL_WERROR "Treat compiler warnings as errors (CI)" OFF)

# Applies the flags to every target created after the call in this directory and below.
function(anvil_enable_warnings)
  # -Wno-missing-field-initializers: C++20 designated initializers ({.name = .., .fn = ..}) leave
  # the other fields at their defaults on purpose; -Wextra would flag every such call.
  set(_cxx -Wall -Wextra -Wshadow -Wnon-virtual-dtor -Wpointer-arith -Wcast-qual
           -Wno-missing-field-initializers)
  if(ANVIL_WERROR)
    list(APPEND _cxx -Werror)
  endif()
  # nvcc forwards host-compiler flags through -Xcompiler, comma-separated.
  list(JOIN _cxx "," _xcompiler)
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:${_cxx}>"
                      "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=${_xcompiler}>")
  if(ANVIL_WERROR)
    # nvcc's own diagnostics (device code) too.
    add_compile_options("$<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings>")
  endif()
endfunction()
