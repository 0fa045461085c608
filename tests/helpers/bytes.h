// SPDX-License-Identifier: Apache-2.0
#pragma once
// Raw bytes for the file-format tests (checkpoints, safetensors): a tensor's bytes, a whole
// file's bytes, and overwriting a file with given bytes (to corrupt a fixture in place).
// Scratch folders for such files: ScratchDir (tests/helpers/datasets.h).
#include <string>

#include "engine/core/tensor.h"

namespace anvil::test {

// The bytes of a tensor's elements in row-major order (a host tensor, any strides).
std::string tensor_bytes(const Tensor& t);
// The whole file ("" when it cannot be opened).
std::string read_file(const std::string& path);
// Replaces the file's contents with `bytes` (REQUIREs that the write succeeded).
void overwrite_file(const std::string& path, const std::string& bytes);

}  // namespace anvil::test
