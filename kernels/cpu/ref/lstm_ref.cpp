// SPDX-License-Identifier: Apache-2.0
// The `ref` entry of the "lstm" table (Note [LSTM ref variant] in
// engine/autograd/functions_recurrent.cpp): the autograd layer runs ref as a composition of
// linear/sigmoid/tanh/mul/add per time step and lets autograd derive the backward, so this
// kernel function is never the path taken; calling it directly is an error that says so.
#include "kernels/cpu/ref/lstm_ref.h"

#include "engine/core/error.h"
#include "engine/dispatch/lstm_problem.h"

namespace anvil::kernels {

void register_lstm_ref() {
  lstm_table().add({
      .name = "ref",
      .supports =
          [](const LstmProblem& p) {
            if (p.dtype != DType::f32 && p.dtype != DType::f64)
              return Support::no(detail::str_cat("ref handles f32/f64, got ", dtype_name(p.dtype)));
            return Support::yes();
          },
      .fn =
          [](const LstmArgs& a) {
            fail("lstm ref",
                 "the reference LSTM is a composition of autograd ops run by "
                 "anvil::lstm_layer (engine/autograd/functions_recurrent.cpp), not a kernel; "
                 "problem ",
                 a.problem.repr());
          },
      .description = "per-step composition of linear/sigmoid/tanh/mul/add; autograd backward",
  });
}

}  // namespace anvil::kernels
