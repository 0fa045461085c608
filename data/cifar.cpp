// SPDX-License-Identifier: Apache-2.0
// CIFAR-10 binary batches: size and label checks, then the records copied into NCHW tensors
// (data/cifar.h has the format). Files are sized first and the tensors allocated once for all of
// them, within the reader's budget (Note [Reader memory budget]: a sparse file of a few GB is
// refused by its size); each file is then read whole (30 MB) and copied in.
#include "data/cifar.h"

#include <array>
#include <filesystem>

namespace anvil::data {
namespace fs = std::filesystem;

namespace {

// Checks a batch's bytes; returns its number of records.
std::int64_t check_cifar10_size(std::uint64_t size, const std::string& name, const char* where) {
  if (size == 0)
    fail(where, name, ": is empty (0 bytes; a CIFAR-10 batch holds records of ", kCifarRecordBytes,
         " bytes)");
  if (size % kCifarRecordBytes != 0)
    fail(where, name, ": has ", size, " bytes, not a multiple of the ", kCifarRecordBytes,
         "-byte CIFAR-10 record (1 label + ", kCifarImageBytes,
         " pixels): ", size / kCifarRecordBytes, " whole records and ", size % kCifarRecordBytes,
         " bytes left over",
         size % (kCifarRecordBytes + 1) == 0 ? " (a multiple of 3074: a CIFAR-100 file?)"
                                             : " (truncated?)");
  return static_cast<std::int64_t>(size / kCifarRecordBytes);
}

std::int64_t check_cifar10(const std::uint8_t* bytes, std::size_t size, const std::string& name,
                           const char* where) {
  if (size >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b)
    fail(where, name,
         ": is gzip-compressed (starts with 1f 8b); CIFAR-10 batches are read "
         "uncompressed (extract cifar-10-binary.tar.gz and pass data_batch_N.bin)");
  const std::int64_t n = check_cifar10_size(size, name, where);
  for (std::int64_t r = 0; r < n; ++r) {
    const std::uint8_t label = bytes[r * kCifarRecordBytes];
    if (label >= kCifar10Classes)
      fail(where, name, ": record ", r, " (byte offset ", r * kCifarRecordBytes, ") has label ",
           int{label}, ", outside [0, ", kCifar10Classes, ")");
  }
  return n;
}

// Copies n checked records into images [n, 3, 32, 32] and labels [n] (raw pointers at the first
// record to fill).
void copy_records(const std::uint8_t* bytes, std::int64_t n, float* images, std::int64_t* labels) {
  std::array<float, 256> scale;
  for (int b = 0; b < 256; ++b) scale[b] = static_cast<float>(b) / 255.0f;
  for (std::int64_t r = 0; r < n; ++r) {
    const std::uint8_t* rec = bytes + r * kCifarRecordBytes;
    labels[r] = rec[0];
    float* x = images + r * kCifarImageBytes;  // [3, 32, 32]: R plane, G plane, B plane
    for (std::int64_t i = 0; i < kCifarImageBytes; ++i) x[i] = scale[rec[1 + i]];
  }
}

// Charges the tensor memory of `file`'s n records to the reader's budget, before the tensors are
// allocated: f32 images (4 bytes per pixel byte) and i64 labels.
void charge_records(std::int64_t n, ReaderBudget& budget, const std::string& file) {
  const auto records = static_cast<std::uint64_t>(n);
  budget.charge(bytes_for(records, kCifarImageBytes * sizeof(float)), file, "its f32 images");
  budget.charge(bytes_for(records, sizeof(std::int64_t)), file, "its labels");
}

ImageDataset allocate(std::int64_t n) {
  ImageDataset ds;
  ds.num_classes = kCifar10Classes;
  ds.images = Tensor::empty({n, 3, 32, 32}, DType::f32);
  ds.labels = Tensor::empty({n}, DType::i64);
  return ds;
}

ImageDataset read_cifar10_impl(const std::vector<std::string>& paths, const char* where) {
  ANVIL_CHECK(!paths.empty(), where, "no batch files given");
  ReaderBudget budget(where);
  // Sizes first: a truncated last batch fails before 150 MB are allocated and filled.
  std::vector<std::int64_t> counts;
  std::int64_t total = 0;
  for (const std::string& path : paths) {
    std::error_code ec;
    const auto status = fs::status(path, ec);
    if (!fs::exists(status)) fail(where, path, ": no such file");
    if (fs::is_directory(status)) fail(where, path, ": is a directory, not a file");
    if (!fs::is_regular_file(status)) fail(where, path, ": is not a regular file");
    const std::uintmax_t size = fs::file_size(path, ec);
    if (ec) fail(where, path, ": cannot read its size: ", ec.message());
    counts.push_back(check_cifar10_size(size, path, where));
    charge_records(counts.back(), budget, path);
    total += counts.back();
  }
  ImageDataset ds = allocate(total);
  float* x = ds.images.data<float>();
  std::int64_t* y = ds.labels.data<std::int64_t>();
  std::int64_t done = 0;
  for (std::size_t f = 0; f < paths.size(); ++f) {
    // One file at a time: its buffer is released before the next is read.
    const std::vector<std::uint8_t> bytes = detail::read_file_bytes(paths[f], where, budget);
    const std::int64_t n = check_cifar10(bytes.data(), bytes.size(), paths[f], where);
    ANVIL_CHECK(n == counts[f], where, paths[f], ": changed while reading (", counts[f],
                " records when sized, ", n, " when read)");
    copy_records(bytes.data(), n, x + done * kCifarImageBytes, y + done);
    done += n;
    ds.source += (f ? ", " : "") + paths[f];
    budget.release(bytes.size());
  }
  return ds;
}

}  // namespace

ImageDataset parse_cifar10(const std::uint8_t* bytes, std::size_t size, const std::string& name) {
  const char* where = "parse_cifar10";
  const std::int64_t n = check_cifar10(bytes, size, name, where);
  ReaderBudget budget(where);
  charge_records(n, budget, name);
  ImageDataset ds = allocate(n);
  copy_records(bytes, n, ds.images.data<float>(), ds.labels.data<std::int64_t>());
  ds.source = name;
  return ds;
}

ImageDataset read_cifar10(const std::vector<std::string>& batch_paths) {
  return read_cifar10_impl(batch_paths, "read_cifar10");
}

ImageDataset read_cifar10_dir(const std::string& dir, const std::string& split) {
  const char* where = "read_cifar10_dir";
  std::vector<std::string> names;
  if (split == "train") {
    for (int i = 1; i <= 5; ++i) names.push_back("data_batch_" + std::to_string(i) + ".bin");
  } else if (split == "test") {
    names.push_back("test_batch.bin");
  } else {
    fail(where, "unknown split '", split, "' (expected \"train\" or \"test\")");
  }
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail(where, dir, ": no such directory");
  fs::path base(dir);
  if (!fs::exists(base / names[0], ec) && fs::is_directory(base / "cifar-10-batches-bin", ec))
    base /= "cifar-10-batches-bin";
  std::vector<std::string> paths;
  for (const std::string& name : names) {
    const fs::path p = base / name;
    if (!fs::exists(p, ec))
      fail(where, dir, ": has no ", name, " (looked for ", p.string(), "; the ", split,
           " split of CIFAR-10 is ",
           names.size() == 1 ? names[0] : "data_batch_1.bin .. data_batch_5.bin", ")");
    paths.push_back(p.string());
  }
  return read_cifar10_impl(paths, where);
}

}  // namespace anvil::data
