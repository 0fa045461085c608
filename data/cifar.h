// SPDX-License-Identifier: Apache-2.0
#pragma once
// CIFAR-10 in its binary form (cifar-10-binary.tar.gz, extracted to cifar-10-batches-bin/):
// data_batch_1.bin .. data_batch_5.bin (10,000 records each) and test_batch.bin.
//
// A record is 3073 bytes: one label byte (0..9), then the 32x32 image as three planes of 1024
// bytes, red, green, blue, each row-major (Krizhevsky's page). That is exactly NCHW for one
// image, so record n's pixel bytes become images[n] = [3, 32, 32] in order, scaled by 1/255.
// Files have no header: the record count is the size / 3073, and a size that is not a multiple
// (truncated download, a CIFAR-100 file with its 2 label bytes, the .tar.gz itself) is rejected
// with the numbers; so are an empty file, a gzip-compressed file and a label above 9, naming the
// record. read_cifar10() checks every file's size before allocating anything (Note [Strict IDX]
// in idx.h says why the readers are strict).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "data/image_dataset.h"

namespace anvil::data {

inline constexpr std::int64_t kCifarImageBytes = 3 * 32 * 32;            // 3072
inline constexpr std::int64_t kCifarRecordBytes = 1 + kCifarImageBytes;  // 3073
inline constexpr std::int64_t kCifar10Classes = 10;

// The records of the files, in order: images [N, 3, 32, 32] f32 in [0, 1], labels [N] i64,
// num_classes = 10. Throws anvil::Error naming the file for a missing file and everything
// parse_cifar10() rejects; an empty list is an error too.
ImageDataset read_cifar10(const std::vector<std::string>& batch_paths);

// One batch file's bytes in memory; `name` is only used in messages. Pure (no I/O); the CIFAR
// fuzz target calls it.
ImageDataset parse_cifar10(const std::uint8_t* bytes, std::size_t size, const std::string& name);

// split "train": dir/data_batch_1.bin .. data_batch_5.bin (50,000 images); "test":
// dir/test_batch.bin (10,000). When dir has no such files but a cifar-10-batches-bin/ folder (the
// layout the archive extracts to), the files are taken from there.
ImageDataset read_cifar10_dir(const std::string& dir, const std::string& split);

}  // namespace anvil::data
