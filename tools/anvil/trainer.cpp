// SPDX-License-Identifier: Apache-2.0
// The `anvil train` loop (trainer.h): classification on image/sequence datasets through the
// DataLoader, language models on PTB token streams with carried state (truncated BPTT). The run's
// stages are here; one epoch's steps are in train_epochs.cpp, the JSON log and the summary in
// train_report.cpp.
#include "tools/anvil/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>

#include <fmt/format.h>

#include "data/loader.h"
#include "data/ptb.h"
#include "anvil/anvil.h"
#include "engine/core/parse_number.h"
#include "engine/core/process_stats.h"
#include "engine/core/provenance.h"
#include "engine/distributed/data_parallel.h"
#include "engine/distributed/handshake.h"
#include "engine/distributed/host_staged.h"
#include "engine/distributed/rank_streams.h"
#include "engine/optim/checkpoint.h"
#include "engine/optim/grad_scaler.h"
#include "models/language_model_eval.h"
#include "models/training_step.h"
#include "tools/anvil/divergence.h"
#include "tools/anvil/fault_hook.h"
#include "tools/anvil/optimizer_setup.h"
#include "tools/anvil/output_paths.h"
#include "tools/anvil/task_data.h"
#include "tools/anvil/train_epochs.h"
#include "tools/anvil/train_report.h"

namespace anvil::tools {

namespace {

constexpr const char* kWhere = "anvil train";
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The training device: the host, or cuda:0 (check_config has checked the model and the GPU).
Device training_device(const TrainConfig& c) {
  return c.device == "cuda" ? Device::cuda(0) : Device::cpu();
}

struct EvalResult {
  double loss = 0.0;    // mean per sample (classifiers) or per token (language models)
  double metric = 0.0;  // accuracy or perplexity
};

// Correct predictions in a batch: argmax of the logits (softmax CE) or logit > 0 (binary CE).
std::int64_t count_correct(const models::ModelInfo& info, const Tensor& logits,
                           const Tensor& targets) {
  // bf16 logits (--precision bf16: the last linear runs in bf16) widen exactly.
  const Tensor l = on_device(logits, Device::cpu()).to(DType::f32).contiguous();
  const float* p = l.data<float>();
  const std::int64_t rows = l.sizes()[0], cols = l.numel() / std::max<std::int64_t>(rows, 1);
  std::int64_t correct = 0;
  if (info.loss == models::LossKind::binary_cross_entropy) {
    const Tensor t = targets.contiguous();
    const float* y = t.data<float>();
    for (std::int64_t r = 0; r < rows; ++r) correct += (p[r] > 0.0f) == (y[r] > 0.5f);
    return correct;
  }
  const std::int64_t* y = targets.contiguous().data<std::int64_t>();
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* row = p + r * cols;
    correct += (std::max_element(row, row + cols) - row) == y[r];
  }
  return correct;
}

EvalResult evaluate_classifier(nn::Module& net, const models::ModelInfo& info,
                               const data::TensorDataset& full, const data::LoaderOptions& options,
                               Device device, dist::Communicator& comm) {
  NoGradGuard no_grad;
  net.eval();
  // Under data parallelism each rank evaluates a contiguous share of the set and the sums are
  // reduced over the ranks (Note [Distributed anvil train]).
  const std::int64_t total = full.size(), ranks = comm.size();
  const std::int64_t begin = total * comm.rank() / ranks, end = total * (comm.rank() + 1) / ranks;
  const data::TensorDataset ds = ranks == 1 ? full : data::take(full, begin, end);
  data::LoaderOptions o = options;
  o.num_shards = 1;
  o.shard = 0;
  o.shuffle = false;
  o.drop_last = false;
  o.background = false;
  data::DataLoader loader(ds, o);
  loader.start_epoch(0);
  double loss_sum = 0;
  std::int64_t correct = 0, n = 0;
  while (auto b = loader.next()) {
    const Tensor out = net.forward(on_device(b->inputs, device));
    const std::int64_t rows = b->inputs.sizes()[0];
    loss_sum += models::model_loss(info, out, on_device(b->targets, device)).item() *
                static_cast<double>(rows);
    correct += count_correct(info, out, b->targets);
    n += rows;
  }
  if (ranks > 1) {
    Tensor sums = Tensor::from_vector(
        std::vector<double>{loss_sum, static_cast<double>(correct), static_cast<double>(n)}, {3});
    comm.all_reduce(sums, dist::ReduceOp::sum);
    loss_sum = sums.data<double>()[0];
    correct = static_cast<std::int64_t>(std::llround(sums.data<double>()[1]));
    n = static_cast<std::int64_t>(std::llround(sums.data<double>()[2]));
  }
  return {loss_sum / static_cast<double>(n), static_cast<double>(correct) / static_cast<double>(n)};
}

// Perplexity over a token stream, state carried across consecutive windows; under data
// parallelism each rank evaluates its rows and the sums are reduced
// (models/language_model_eval.h).
EvalResult evaluate_language_model(nn::Module& net, const std::vector<std::int64_t>& ids,
                                   std::int64_t batch, std::int64_t seq_len, Device device,
                                   dist::Communicator& comm) {
  const models::LanguageModelEval r =
      models::evaluate_language_model(net, ids, batch, seq_len, device, &comm);
  return {r.loss, r.perplexity};
}

double lr_for_epoch(const TrainConfig& c, int epoch /* 0-based */) {
  if (c.decay_after <= 0 || epoch < c.decay_after) return c.lr;
  return c.lr * std::pow(c.lr_decay, epoch - c.decay_after + 1);
}

// Every knob against its limit (trainer.h), before anything is read or built: a value out of
// range is the caller's error (anvil::ConfigError, exit status 2 in the CLI).
void check_config(const TrainConfig& c) {
  try {
    (void)models::info(c.model);  // "unknown model 'x'; known models: ..."
  } catch (const ConfigError&) {
    throw;
  } catch (const Error& e) {
    throw ConfigError(e.what());
  }
  ANVIL_CHECK_CONFIG(c.epochs >= 1 && c.epochs <= kMaxEpochs, kWhere, "--epochs must be in [1, ",
                     kMaxEpochs, "], got ", c.epochs);
  // 0 = the default (the model's batch, the default thread count).
  ANVIL_CHECK_CONFIG(c.batch >= 0 && c.batch <= kMaxBatch, kWhere, "--batch must be in [1, ",
                     kMaxBatch, "], got ", c.batch);
  ANVIL_CHECK_CONFIG(c.lr > 0 && std::isfinite(c.lr), kWhere,
                     "--lr must be a positive finite number, got ", c.lr);
  ANVIL_CHECK_CONFIG(c.momentum >= 0 && c.momentum < 1, kWhere,
                     "--momentum must be in [0, 1), got ", c.momentum);
  ANVIL_CHECK_CONFIG(c.clip_norm >= 0 && !std::isnan(c.clip_norm), kWhere,
                     "--clip must be >= 0, got ", c.clip_norm);
  ANVIL_CHECK_CONFIG(c.lr_decay > 0 && c.lr_decay <= 1, kWhere,
                     "--lr-decay must be in (0, 1], got ", c.lr_decay);
  ANVIL_CHECK_CONFIG(c.decay_after >= 0 && c.decay_after <= kMaxEpochs, kWhere,
                     "--decay-after must be in [0, ", kMaxEpochs, "], got ", c.decay_after);
  ANVIL_CHECK_CONFIG(c.threads >= 0 && c.threads <= max_threads(), kWhere,
                     "--threads must be in [1, ", max_threads(), "] (", thread_limit_reason(),
                     "), got ", c.threads);
  ANVIL_CHECK_CONFIG(c.subset >= 0, kWhere, "--subset must be >= 0, got ", c.subset);
  ANVIL_CHECK_CONFIG(c.val_split >= 0.0 && c.val_split < 1.0, kWhere,
                     "--val-split must be in [0, 1), got ", c.val_split);
  ANVIL_CHECK_CONFIG(!c.target_accuracy || (*c.target_accuracy > 0 && *c.target_accuracy <= 1),
                     kWhere, "--target-accuracy must be a fraction in (0, 1], got ",
                     c.target_accuracy.value_or(0));
  ANVIL_CHECK_CONFIG(c.bucket_mb > 0 && c.bucket_mb <= kMaxBucketMb, kWhere,
                     "--bucket-mb must be in (0, ", kMaxBucketMb, "] MiB, got ", c.bucket_mb);
  ANVIL_CHECK_CONFIG(c.accumulate >= 1 && c.accumulate <= kMaxAccumulate, kWhere,
                     "--accumulate must be in [1, ", kMaxAccumulate, "], got ", c.accumulate);
  // See Note [Sharded optimizer update]: the gradient norm and the optimizer state are spread over
  // the ranks; neither clipping nor checkpoints gather them yet.
  ANVIL_CHECK_CONFIG(!c.shard_optimizer || c.clip_norm == 0, kWhere,
                     "--shard-optimizer with --clip is not supported: each rank holds only its "
                     "block of the gradient");
  ANVIL_CHECK_CONFIG(!c.shard_optimizer || (c.checkpoint.empty() && c.resume.empty()), kWhere,
                     "--shard-optimizer with --checkpoint or --resume is not supported: the "
                     "optimizer state is spread over the ranks");
  ANVIL_CHECK_CONFIG(c.grad_bucket_dtype == "f32" || c.grad_bucket_dtype == "bf16", kWhere,
                     "--grad-bucket-dtype must be f32 or bf16, got '", c.grad_bucket_dtype, "'");
  // See Note [bf16 gradient buckets]: ZeRO-1's reduce-scatter has no bf16 form.
  ANVIL_CHECK_CONFIG(c.grad_bucket_dtype == "f32" || !c.shard_optimizer, kWhere,
                     "--grad-bucket-dtype bf16 with --shard-optimizer is not supported: the "
                     "reduce-scatter of the sharded update has no bf16 form");
  // Throws naming the text when it is not a precision (exit 2, as the other knobs).
  const Precision precision = [&] {
    try {
      return parse_precision(c.precision);
    } catch (const Error& e) {
      fail_config(kWhere, "--precision: ", e.what());
    }
  }();
  ANVIL_CHECK_CONFIG(precision != Precision::tf32, kWhere,
                     "--precision tf32 is not supported yet: TF32 is a GPU tensor-core mode, and "
                     "anvil train does not switch its GPU kernels to it (use fp32, or force a "
                     "tf32 variant with --variant)");
  // See Note [Dynamic loss scaling]: the overflow check reads this rank's gradients; with
  // --shard-optimizer each rank holds only its block, and the ranks could disagree on a skip.
  ANVIL_CHECK_CONFIG(precision != Precision::fp16 || !c.shard_optimizer, kWhere,
                     "--precision fp16 with --shard-optimizer is not supported: each rank would "
                     "check only its block of the gradient for overflow");
  ANVIL_CHECK_CONFIG(precision == Precision::fp32 || c.device == "cpu", kWhere, "--precision ",
                     c.precision, " on --device ", c.device,
                     " is not supported yet: the CUDA kernels take no bf16/f16 operands; train "
                     "it on cpu");
  ANVIL_CHECK_CONFIG(c.on_divergence == "stop" || c.on_divergence == "continue", kWhere,
                     "--on-divergence must be stop or continue, got '", c.on_divergence, "'");
  check_optimizer_config(c);  // --optimizer, --weight-decay, the schedule (optimizer_setup.h)
  if (c.device != "cpu") {
    ANVIL_CHECK_CONFIG(c.device == "cuda", kWhere, "--device must be cpu or cuda, got '", c.device,
                       "'");
    // Before the GPU check, so that the answer does not depend on the machine.
    ANVIL_CHECK_CONFIG(
        models::info(c.model).gpu_path, kWhere, "--device cuda: ", c.model,
        " has no GPU path (some of its ops have CPU kernels only; ModelInfo::gpu_path); train it "
        "on cpu");
    require_cuda(kWhere);  // throws with the reason when there is no usable GPU
  }
}

// The checkpoint metadata of a run, and the check that a resumed run is the same run.
std::map<std::string, std::string> run_metadata(const TrainConfig& c, std::int64_t batch) {
  return {{"anvil_train.model", c.model},
          {"anvil_train.dataset", c.dataset},
          {"anvil_train.optimizer", c.optimizer},
          {"anvil_train.weight_decay", fmt::format("{}", weight_decay_of(c))},
          {"anvil_train.lr_schedule", schedule_description(c)},
          {"anvil_train.lr", fmt::format("{}", c.lr)},
          {"anvil_train.batch", std::to_string(batch)},
          {"anvil_train.seed", std::to_string(c.seed)},
          {"anvil_train.subset", std::to_string(c.subset)},
          {"anvil_train.val_split", fmt::format("{}", c.val_split)},
          {"anvil_train.accumulate", std::to_string(c.accumulate)},
          {"anvil_train.grad_bucket_dtype", c.grad_bucket_dtype},
          {"anvil_train.precision", c.precision}};
}

struct ResumeState {
  int epochs_done = 0;
  double training_seconds = 0.0;
  std::optional<double> time_to_target;
  std::uint64_t fingerprint = 0;  // of the whole file, for the handshake
};

// Note [Resume metadata is checked first]
// A checkpoint's run metadata is validated with the rest of the file before anything is loaded:
// the configuration keys must equal this run's, and the counters must be numbers in range
// (parse_number, never std::stoi, whose error is a bare "stoi"). Only then does load_checkpoint
// touch the model and the optimizer, so a bad file changes nothing. Under data parallelism the
// file's fingerprint joins the configuration handshake (Note [Configuration handshake]), so the
// checkpoint is read before the first collective and loaded (load_checkpoint) after it.
ResumeState read_resume(const TrainConfig& c, std::int64_t batch) {
  const auto meta = optim::read_checkpoint_info(c.resume).metadata;
  auto get = [&](const std::string& key) -> std::string {
    const auto it = meta.find(key);
    ANVIL_CHECK(it != meta.end(), kWhere, "--resume ", c.resume, " has no '", key,
                "': not a checkpoint of anvil train");
    return it->second;
  };
  // A checkpoint written before --accumulate (--precision) existed accumulated one micro-batch
  // per step (trained in fp32).
  auto recorded = [&](const std::string& key) {
    if (key == "anvil_train.accumulate" && meta.find(key) == meta.end()) return std::string("1");
    if (key == "anvil_train.grad_bucket_dtype" && meta.find(key) == meta.end())
      return std::string("f32");  // ... and before --grad-bucket-dtype, with f32 buckets
    if (key == "anvil_train.precision" && meta.find(key) == meta.end()) return std::string("fp32");
    // ... and before --weight-decay and --lr-schedule, without either.
    if (key == "anvil_train.weight_decay" && meta.find(key) == meta.end()) return std::string("0");
    if (key == "anvil_train.lr_schedule" && meta.find(key) == meta.end())
      return std::string("none");
    return get(key);
  };
  for (const auto& [key, value] : run_metadata(c, batch))
    ANVIL_CHECK(recorded(key) == value, kWhere, "--resume ", c.resume, ": the checkpoint has ", key,
                " = ", recorded(key), " but this run has ", value,
                "; resuming must repeat the configuration");
  // A time in seconds: finite and not negative.
  auto seconds = [&](const std::string& key, const std::string& text) {
    const auto v = parse_number<double>(text);
    ANVIL_CHECK(v && std::isfinite(*v) && *v >= 0, kWhere, "--resume ", c.resume, ": ", key, " = '",
                text, "' is not a number of seconds (finite, >= 0)");
    return *v;
  };
  ResumeState s;
  const std::string done = get("anvil_train.epochs_done");
  const auto epochs_done = parse_number<int>(done);
  ANVIL_CHECK(epochs_done && *epochs_done >= 1 && *epochs_done <= kMaxEpochs, kWhere, "--resume ",
              c.resume, ": anvil_train.epochs_done = '", done, "' is not an epoch count in [1, ",
              kMaxEpochs, "]");
  s.epochs_done = *epochs_done;
  s.training_seconds = seconds("anvil_train.training_seconds", get("anvil_train.training_seconds"));
  if (const auto it = meta.find("anvil_train.time_to_target"); it != meta.end())
    s.time_to_target = seconds(it->first, it->second);
  s.fingerprint = dist::file_fingerprint(c.resume);
  return s;
}

std::vector<Tensor> checkpointed_state(nn::Module& net);  // below

// What every rank must agree on (Note [Configuration handshake]), in the order a mismatch is
// reported. Paths are not compared (each node may keep its own copy): the data by its sizes and
// content, the checkpoint to resume from by its epoch and content.
std::vector<dist::HandshakeField> configuration_fields(const TrainConfig& c, std::int64_t batch,
                                                       std::int64_t rank_batch,
                                                       const TaskData& task, const TrainReport& r,
                                                       nn::Module& net,
                                                       const ResumeState& resumed) {
  std::string shapes, dtypes;
  for (const Tensor& t : checkpointed_state(net)) {
    const std::string dtype(dtype_name(t.dtype()));
    shapes += shape_str(t.sizes()) + dtype + ";";
    if (dtypes.find(dtype) == std::string::npos) dtypes += (dtypes.empty() ? "" : ",") + dtype;
  }
  std::uint64_t data = 0;
  if (task.language_model) {
    data = dist::fnv1a64(task.lm_train.data(), task.lm_train.size() * sizeof(std::int64_t));
  } else {
    data =
        dist::tensor_fingerprint(task.train.targets, dist::tensor_fingerprint(task.train.inputs));
  }
  return {
      {"model", c.model, ""},
      {"parameter shapes",
       fmt::format("{} tensors, {} parameters", checkpointed_state(net).size(), r.parameters),
       shapes},
      {"precision", dtypes, ""},
      {"autocast precision", c.precision, ""},
      {"device", c.device, ""},
      {"batch", std::to_string(batch), ""},
      {"batch per rank", std::to_string(rank_batch), ""},
      {"accumulate", fmt::format("{} micro-batch(es)", c.accumulate), ""},
      {"shard optimizer", c.shard_optimizer ? "on" : "off", ""},
      {"grad bucket dtype", c.grad_bucket_dtype, ""},
      {"epochs", std::to_string(c.epochs), ""},
      {"bucket cap", fmt::format("{} MiB", c.bucket_mb), ""},
      {"optimizer",
       fmt::format("{} lr={} momentum={} weight-decay={} clip={} lr-decay={} after={} schedule={}",
                   c.optimizer, c.lr, c.momentum, weight_decay_of(c), c.clip_norm, c.lr_decay,
                   c.decay_after, schedule_description(c)),
       ""},
      {"seed", std::to_string(c.seed), ""},
      {"samples",
       fmt::format("{} train / {} validation / {} test", r.train_samples, r.val_samples,
                   r.test_samples),
       ""},
      {"data options",
       fmt::format("subset={} val-split={} normalize={}", c.subset, c.val_split, c.normalize), ""},
      {"training data", fmt::format("fingerprint {:016x}", data), ""},
      {"on-divergence", c.on_divergence, ""},
      {"resume",
       c.resume.empty()
           ? "none"
           : fmt::format("epoch {} of {:016x}", resumed.epochs_done, resumed.fingerprint),
       ""},
  };
}

// The model's buffers (batch-norm running statistics), in registration order.
std::vector<Tensor> model_buffers(const nn::Module& net) {
  std::vector<Tensor> buffers;
  for (auto& [name, b] : net.named_buffers()) buffers.push_back(b);
  return buffers;
}

// What a checkpoint stores of the model: its parameters and buffers.
std::vector<Tensor> checkpointed_state(nn::Module& net) {
  std::vector<Tensor> state = net.parameters();
  for (Tensor& b : model_buffers(net)) state.push_back(std::move(b));
  return state;
}

// What a run builds before its first epoch, filled in by run_training's stages in order (the
// communicator, the data, the model, the optimizer), and read by the epoch loop.
struct Run {
  explicit Run(const TrainConfig& c)
      : config(c),
        info(models::info(c.model)),  // throws listing the models
        batch(c.batch > 0 ? c.batch : info.cpu_batch) {}
  const TrainConfig& config;
  const models::ModelInfo& info;
  const std::int64_t batch;  // the global batch of one optimizer step
  std::int64_t rank_batch = 0, micro_batch = 0;
  dist::CommunicatorPtr comm;
  int ranks = 1;
  Device device;
  TaskData task;
  bool lm = false;  // a language model on a token stream
  nn::ModulePtr net;
  ResumeState resumed;
  std::unique_ptr<dist::DataParallel> dp;
  std::unique_ptr<optim::Optimizer> opt;
  std::optional<optim::GradScaler> scaler;
  data::LoaderOptions loader_options;
  std::unique_ptr<data::DataLoader> loader;  // classifiers only
  std::int64_t steps_per_epoch = 0;
  std::unique_ptr<optim::LRScheduler> sched;
  optim::GradScaler* scaler_ptr() { return scaler ? &*scaler : nullptr; }
};

// Note [Distributed anvil train]
// The communicator and the checks that depend on the rank count
// come before any data is read or model built.
void open_communicator(Run& run, dist::CommunicatorPtr* job) {
  const TrainConfig& config = run.config;
  dist::CommunicatorPtr comm = dist::create_communicator(config.dist);
  if (job != nullptr) *job = comm;  // Note [Failing fast across ranks]
  // --device cuda on several ranks of a host backend: the gradients go through host copies, and
  // ranks may share a GPU (Note [Host-staged device collectives]).
  if (comm->size() > 1 && config.device == "cuda" && comm->cuda_device() < 0)
    comm = dist::host_staged(comm);
  const int ranks = comm->size();
  const std::int64_t batch = run.batch;
  ANVIL_CHECK(batch % ranks == 0, kWhere, "--batch ", batch, " is not divisible by the ", ranks,
              " ranks (", comm->backend(), "); the global batch is split evenly over the ranks");
  ANVIL_CHECK_CONFIG(batch % (ranks * config.accumulate) == 0, kWhere, "--batch ", batch,
                     " is not divisible by ", ranks, " rank(s) x --accumulate ", config.accumulate,
                     "; the global batch of a step is split into equal micro-batches");
  // NCCL moves only device memory: on the host every collective would go over the bootstrap.
  ANVIL_CHECK(comm->backend() != "nccl" || config.device == "cuda", kWhere,
              "--dist nccl trains on the GPU: add --device cuda (or use --dist mpi on the CPU)");
  run.comm = std::move(comm);
  run.ranks = ranks;
  run.rank_batch = batch / ranks;
  // See Note [Global batch and micro-batches]: one step is `batch`, in `accumulate` micro-batches.
  run.micro_batch = run.rank_batch / config.accumulate;
}

// The report's description of the run (provenance, backend, threads), and the training device.
TrainReport start_report(Run& run) {
  const dist::Communicator& comm = *run.comm;
  TrainReport r;
  r.provenance = provenance();
  r.dist_backend = comm.backend();
  r.dist_version = comm.version();
  r.rank = comm.rank();
  r.ranks = run.ranks;
  r.model = run.config.model;
  r.threads = get_num_threads();
  // Under nccl (and host-staged mpi) each rank trains on its communicator's GPU
  // (Note [One GPU per rank], Note [Host-staged device collectives]).
  run.device =
      comm.cuda_device() >= 0 ? Device::cuda(comm.cuda_device()) : training_device(run.config);
  r.device = run.device.is_cpu()
                 ? "cpu"
                 : run.device.str() + " " + require_cuda(kWhere).device_name(run.device.index);
  return r;
}

// Reads the dataset and checks it against the configuration; the report counts its samples.
void load_data(Run& run, TrainReport& r) {
  const TrainConfig& config = run.config;
  run.task = load_task_data(run.info, config.dataset, config.val_split, config.subset);
  const TaskData& task = run.task;
  r.dataset = task.description;
  const bool lm = task.language_model;
  run.lm = lm;
  // A window's rows carry their LSTM state to the next window (Note [Sharded PTB streams]):
  // splitting the rows into micro-batches would need a state per micro-batch.
  ANVIL_CHECK_CONFIG(!(lm && config.accumulate > 1), kWhere,
                     "--accumulate applies to classifiers; ", config.model,
                     " carries its state across windows of the whole batch of streams");
  r.metric = lm ? "perplexity" : "accuracy";
  ANVIL_CHECK(!(lm && config.target_accuracy), kWhere, "--target-accuracy applies to classifiers; ",
              config.model, " reports perplexity");
  check_split_sizes(task, run.batch, config.val_split);
  if (lm) {
    r.train_samples = static_cast<std::int64_t>(task.lm_train.size());
    r.val_samples = static_cast<std::int64_t>(task.lm_val.size());
    r.test_samples = static_cast<std::int64_t>(task.lm_test.size());
  } else {
    r.train_samples = task.train.size();
    r.val_samples = task.val.inputs.defined() ? task.val.size() : 0;
    r.test_samples = task.test.size();
  }
}

// Note [Data parallelism on one NCCL rank]
// An explicit --dist nccl builds the data-parallel path
// on one rank too (averaging over one rank is the identity), so that a machine with one GPU runs
// the NCCL broadcast and the bucketed gradient all-reduce; mpi and single do not.
// --shard-optimizer builds it on one rank too (S = 1: the blocks are the whole buckets), and so
// does --grad-bucket-dtype bf16 (one rank rounds its gradients as each of S ranks does).
std::unique_ptr<dist::DataParallel> make_data_parallel(const Run& run) {
  const TrainConfig& config = run.config;
  const bool bf16_buckets = config.grad_bucket_dtype == "bf16";
  if (!(run.ranks > 1 || run.comm->backend() == "nccl" || config.shard_optimizer || bf16_buckets))
    return nullptr;
  auto dp = std::make_unique<dist::DataParallel>(
      run.comm, run.net->parameters(),
      dist::DataParallelOptions{.bucket_cap_mb = config.bucket_mb,
                                .overlap = config.overlap,
                                .shard_optimizer = config.shard_optimizer,
                                .grad_bucket_dtype = bf16_buckets ? DType::bf16 : DType::f32});
  dp->broadcast_from_root(checkpointed_state(*run.net));  // every rank starts from rank 0's model
  return dp;
}

// The model on its device, the checkpoint to resume from read and checked, the ranks agreed on
// the configuration, and the data-parallel wrapper when the run has one.
void build_model(Run& run, TrainReport& r) {
  const TrainConfig& config = run.config;
  manual_seed(config.seed);  // dropout masks (Note [Resuming a run])
  run.net = models::create(config.model, {.seed = config.seed});
  r.parameters = run.net->num_parameters();
  // Initialised on the host (the same weights as a CPU run of this seed), moved before the
  // optimizer takes the parameter handles; its state is then created on the same device.
  if (run.device.is_cuda()) run.net->to(run.device);
  if (!config.resume.empty()) run.resumed = read_resume(config, run.batch);
  // Before the first collective of training (Note [Configuration handshake]).
  dist::agree_on_configuration(*run.comm, configuration_fields(config, run.batch, run.rank_batch,
                                                               run.task, r, *run.net, run.resumed));
  run.dp = make_data_parallel(run);
}

// The optimizer, the loss scaler, the loader and the schedule; then the checkpoint's state, when
// the run resumes, loaded into them and the model.
void build_training(Run& run, TrainReport& r) {
  const TrainConfig& config = run.config;
  // ZeRO-1: the optimizer updates this rank's blocks (Note [Sharded optimizer update]).
  run.opt = make_optimizer(
      config, config.shard_optimizer ? run.dp->shard_parameters() : run.net->parameters());
  if (run.dp) run.dp->prepare_optimizer(*run.opt);

  // --precision fp16: dynamic loss scaling with PyTorch's defaults (Note [Dynamic loss
  // scaling]); its state is checkpointed, so a resumed run continues with the same scale.
  if (parse_precision(config.precision) == Precision::fp16) run.scaler.emplace();

  run.loader_options = {.batch = run.micro_batch,
                        .shuffle = true,
                        .seed = config.seed,
                        .background = config.loader_thread,
                        .num_shards = run.ranks,
                        .shard = run.comm->rank()};
  const TaskData& task = run.task;
  if (!run.lm && config.normalize && task.train.inputs.dtype() == DType::f32)
    run.loader_options.normalization = data::Normalization::from_data(task.train.inputs);
  // On a GPU the batches are gathered straight into page-locked memory, so each copy to the
  // device is one DMA instead of a staged copy (Note [Pinned batches]); it is still waited for.
  run.loader_options.pin_memory = run.device.is_cuda();
  if (!run.lm) run.loader = std::make_unique<data::DataLoader>(task.train, run.loader_options);
  // Optimizer steps per epoch (Note [Global batch and micro-batches]), for the schedules.
  run.steps_per_epoch =
      run.lm ? data::PtbBatcher(task.lm_train, run.batch, run.info.sample_shape.at(0)).num_batches()
             : (run.loader->batches_per_epoch() + config.accumulate - 1) / config.accumulate;
  run.sched = make_scheduler(config, *run.opt, std::max<std::int64_t>(run.steps_per_epoch, 1));

  if (!config.resume.empty())
    optim::load_checkpoint(config.resume, *run.net, run.opt.get(), run.sched.get(),
                           run.scaler_ptr());
  ANVIL_CHECK(run.resumed.epochs_done < config.epochs, kWhere, "--resume ", config.resume,
              " already has ", run.resumed.epochs_done,
              " epochs; ask for more than that with --epochs");
  r.first_epoch = run.resumed.epochs_done + 1;
  r.training_seconds = run.resumed.training_seconds;
  r.time_to_target_seconds = run.resumed.time_to_target;
}

// The run's opening lines: model, data, optimizer, distribution.
void print_run_header(const Run& run, const TrainReport& r, std::ostream& out) {
  const TrainConfig& config = run.config;
  out << fmt::format(
      "anvil train: {} ({} parameters) on {}: {} train / {} validation / {} test {}, batch {}, "
      "{} lr {}, {} thread(s), {}\n",
      config.model, r.parameters, r.dataset, r.train_samples, r.val_samples, r.test_samples,
      run.lm ? "tokens" : "samples", run.batch, config.optimizer, config.lr, r.threads, r.device);
  if (run.sched || weight_decay_of(config) > 0)
    out << fmt::format("optimizer: {}, weight decay {}{}; lr schedule: {} ({} steps per epoch)\n",
                       config.optimizer, weight_decay_of(config),
                       weight_decay_of(config) > 0 ? " (none on biases and norms)" : "",
                       schedule_description(config), run.steps_per_epoch);
  std::string per_step;  // what --batch means (Note [Global batch and micro-batches])
  if (config.accumulate > 1)
    per_step = fmt::format(
        ", {} samples per rank per step in {} micro-batches of {} (global batch {} per step, "
        "gradients accumulated locally, one all-reduce and one optimizer step)",
        run.rank_batch, config.accumulate, run.micro_batch, run.batch);
  else if (run.ranks > 1)
    per_step = fmt::format(", {} samples per rank per step", run.rank_batch);
  out << fmt::format("distributed: {} backend, {} rank(s){} ({})\n", r.dist_backend, run.ranks,
                     per_step, r.dist_version);
  if (run.dp) {
    out << "data parallel: " << run.dp->describe() << "\n";
    for (const std::string& note : run.dp->notes()) out << "data parallel: " << note << "\n";
  }
}

// This run's sums over its epochs (the epochs before a resume are not in them).
struct RunTotals {
  double wall = 0, cpu = 0, loader_wait = 0, comm_wait = 0;
  std::int64_t samples = 0;
};

// One epoch's training loop with its learning rate, peaks and timings; the epoch's figures go
// into `e` and the run's sums into `totals`.
void train_epoch(Run& run, int epoch, DivergenceGuard& guard, FaultHook& faults, std::ostream& out,
                 EpochReport& e, RunTotals& totals, TrainReport& r) {
  const TrainConfig& config = run.config;
  e.epoch = epoch + 1;
  if (run.sched) {
    e.lr = run.opt->lr();  // the lr of the epoch's first step (Note [Schedules in anvil train])
  } else {
    e.lr = lr_for_epoch(config, epoch);
    run.opt->set_lr(e.lr);
  }
  reset_peak_rss();
  reset_peak_memory();
  if (run.device.is_cuda()) reset_peak_memory(run.device);
  // Each rank its own dropout streams, from (seed, rank, epoch) (Note [Dropout under data
  // parallelism]); one rank keeps the single-process streams.
  if (run.ranks > 1) dist::seed_rank_streams(*run.net, config.seed, run.comm->rank(), epoch);
  const double cpu0 = process_cpu_seconds();
  optim::GradScaler* scaler = run.scaler_ptr();
  const std::int64_t skipped0 = scaler != nullptr ? scaler->skipped_steps() : 0;
  const auto t0 = Clock::now();
  std::int64_t samples = 0;
  if (run.lm) {
    std::tie(e.train_loss, samples) = train_language_model_epoch(
        config, run.info, *run.net, *run.opt, run.sched.get(), run.task.lm_train, run.batch, epoch,
        run.device, out, run.dp.get(), guard, faults, scaler);
  } else {
    std::tie(e.train_loss, samples) =
        train_classifier_epoch(config, run.info, *run.net, *run.opt, run.sched.get(), *run.loader,
                               epoch, run.device, out, run.dp.get(), guard, faults, scaler);
    e.loader_wait_seconds = run.loader->wait_seconds();
  }
  e.train_seconds = seconds_since(t0);
  if (scaler != nullptr) {
    e.loss_scale = scaler->get_scale();
    e.skipped_steps = scaler->skipped_steps() - skipped0;
    r.skipped_steps = scaler->skipped_steps();  // since the run began, resumed or not
  }
  // Every rank evaluates and checkpoints the same buffers (Note [Buffer synchronisation]).
  if (run.dp) run.dp->synchronize_buffers(model_buffers(*run.net));
  if (run.ranks > 1) {  // the slowest rank's time; waits averaged over the ranks
    const double comm_wait0 = run.dp->wait_seconds_total();  // this run's epochs so far
    e.train_seconds = run.comm->all_reduce_scalar(e.train_seconds, dist::ReduceOp::max);
    e.loader_wait_seconds =
        run.comm->all_reduce_scalar(e.loader_wait_seconds, dist::ReduceOp::average);
    totals.comm_wait = run.comm->all_reduce_scalar(comm_wait0, dist::ReduceOp::average);
  } else if (run.dp) {
    totals.comm_wait = run.dp->wait_seconds_total();  // one NCCL rank
  }
  totals.samples += samples;
  totals.cpu += process_cpu_seconds() - cpu0;
  totals.wall += e.train_seconds;
  totals.loader_wait += e.loader_wait_seconds;
  e.samples_per_second = static_cast<double>(samples) / e.train_seconds;
  e.allocator_peak_bytes = static_cast<double>(memory_stats().peak);
  if (run.device.is_cuda())
    e.gpu_allocator_peak_bytes = static_cast<double>(memory_stats(run.device).peak);
  r.training_seconds += e.train_seconds;
}

// Loss and metric on the validation or the test split.
EvalResult evaluate_split(Run& run, bool test) {
  const TaskData& task = run.task;
  if (run.lm)
    return evaluate_language_model(*run.net, test ? task.lm_test : task.lm_val, run.batch,
                                   run.info.sample_shape.at(0), run.device, *run.comm);
  return evaluate_classifier(*run.net, run.info, test ? task.test : task.val, run.loader_options,
                             run.device, *run.comm);
}

// The epoch's validation (when there is a split) and memory figures, and its printed lines.
void finish_epoch_report(Run& run, EpochReport& e, TrainReport& r, std::ostream& out) {
  const TrainConfig& config = run.config;
  e.val_metric = std::numeric_limits<double>::quiet_NaN();
  if (r.val_samples > 0) {
    const EvalResult v = evaluate_split(run, /*test=*/false);
    e.val_loss = v.loss;
    e.val_metric = v.metric;
    if (config.target_accuracy && !r.time_to_target_seconds && v.metric >= *config.target_accuracy)
      r.time_to_target_seconds = r.training_seconds;
  }
  // Current first, then the high-water mark since the epoch began (evaluation included), so
  // the peak printed is never below the current size.
  e.rss_end_bytes = current_rss_bytes();
  e.rss_peak_bytes = std::max(peak_rss_bytes(), e.rss_end_bytes);
  r.peak_rss_bytes = std::max(r.peak_rss_bytes, e.rss_peak_bytes);
  r.allocator_peak_bytes = std::max(r.allocator_peak_bytes, e.allocator_peak_bytes);
  r.gpu_allocator_peak_bytes = std::max(r.gpu_allocator_peak_bytes, e.gpu_allocator_peak_bytes);
  r.epochs.push_back(e);
  out << fmt::format(
      "epoch {}/{}: loss {:.4f}, val {} {}, {:.1f} s ({:.0f} {}/s, loader wait {:.2f} s), "
      "RSS {:.0f} MB (peak {:.0f} MB)\n",
      e.epoch, config.epochs, e.train_loss, r.metric,
      std::isnan(e.val_metric) ? std::string("n/a") : fmt::format("{:.4f}", e.val_metric),
      e.train_seconds, e.samples_per_second, run.lm ? "tokens" : "samples", e.loader_wait_seconds,
      e.rss_end_bytes / 1048576.0, e.rss_peak_bytes / 1048576.0);
  if (run.scaler)
    out << fmt::format("epoch {}/{}: loss scale {}, {} step(s) skipped (gradient overflow)\n",
                       e.epoch, config.epochs, e.loss_scale, e.skipped_steps);
  out << std::flush;
}

// After an epoch: the ranks agree on whether the run diverged, and rank 0 writes the checkpoint
// (unless it did) and the JSON log.
void end_epoch(Run& run, int epoch, DivergenceGuard& guard, TrainReport& r, std::ostream& out) {
  const TrainConfig& config = run.config;
  dist::Communicator& comm = *run.comm;
  // See Note [Divergence]: never a checkpoint of non-finite weights.
  if (!guard.first() && !all_finite(checkpointed_state(*run.net)))
    guard.weights_not_finite(epoch + 1);
  // Note [Checkpoints after agreement]
  // Every rank has finished the epoch (a rank that failed
  // has ended the job) and says whether it saw a divergence; rank 0 writes only then, and
  // only when no rank did.
  std::optional<std::string> diverged = guard.first();
  if (run.ranks > 1 && comm.all_reduce_scalar(diverged ? 1.0 : 0.0, dist::ReduceOp::max) > 0 &&
      !diverged)
    diverged = fmt::format("epoch {}, on another rank", epoch + 1);
  if (diverged && !r.diverged) {  // --on-divergence continue: said once
    r.diverged = *diverged;
    out << "anvil train: training diverged at " << *r.diverged
        << "; continuing (--on-divergence continue), no further checkpoints\n";
  }
  if (!config.checkpoint.empty() && comm.rank() == 0 && !r.diverged) {  // rank 0 writes
    auto meta = run_metadata(config, run.batch);
    meta["anvil_train.epochs_done"] = std::to_string(epoch + 1);
    meta["anvil_train.training_seconds"] = fmt::format("{}", r.training_seconds);
    if (r.time_to_target_seconds)
      meta["anvil_train.time_to_target"] = fmt::format("{}", *r.time_to_target_seconds);
    optim::save_checkpoint(config.checkpoint, *run.net, run.opt.get(), run.sched.get(), meta,
                           run.scaler_ptr());
  }
  if (comm.rank() == 0) write_json_log(config, r);
  if (run.ranks > 1) comm.barrier();  // the checkpoint exists before any rank goes on
}

// The run's rates from this run's sums.
void summarise_totals(const RunTotals& totals, int ranks, TrainReport& r) {
  r.cpu_utilisation = totals.cpu / (totals.wall * r.threads);
  r.loader_wait_fraction = totals.loader_wait / totals.wall;
  r.samples_per_second_total = static_cast<double>(totals.samples) / std::max(totals.wall, 1e-12);
  r.samples_per_second_per_rank = r.samples_per_second_total / ranks;
  r.comm_wait_fraction = totals.comm_wait / std::max(totals.wall, 1e-12);
}

}  // namespace

TrainReport run_training(const TrainConfig& config, std::ostream& out_all,
                         dist::CommunicatorPtr* job) {
  check_config(config);
  // The whole run (training and evaluation) under the precision's policy; the optimizer and
  // the parameters stay f32 (Note [Autocast policy]).
  const AutocastGuard autocast(parse_precision(config.precision));
  Run run(config);
  open_communicator(run, job);
  std::ostream null_stream(nullptr);
  std::ostream& out = run.comm->rank() == 0 ? out_all : null_stream;  // rank 0 prints
  if (run.comm->rank() == 0) check_output_paths(config);              // rank 0 writes them
  if (config.threads > 0) set_num_threads(config.threads);

  TrainReport r = start_report(run);
  load_data(run, r);
  build_model(run, r);
  build_training(run, r);
  print_run_header(run, r, out);

  DivergenceGuard guard(config.on_divergence == "stop", config.checkpoint);
  FaultHook faults = FaultHook::from_env(run.comm->rank());  // Note [Test fault hook]
  RunTotals totals;
  for (int epoch = run.resumed.epochs_done; epoch < config.epochs; ++epoch) {
    EpochReport e;
    train_epoch(run, epoch, guard, faults, out, e, totals, r);
    finish_epoch_report(run, e, r, out);
    end_epoch(run, epoch, guard, r, out);
  }
  summarise_totals(totals, run.ranks, r);

  const auto t_test = Clock::now();
  const EvalResult test = evaluate_split(run, /*test=*/true);
  r.testing_seconds = seconds_since(t_test);
  r.test_loss = test.loss;
  r.test_metric = test.metric;
  if (run.comm->rank() == 0) write_json_log(config, r);
  return r;
}

}  // namespace anvil::tools
