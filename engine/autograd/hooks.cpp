// SPDX-License-Identifier: Apache-2.0
// Post-accumulate-grad hooks on leaves (hooks.h); AccumulateGrad::apply (node.cpp) runs them.
#include "engine/autograd/hooks.h"

#include <algorithm>
#include <atomic>

#include "engine/autograd/autograd_meta.h"
#include "engine/core/error.h"

namespace anvil {

std::uint64_t register_post_accumulate_grad_hook(const Tensor& leaf, PostAccumulateGradHook hook) {
  constexpr const char* kWhere = "register_post_accumulate_grad_hook";
  ANVIL_CHECK(leaf.defined() && leaf.requires_grad(), kWhere,
              "the tensor must be a leaf that requires grad");
  AutogradMeta& m = ensure_autograd_meta(leaf);
  ANVIL_CHECK(!m.grad_fn, kWhere, "tensor ", shape_str(leaf.sizes()),
              " is not a leaf (it was produced by ", m.grad_fn->name(), ")");
  ANVIL_CHECK(static_cast<bool>(hook), kWhere, "empty hook");
  static std::atomic<std::uint64_t> next_id{1};
  const std::uint64_t id = next_id++;
  m.post_accumulate_hooks.emplace_back(id, std::move(hook));
  return id;
}

void remove_post_accumulate_grad_hook(const Tensor& leaf, std::uint64_t id) {
  AutogradMeta* m = autograd_meta(leaf);
  if (m == nullptr) return;
  auto& hooks = m->post_accumulate_hooks;
  hooks.erase(
      std::remove_if(hooks.begin(), hooks.end(), [id](const auto& h) { return h.first == id; }),
      hooks.end());
}

}  // namespace anvil
