// SPDX-License-Identifier: Apache-2.0
#pragma once
// Where the tests find real datasets. A missing file FAILS the test (REQUIRE), saying where it
// looked: a dataset test never skips silently.
//   PTB:           ANVIL_PTB_DIR (environment) or ANVIL_DATASETS_DIR/ptb (CMake cache variable,
//                  default the repository's data/datasets)
//   Fashion-MNIST: ANVIL_FASHION_MNIST_DIR (environment) or /usr/share/datasets/fashion-mnist
//                  (the Debian package dataset-fashion-mnist, scripts/install_deps.sh)
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace anvil::test {

std::string ptb_dir();
// The path of a real PTB file (e.g. "ptb.valid.txt"); REQUIREs that it exists.
std::string ptb_file(const std::string& name);

std::string fashion_mnist_dir();
// The path of a real Fashion-MNIST file (e.g. "train-labels-idx1-ubyte.gz"); REQUIREs that it
// exists.
std::string fashion_mnist_file(const std::string& name);

// A scratch folder under the system temp directory (a unique name per process and instance) for
// files a test generates, removed with everything in it when the object goes.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag = "data");
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // path()/name as a string (nothing is created).
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  // Writes `bytes` to path()/name (creating sub-folders) and returns the full path.
  std::string write(const std::string& name, const std::vector<std::uint8_t>& bytes) const;
  std::string write(const std::string& name, const std::string& bytes) const;

 private:
  std::filesystem::path path_;
};

}  // namespace anvil::test
