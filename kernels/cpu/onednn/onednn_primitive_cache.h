// SPDX-License-Identifier: Apache-2.0
#pragma once
// Small shared pieces of the oneDNN pooling and batch-norm variants: the CPU engine and stream,
// a per-thread user scratchpad, the execute step, and a bounded primitive cache keyed by
// problem + thread count.
// The reasoning is Note [oneDNN matmul primitive cache] (gemm_onednn.cpp), applied per problem:
// creation is slow (implementation search, JIT), so each distinct (problem key, omp threads)
// creates once; entries are immutable and shared; creation runs outside the lock.
#include <omp.h>

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include <oneapi/dnnl/dnnl.hpp>

#include "engine/core/error.h"
#include "kernels/cpu/thread_scratch.h"

namespace anvil::kernels::onednn {

// The thread count a primitive created here and now is built for: oneDNN asks
// dnnl_get_current_num_threads(), which is 1 inside an active OpenMP parallel region (a kernel
// that calls oneDNN from its own threads, e.g. the batch-row-parallel LSTM recurrence) and
// omp_get_max_threads() outside. Cache keys must use the same count: a primitive created for a
// 2-thread work split, executed where oneDNN runs only thread 0 of it, would compute part of C.
inline int threads_for_key() { return omp_in_parallel() ? 1 : omp_get_max_threads(); }

inline dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}
inline dnnl::stream& cpu_stream() {
  static dnnl::stream stream(cpu_engine());
  return stream;
}

// This thread's scratchpad, 64-byte aligned, grown to at least `bytes` (never shrunk).
inline void* thread_scratchpad(std::size_t bytes, const char* where) {
  thread_local ScratchBuffer buf;
  return buf.get(bytes, where);
}

// Runs `primitive` on the CPU stream with `args` (and, when it needs one, this thread's
// scratchpad of `scratchpad_md`) and waits for it: the execute step of the pooling and
// batch-norm variants.
inline void execute_and_wait(const dnnl::primitive& primitive,
                             std::unordered_map<int, dnnl::memory>& args,
                             const dnnl::memory::desc& scratchpad_md,
                             std::size_t scratchpad_bytes) {
  if (scratchpad_bytes > 0)
    args.emplace(DNNL_ARG_SCRATCHPAD,
                 dnnl::memory(scratchpad_md, cpu_engine(),
                              thread_scratchpad(scratchpad_bytes, "cpu.onednn")));
  primitive.execute(cpu_stream(), args);
  cpu_stream().wait();
}

// A process-wide cache of immutable entries E, bounded (cleared past kMax entries).
template <typename E>
class PrimitiveCache {
 public:
  static constexpr std::size_t kMax = 512;
  template <typename Create>
  std::shared_ptr<const E> get(const std::string& problem_key, Create&& create) {
    std::string key = problem_key + " threads=" + std::to_string(threads_for_key());
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = map_.find(key); it != map_.end()) return it->second;
    }
    std::shared_ptr<const E> entry = create();  // slow: outside the lock
    std::lock_guard<std::mutex> lock(mu_);
    if (map_.size() >= kMax) map_.clear();
    return map_.emplace(std::move(key), std::move(entry)).first->second;
  }

 private:
  std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const E>> map_;
};

}  // namespace anvil::kernels::onednn
