// SPDX-License-Identifier: Apache-2.0
// Link support for the fuzz targets, which are built from the data readers and engine/core
// only (scripts/fuzz.sh), not from the whole of libanvil. Two symbols that engine/core refers
// to live elsewhere: Tensor::requires_grad (engine/autograd; only Tensor::str uses it) and
// require_cuda (engine/core/cuda_backend.cpp, which needs the config module and OpenMP; only
// device tensors use it). The readers make CPU tensors and never print them, so neither can
// be reached: reaching one is a harness bug, reported as a crash.
#include "engine/core/cuda_backend.h"
#include "engine/core/tensor.h"

bool anvil::Tensor::requires_grad() const { __builtin_trap(); }
anvil::CudaBackend& anvil::require_cuda(const char*) { __builtin_trap(); }
