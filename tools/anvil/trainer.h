// SPDX-License-Identifier: Apache-2.0
#pragma once
// The training loop of `anvil train`: a registered model on real data, with the metrics the
// papers reported (Al-Bdour, Kabakus; docs/spec/experiments.md): training time, time to a
// target accuracy, testing (inference) time, accuracy or perplexity, peak memory and CPU
// utilisation, per epoch and in total. With --device cuda the model, its gradients and the
// optimizer state live on the GPU and every batch is copied there (the loader stays on the host);
// the report adds the GPU caching allocator's peak. Checkpoints at the end of every epoch; resuming
// from one gives the same run as not stopping (Note [Resuming a run]).
//
// It lives apart from the command-line parsing so that tests can run it directly.
//
// Note [Resuming a run]
// A run is a pure function of its configuration and seed: parameters are initialised from the
// seed, the data order of epoch e depends only on (seed, e) (Note [Reproducible data order]),
// dropout draws from the default generator (seeded once, its state stored in every checkpoint),
// the learning rate schedule depends only on the epoch and the step (the scheduler's state is
// checkpointed), and the optimizer state (Adam moments and step count, SGD momentum) is
// checkpointed. So "train to epoch k, save, resume, train to n" ends
// with the same parameters as "train to n". Checkpoints are taken at epoch ends only.
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "engine/distributed/communicator.h"

namespace anvil::tools {

// Limits of the knobs (docs/training.md, "Limits"): run_training refuses a value outside them
// with anvil::ConfigError naming the option and the value (exit status 2 in the CLI), before
// anything is read. Threads are held to anvil::max_threads() (Note [Thread limit]); a seed is
// any 64-bit unsigned integer.
inline constexpr int kMaxEpochs = 1'000'000;
inline constexpr std::int64_t kMaxBatch = std::int64_t{1} << 20;
inline constexpr double kMaxBucketMb = 65536.0;  // 64 GiB, more than any model's gradients
inline constexpr int kMaxAccumulate = 1024;      // micro-batches per optimizer step
inline constexpr std::int64_t kMaxWarmupSteps = std::int64_t{1} << 30;

struct TrainConfig {
  std::string model;
  std::string dataset = "fashion-mnist";  // a name or a folder (task_data.h)
  int epochs = 1;
  std::int64_t batch = 0;         // 0 = the model's paper batch (ModelInfo::cpu_batch)
  std::string optimizer = "sgd";  // sgd | adam | adamw
  double lr = 0.01;
  double momentum = 0.0;  // SGD only
  // L2 decay (sgd, adam) or decoupled decay (adamw) of the weights; parameters of one dimension
  // (biases, batch-norm scale and shift) get none (Note [Weight decay groups] in trainer.cpp).
  // Unset: the optimizer's default (0; adamw 0.01).
  std::optional<double> weight_decay;
  // Note [Schedules in anvil train] (trainer.cpp): none (the per-epoch --lr-decay below),
  // step (x lr_decay every step_epochs epochs), multistep (x lr_decay at each of the
  // milestones, in epochs) or cosine (to 0 over cosine_epochs epochs, default: epochs), per
  // optimizer step; warmup_steps > 0 ramps the lr up linearly first.
  std::string lr_schedule = "none";
  std::vector<int> milestones;  // epochs, with --lr-schedule multistep
  int step_epochs = 0;          // 0 = 1 with --lr-schedule step
  int cosine_epochs = 0;        // 0 = epochs
  std::int64_t warmup_steps = 0;
  double clip_norm = 0.0;  // global gradient-norm clipping; 0 = off
  double lr_decay =
      1.0;  // multiply the learning rate by this after every epoch from `decay_after` on
  int decay_after = 0;         // 0 = no decay
  int threads = 0;             // 0 = the default (ANVIL_NUM_THREADS or OpenMP's)
  std::string device = "cpu";  // cpu | cuda (cuda:0; models with ModelInfo::gpu_path)
  std::uint64_t seed = 1;
  std::optional<double> target_accuracy;  // fraction in (0, 1]
  double val_split = 0.2;
  std::int64_t subset = 0;    // > 0: only the first `subset` training and test samples
  bool loader_thread = true;  // prepare batches in a background thread (Note [Loader thread])
  bool normalize = true;      // standardise float inputs by the training set's mean and std
  std::string checkpoint;     // saved at the end of every epoch when set
  std::string resume;         // a checkpoint of the same configuration to continue from
  std::string json_log;       // a JSON document rewritten after every epoch when set
  bool progress_bar = false;  // redraw one line (a terminal) instead of printing lines
  // See Note [Divergence]: "stop" ends the run at the first non-finite loss or gradient norm;
  // "continue" trains on. Either way no checkpoint with non-finite weights is written.
  std::string on_divergence = "stop";
  // fp32 | tf32 | bf16 | fp16 (Note [Autocast policy]): bf16 and fp16 train under an
  // AutocastGuard with f32 master weights, fp16 with dynamic loss scaling (optim::GradScaler,
  // its state in the checkpoints); both on the CPU only. tf32 is refused until its GPU mode exists.
  std::string precision = "fp32";
  // Data parallelism (docs/distributed.md): the communicator backend (auto = mpi under mpirun
  // with more than one rank, else single), the gradient bucket cap and whether bucket
  // all-reduces overlap backward. `batch` is the global batch, split evenly over the ranks.
  std::string dist = "auto";
  double bucket_mb = 25.0;
  bool overlap = true;
  // Micro-batches per optimizer step (Note [Global batch and micro-batches] in trainer.cpp):
  // `batch` stays the global batch of one step; each rank runs `accumulate` forward/backward
  // passes of batch / (ranks x accumulate) samples, then one all-reduce and one step.
  int accumulate = 1;
  // ZeRO-1 (Note [Sharded optimizer update] in engine/distributed/data_parallel.h): each rank
  // keeps optimizer state for 1/ranks of the parameters; reduce-scatter, update, all-gather.
  bool shard_optimizer = false;
  // "f32" or "bf16": the wire format of the gradient all-reduce (Note [bf16 gradient buckets] in
  // engine/distributed/data_parallel.h); bf16 rounds each rank's gradients, opt-in.
  std::string grad_bucket_dtype = "f32";
};

struct EpochReport {
  int epoch = 0;  // 1-based
  double lr = 0.0;
  double train_loss = 0.0;           // mean over the epoch's samples
  double train_seconds = 0.0;        // the epoch's training loop (no validation)
  double loader_wait_seconds = 0.0;  // of train_seconds, time spent waiting for batches
  double samples_per_second = 0.0;
  double val_loss = 0.0;
  double val_metric = 0.0;      // accuracy (fraction) or perplexity; NaN without validation data
  double rss_end_bytes = 0.0;   // resident memory at the end of the epoch
  double rss_peak_bytes = 0.0;  // resident peak during the epoch
  double allocator_peak_bytes = 0.0;      // anvil's CPU allocator peak during the epoch
  double gpu_allocator_peak_bytes = 0.0;  // the GPU caching allocator's peak (--device cuda)
  // --precision fp16 (Note [Dynamic loss scaling]): the loss scale at the end of the epoch and
  // the optimizer steps the scaler skipped in it (a gradient overflowed); 0 without scaling.
  double loss_scale = 0.0;
  std::int64_t skipped_steps = 0;
};

struct TrainReport {
  // Where and from what the run was made, taken when it starts (Note [Provenance]).
  std::vector<std::pair<std::string, std::string>> provenance;
  std::string model, dataset, metric;  // metric: "accuracy" or "perplexity"
  std::int64_t train_samples = 0, val_samples = 0, test_samples = 0, parameters = 0;
  int threads = 0;
  std::string device;               // "cpu", or "cuda:0 <GPU name>"
  int first_epoch = 1;              // > 1 when resumed
  std::vector<EpochReport> epochs;  // the epochs this run trained
  double training_seconds = 0.0;    // all epochs, including those before a resume
  std::optional<double>
      time_to_target_seconds;    // training time until validation reached the target
  double testing_seconds = 0.0;  // inference over the whole test set
  double test_loss = 0.0;
  double test_metric = 0.0;               // accuracy (fraction) or perplexity
  double peak_rss_bytes = 0.0;            // host resident peak over the training epochs
  double allocator_peak_bytes = 0.0;      // anvil's CPU allocator peak over the training epochs
  double gpu_allocator_peak_bytes = 0.0;  // the GPU caching allocator's peak over the epochs
  double cpu_utilisation = 0.0;           // process CPU time / (training wall time x threads)
  double loader_wait_fraction = 0.0;      // loader wait / training time (this run's epochs)
  // Data parallelism: backend ("single", "mpi", "nccl"), this rank and the rank count; samples/s
  // over all ranks and per rank (this run's epochs, slowest rank's time); the share of training
  // time spent waiting for gradient all-reduces (mean over ranks).
  std::string dist_backend = "single";
  std::string dist_version;
  int rank = 0, ranks = 1;
  double samples_per_second_total = 0.0;
  double samples_per_second_per_rank = 0.0;
  double comm_wait_fraction = 0.0;
  // See Note [Divergence]: the first non-finite loss, gradient norm or weights of a run that went
  // on
  // (--on-divergence continue), e.g. "epoch 2, step 17: loss nan".
  std::optional<std::string> diverged;
  // --precision fp16: steps skipped over the whole run (before a resume included).
  std::int64_t skipped_steps = 0;
};

// Runs the whole configuration, printing progress and per-epoch lines to `out` (rank 0 only under
// data parallelism; the other ranks print nothing and write no files). Throws
// anvil::Error for a bad configuration, dataset or checkpoint, dist::RanksDisagree (on every
// rank, with one message) when the ranks' configurations differ (Note [Configuration
// handshake]). `job`, when given, receives the communicator as soon as it exists, so that the
// caller can end every rank after an error of this one (Note [Failing fast across ranks]).
TrainReport run_training(const TrainConfig& config, std::ostream& out,
                         dist::CommunicatorPtr* job = nullptr);

// The final summary block printed by `anvil train`.
void print_summary(const TrainReport& report, std::ostream& out);

}  // namespace anvil::tools
