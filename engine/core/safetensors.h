// SPDX-License-Identifier: Apache-2.0
#pragma once
// The safetensors file format (https://github.com/huggingface/safetensors), read and written by
// anvil itself: an 8-byte little-endian u64 N, N bytes of UTF-8 JSON header
//   {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, ...,
//    "__metadata__": {"key": "value", ...}}
// padded with spaces so that the data starts at a multiple of 8, then the raw little-endian
// tensor bytes; data_offsets are [begin, end) relative to the start of the data section.
// anvil writes F32, F64, I32 and I64 (its four dtypes). docs/checkpoints.md has the details.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/tensor.h"

namespace anvil {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

struct SafetensorsFile {
  NamedTensors tensors;                         // in the order of their data in the file
  std::map<std::string, std::string> metadata;  // the header's "__metadata__" (may be empty)
  // The tensor called `name`; throws naming the file's tensors when there is none.
  const Tensor& at(const std::string& name) const;
};

// Writes `tensors` (CPU or GPU, any strides; stored contiguous, in this order) and `metadata`
// to `path`, atomically: the bytes go to "<path>.tmp.<pid>" in the same directory, which is
// flushed to disk (fsync) and then renamed over `path` (and the directory fsynced), so `path`
// holds either its old content or the complete new file, also when the process is killed or
// the machine loses power. On an error the temporary file is removed and anvil::Error thrown.
// Names must be unique and not "__metadata__"; every tensor must be defined.
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Reads a safetensors file into new CPU tensors. Validates strictly and throws anvil::Error
// naming the file and the problem: a file shorter than 8 bytes, a header length larger than
// the file, a header that is not a JSON object or has a duplicate key, an unsupported dtype,
// a shape that does not match its data_offsets, offsets outside the data section, overlapping
// or leaving holes, metadata that is not string -> string.
SafetensorsFile load_safetensors(const std::string& path);
// The header's "__metadata__" alone, with the same validation, without reading the data.
std::map<std::string, std::string> load_safetensors_metadata(const std::string& path);
// load_safetensors on bytes in memory (`name` only for messages, which start
// "load_safetensors: <name>: "). Pure (no I/O); the safetensors fuzz target calls it.
SafetensorsFile parse_safetensors(const std::uint8_t* bytes, std::size_t size,
                                  const std::string& name);

namespace detail {
// Test-only hook (tests/test_checkpoint.cpp): when set, save_safetensors calls it after each
// chunk (at most 1 MiB) of the temporary file is written, with the bytes written so far, so a
// test can kill the writer at a known point. Not thread-safe; leave it empty in real code.
void set_safetensors_write_hook(std::function<void(std::uint64_t bytes_written)> hook);
}  // namespace detail

}  // namespace anvil
