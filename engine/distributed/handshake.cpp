// SPDX-License-Identifier: Apache-2.0
// The configuration handshake (Note [Configuration handshake] in handshake.h).
#include "engine/distributed/handshake.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace anvil::dist {
namespace {

constexpr std::size_t kSlotBytes = 64;  // 8 bytes of hash, 56 of NUL-terminated text
constexpr std::size_t kTextBytes = kSlotBytes - sizeof(std::uint64_t);
constexpr std::uint64_t kFnvPrime = 1099511628211ull;

struct Slot {
  std::uint64_t hash = 0;
  char text[kTextBytes] = {};
};
static_assert(sizeof(Slot) == kSlotBytes);

Slot make_slot(const std::string& printable, const std::string& key) {
  Slot s;
  s.hash = fnv1a64(key.data(), key.size());
  std::string text = printable.empty() ? "none" : printable;
  if (text.size() > kTextBytes - 1) text = text.substr(0, kTextBytes - 4) + "...";
  std::memcpy(s.text, text.data(), text.size());
  return s;
}

std::uint64_t mix_words(const unsigned char* p, std::size_t n, std::uint64_t h) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t w = 0;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * kFnvPrime;
  }
  return fnv1a64(p + i, n - i, h);
}

}  // namespace

std::uint64_t fnv1a64(const void* data, std::size_t n, std::uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= kFnvPrime;
  }
  return h;
}

std::uint64_t file_fingerprint(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  ANVIL_CHECK(f.good(), "file_fingerprint", "cannot read ", path);
  std::vector<unsigned char> buf(std::size_t{1} << 20);  // a multiple of 8: words stay aligned
  std::uint64_t h = kFnvOffset;
  while (f) {
    f.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(buf.size()));
    h = mix_words(buf.data(), static_cast<std::size_t>(f.gcount()), h);
  }
  ANVIL_CHECK(f.eof(), "file_fingerprint", "reading ", path, " failed");
  return h;
}

std::uint64_t tensor_fingerprint(const Tensor& t, std::uint64_t h) {
  if (!t.defined() || t.numel() == 0) return h;
  const Tensor c = t.device().is_cpu() ? t.contiguous() : t.to(Device::cpu()).contiguous();
  return mix_words(static_cast<const unsigned char*>(c.data_ptr()), c.nbytes(), h);
}

void agree_on_configuration(Communicator& comm, const std::vector<HandshakeField>& fields) {
  ANVIL_CHECK(fields.size() < static_cast<std::size_t>(kHandshakeSlots), "agree_on_configuration",
              fields.size(), " fields, at most ", kHandshakeSlots - 1);
  if (comm.size() == 1) return;
  std::string names;
  for (const auto& f : fields) names += f.name + ";";
  constexpr std::int64_t kWords = kHandshakeSlots * kSlotBytes / sizeof(std::int64_t);
  Tensor mine = Tensor::zeros({kWords}, DType::i64);
  auto* slots = static_cast<Slot*>(mine.data_ptr());
  slots[0] =
      make_slot("anvil handshake v1, " + std::to_string(fields.size()) + " fields", "v1;" + names);
  for (std::size_t i = 0; i < fields.size(); ++i)
    slots[i + 1] =
        make_slot(fields[i].value, fields[i].key.empty() ? fields[i].value : fields[i].key);
  const Tensor all = comm.all_gather(mine);
  const auto* every = static_cast<const Slot*>(all.data_ptr());
  // The same verdict on every rank: the first slot, then the lowest rank, that differs.
  for (std::size_t i = 0; i <= fields.size(); ++i) {
    for (int r = 1; r < comm.size(); ++r) {
      const Slot& a = every[i];
      const Slot& b = every[static_cast<std::size_t>(r) * kHandshakeSlots + i];
      if (a.hash == b.hash) continue;
      // Values that differ beyond the printed prefix (or only in their key) show their hashes.
      const bool same_text = std::strncmp(a.text, b.text, kTextBytes) == 0;
      const auto text = [same_text](const Slot& s) {
        std::string t(s.text, strnlen(s.text, kTextBytes));
        if (same_text) {
          char hex[32];
          std::snprintf(hex, sizeof hex, " (hash %016llx)",
                        static_cast<unsigned long long>(s.hash));
          t += hex;
        }
        return t;
      };
      const std::string name =
          i == 0 ? "the handshake (different anvil builds?)" : fields[i - 1].name;
      throw RanksDisagree(detail::str_cat("ranks disagree on ", name, ": rank 0 has ", text(a),
                                          ", rank ", r, " has ", text(b)),
                          comm.rank());
    }
  }
}

}  // namespace anvil::dist
