// SPDX-License-Identifier: Apache-2.0
// Per-thread grad mode (engine/autograd/grad_mode.h).
#include "engine/autograd/grad_mode.h"

namespace anvil {
namespace {
thread_local bool tls_grad_enabled = true;
}
bool grad_enabled() { return tls_grad_enabled; }
void set_grad_enabled(bool on) { tls_grad_enabled = on; }
NoGradGuard::NoGradGuard() : previous_(tls_grad_enabled) { tls_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { tls_grad_enabled = previous_; }
}  // namespace anvil
