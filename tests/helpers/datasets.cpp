// SPDX-License-Identifier: Apache-2.0
// Dataset locations for the tests (tests/helpers/datasets.h).
#include "helpers/datasets.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <unistd.h>

namespace anvil::test {

std::string ptb_dir() {
  if (const char* env = std::getenv("ANVIL_PTB_DIR"); env && *env) return env;
  return std::string(ANVIL_DATASETS_DIR) + "/ptb";
}

std::string ptb_file(const std::string& name) {
  std::string path = ptb_dir() + "/" + name;
  INFO("PTB file " << path
                   << " not found: set the environment variable ANVIL_PTB_DIR or configure "
                      "with -DANVIL_DATASETS_DIR=<dir holding ptb/> (looked in "
                   << ptb_dir() << ")");
  REQUIRE(std::filesystem::is_regular_file(path));
  return path;
}

std::string fashion_mnist_dir() {
  if (const char* env = std::getenv("ANVIL_FASHION_MNIST_DIR"); env && *env) return env;
  return "/usr/share/datasets/fashion-mnist";
}

std::string fashion_mnist_file(const std::string& name) {
  std::string path = fashion_mnist_dir() + "/" + name;
  INFO("Fashion-MNIST file "
       << path
       << " not found: install the Debian package "
          "dataset-fashion-mnist (scripts/install_deps.sh) or set the environment variable "
          "ANVIL_FASHION_MNIST_DIR (looked in "
       << fashion_mnist_dir() << ")");
  REQUIRE(std::filesystem::is_regular_file(path));
  return path;
}

ScratchDir::ScratchDir(const std::string& tag) {
  static std::atomic<int> counter{0};
  path_ = std::filesystem::temp_directory_path() /
          ("anvil_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  std::filesystem::remove_all(path_);  // a stale folder of an earlier process with this pid
  std::filesystem::create_directories(path_);
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string ScratchDir::write(const std::string& name, const std::string& bytes) const {
  const std::filesystem::path p = path_ / name;
  std::filesystem::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  REQUIRE(out.good());
  return p.string();
}

std::string ScratchDir::write(const std::string& name,
                              const std::vector<std::uint8_t>& bytes) const {
  return write(name, std::string(bytes.begin(), bytes.end()));
}

}  // namespace anvil::test
