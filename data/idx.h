// SPDX-License-Identifier: Apache-2.0
#pragma once
// IDX files (the MNIST / Fashion-MNIST container) and the MNIST-format image reader.
//
// IDX layout (LeCun's MNIST page): bytes 0-1 are zero, byte 2 the element type (0x08 unsigned
// byte, 0x09 signed byte, 0x0B int16, 0x0C int32, 0x0D float32, 0x0E float64), byte 3 the number
// of dimensions n; then n big-endian uint32 sizes; then the elements, row-major, big-endian. Only
// 0x08 is read (every MNIST-family file is unsigned bytes); the other types are rejected by name.
//
// Note [Strict IDX]
// The readers trust nothing in a file before checking it against the bytes that are really
// there: the product of the declared sizes is computed with overflow checks and compared with
// the payload length BEFORE anything of that size is allocated, so a 16-byte file declaring
// 4e9 x 4e9 x 4e9 elements is an error, not a bad_alloc or a crash. A short payload (truncated
// download) and extra bytes after it are both errors, as are a wrong magic, a type other than
// 0x08 and, for MNIST, images that are not 3-D, labels that are not 1-D, counts that differ and
// labels outside [0, 10). Every message names the file and the numbers.
//
// Compression is chosen by the name, never guessed: "*.gz" is gunzipped with zlib, anything else
// is read raw. A raw-named file that starts with the gzip magic 1f 8b and a .gz-named file that
// does not are rejected, so a file is never silently read the wrong way. A gzipped file is
// inflated into a buffer that grows with what the stream really produces and stops at the size
// its IDX header declares (plus one byte, to detect extra data): a small .gz cannot make the
// reader allocate more than it decompresses (Note [Bounded gunzip] in idx.cpp).
//
// Every read is bounded by IdxOptions::max_bytes (default 1 GiB, 20x the largest MNIST-family
// file): a raw file larger than that is refused before it is read, a header declaring more is
// refused as soon as it is decompressed, and the gunzip output is checked against the limit
// while inflating, so a gzip bomb costs at most max_bytes of memory and the time to inflate
// them. Only regular files are read (a FIFO or /dev/zero is refused, data/file_bytes.h).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "data/image_dataset.h"

namespace anvil::data {

// Default IdxOptions::max_bytes: 1 GiB (train-images-idx3-ubyte of MNIST is 47 MB).
inline constexpr std::uint64_t kDefaultIdxMaxBytes = std::uint64_t{1} << 30;
// Above this (1 TiB) no limit is accepted: it keeps every size product far from overflow.
inline constexpr std::uint64_t kMaxIdxMaxBytes = std::uint64_t{1} << 40;

struct IdxOptions {
  // The most bytes of IDX data (header + payload) read from a raw file or decompressed from a
  // gzip stream; in [1, kMaxIdxMaxBytes].
  std::uint64_t max_bytes = kDefaultIdxMaxBytes;
};

// One IDX file: the element type code (always 0x08 here), the sizes and the raw elements.
struct IdxArray {
  std::uint8_t type_code = 0;
  std::vector<std::int64_t> dims;
  std::vector<std::uint8_t> data;  // row-major, dims product bytes
};

// Reads an IDX file (gunzipped when the name ends in ".gz"). Throws anvil::Error naming the path
// for a missing or unreadable file, a compression that does not match the name, corrupt or
// truncated gzip data, a file that is not a regular file, more data than options.max_bytes and
// everything parse_idx() rejects.
IdxArray read_idx(const std::string& path, const IdxOptions& options = {});

// What read_idx() does after reading the file, on bytes in memory: checks the gzip magic against
// `name`, gunzips "*.gz" and parses. Pure (no I/O); the IDX fuzz target calls it.
IdxArray decode_idx(const std::uint8_t* bytes, std::size_t size, const std::string& name,
                    const IdxOptions& options = {});

// Parses uncompressed IDX bytes; `name` is only used in messages. Pure (no I/O); the IDX fuzz
// target calls it. Throws for a short header, a bad magic, a type other than 0x08, 0 dimensions,
// a size product that overflows or exceeds options.max_bytes, and a payload shorter or longer
// than the product of the sizes.
IdxArray parse_idx(const std::uint8_t* bytes, std::size_t size, const std::string& name,
                   const IdxOptions& options = {});

// MNIST-format images + labels: images [N, 1, rows, cols] f32 in [0, 1] (byte / 255), labels
// [N] i64, num_classes = 10. The images file must be 3-D (N, rows, cols) with no zero size, the
// labels file 1-D (N) with the same N, every label < 10.
ImageDataset read_mnist(const std::string& images_path, const std::string& labels_path,
                        const IdxOptions& options = {});

// The same from already parsed arrays; the names are only used in messages.
ImageDataset mnist_from_idx(const IdxArray& images, const IdxArray& labels,
                            const std::string& images_name, const std::string& labels_name);

// A folder in the layout of the MNIST / Fashion-MNIST downloads: `<split>-images-idx3-ubyte` and
// `<split>-labels-idx1-ubyte`, each uncompressed or with ".gz" (the uncompressed one is taken when
// both exist). split: "train", or "t10k" / "test" for the test set.
ImageDataset read_mnist_dir(const std::string& dir, const std::string& split,
                            const IdxOptions& options = {});

}  // namespace anvil::data
