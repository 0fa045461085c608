// SPDX-License-Identifier: Apache-2.0
#pragma once
// Whole-file reads for the dataset readers (IDX, CIFAR-10, IMDB, PTB), bounded: only regular
// files are read, and a file larger than the caller's limit or its reader's memory budget is
// refused before anything is read (Note [Bounded file reads] in file_bytes.cpp, Note [Reader
// memory budget] in engine/core/reader_budget.h).
#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/reader_budget.h"

namespace anvil::data::detail {

inline constexpr std::uint64_t kNoFileLimit = ~std::uint64_t{0};

// The whole file. Throws anvil::Error "<where>: <path>: <problem>" for a missing file ("no such
// file"), a directory ("is a directory, not a file"), anything else that is not a regular file
// ("is not a regular file (a FIFO)", a character or block device, a socket), a file larger than
// max_bytes, a file whose size does not fit in `budget` (charged with it before the buffer is
// allocated; the caller releases it when it frees the buffer), and open or read errors. Never
// blocks on a FIFO.
std::vector<std::uint8_t> read_file_bytes(const std::string& path, const char* where,
                                          ReaderBudget& budget,
                                          std::uint64_t max_bytes = kNoFileLimit);
// The same as text (the bytes unchanged).
std::string read_file_text(const std::string& path, const char* where, ReaderBudget& budget,
                           std::uint64_t max_bytes = kNoFileLimit);

}  // namespace anvil::data::detail
