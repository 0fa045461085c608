// SPDX-License-Identifier: Apache-2.0
#pragma once
// register_builtin_kernels() is declared in engine/dispatch/registration.h (the registration
// seam, Note [Kernel registration]); this header only forwards there, for the tests, benchmarks
// and tools that include it. Library code (ops, autograd, optim) must not include kernels/.
#include "engine/dispatch/registration.h"
