#pragma once
// Where the tests find real datasets: ANVIL_PTB_DIR (environment) or ANVIL_DATASETS_DIR/ptb
// (CMake cache variable, default the repository's data/datasets). A missing file FAILS the test
// (REQUIRE), saying where it looked: a dataset test never skips silently.
#include <string>

namespace anvil::test {

std::string ptb_dir();
// The path of a real PTB file (e.g. "ptb.valid.txt"); REQUIREs that it exists.
std::string ptb_file(const std::string& name);

}  // namespace anvil::test
