// SPDX-License-Identifier: Apache-2.0
// Dropout problem descriptor and table (engine/dispatch/dropout_problem.h).
#include "engine/dispatch/dropout_problem.h"

#include <cmath>

#include "engine/core/error.h"
#include "engine/dispatch/registration.h"

namespace anvil {

std::string DropoutProblem::key() const {
  return detail::str_cat("dropout ", dtype_name(dtype), ' ', device.str(), ' ', numel, ' ', p);
}

std::string DropoutProblem::repr() const {
  return detail::str_cat("dropout ", dtype_name(dtype), ' ', device.str(), " numel=", numel,
                         " p=", p);
}

std::uint64_t dropout_keep_threshold(double p) {
  ANVIL_CHECK(p >= 0.0 && p < 1.0, "dropout_keep_threshold", "probability must be in [0, 1), got ",
              p);
  // In [1, 2^32]: a word r (< 2^32) is kept when r < threshold; p = 0 keeps every word.
  const double t = std::nearbyint((1.0 - p) * 4294967296.0);
  return t < 1.0 ? 1u : static_cast<std::uint64_t>(t);
}

DropoutTable& dropout_table() {
  static DropoutTable table(
      "dropout", "each call draws its mask from the generator: trials would change the masks");
  register_builtin_kernels();  // fills the table on first use
  return table;
}

}  // namespace anvil
