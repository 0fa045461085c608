// SPDX-License-Identifier: Apache-2.0
// The Catch2 main for every test binary (Catch2 v2 single header).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
