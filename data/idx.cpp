// SPDX-License-Identifier: Apache-2.0
// IDX files: the header and payload checks (Note [Strict IDX] in idx.h), the bounded gunzip
// (Note [Bounded gunzip]) and the MNIST-format image reader on top. Also the file reading shared
// by the dataset readers (detail::read_file_bytes).
#include "data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace anvil::data {
namespace fs = std::filesystem;

namespace {

constexpr std::uint8_t kIdxUnsignedByte = 0x08;

// The checked limit of `options` (in [1, kMaxIdxMaxBytes]).
std::uint64_t max_bytes_of(const IdxOptions& options, const char* where) {
  ANVIL_CHECK(options.max_bytes >= 1 && options.max_bytes <= kMaxIdxMaxBytes, where,
              "IdxOptions::max_bytes must be in [1, ", kMaxIdxMaxBytes, "], got ",
              options.max_bytes);
  return options.max_bytes;
}

const char* idx_type_name(std::uint8_t t) {
  switch (t) {
    case 0x08:
      return "unsigned byte";
    case 0x09:
      return "signed byte";
    case 0x0B:
      return "int16";
    case 0x0C:
      return "int32";
    case 0x0D:
      return "float32";
    case 0x0E:
      return "float64";
    default:
      return nullptr;
  }
}

constexpr const char* kHexDigits = "0123456789abcdef";

// "0x0d"
std::string hex_byte(std::uint8_t b) {
  std::string s = "0x";
  s += kHexDigits[b >> 4];
  s += kHexDigits[b & 15];
  return s;
}

// "1f 8b 08 00"
std::string hex_bytes(const std::uint8_t* b, std::size_t n) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) {
    if (i) s += ' ';
    s += kHexDigits[b[i] >> 4];
    s += kHexDigits[b[i] & 15];
  }
  return s;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool has_gzip_magic(const std::uint8_t* b, std::size_t n) {
  return n >= 2 && b[0] == 0x1f && b[1] == 0x8b;
}

std::uint32_t read_be32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         p[3];
}

// "60000 x 28 x 28"
std::string dims_text(const std::vector<std::int64_t>& dims) {
  std::ostringstream os;
  for (std::size_t i = 0; i < dims.size(); ++i) os << (i ? " x " : "") << dims[i];
  return os.str();
}

struct IdxHeader {
  std::uint8_t type = 0;
  std::vector<std::int64_t> dims;
  std::size_t header_bytes = 0;  // 4 + 4 * ndims
  std::uint64_t payload_bytes = 0;
};

// Number of header bytes the first 4 bytes announce (4 + 4 * ndims).
std::size_t idx_header_length(const std::uint8_t* b) { return 4 + 4 * std::size_t{b[3]}; }

// Checks the magic, the type and the sizes; needs the whole header in [b, b + size).
// `has` is how the message names what the payload was measured in ("file has" or, after gunzip,
// "decompressed data has"); the payload length is checked by the caller.
IdxHeader parse_idx_header(const std::uint8_t* b, std::size_t size, const std::string& name,
                           const char* where, std::uint64_t max_bytes) {
  if (size == 0) fail(where, name, ": is empty (0 bytes)");
  if (size < 4)
    fail(where, name, ": is too short for an IDX header (", size,
         " bytes; the magic number alone is 4)");
  if (b[0] != 0 || b[1] != 0)
    fail(
        where, name, ": bad magic number ", hex_bytes(b, 4),
        " (an IDX file starts with two zero bytes, the element type and the number of dimensions)");
  IdxHeader h;
  h.type = b[2];
  if (h.type != kIdxUnsignedByte) {
    if (const char* type = idx_type_name(h.type))
      fail(where, name, ": element type ", hex_byte(h.type), " (", type,
           ") is not supported: only 0x08 (unsigned byte) is read");
    fail(where, name, ": bad magic number ", hex_bytes(b, 4), ": unknown element type ",
         hex_byte(h.type), " (IDX types are 0x08, 0x09 and 0x0b to 0x0e)");
  }
  const std::size_t ndims = b[3];
  if (ndims == 0) fail(where, name, ": declares 0 dimensions (magic number ", hex_bytes(b, 4), ")");
  h.header_bytes = idx_header_length(b);
  if (size < h.header_bytes)
    fail(where, name, ": is truncated in its header: declares ", ndims, " dimensions (a ",
         h.header_bytes, "-byte header), file has ", size, " bytes");
  std::uint64_t product = 1;
  bool overflow = false;
  h.dims.resize(ndims);
  for (std::size_t d = 0; d < ndims; ++d) {
    const std::uint32_t n = read_be32(b + 4 + 4 * d);
    h.dims[d] = n;
    if (!overflow && __builtin_mul_overflow(product, std::uint64_t{n}, &product)) overflow = true;
  }
  if (overflow)
    fail(where, name, ": declares ", dims_text(h.dims),
         " elements: the product overflows 64 bits (corrupt header?)");
  if (product > max_bytes || h.header_bytes + product > max_bytes)
    fail(where, name, ": declares ", dims_text(h.dims), " = ", product,
         " bytes of data, more than the limit of ", max_bytes,
         " bytes (IdxOptions::max_bytes; corrupt header?)");
  h.payload_bytes = product;
  return h;
}

IdxArray parse_idx_impl(const std::uint8_t* bytes, std::size_t size, const std::string& name,
                        const char* where, const char* has, std::uint64_t max_bytes,
                        ReaderBudget& budget) {
  IdxHeader h = parse_idx_header(bytes, size, name, where, max_bytes);
  const std::uint64_t have = size - h.header_bytes;
  if (have < h.payload_bytes)
    fail(where, name, ": declares ", dims_text(h.dims), " = ", h.payload_bytes, " bytes of data, ",
         has, " ", have, " (truncated)");
  if (have > h.payload_bytes)
    fail(where, name, ": declares ", dims_text(h.dims), " = ", h.payload_bytes, " bytes of data, ",
         has, " ", have, " (", have - h.payload_bytes, " bytes after the data)");
  budget.charge(h.payload_bytes, name, "the IDX payload");  // the copy below
  IdxArray out;
  out.type_code = h.type;
  out.dims = std::move(h.dims);
  out.data.assign(bytes + h.header_bytes, bytes + size);
  return out;
}

// Note [Bounded gunzip]
// The uncompressed size of a gzip stream is only known by inflating it (the ISIZE trailer is the
// size mod 2^32 and may lie), so the output buffer starts at 64 KiB and doubles as the stream
// fills it: memory stays within twice what the data really decompresses to. As soon as the IDX
// header is out, it is checked (parse_idx_header) and the buffer is capped at header + declared
// payload + 1 byte: a stream that fills that last byte holds more than it declares and is
// rejected without inflating the rest (a "zip bomb" behind a small header costs nothing). A
// header that declares more than IdxOptions::max_bytes is rejected as soon as it is out, and
// until then (and whatever the header says) the output may never pass max_bytes: the check runs
// on every inflate call, so a bomb is stopped after at most max_bytes + 1 bytes. Several
// concatenated gzip members are one stream (as gzip -d and Python read them); anything else after
// the last member is corrupt data.
std::vector<std::uint8_t> gunzip_idx(const std::uint8_t* bytes, std::size_t size,
                                     const std::string& name, const char* where,
                                     std::uint64_t max_bytes, ReaderBudget& budget) {
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK)  // 16 +: gzip wrapper only
    fail(where, name, ": zlib inflateInit2 failed");
  struct End {
    z_stream* zs;
    ~End() { inflateEnd(zs); }
  } end{&zs};

  std::vector<std::uint8_t> out;
  std::size_t produced = 0;
  // max_bytes + 1 until the header is known, then header + payload + 1 (<= max_bytes + 1).
  std::size_t limit = static_cast<std::size_t>(max_bytes) + 1;
  bool header_known = false;
  IdxHeader header;
  const auto fail_extra = [&] {
    if (!header_known)
      fail(where, name, ": decompresses to more than the limit of ", max_bytes,
           " bytes (IdxOptions::max_bytes) before its IDX header ends");
    fail(where, name, ": declares ", dims_text(header.dims), " = ", header.payload_bytes,
         " bytes of data, the gzip stream holds more (extra data after the payload)");
  };
  const std::uint8_t* in = bytes;
  std::size_t in_left = size;
  for (;;) {
    if (produced == out.size()) {
      if (produced >= limit) fail_extra();
      std::size_t grow = std::max<std::size_t>(65536, out.size());
      grow = std::min(grow, limit - produced);
      budget.charge(grow, name, "the gunzipped data");  // before it is allocated
      out.reserve(produced + grow);                     // exactly: the capacity is what was charged
      out.resize(produced + grow);
    }
    if (zs.avail_in == 0 && in_left > 0) {
      const std::size_t n = std::min<std::size_t>(in_left, UINT_MAX);
      zs.next_in = const_cast<Bytef*>(in);
      zs.avail_in = static_cast<uInt>(n);
      in += n;
      in_left -= n;
    }
    const std::size_t room = std::min<std::size_t>(out.size() - produced, UINT_MAX);
    zs.next_out = out.data() + produced;
    zs.avail_out = static_cast<uInt>(room);
    const int ret = inflate(&zs, Z_NO_FLUSH);
    produced += room - zs.avail_out;
    if (produced >= limit) fail_extra();  // checked on every call: never past max_bytes + 1
    if (!header_known && produced >= 4 && produced >= idx_header_length(out.data())) {
      header = parse_idx_header(out.data(), produced, name, where, max_bytes);
      limit = header.header_bytes + header.payload_bytes + 1;
      header_known = true;
      if (produced >= limit) fail_extra();
      if (out.size() > limit) out.resize(limit);
    }
    if (ret == Z_STREAM_END) {
      if (zs.avail_in == 0 && in_left == 0) break;
      // Another gzip member follows (inflate checks its magic and reports garbage as corrupt).
      if (inflateReset(&zs) != Z_OK) fail(where, name, ": zlib inflateReset failed");
      continue;
    }
    if (ret == Z_OK) continue;
    if (ret == Z_BUF_ERROR && zs.avail_out == 0) continue;  // no room: grows at the top
    if (ret == Z_BUF_ERROR)  // room but no progress: the input is used up mid-stream
      fail(where, name, ": truncated gzip data (the stream ends after ", produced,
           " decompressed bytes, before its end marker)");
    if (ret == Z_MEM_ERROR) fail(where, name, ": out of memory while gunzipping");
    fail(where, name, ": corrupt gzip data (", zs.msg ? zs.msg : "inflate error", ", after ",
         produced, " decompressed bytes)");
  }
  out.resize(produced);
  return out;
}

IdxArray decode_idx_impl(const std::uint8_t* bytes, std::size_t size, const std::string& name,
                         const char* where, std::uint64_t max_bytes, ReaderBudget& budget) {
  const bool gz_name = ends_with(name, ".gz");
  const bool gz_data = has_gzip_magic(bytes, size);
  if (size == 0) fail(where, name, ": is empty (0 bytes)");
  if (gz_name && !gz_data)
    fail(where, name, ": is not gzip-compressed (it starts with ",
         hex_bytes(bytes, std::min<std::size_t>(size, 4)),
         ", not the gzip magic 1f 8b); a name ending in .gz must hold gzip data");
  if (!gz_name && gz_data)
    fail(where, name, ": is gzip-compressed (starts with 1f 8b); its name must end in .gz");
  if (!gz_name) return parse_idx_impl(bytes, size, name, where, "file has", max_bytes, budget);
  const std::vector<std::uint8_t> raw = gunzip_idx(bytes, size, name, where, max_bytes, budget);
  IdxArray out =
      parse_idx_impl(raw.data(), raw.size(), name, where, "gunzipped data has", max_bytes, budget);
  budget.release(raw.capacity());  // freed on return
  return out;
}

IdxArray read_idx_impl(const std::string& path, const char* where, std::uint64_t max_bytes,
                       ReaderBudget& budget) {
  // A compressed file is never larger than max_bytes either (gzip adds 18 bytes + 5 per 64 KiB
  // block to incompressible data, far below the 1 KiB IDX header that max_bytes must hold).
  const std::vector<std::uint8_t> bytes = detail::read_file_bytes(path, where, budget, max_bytes);
  IdxArray out = decode_idx_impl(bytes.data(), bytes.size(), path, where, max_bytes, budget);
  budget.release(bytes.size());  // freed on return
  return out;
}

void check_consistent(const IdxArray& a, const std::string& name, const char* where) {
  ANVIL_CHECK(a.type_code == kIdxUnsignedByte, where, name, ": element type ",
              hex_byte(a.type_code), " is not supported: only 0x08 (unsigned byte) is read");
  std::uint64_t product = 1;
  for (const std::int64_t d : a.dims) {
    ANVIL_CHECK(d >= 0 && !__builtin_mul_overflow(product, static_cast<std::uint64_t>(d), &product),
                where, name, ": bad sizes ", dims_text(a.dims));
  }
  ANVIL_CHECK(product == a.data.size(), where, name, ": sizes ", dims_text(a.dims), " need ",
              product, " bytes, the array holds ", a.data.size());
}

ImageDataset mnist_from_idx_impl(const IdxArray& images, const IdxArray& labels,
                                 const std::string& images_name, const std::string& labels_name,
                                 const char* where, ReaderBudget& budget) {
  check_consistent(images, images_name, where);
  check_consistent(labels, labels_name, where);
  if (images.dims.size() != 3)
    fail(where, images_name, ": images must be 3-D (count x rows x cols), the file declares ",
         images.dims.size(), " dimension", images.dims.size() == 1 ? "" : "s", " [",
         dims_text(images.dims), "]", images.dims.size() == 1 ? " (is it a labels file?)" : "");
  if (labels.dims.size() != 1)
    fail(where, labels_name, ": labels must be 1-D (count), the file declares ", labels.dims.size(),
         " dimensions [", dims_text(labels.dims), "]",
         labels.dims.size() == 3 ? " (is it an images file?)" : "");
  const std::int64_t n = images.dims[0], rows = images.dims[1], cols = images.dims[2];
  if (n == 0) fail(where, images_name, ": holds no images (", dims_text(images.dims), ")");
  if (rows == 0 || cols == 0)
    fail(where, images_name, ": holds empty images of ", rows, " x ", cols, " pixels");
  if (labels.dims[0] != n)
    fail(where, images_name, " holds ", n, " images but ", labels_name, " holds ", labels.dims[0],
         " labels");
  constexpr std::int64_t kClasses = 10;
  for (std::size_t i = 0; i < labels.data.size(); ++i)
    if (labels.data[i] >= kClasses)
      fail(where, labels_name, ": label ", int{labels.data[i]}, " at index ", i, " is outside [0, ",
           kClasses, ")");

  // 4 bytes per pixel byte: a 1 GB array within IdxOptions::max_bytes would need 4 GB more.
  budget.charge(bytes_for(images.data.size(), sizeof(float)), images_name, "the f32 images");
  budget.charge(bytes_for(labels.data.size(), sizeof(std::int64_t)), labels_name, "the labels");
  ImageDataset ds;
  ds.num_classes = kClasses;
  ds.images = Tensor::empty({n, 1, rows, cols}, DType::f32);  // [N, 1, H, W]
  ds.labels = Tensor::empty({n}, DType::i64);                 // [N]
  std::array<float, 256> scale;
  for (int b = 0; b < 256; ++b) scale[b] = static_cast<float>(b) / 255.0f;
  float* x = ds.images.data<float>();
  for (std::size_t i = 0; i < images.data.size(); ++i) x[i] = scale[images.data[i]];
  std::int64_t* y = ds.labels.data<std::int64_t>();
  for (std::size_t i = 0; i < labels.data.size(); ++i) y[i] = labels.data[i];
  ds.source = images_name + ", " + labels_name;
  return ds;
}

}  // namespace

IdxArray parse_idx(const std::uint8_t* bytes, std::size_t size, const std::string& name,
                   const IdxOptions& options) {
  const char* where = "parse_idx";
  ReaderBudget budget(where);
  return parse_idx_impl(bytes, size, name, where, "file has", max_bytes_of(options, where), budget);
}

IdxArray decode_idx(const std::uint8_t* bytes, std::size_t size, const std::string& name,
                    const IdxOptions& options) {
  const char* where = "decode_idx";
  ReaderBudget budget(where);
  return decode_idx_impl(bytes, size, name, where, max_bytes_of(options, where), budget);
}

IdxArray read_idx(const std::string& path, const IdxOptions& options) {
  const char* where = "read_idx";
  ReaderBudget budget(where);
  return read_idx_impl(path, where, max_bytes_of(options, where), budget);
}

ImageDataset mnist_from_idx(const IdxArray& images, const IdxArray& labels,
                            const std::string& images_name, const std::string& labels_name) {
  ReaderBudget budget("mnist_from_idx");
  return mnist_from_idx_impl(images, labels, images_name, labels_name, "mnist_from_idx", budget);
}

ImageDataset read_mnist(const std::string& images_path, const std::string& labels_path,
                        const IdxOptions& options) {
  const char* where = "read_mnist";
  const std::uint64_t max_bytes = max_bytes_of(options, where);
  ReaderBudget budget(where);
  const IdxArray labels = read_idx_impl(labels_path, where, max_bytes, budget);
  const IdxArray images = read_idx_impl(images_path, where, max_bytes, budget);
  return mnist_from_idx_impl(images, labels, images_path, labels_path, where, budget);
}

ImageDataset read_mnist_dir(const std::string& dir, const std::string& split,
                            const IdxOptions& options) {
  const char* where = "read_mnist_dir";
  const std::uint64_t max_bytes = max_bytes_of(options, where);
  std::string prefix;
  if (split == "train")
    prefix = "train";
  else if (split == "t10k" || split == "test")
    prefix = "t10k";
  else
    fail(where, "unknown split '", split, "' (expected \"train\", \"t10k\" or \"test\")");
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail(where, dir, ": no such directory");
  const auto pick = [&](const std::string& base) {
    // raw and gz are not const, so that returning them moves them.
    std::string raw = (fs::path(dir) / base).string();
    if (fs::exists(raw, ec)) return raw;
    std::string gz = raw + ".gz";
    if (fs::exists(gz, ec)) return gz;
    fail(where, dir, ": has neither ", base, " nor ", base, ".gz (the ", split,
         " split of an MNIST-format dataset)");
  };
  const std::string labels = pick(prefix + "-labels-idx1-ubyte");
  const std::string images = pick(prefix + "-images-idx3-ubyte");
  ReaderBudget budget(where);
  const IdxArray l = read_idx_impl(labels, where, max_bytes, budget);
  const IdxArray i = read_idx_impl(images, where, max_bytes, budget);
  return mnist_from_idx_impl(i, l, images, labels, where, budget);
}

}  // namespace anvil::data
