// Dataset locations for the tests (tests/helpers/datasets.h).
#include "helpers/datasets.h"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>

namespace anvil::test {

std::string ptb_dir() {
  if (const char* env = std::getenv("ANVIL_PTB_DIR"); env && *env) return env;
  return std::string(ANVIL_DATASETS_DIR) + "/ptb";
}

std::string ptb_file(const std::string& name) {
  const std::string path = ptb_dir() + "/" + name;
  INFO("PTB file " << path << " not found: set the environment variable ANVIL_PTB_DIR or configure "
                   "with -DANVIL_DATASETS_DIR=<dir holding ptb/> (looked in " << ptb_dir() << ")");
  REQUIRE(std::filesystem::is_regular_file(path));
  return path;
}

}  // namespace anvil::test
