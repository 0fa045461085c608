// SPDX-License-Identifier: Apache-2.0
// A tiny program for the dispatch-log CTest (tests/dispatch/check_dispatch_log.py): a few op
// calls whose selections ANVIL_VERBOSE=dispatch prints to stderr (Note [Dispatch log]). The same
// matrix product runs three times (one logged decision unless dispatch_all), then a ReLU by the
// table's order and one forced to `ref`. stdout lists each table's registered variants, so the
// checker can tell that a line names every other variant as declined.
#include <iostream>
#include <string>

#include "engine/dispatch/elementwise_problem.h"
#include "engine/dispatch/gemm_problem.h"
#include "engine/dispatch/selection.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/gemm.h"

int main() {
  using namespace anvil;
  const Tensor a = Tensor::arange(0, 6 * 5, 1).reshape({6, 5});
  const Tensor b = Tensor::arange(0, 5 * 4, 1).reshape({5, 4});
  for (int i = 0; i < 3; ++i) (void)ops::mm(a, false, b, false);
  (void)ops::unary(EwOp::relu, a);
  {
    ForceVariant force("elementwise", "ref");
    (void)ops::unary(EwOp::relu, a);
  }
  for (VariantTableBase* t : {static_cast<VariantTableBase*>(&gemm_table()),
                              static_cast<VariantTableBase*>(&elementwise_table())}) {
    std::cout << "table " << t->op() << ":";
    for (const auto& v : t->list()) std::cout << ' ' << v.name;
    std::cout << '\n';
  }
  return 0;
}
