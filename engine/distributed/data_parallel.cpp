// SPDX-License-Identifier: Apache-2.0
// Gradient buckets and their overlapped all-reduce (Note [Gradient buckets] in data_parallel.h).
#include "engine/distributed/data_parallel.h"

#include <chrono>
#include <algorithm>
#include <cstdio>

#include "engine/autograd/autograd_meta.h"
#include "engine/autograd/grad_mode.h"
#include "engine/autograd/hooks.h"
#include "engine/core/error.h"
#include "engine/ops/elementwise.h"

namespace anvil::dist {

namespace {
constexpr const char* kWhere = "DataParallel";

// Detached views of `tensors` for a collective, which needs each as one contiguous buffer.
std::vector<Tensor> collective_views(const std::vector<Tensor>& tensors, const char* what) {
  std::vector<Tensor> views;
  for (const Tensor& t : tensors) {
    views.push_back(t.detach());
    ANVIL_CHECK(views.back().is_contiguous(), kWhere, what, " of a non-contiguous tensor ",
                shape_str(views.back().sizes()));
  }
  return views;
}
}  // namespace

DataParallel::DataParallel(CommunicatorPtr comm, std::vector<Tensor> params,
                           DataParallelOptions options)
    : comm_(std::move(comm)), options_(options), params_(std::move(params)) {
  ANVIL_CHECK(comm_ != nullptr, kWhere, "no communicator");
  ANVIL_CHECK(options_.bucket_cap_mb > 0, kWhere, "bucket_cap_mb must be positive, got ",
              options_.bucket_cap_mb);
  const bool bf16_wire = options_.grad_bucket_dtype == DType::bf16;
  ANVIL_CHECK(bf16_wire || options_.grad_bucket_dtype == DType::f32, kWhere,
              "grad_bucket_dtype must be f32 or bf16, got ",
              dtype_name(options_.grad_bucket_dtype));
  // Note [bf16 gradient buckets]: the reduce-scatter of ZeRO-1 has no bf16 form.
  ANVIL_CHECK(!(bf16_wire && options_.shard_optimizer), kWhere,
              "bf16 gradient buckets with shard_optimizer are not supported");
  const double cap_bytes = options_.bucket_cap_mb * 1048576.0;
  // Reverse registration order: the last layers' gradients are final first.
  struct Pending {
    std::vector<std::size_t> members;
    std::int64_t elements = 0;
  };
  std::vector<Pending> groups;
  for (std::size_t k = params_.size(); k-- > 0;) {
    const Tensor& p = params_[k];
    ANVIL_CHECK(p.defined() && p.requires_grad(), kWhere, "parameter ", k,
                " is not a tensor that requires grad");
    ANVIL_CHECK(is_floating(p.dtype()), kWhere, "parameter ", k, " has dtype ",
                dtype_name(p.dtype()));
    bool fresh = groups.empty();
    if (!fresh) {
      const Tensor& first = params_[groups.back().members.front()];
      const double bytes = static_cast<double>((groups.back().elements + p.numel()) *
                                               static_cast<std::int64_t>(p.element_size()));
      fresh = first.dtype() != p.dtype() || first.device() != p.device() ||
              (bytes > cap_bytes && groups.back().elements > 0);
    }
    if (fresh) groups.emplace_back();
    groups.back().members.push_back(k);
    groups.back().elements += p.numel();
  }
  hook_ids_.assign(params_.size(), 0);
  const std::int64_t ranks = comm_->size();
  for (auto& g : groups) {
    Bucket b;
    const Tensor& first = params_[g.members.front()];
    // Sharded: padded to S equal blocks (the padding stays zero, Note [Sharded optimizer update]).
    const std::int64_t padded =
        options_.shard_optimizer ? (g.elements + ranks - 1) / ranks * ranks : g.elements;
    b.flat = Tensor::zeros({padded}, first.dtype(), first.device());
    if (bf16_wire && first.dtype() == DType::f32)
      b.wire = Tensor::zeros({padded}, DType::bf16, first.device());
    if (options_.shard_optimizer) {
      b.shard_param = Tensor::zeros({padded / ranks}, first.dtype(), first.device());
      b.shard_param.set_requires_grad(true);
      b.shard_grad = Tensor::zeros({padded / ranks}, first.dtype(), first.device());
      b.gathered = Tensor::zeros({padded}, first.dtype(), first.device());
    }
    std::int64_t off = 0;
    for (std::size_t k : g.members) {
      b.slots.push_back({params_[k], k, off, false});
      off += params_[k].numel();
    }
    b.pending = static_cast<std::int64_t>(b.slots.size());
    buckets_.push_back(std::move(b));
  }
  if (options_.shard_optimizer)
    for (Bucket& b : buckets_) load_shard(b);
  for (std::size_t bi = 0; bi < buckets_.size(); ++bi)
    for (std::size_t si = 0; si < buckets_[bi].slots.size(); ++si) {
      const Slot& slot = buckets_[bi].slots[si];
      hook_ids_[slot.index] = register_post_accumulate_grad_hook(
          slot.param, [this, bi, si](const Tensor&) { on_gradient(bi, si); });
    }
  for (const Tensor& p : params_) {
    AutogradMeta* m = autograd_meta(p);
    if (m != nullptr && m->folded_sgd_lr > 0) {
      m->folded_sgd_lr = 0;
      if (notes_.empty() || notes_.back().find("folded SGD") == std::string::npos)
        notes_.push_back(
            "folded SGD off: under data parallelism the update must wait for the averaged "
            "gradient, so it cannot be folded into the local weight-gradient GEMM");
    }
  }
}

DataParallel::~DataParallel() {
  for (std::size_t k = 0; k < params_.size(); ++k)
    if (hook_ids_[k] != 0) remove_post_accumulate_grad_hook(params_[k], hook_ids_[k]);
}

std::int64_t DataParallel::bucket_bytes(std::size_t i) const {
  const Bucket& b = buckets_.at(i);
  return static_cast<std::int64_t>(b.wire.defined() ? b.wire.nbytes() : b.flat.nbytes());
}

std::string DataParallel::describe() const {
  std::string s = std::to_string(buckets_.size()) + " bucket(s) (cap " +
                  std::to_string(options_.bucket_cap_mb) + " MiB" +
                  (options_.overlap ? ", overlapped" : ", after backward") +
                  (options_.grad_bucket_dtype == DType::bf16 ? ", bf16 on the wire" : "") + "):";
  std::int64_t elements = 0;
  for (std::size_t i = 0; i < buckets_.size(); ++i) {
    char mb[32];
    std::snprintf(mb, sizeof mb, " %.2f MiB", static_cast<double>(bucket_bytes(i)) / 1048576.0);
    s += mb;
    elements += buckets_[i].flat.numel();
  }
  std::int64_t largest = 0;
  for (std::size_t i = 0; i < buckets_.size(); ++i) largest = std::max(largest, bucket_bytes(i));
  if (!options_.shard_optimizer && !buckets_.empty())
    s += "; all-reduce of the largest: " + comm_->all_reduce_algorithm(largest);
  if (options_.shard_optimizer)
    s += "; ZeRO-1: reduce-scatter, the optimizer updates " + std::to_string(shard_elements()) +
         " of " + std::to_string(elements) + " elements on this rank, all-gather";
  return s;
}

void DataParallel::broadcast_from_root(const std::vector<Tensor>& tensors) {
  NoGradGuard no_grad;
  for (Tensor& view : collective_views(tensors, "broadcast")) comm_->broadcast(view, 0);
}

void DataParallel::prepare_optimizer(optim::Optimizer& opt) {
  auto* sgd = dynamic_cast<optim::SGD*>(&opt);
  if (sgd != nullptr && sgd->folded()) {
    sgd->fold_into_backward(false);
    notes_.push_back(
        "folded SGD off: under data parallelism the update must wait for the averaged gradient, "
        "so it cannot be folded into the local weight-gradient GEMM");
  }
}

DataParallel::NoSync::NoSync(DataParallel& dp) : dp_(&dp) { ++dp_->no_sync_depth_; }
DataParallel::NoSync::~NoSync() {
  if (dp_ != nullptr) --dp_->no_sync_depth_;
}
DataParallel::NoSync::NoSync(NoSync&& other) noexcept : dp_(other.dp_) { other.dp_ = nullptr; }

void DataParallel::synchronize_buffers(const std::vector<Tensor>& buffers) {
  NoGradGuard no_grad;
  for (Tensor& view : collective_views(buffers, "synchronize_buffers")) {
    if (is_floating(view.dtype()))
      comm_->all_reduce(view, ReduceOp::average);
    else
      comm_->broadcast(view, 0);  // counters: equal on every rank that took the same steps
  }
}

void DataParallel::on_gradient(std::size_t bi, std::size_t si) {
  // Under no_sync the gradient keeps accumulating in param.grad (Note [Accumulation without
  // synchronisation]); the collectives in flight (none, between steps) need no progress.
  if (no_sync_depth_ > 0) return;
  Bucket& b = buckets_[bi];
  Slot& s = b.slots[si];
  if (!s.ready) {
    const Tensor& g = s.param.grad();
    Tensor dst = b.flat.slice(0, s.offset, s.offset + s.param.numel()).view(s.param.sizes());
    if (g.data_ptr() != dst.data_ptr()) dst.copy_(g);
    s.ready = true;
    if (--b.pending == 0) b.complete = std::chrono::steady_clock::now();
  }
  if (options_.overlap) launch_ready();
  comm_->progress();
  if (timeline_) poll_in_flight();
}

void DataParallel::poll_in_flight() {
  const auto now = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < next_launch_; ++i) {
    Bucket& b = buckets_[i];
    if (!b.seen_done && b.work->test()) {
      b.done = now;
      b.seen_done = true;
    }
  }
}

void DataParallel::launch(Bucket& b) {
  b.started = std::chrono::steady_clock::now();
  b.seen_done = false;
  if (b.wire.defined()) {  // Note [bf16 gradient buckets]: rounded once, summed, averaged later
    b.wire.copy_(b.flat);
    b.work = comm_->all_reduce_async(b.wire, ReduceOp::sum);
    return;
  }
  if (options_.shard_optimizer)
    b.work = comm_->reduce_scatter_async(b.flat, b.shard_grad, ReduceOp::average);
  else
    b.work = comm_->all_reduce_async(b.flat, ReduceOp::average);
}

void DataParallel::unpack_wire(Bucket& b) {
  if (!b.wire.defined() || b.flat.numel() == 0) return;
  b.flat.copy_(b.wire);
  if (comm_->size() > 1) ops::mul_scalar_(b.flat, 1.0 / comm_->size());
}

void DataParallel::launch_ready() {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0)
    launch(buckets_[next_launch_++]);
}

void DataParallel::finish_gradients() {
  ANVIL_CHECK(no_sync_depth_ == 0, kWhere,
              "finish_gradients() inside no_sync(): the accumulated gradients would never be "
              "averaged; end the NoSync guard first");
  NoGradGuard no_grad;
  // A parameter whose hook did not run in a synchronised backward contributes what it
  // accumulated under no_sync, or zeros when it got no gradient this step.
  for (Bucket& b : buckets_)
    for (Slot& s : b.slots)
      if (!s.ready) {
        Tensor dst = b.flat.slice(0, s.offset, s.offset + s.param.numel());
        const Tensor& g = s.param.grad();
        if (!g.defined())
          dst.fill_(0.0);
        else if (g.data_ptr() != dst.data_ptr())
          dst.view(s.param.sizes()).copy_(g);
        s.ready = true;
        if (--b.pending == 0) b.complete = std::chrono::steady_clock::now();
      }
  launch_ready();
  const auto t0 = std::chrono::steady_clock::now();
  for (Bucket& b : buckets_) {
    b.work->wait();
    if (!b.seen_done) b.done = std::chrono::steady_clock::now();
    b.seen_done = true;
  }
  for (Bucket& b : buckets_) unpack_wire(b);
  wait_last_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  wait_total_ += wait_last_;
  ++steps_;
  // Gradients become views of the averaged buckets (no copy; the next step's hooks copy new
  // gradients in before the bucket is reduced again). Sharded: the block's parameters and
  // averaged gradient are the optimizer's, the model's gradients are released.
  for (Bucket& b : buckets_) {
    if (options_.shard_optimizer) {
      load_shard(b);
      b.shard_param.mutable_grad() = b.shard_grad;
    }
    for (Slot& s : b.slots) {
      s.param.mutable_grad() =
          options_.shard_optimizer
              ? Tensor()
              : b.flat.slice(0, s.offset, s.offset + s.param.numel()).view(s.param.sizes());
      s.ready = false;
    }
    b.pending = static_cast<std::int64_t>(b.slots.size());
    b.work.reset();
  }
  next_launch_ = 0;
}

}  // namespace anvil::dist
