// SPDX-License-Identifier: Apache-2.0
#pragma once
// Grad mode: whether ops record autograd nodes (per thread). NoGradGuard turns recording off
// for inference, optimizer updates and kernel benchmarks.
namespace anvil {

bool grad_enabled();
void set_grad_enabled(bool on);

class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace anvil
