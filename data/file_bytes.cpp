// SPDX-License-Identifier: Apache-2.0
// Bounded whole-file reads (file_bytes.h): open without blocking, fstat, refuse what is not a
// regular file or is larger than the limit, then read exactly the size fstat reported.
#include "data/file_bytes.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "engine/core/error.h"

namespace anvil::data::detail {
namespace {

// Note [Bounded file reads]
// A reader that reads "until EOF" can be made to read forever: /dev/zero, /dev/urandom or a FIFO
// fed by `yes` never end, and opening a FIFO without a writer blocks for ever. So the file is
// opened with O_NONBLOCK (a FIFO opens at once), fstat'ed on that descriptor (no race with a
// rename between a stat and the open), and anything but a regular file is refused by its kind.
// A regular file is read up to the size fstat gave, and must not be larger than the caller's
// limit, which is checked before any byte is allocated or read. Reading stops at that size even
// if the file grows meanwhile; a file that shrinks is an error ("changed while reading?").
const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

template <typename Buffer>
Buffer read_whole(const std::string& path, const char* where, ReaderBudget& budget,
                  std::uint64_t max_bytes) {
  Fd f{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
  if (f.fd < 0) {
    const int err = errno;
    if (err == ENOENT) fail(where, path, ": no such file");
    fail(where, path, ": cannot open: ", std::strerror(err));
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) fail(where, path, ": cannot stat: ", std::strerror(errno));
  if (S_ISDIR(st.st_mode)) fail(where, path, ": is a directory, not a file");
  if (!S_ISREG(st.st_mode))
    fail(where, path, ": is not a regular file (", kind_of(st.st_mode),
         "); dataset files are read only from regular files");
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size > max_bytes)
    fail(where, path, ": is ", size, " bytes, more than this reader's limit of ", max_bytes,
         " bytes");
  budget.charge(size, path, "the file's bytes");  // a sparse file is refused here
  Buffer out(static_cast<std::size_t>(size), 0);
  std::uint64_t done = 0;
  while (done < size) {
    const ssize_t n =
        ::read(f.fd, reinterpret_cast<char*>(out.data()) + done,
               static_cast<std::size_t>(std::min<std::uint64_t>(size - done, 1 << 24)));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(where, path, ": error while reading: ", std::strerror(errno));
    if (n == 0)
      fail(where, path, ": read ", done, " of its ", size, " bytes (changed while reading?)");
    done += static_cast<std::uint64_t>(n);
  }
  return out;
}

}  // namespace

std::vector<std::uint8_t> read_file_bytes(const std::string& path, const char* where,
                                          ReaderBudget& budget, std::uint64_t max_bytes) {
  return read_whole<std::vector<std::uint8_t>>(path, where, budget, max_bytes);
}

std::string read_file_text(const std::string& path, const char* where, ReaderBudget& budget,
                           std::uint64_t max_bytes) {
  return read_whole<std::string>(path, where, budget, max_bytes);
}

}  // namespace anvil::data::detail
