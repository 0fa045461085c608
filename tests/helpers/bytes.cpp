// SPDX-License-Identifier: Apache-2.0
// The raw-bytes helpers of the file-format tests (tests/helpers/bytes.h).
#include "helpers/bytes.h"

#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>

#include "engine/core/views.h"

namespace anvil::test {

std::string tensor_bytes(const Tensor& t) {
  const Tensor c = raw::contiguous(t);
  return std::string(static_cast<const char*>(c.data_ptr()), c.nbytes());
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void overwrite_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  REQUIRE(f.good());
}

}  // namespace anvil::test
