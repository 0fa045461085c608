// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the IDX reader (data/idx.h): every input is decoded as a raw file and as a
// ".gz" file (decode_idx: gzip magic check, bounded gunzip, header and payload checks); what
// parses as a 3-D or 1-D array also goes through mnist_from_idx with a matching partner array,
// so the MNIST checks (dimensions, counts, labels < 10) and the tensor fill run too.
// anvil::Error is the expected way to reject an input; any other exception, a crash or a
// sanitizer report is a finding. Built and run by scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>

#include "data/idx.h"

namespace {

void try_mnist(const anvil::data::IdxArray& a) {
  using anvil::data::IdxArray;
  if (a.dims.size() == 3) {
    // Labels 0..9 cycling, one per image (capped so a huge count does not dominate the run).
    if (a.dims[0] > 100000) return;
    IdxArray labels{0x08, {a.dims[0]}, {}};
    for (std::int64_t i = 0; i < a.dims[0]; ++i)
      labels.data.push_back(static_cast<std::uint8_t>(i % 10));
    (void)anvil::data::mnist_from_idx(a, labels, "fuzz-images", "fuzz-labels");
  } else if (a.dims.size() == 1) {
    if (a.dims[0] > 100000) return;
    IdxArray images{0x08, {a.dims[0], 2, 2}, std::vector<std::uint8_t>(a.data.size() * 4, 7)};
    (void)anvil::data::mnist_from_idx(images, a, "fuzz-images", "fuzz-labels");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  for (const char* name : {"fuzz-idx3-ubyte", "fuzz-idx3-ubyte.gz"}) {
    try {
      const anvil::data::IdxArray a = anvil::data::decode_idx(data, size, name);
      try_mnist(a);
    } catch (const anvil::Error&) {
      // rejected with a message: the expected outcome for a malformed input
    }
  }
  return 0;
}
