// SPDX-License-Identifier: Apache-2.0
#pragma once
// The LSTM problem descriptor and its variant table "lstm".
//
// One problem = one single-direction LSTM layer over a whole sequence, one pass:
//   x [T, B, I], h0/c0 [B, H] (or zeros), w_ih [4H, I], w_hh [4H, H], b_ih [4H] (+ b_hh [4H]);
//   gates in PyTorch's order (input, forget, cell, output), row blocks of 4H;
//   y [T, B, H], h_n/c_n [B, H]. All buffers dense row-major.
// A forward_training call leaves the variant's saved state (LstmSaved) in *args.saved; the
// backward call of the same variant consumes it (Note [LSTM saved state]).
// Variants: ref (per-step reference kernel, kernels/cpu/ref/lstm_ref.cpp),
// cpu.fused (kernels/cpu/omp/lstm_fused.cpp), cpu.onednn (kernels/cpu/onednn/lstm_onednn.cpp);
// cuda.cudnn and cuda.custom.* have room (the device field).
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>

#include "engine/core/device.h"
#include "engine/core/dtype.h"
#include "engine/core/error.h"
#include "engine/dispatch/variant_table.h"

namespace anvil {

enum class LstmPass : std::uint8_t { forward_inference, forward_training, backward };
const char* lstm_pass_name(LstmPass p);

struct LstmProblem {
  std::int64_t T = 0, B = 0, I = 0, H = 0;
  bool two_biases = false;         // b_hh present (PyTorch's layout)
  bool has_initial_state = false;  // h0/c0 given (else zeros)
  LstmPass pass = LstmPass::forward_inference;
  DType dtype = DType::f32;
  Device device = Device::cpu();

  DeviceType device_type() const { return device.type; }
  // Every member (Note [Problem fields], engine/dispatch/problem_fields.h).
  bool operator==(const LstmProblem&) const = default;
  auto fields() const {
    return std::tie(T, B, I, H, two_biases, has_initial_state, pass, dtype, device);
  }
  std::string key() const;
  // "lstm f32 cpu forward_training T=32 B=128 I=256 H=256 biases=1 state=0"
  std::string repr() const;
  // Multiply-add FLOPs (2 per MAC) of the GEMMs plus ~10 per cell element for the pointwise
  // part; backward counts the three gradient GEMM families (2x forward GEMMs).
  double flops() const;
  // Bytes of weights, inputs and outputs touched once.
  double bytes() const;
};

// Note [LSTM saved state]
// What a forward_training call keeps for its backward is the variant's own business (cpu.fused
// keeps the activated gates and the c sequence, cpu.onednn its workspace), so the problem
// cannot size it. The variant stores an LstmSaved subclass (holding Tensors from the
// allocator, so memory stats see it) through args.saved; the autograd node owns it and frees
// it after backward. `variant` names the producer; a backward of another variant is an error.
struct LstmSaved {
  virtual ~LstmSaved() = default;
  std::string variant;
};

struct LstmArgs {
  LstmProblem problem;
  // forward inputs (also read by backward)
  const void* x = nullptr;     // [T, B, I]
  const void* h0 = nullptr;    // [B, H] or null (zeros)
  const void* c0 = nullptr;    // [B, H] or null (zeros)
  const void* w_ih = nullptr;  // [4H, I]
  const void* w_hh = nullptr;  // [4H, H]
  const void* b_ih = nullptr;  // [4H]
  const void* b_hh = nullptr;  // [4H] or null
  // forward outputs (also read by backward: y is the h sequence)
  void* y = nullptr;    // [T, B, H]
  void* h_n = nullptr;  // [B, H]
  void* c_n = nullptr;  // [B, H]
  // forward_training writes, backward reads (Note [LSTM saved state])
  std::shared_ptr<LstmSaved>* saved = nullptr;
  // backward inputs; dh_n/dc_n may be null (zero)
  const void* dy = nullptr;
  const void* dh_n = nullptr;
  const void* dc_n = nullptr;
  // backward outputs (all written, never accumulated); dh0/dc0 only with has_initial_state,
  // db_hh only with two_biases (it equals db_ih)
  void* dx = nullptr;
  void* dh0 = nullptr;
  void* dc0 = nullptr;
  void* dw_ih = nullptr;
  void* dw_hh = nullptr;
  void* db_ih = nullptr;
  void* db_hh = nullptr;
};

// The saved state that a backward call of `variant` gets (Note [LSTM saved state]), as that
// variant's own type S; throws naming the variant and the problem when there is none or when
// another variant's forward produced it.
template <typename S>
const S& saved_state_of(const LstmArgs& a, const char* variant) {
  ANVIL_CHECK(a.saved && *a.saved, variant, "backward without saved state for ", a.problem.repr());
  const auto* s = dynamic_cast<const S*>(a.saved->get());
  ANVIL_CHECK(s != nullptr, variant, "backward got the saved state of variant '",
              (*a.saved)->variant, "' for ", a.problem.repr());
  return *s;
}

using LstmTable = VariantTable<LstmProblem, LstmArgs>;
// The process-wide LSTM table (filled by register_builtin_kernels()).
LstmTable& lstm_table();

}  // namespace anvil
