// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the CIFAR-10 batch parser (data/cifar.h): parse_cifar10 on the input
// bytes (size and label checks, then the NCHW tensor fill). anvil::Error is the expected way to
// reject an input; any other exception, a crash or a sanitizer report is a finding. Built and
// run by scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>

#include "data/cifar.h"
#include "tests/fuzz/fuzz_guard.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const anvil_fuzz::TimeGuard guard(size);  // linear time (scripts/fuzz.sh)
  try {
    const anvil::data::ImageDataset ds = anvil::data::parse_cifar10(data, size, "fuzz.bin");
    // Touch the result: the label of the last record must be what the input holds.
    const std::int64_t n = ds.labels.size(0);
    if (ds.labels.data<std::int64_t>()[n - 1] != data[(n - 1) * anvil::data::kCifarRecordBytes])
      __builtin_trap();
  } catch (const anvil::Error&) {
    // rejected with a message: the expected outcome for a malformed input
  }
  return 0;
}
