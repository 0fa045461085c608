// SPDX-License-Identifier: Apache-2.0
#pragma once
// Data-parallel training in the spirit of PyTorch's DistributedDataParallel and Horovod: every
// rank holds the whole model, trains on its shard of each global batch (data/loader.h, Note
// [Sharded epochs]), and averages gradients over the ranks before the optimizer step.
//
//   auto comm = dist::create_communicator("auto");
//   dist::DataParallel dp(comm, net->parameters());
//   dp.broadcast_from_root(net->parameters());  // and the buffers
//   dp.prepare_optimizer(opt);                  // turns folded SGD off, with a note
//   per step: opt.zero_grad(); loss.backward(); dp.finish_gradients(); opt.step();
//   accumulating N micro-batches (Note [Accumulation without synchronisation]):
//     opt.zero_grad();
//     for i < N - 1: { auto quiet = dp.no_sync(); (loss_i * scale_i).backward(); }
//     (loss_last * scale_last).backward(); dp.finish_gradients(); opt.step();
//   before evaluating or saving: dp.synchronize_buffers(buffers) (Note [Buffer synchronisation])
//   ZeRO-1 (options.shard_optimizer, Note [Sharded optimizer update]): the optimizer is built
//   over dp.shard_parameters(), and dp.finish_update() follows every opt.step().
//
// Note [Gradient buckets]
// Parameters are grouped, in reverse registration order (roughly the order backward finishes
// their gradients), into buckets of at most `bucket_cap_mb` (one flat buffer per bucket, of one
// dtype and device). A post-accumulate hook (engine/autograd/hooks.h) copies each gradient into
// its bucket when backward has made it final; when a bucket's last gradient arrives its
// all-reduce (average) starts at once, while backward goes on with earlier layers, so the
// communication overlaps the rest of backward. Buckets start strictly in index order on every
// rank (an MPI requirement: collectives must be issued in the same order everywhere), and every
// hook call also advances the collectives in flight (Communicator::progress). finish_gradients()
// starts any bucket not yet started (parameters that got no gradient contribute zeros), waits
// for all of them and points each parameter's gradient at its slice of the averaged bucket.
// With overlap off, all buckets start only in finish_gradients(): the "all-reduce after
// backward" baseline of the benchmarks.
//
// Note [Accumulation without synchronisation]
// As PyTorch DDP's no_sync(): while a NoSync guard lives, backward only accumulates each
// parameter's gradient locally (AccumulateGrad sums into param.grad) and the hooks neither copy
// nor start anything. The first backward after the guard is gone sees the summed gradient in its
// hooks and reduces it as usual, so N micro-batches cost one all-reduce. finish_gradients() also
// copies in the accumulated gradient of a parameter that had one only under no_sync (zeros when
// it has none), so a step whose every backward ran under the guard is reduced correctly as well.
// The caller scales each micro-batch's loss so that the sum is the mean over the step's samples
// (anvil train: by rows_i / rows of the step, Note [Global batch and micro-batches] in
// tools/anvil/trainer.cpp); DataParallel never rescales, since it cannot know the weights.
// finish_gradients() inside a NoSync guard is a caller error and throws.
//
// Note [Buffer synchronisation]
// Buffers (batch-norm running statistics) are not gradients: each rank updates its own from its
// own samples, so without a reduction the ranks would evaluate and checkpoint different models.
// synchronize_buffers() averages floating buffers over the ranks (integer ones, counters, are
// taken from rank 0). Average rather than broadcast from rank 0 (DDP's default), because the
// running mean is an exponential moving average, linear in the batch means: with equal local
// batches the average of the ranks' running means is, up to rounding, the running mean one
// process computes from the global batches, however rarely it is averaged; rank 0's alone would
// hold 1/S of the samples. The running variance averages the ranks' within-batch variances and
// so misses the spread of the ranks' batch means (small when shards are drawn from one
// permutation); the batch statistics used in training mode are per rank either way (no
// SyncBatchNorm). anvil train calls it once per epoch, before validation and the checkpoint.
//
// Note [Sharded optimizer update]
// ZeRO stage 1 (Rajbhandari et al. 2020; DeepSpeed, PyTorch's ZeroRedundancyOptimizer): with
// shard_optimizer each bucket's flat buffer is padded to a multiple of the rank count S and
// split into S equal blocks; rank r owns block r. The bucket's all-reduce becomes a
// reduce-scatter (average) that leaves rank r only its block of the averaged gradient.
// shard_parameters() are one leaf tensor per bucket, rank r's block of the bucket's parameters
// (refreshed from the model in finish_gradients(), so a broadcast or a loaded checkpoint is
// picked up), whose gradient finish_gradients() points at that block: an optimizer built over
// them keeps momentum or Adam moments for 1/S of the parameters (plus padding). After its
// step(), finish_update() all-gathers every bucket's blocks and copies them into the model's
// parameters. SGD, momentum and Adam are elementwise, so updating a block is updating those
// elements of the whole; and for 2 ranks the reduce-scatter sums a + b as the all-reduce does:
// the parameters equal plain data parallelism's within rounding (tested to 1e-6 over 10 steps).
// Communication: reduce-scatter + all-gather move what one all-reduce moves (a ring all-reduce
// is exactly those two halves); the saving is optimizer memory and update work, 1/S per rank.
// After finish_gradients() the model's own gradients are released (undefined): the averaged
// gradient exists only as the blocks. Global-norm clipping over shard_parameters() would see
// only this rank's block, so it needs an all-reduce of the squared norms (anvil train refuses
// --clip with --shard-optimizer); checkpoints would need the blocks gathered (refused as well).
//
// Note [bf16 gradient buckets]
// Opt-in (grad_bucket_dtype = bf16; anvil train --grad-bucket-dtype bf16), as PyTorch DDP's
// bf16 compression hook: every f32 bucket gets a bf16 twin of the same length, the wire buffer.
// When the bucket is complete its f32 gradients are rounded to bf16 (nearest even) into the
// wire buffer, which is all-reduced with a sum that adds each pair of values in f32 and rounds
// once to bf16 (mpi: a user MPI_Op, Note [bf16 summing MPI_Op] in
// engine/distributed/mpi/mpi_bf16_sum.cpp; nccl: ncclBfloat16 with ncclSum). finish_gradients()
// casts the summed wire buffer back into the f32 bucket and scales it by 1/S in f32 (exact for a
// power-of-two S), so the parameters' gradients stay f32 views of the bucket as without it. Half
// the bytes move (the bucket cap still counts the f32 gradient); the price is the rounding: each
// rank's gradient loses all but 8 significant bits (relative error <= 2^-9), and each partial
// sum is rounded again. The buckets of other dtypes (f64) keep their own. Not with
// shard_optimizer (its reduce-scatter has no bf16 form): refused. The ranks all round the same
// way, so they still hold bitwise equal parameters, and a run is still bitwise reproducible.
//
// Note [Data-parallel determinism]
// Each rank's gradients are a deterministic function of its samples; the all-reduce sums the
// same buckets in the same order on every run (MPI's algorithm depends only on sizes and the
// rank count), so a run is bitwise reproducible and all ranks hold bitwise equal parameters.
// Against one process on the global batch the result differs by rounding only: the global mean
// is formed as (mean over rank 0's half + mean over rank 1's half) / 2 instead of one sum.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/distributed/communicator.h"
#include "engine/optim/optimizer.h"

namespace anvil::dist {

struct DataParallelOptions {
  double bucket_cap_mb = 25.0;   // MiB per bucket (PyTorch DDP's default)
  bool overlap = true;           // false: all buckets start after backward (baseline)
  bool shard_optimizer = false;  // ZeRO-1 (Note [Sharded optimizer update])
  // f32 (default) or bf16: the all-reduce's wire format of f32 buckets (Note [bf16 gradient
  // buckets]); bf16 is not combined with shard_optimizer.
  DType grad_bucket_dtype = DType::f32;
};

class DataParallel {
 public:
  DataParallel(CommunicatorPtr comm, std::vector<Tensor> params, DataParallelOptions options = {});
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  // Makes `tensors` (parameters, buffers) on every rank equal to rank 0's.
  void broadcast_from_root(const std::vector<Tensor>& tensors);
  // Folded SGD (Note [Folded SGD]) updates parameters inside backward, before their gradients
  // could be averaged: it is turned off here, and the reason is added to notes().
  void prepare_optimizer(optim::Optimizer& opt);
  // After backward: starts the remaining buckets, waits for all, leaves averaged gradients.
  // Throws inside a NoSync guard (Note [Accumulation without synchronisation]).
  void finish_gradients();

  // While alive, backward accumulates gradients locally and starts no all-reduce.
  class NoSync {
   public:
    explicit NoSync(DataParallel& dp);
    ~NoSync();
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;
    NoSync(NoSync&& other) noexcept;
    NoSync& operator=(NoSync&&) = delete;

   private:
    DataParallel* dp_;
  };
  [[nodiscard]] NoSync no_sync() { return NoSync(*this); }
  bool syncing() const { return no_sync_depth_ == 0; }

  // ZeRO-1 (Note [Sharded optimizer update]): the tensors to build the optimizer over (empty
  // without shard_optimizer), and the all-gather of the updated blocks after opt.step() (a
  // no-op without shard_optimizer).
  std::vector<Tensor> shard_parameters() const;
  void finish_update();
  bool sharded() const { return options_.shard_optimizer; }
  std::int64_t shard_elements() const;  // elements of shard_parameters(), all buckets

  // Averages floating `buffers` over the ranks, integer ones from rank 0 (Note [Buffer
  // synchronisation]); contiguous tensors of one device. Blocking; identity on one rank.
  void synchronize_buffers(const std::vector<Tensor>& buffers);

  // Between steps: overlapped buckets or all after backward (the benchmarks alternate them).
  void set_overlap(bool on) { options_.overlap = on; }
  bool overlap() const { return options_.overlap; }
  Communicator& comm() { return *comm_; }
  std::size_t num_buckets() const { return buckets_.size(); }
  // Bytes the all-reduce of bucket i moves per rank (its bf16 wire buffer's when it has one).
  std::int64_t bucket_bytes(std::size_t i) const;
  std::int64_t bucket_elements(std::size_t i) const { return buckets_.at(i).flat.numel(); }
  // Note [Bucket timeline]
  // With set_timeline(true) every hook also polls the buckets in flight
  // (Work::test), so that each bucket's completion is seen near when it happens; off by default
  // (the polls are extra MPI calls). Per bucket of the last finish_gradients(): when its
  // collective was started and when it was first seen complete (by a hook's poll or the final
  // wait: an upper bound, at most one layer's backward late), as steady_clock time points; and
  // when its last gradient was copied in (complete), before its launch and this hook's progress.
  void set_timeline(bool on) { timeline_ = on; }
  std::chrono::steady_clock::time_point bucket_complete(std::size_t i) const {
    return buckets_.at(i).complete;
  }
  std::chrono::steady_clock::time_point bucket_started(std::size_t i) const {
    return buckets_.at(i).started;
  }
  std::chrono::steady_clock::time_point bucket_done(std::size_t i) const {
    return buckets_.at(i).done;
  }
  // Reasons for changes made to the training setup, for the log.
  const std::vector<std::string>& notes() const { return notes_; }
  // Seconds finish_gradients() spent waiting for the collectives (total, and the last step),
  // and the number of steps.
  double wait_seconds_total() const { return wait_total_; }
  double last_wait_seconds() const { return wait_last_; }
  std::int64_t steps() const { return steps_; }
  // "2 buckets (cap 25 MiB): 0.4 MiB, 1.2 MiB"
  std::string describe() const;

 private:
  struct Slot {
    Tensor param;
    std::size_t index = 0;    // in params_
    std::int64_t offset = 0;  // elements into the bucket
    bool ready = false;
  };
  struct Bucket {
    Tensor flat;  // [elements] of the bucket's dtype and device (sharded: padded to S blocks)
    Tensor
        wire;  // bf16 buckets: [elements] bf16, what is all-reduced (Note [bf16 gradient buckets])
    std::vector<Slot> slots;
    std::int64_t pending = 0;  // slots not yet ready this step
    WorkPtr work;
    std::chrono::steady_clock::time_point complete, started, done;  // Note [Bucket timeline]
    bool seen_done = false;
    // Sharded only (Note [Sharded optimizer update]), each [flat / S] but `gathered` [flat]:
    Tensor shard_param;  // this rank's block of the parameters, a leaf the optimizer updates
    Tensor shard_grad;   // its averaged gradient (the reduce-scatter's output)
    Tensor gathered;     // every rank's block after the update (the all-gather's output)
  };
  void on_gradient(std::size_t bucket, std::size_t slot);
  void launch_ready();
  void poll_in_flight();  // Note [Bucket timeline]
  void launch(Bucket& b);
  // bf16 buckets: the summed wire buffer back into the f32 bucket, averaged.
  void unpack_wire(Bucket& b);
  // Sharded: the parameter values of this rank's block of `b`, into (to_block) or from the
  // flat buffer `blocks` laid out as the bucket.
  void load_shard(Bucket& b);
  void scatter_gathered(Bucket& b);

  CommunicatorPtr comm_;
  DataParallelOptions options_;
  std::vector<Tensor> params_;
  std::vector<Bucket> buckets_;
  std::vector<std::uint64_t> hook_ids_;  // one per parameter, same order as params_
  std::size_t next_launch_ = 0;
  int no_sync_depth_ = 0;
  bool timeline_ = false;
  std::vector<std::string> notes_;
  double wait_total_ = 0.0, wait_last_ = 0.0;
  std::int64_t steps_ = 0;
};

}  // namespace anvil::dist
