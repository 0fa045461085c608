// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the safetensors/checkpoint reader (engine/core/safetensors.h):
// parse_safetensors on the input bytes (header length, UTF-8 JSON header, dtypes, shapes,
// data_offsets tiling the data section), then what load_checkpoint parses from the metadata
// before touching a model: the generator texts ("anvil.rng.default", "anvil.module.*") go
// through Generator::set_state. Oracles: the tensors' bytes add up to the data section, and a
// generator text that parses round-trips. anvil::Error is the expected way to reject an input;
// any other exception, a crash or a sanitizer report is a finding. Built and run by
// scripts/fuzz.sh. (The model/optimizer half of load_checkpoint is covered by
// tests/test_checkpoint_transactional.cpp and the malformed corpus, which need all of libanvil.)
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "engine/core/random.h"
#include "engine/core/safetensors.h"
#include "tests/fuzz/fuzz_guard.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const anvil_fuzz::TimeGuard guard(size);  // linear time (scripts/fuzz.sh)
  try {
    const anvil::SafetensorsFile f = anvil::parse_safetensors(data, size, "fuzz.safetensors");
    std::uint64_t header = 0;
    std::memcpy(&header, data, 8);
    std::uint64_t total = 0;
    for (const auto& [name, t] : f.tensors) total += t.nbytes();
    if (total != size - 8 - header) __builtin_trap();  // the tensors tile the data section
    for (const auto& [key, text] : f.metadata) {
      if (key != "anvil.rng.default" && key.rfind("anvil.module.", 0) != 0) continue;
      try {
        anvil::Generator g;
        g.set_state(text);
        anvil::Generator h;
        h.set_state(g.state());
        if (g.next() != h.next()) __builtin_trap();
      } catch (const anvil::Error&) {}
    }
  } catch (const anvil::Error&) {
    // rejected with a message: the expected outcome for a malformed input
  }
  return 0;
}
