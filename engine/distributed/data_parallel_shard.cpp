// SPDX-License-Identifier: Apache-2.0
// The ZeRO-1 part of DataParallel (Note [Sharded optimizer update] in data_parallel.h): each
// rank's block of every bucket's parameters, the optimizer's tensors, and the all-gather that
// copies the updated blocks back into the model.
#include <algorithm>

#include "engine/autograd/grad_mode.h"
#include "engine/core/error.h"
#include "engine/distributed/data_parallel.h"

namespace anvil::dist {

namespace {

// Calls fn(slot, offset into the slot's parameter, offset into the block, count) for every
// slot overlapping the elements [begin, end) of a bucket's flat layout.
template <typename Slots, typename Fn>
void for_each_overlap(const Slots& slots, std::int64_t begin, std::int64_t end, Fn fn) {
  for (const auto& s : slots) {
    const std::int64_t lo = std::max(begin, s.offset);
    const std::int64_t hi = std::min(end, s.offset + s.param.numel());
    if (lo < hi) fn(s, lo - s.offset, lo - begin, hi - lo);
  }
}

}  // namespace

std::vector<Tensor> DataParallel::shard_parameters() const {
  std::vector<Tensor> out;
  if (!options_.shard_optimizer) return out;
  for (const Bucket& b : buckets_) out.push_back(b.shard_param);
  return out;
}

std::int64_t DataParallel::shard_elements() const {
  std::int64_t n = 0;
  for (const Bucket& b : buckets_)
    if (b.shard_param.defined()) n += b.shard_param.numel();
  return n;
}

void DataParallel::load_shard(Bucket& b) {
  const std::int64_t k = b.shard_param.numel();
  const std::int64_t begin = comm_->rank() * k;
  Tensor block = b.shard_param.detach();
  for_each_overlap(
      b.slots, begin, begin + k,
      [&](const Slot& s, std::int64_t from, std::int64_t to, std::int64_t n) {
        block.slice(0, to, to + n).copy_(s.param.detach().flatten().slice(0, from, from + n));
      });
}

void DataParallel::scatter_gathered(Bucket& b) {
  for (const Slot& s : b.slots)
    s.param.detach().copy_(
        b.gathered.slice(0, s.offset, s.offset + s.param.numel()).view(s.param.sizes()));
}

void DataParallel::finish_update() {
  if (!options_.shard_optimizer) return;
  NoGradGuard no_grad;
  for (Bucket& b : buckets_) b.work = comm_->all_gather_async(b.shard_param.detach(), b.gathered);
  for (Bucket& b : buckets_) {
    b.work->wait();
    b.work.reset();
    scatter_gathered(b);
  }
}

}  // namespace anvil::dist
