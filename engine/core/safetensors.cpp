// SPDX-License-Identifier: Apache-2.0
// Reading and writing safetensors files (engine/core/safetensors.h): the header is JSON
// (nlohmann-json, private to this file), the data are raw little-endian bytes; writes go through
// a temporary file that is fsynced and renamed over the target (Note [Atomic save]).
#include "engine/core/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/core/json_reader.h"
#include "engine/core/reader_budget.h"
#include "engine/core/views.h"

namespace anvil {

// The format stores little-endian bytes and anvil copies tensor memory as is.
static_assert(std::endian::native == std::endian::little,
              "safetensors I/O assumes a little-endian host");

namespace {

// The reference implementation refuses headers above 100 MB; so do we (before allocating).
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;
constexpr std::size_t kChunkBytes = std::size_t{1} << 20;
constexpr const char* kMetadataKey = "__metadata__";

std::function<void(std::uint64_t)>& write_hook() {
  static std::function<void(std::uint64_t)> hook;
  return hook;
}

const char* st_dtype(DType t) {
  switch (t) {
    case DType::f32:
      return "F32";
    case DType::f64:
      return "F64";
    case DType::i32:
      return "I32";
    case DType::i64:
      return "I64";
    case DType::bf16:
      return "BF16";
    case DType::f16:
      return "F16";
  }
  return "?";
}

bool parse_st_dtype(const std::string& s, DType& out) {
  for (DType t : kAllDTypes)
    if (s == st_dtype(t)) {
      out = t;
      return true;
    }
  return false;
}

std::string errno_text(int err) { return std::strerror(err); }

// Closes a file descriptor on scope exit.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

// ---- writing ------------------------------------------------------------------------------

// Note [Atomic save]
// save_safetensors never writes into `path` itself. It writes "<path>.tmp.<pid>" in the same
// directory (so rename stays within one file system), fsyncs it, renames it over `path` (an
// atomic replacement on POSIX file systems) and fsyncs the directory so the rename itself is
// durable. A reader therefore sees the old file or the complete new one. A writer killed
// before the rename leaves its temporary file behind (nothing can run on SIGKILL), never a
// truncated `path`; any error the writer sees removes the temporary file before throwing.
class TempFile {
 public:
  TempFile(std::string final_path, const char* where)
      : where_(where),
        final_(std::move(final_path)),
        tmp_(final_ + ".tmp." + std::to_string(::getpid())) {
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0)
      fail(where_, final_, ": cannot create temporary file ", tmp_, ": ", errno_text(errno));
  }
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(tmp_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  void write(const void* data, std::size_t bytes) {
    const char* p = static_cast<const char*>(data);
    while (bytes > 0) {
      const std::size_t chunk = std::min(bytes, kChunkBytes);
      std::size_t done = 0;
      while (done < chunk) {
        const ssize_t n = ::write(fd_, p + done, chunk - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0)
          fail(where_, final_, ": writing ", tmp_, " failed after ", written_ + done,
               " bytes: ", n < 0 ? errno_text(errno) : std::string("no progress"));
        done += static_cast<std::size_t>(n);
      }
      p += chunk;
      bytes -= chunk;
      written_ += chunk;
      if (write_hook()) write_hook()(written_);
    }
  }

  // fsync, close, rename over the final path, fsync the directory.
  void commit() {
    if (::fsync(fd_) != 0)
      fail(where_, final_, ": fsync of ", tmp_, " failed: ", errno_text(errno));
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail(where_, final_, ": closing ", tmp_, " failed: ", errno_text(errno));
    if (::rename(tmp_.c_str(), final_.c_str()) != 0)
      fail(where_, final_, ": renaming ", tmp_, " over it failed: ", errno_text(errno));
    committed_ = true;
    const auto slash = final_.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "."
                            : slash == 0               ? "/"
                                                       : final_.substr(0, slash);
    Fd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    // A file system that cannot fsync a directory (EINVAL) gives no stronger guarantee anyway.
    if (dfd.fd >= 0 && ::fsync(dfd.fd) != 0 && errno != EINVAL)
      fail(where_, final_, ": the file is complete but fsync of its directory ", dir,
           " failed: ", errno_text(errno));
  }

 private:
  const char* where_;
  std::string final_, tmp_;
  int fd_ = -1;
  std::uint64_t written_ = 0;
  bool committed_ = false;
};

// ---- reading ------------------------------------------------------------------------------

struct Entry {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  std::uint64_t begin = 0, end = 0;
};

// A JSON value that is a non-negative integer fitting in `limit`.
bool as_uint(const JsonValue& j, std::uint64_t limit, std::uint64_t& out) {
  return j.as_uint(out) && out <= limit;
}

// Note [Safetensors read budget]
// What load_safetensors allocates besides the tensors' bytes, charged per entry to the
// reader's budget (Note [Reader memory budget]): the Entry with its shape and name, then the
// Tensor with its storage header and the name again in NamedTensors. Estimates, generous.
constexpr std::uint64_t kEntryBytes = sizeof(Entry) + 64;
constexpr std::uint64_t kTensorOverheadBytes = 256;
constexpr std::uint64_t kMetadataEntryBytes = 96;  // a std::map node with two strings

Entry parse_entry(const std::string& path, const std::string& name, const JsonValue& j) {
  const char* where = "load_safetensors";
  const std::string quoted = json_prefix(name);
  ANVIL_CHECK(j.is_object(), where, path, ": tensor ", quoted,
              " is not a JSON object: ", j.preview());
  for (const std::string& key : j.keys())
    ANVIL_CHECK(key == "dtype" || key == "shape" || key == "data_offsets", where, path, ": tensor ",
                quoted, " has an unknown field ", json_prefix(key),
                " (expected dtype, shape, data_offsets)");
  for (const char* key : {"dtype", "shape", "data_offsets"})
    ANVIL_CHECK(j.find(key) != nullptr, where, path, ": tensor ", quoted, " has no '", key, "'");
  Entry e;
  e.name = name;
  const JsonValue& dt = *j.find("dtype");
  ANVIL_CHECK(dt.is_string() && parse_st_dtype(dt.str(), e.dtype), where, path, ": tensor ", quoted,
              " has unsupported dtype ", dt.preview(),
              " (anvil reads F32, F64, I32, I64, BF16, F16)");
  const JsonValue& sh = *j.find("shape");
  ANVIL_CHECK(sh.is_array(), where, path, ": tensor ", quoted,
              ": shape is not an array: ", sh.preview());
  std::uint64_t numel = 1;
  for (const JsonValue& d : sh.items()) {
    std::uint64_t v = 0;
    ANVIL_CHECK(as_uint(d, static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()), v),
                where, path, ": tensor ", quoted, ": shape ", sh.preview(),
                " must hold non-negative integers");
    ANVIL_CHECK(!__builtin_mul_overflow(numel, v, &numel), where, path, ": tensor ", quoted,
                ": shape ", sh.preview(), " has too many elements");
    e.shape.push_back(static_cast<std::int64_t>(v));
  }
  const JsonValue& off = *j.find("data_offsets");
  ANVIL_CHECK(off.is_array() && off.size() == 2 &&
                  as_uint(off.items()[0], std::numeric_limits<std::uint64_t>::max(), e.begin) &&
                  as_uint(off.items()[1], std::numeric_limits<std::uint64_t>::max(), e.end) &&
                  e.begin <= e.end,
              where, path, ": tensor ", quoted, ": data_offsets ", off.preview(),
              " must be [begin, end] with 0 <= begin <= end");
  std::uint64_t bytes = 0;
  ANVIL_CHECK(
      !__builtin_mul_overflow(numel, static_cast<std::uint64_t>(dtype_size(e.dtype)), &bytes),
      where, path, ": tensor ", quoted, ": shape ", sh.preview(), " has too many bytes");
  ANVIL_CHECK(e.end - e.begin == bytes, where, path, ": tensor ", quoted, ": shape ",
              shape_str(e.shape), " ", st_dtype(e.dtype), " needs ", bytes,
              " bytes but data_offsets [", e.begin, ", ", e.end, "] hold ", e.end - e.begin);
  return e;
}

void read_exact(int fd, void* dst, std::uint64_t bytes, std::uint64_t offset,
                const std::string& path) {
  char* p = static_cast<char*>(dst);
  std::uint64_t done = 0;
  while (done < bytes) {
    const std::size_t want =
        static_cast<std::size_t>(std::min<std::uint64_t>(bytes - done, kChunkBytes * 64));
    const ssize_t n = ::pread(fd, p + done, want, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    ANVIL_CHECK(n > 0, "load_safetensors", path, ": reading ", bytes, " bytes at offset ", offset,
                " failed: ", n < 0 ? errno_text(errno) : std::string("unexpected end of file"));
    done += static_cast<std::uint64_t>(n);
  }
}

}  // namespace

const Tensor& SafetensorsFile::at(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return t;
  std::string names;
  for (const auto& [n, t] : tensors) names += (names.empty() ? "" : ", ") + n;
  fail("SafetensorsFile::at", "no tensor '", name, "' (the file has: ", names, ")");
}

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  const char* where = "save_safetensors";
  // Validate and lay out everything before the first byte is written.
  std::vector<Tensor> data;
  data.reserve(tensors.size());
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    auto& m = header[kMetadataKey] = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
  }
  std::set<std::string> names;
  std::uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    ANVIL_CHECK(name != kMetadataKey, where, path, ": '", kMetadataKey,
                "' is reserved, not a tensor name");
    ANVIL_CHECK(names.insert(name).second, where, path, ": duplicate tensor name '", name, "'");
    ANVIL_CHECK(t.defined(), where, path, ": tensor '", name, "' is undefined");
    Tensor c = t.device().is_cpu() ? t : raw::to_device(t, Device::cpu());
    if (!c.is_contiguous()) c = raw::contiguous(c);
    const std::uint64_t bytes = c.nbytes();
    header[name] = {{"dtype", st_dtype(c.dtype())},
                    {"shape", c.sizes()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    data.push_back(std::move(c));
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::ordered_json::exception& e) {  // e.g. a name that is not UTF-8
    fail(where, path, ": cannot encode the header: ", e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned
  const std::uint64_t n = text.size();
  unsigned char len[8];
  std::memcpy(len, &n, 8);  // little-endian host (static_assert above)

  TempFile file(path, where);
  file.write(len, 8);
  file.write(text.data(), text.size());
  for (const Tensor& t : data)
    if (t.numel() > 0) file.write(t.data_ptr(), t.nbytes());
  file.commit();
}

namespace {

// The validated header of an open file: entries sorted by offset, tiling the data section.
struct Header {
  std::vector<Entry> entries;
  std::map<std::string, std::string> metadata;
  std::uint64_t data_begin = 0;  // file offset of the data section
};

// Where the bytes come from: an open file (read with pread) or memory (parse_safetensors).
struct Source {
  std::uint64_t size = 0;
  std::function<void(void* dst, std::uint64_t bytes, std::uint64_t offset)> read;
};

Source file_source(int fd, const std::string& path) {
  const char* where = "load_safetensors";
  struct stat st {};
  ANVIL_CHECK(::fstat(fd, &st) == 0, where, path, ": cannot stat: ", errno_text(errno));
  ANVIL_CHECK(!S_ISDIR(st.st_mode), where, path, ": is a directory, not a regular file");
  ANVIL_CHECK(S_ISREG(st.st_mode), where, path, ": not a regular file (",
              S_ISFIFO(st.st_mode)  ? "a FIFO"
              : S_ISCHR(st.st_mode) ? "a character device"
                                    : "a device or socket",
              ")");
  return {static_cast<std::uint64_t>(st.st_size),
          [fd, &path](void* dst, std::uint64_t bytes, std::uint64_t offset) {
            read_exact(fd, dst, bytes, offset, path);
          }};
}

Source memory_source(const std::uint8_t* bytes, std::size_t size) {
  return {size, [bytes](void* dst, std::uint64_t n, std::uint64_t offset) {
            if (n > 0) std::memcpy(dst, bytes + offset, static_cast<std::size_t>(n));
          }};
}

Header read_header(const Source& src, const std::string& path, ReaderBudget& budget) {
  const char* where = "load_safetensors";
  const std::uint64_t file_size = src.size;
  ANVIL_CHECK(file_size >= 8, where, path, ": file is ", file_size,
              " bytes, shorter than the 8-byte header length");
  std::uint64_t n = 0;
  src.read(&n, 8, 0);  // little-endian host (static_assert above)
  ANVIL_CHECK(n <= file_size - 8, where, path, ": header length ", n,
              " is larger than the rest of the file (", file_size - 8, " bytes)");
  ANVIL_CHECK(n <= kMaxHeaderBytes, where, path, ": header length ", n, " exceeds the limit of ",
              kMaxHeaderBytes, " bytes");
  budget.charge(n, path, "the JSON header");
  std::string text(static_cast<std::size_t>(n), '\0');
  src.read(text.data(), n, 8);
  ANVIL_CHECK(!text.empty() && text[0] == '{', where, path,
              ": header does not start with '{' (not a safetensors file?)");
  // Linear in the header, duplicate keys refused at every depth (Note [Linear JSON]).
  const JsonValue json = parse_json(text, path, where, "invalid JSON header", budget,
                                    {.max_depth = 64, .max_bytes = kMaxHeaderBytes});
  ANVIL_CHECK(json.is_object(), where, path, ": header is not a JSON object");
  budget.release(n);  // the text goes when this returns; the tree stays charged until then
  text = std::string();

  Header h;
  h.data_begin = 8 + n;
  const std::uint64_t data_size = file_size - h.data_begin;
  budget.charge(bytes_for(json.size(), kEntryBytes), path, "the header's entries");
  h.entries.reserve(json.size());
  for (std::size_t i = 0; i < json.size(); ++i) {
    const std::string& key = json.keys()[i];
    const JsonValue& value = json.items()[i];
    if (key == kMetadataKey) {
      ANVIL_CHECK(value.is_object(), where, path, ": ", kMetadataKey, " is not a JSON object");
      for (std::size_t m = 0; m < value.size(); ++m) {
        const JsonValue& v = value.items()[m];
        ANVIL_CHECK(v.is_string(), where, path, ": metadata ", json_prefix(value.keys()[m]),
                    " is not a string: ", v.preview());
        budget.charge(kMetadataEntryBytes + value.keys()[m].size() + v.str().size(), path,
                      "the header's metadata");
        h.metadata.emplace(value.keys()[m], v.str());
      }
      continue;
    }
    Entry e = parse_entry(path, key, value);
    ANVIL_CHECK(e.end <= data_size, where, path, ": tensor ", json_prefix(e.name),
                ": data_offsets [", e.begin, ", ", e.end, "] lie outside the data section (",
                data_size, " bytes)");
    h.entries.push_back(std::move(e));
  }
  // The tensors must tile the data section exactly: no overlap, no hole, nothing after.
  auto& es = h.entries;
  std::stable_sort(es.begin(), es.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t covered = 0;
  for (std::size_t i = 0; i < es.size(); ++i) {
    ANVIL_CHECK(es[i].begin >= covered, where, path, ": tensor ", json_prefix(es[i].name),
                " data_offsets [", es[i].begin, ", ", es[i].end, "] overlap tensor ",
                json_prefix(es[i - 1].name), " [", es[i - 1].begin, ", ", es[i - 1].end, "]");
    ANVIL_CHECK(es[i].begin == covered, where, path, ": bytes [", covered, ", ", es[i].begin,
                ") of the data section belong to no tensor (before ", json_prefix(es[i].name), ")");
    covered = es[i].end;
  }
  ANVIL_CHECK(covered == data_size, where, path, ": data section is ", data_size,
              " bytes but the tensors cover ", covered, " (file ", file_size, " bytes, header ", n,
              ")");
  return h;
}

// O_NONBLOCK: opening a FIFO must not wait for a writer; read_header then refuses anything
// that is not a regular file (a FIFO, /dev/zero, a directory) before reading a byte.
int open_for_reading(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ANVIL_CHECK(fd >= 0, "load_safetensors", path, ": cannot open: ", errno_text(errno));
  return fd;
}

}  // namespace

namespace {

SafetensorsFile load_from(const Source& src, const std::string& path) {
  ReaderBudget budget("load_safetensors");
  Header h = read_header(src, path, budget);
  // The tensors tile the data section (read_header checked it), so their bytes are its size:
  // charged before any is allocated, so a sparse or huge file is refused here.
  budget.charge(src.size - h.data_begin, path, "the tensors' data");
  budget.charge(bytes_for(h.entries.size(), kTensorOverheadBytes), path, "the tensors");
  SafetensorsFile out;
  out.metadata = std::move(h.metadata);
  out.tensors.reserve(h.entries.size());
  for (const Entry& e : h.entries) {
    Tensor t = Tensor::empty(e.shape, e.dtype);
    if (e.end > e.begin) src.read(t.data_ptr(), e.end - e.begin, h.data_begin + e.begin);
    out.tensors.emplace_back(e.name, std::move(t));
  }
  return out;
}

}  // namespace

SafetensorsFile load_safetensors(const std::string& path) {
  Fd fd(open_for_reading(path));
  return load_from(file_source(fd.fd, path), path);
}

std::map<std::string, std::string> load_safetensors_metadata(const std::string& path) {
  Fd fd(open_for_reading(path));
  ReaderBudget budget("load_safetensors");
  return read_header(file_source(fd.fd, path), path, budget).metadata;
}

SafetensorsFile parse_safetensors(const std::uint8_t* bytes, std::size_t size,
                                  const std::string& name) {
  return load_from(memory_source(bytes, size), name);
}

namespace detail {
void set_safetensors_write_hook(std::function<void(std::uint64_t)> hook) {
  write_hook() = std::move(hook);
}
}  // namespace detail

}  // namespace anvil
