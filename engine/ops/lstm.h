// SPDX-License-Identifier: Apache-2.0
#pragma once
// Tensor-level embedding and LSTM layer without autograd: input checks (errors name the
// function and the values), output allocation, dispatch to a variant of the "lstm" table.
// The differentiable versions are anvil::embedding and anvil::lstm_layer (functions.h).
#include <memory>

#include "engine/core/tensor.h"
#include "engine/dispatch/lstm_problem.h"

namespace anvil::ops {

// ---- embedding ---------------------------------------------------------------------------------
// weight [V, D] (f32/f64), ids int32/int64 of any shape with values in [0, V) -> [ids..., D].
Tensor embedding(const Tensor& weight, const Tensor& ids);
// The dense [V, D] gradient of embedding: zeros except the rows named in ids, which get the sum
// of their rows of dy [ids..., D].
Tensor embedding_backward(const Tensor& dy, const Tensor& ids, std::int64_t num_rows);

// ---- LSTM layer -------------------------------------------------------------------------------
struct LstmInputs {
  Tensor x;           // [T, B, I]
  Tensor h0, c0;      // [B, H] or both undefined (zeros)
  Tensor w_ih, w_hh;  // [4H, I], [4H, H]
  Tensor b_ih;        // [4H]
  Tensor b_hh;        // [4H] or undefined
};

// Checks every shape, dtype and device (throws naming `where` and the values) and returns the
// problem for `pass`.
LstmProblem lstm_problem_for(const LstmInputs& in, LstmPass pass, const char* where = "lstm_layer");

struct LstmForwardResult {
  Tensor y, h_n, c_n;                // [T, B, H], [B, H], [B, H]
  std::shared_ptr<LstmSaved> saved;  // training only (Note [LSTM saved state])
  std::string variant;               // the variant that ran
};

// The variant the table selects for `p` (forced, heuristic or by the table's order; with autotune
// on and `in` given, the fastest forward on scratch outputs, cached per problem key).
const LstmTable::Variant& select_lstm_variant(const LstmProblem& p, const LstmInputs* in = nullptr);

// Runs `variant` forward (training keeps its saved state). Inputs need not be contiguous.
LstmForwardResult lstm_forward(const LstmTable::Variant& variant, const LstmInputs& in,
                               bool training);

struct LstmGrads {
  Tensor dx, dh0, dc0, dw_ih, dw_hh, db_ih, db_hh;  // undefined where not asked / not present
};
// Backward of a training forward of the same variant. dy [T, B, H]; dh_n, dc_n [B, H] or
// undefined (zero). need_dx = false skips the dx GEMM; state gradients exist only with h0/c0.
LstmGrads lstm_backward(const LstmTable::Variant& variant, const LstmInputs& in,
                        const LstmForwardResult& fwd, const Tensor& dy, const Tensor& dh_n,
                        const Tensor& dc_n, bool need_dx = true);

}  // namespace anvil::ops
