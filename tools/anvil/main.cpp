// SPDX-License-Identifier: Apache-2.0
// `anvil`: the command-line tool. Subcommands:
//   anvil models [NAME]   the model zoo (parameters, FLOPs per sample) or one model's layer table
//   anvil train ...       train a model on real data and report the papers' metrics (trainer.h)
//   anvil info            devices, threads, library versions, variant tables, measured peak
// Every error is one line on stderr ("anvil: error: ..."). Exit status 2: a usage error (an
// option the parser refuses, a knob out of its limits, a bad environment variable:
// anvil::ConfigError); 1: any other failure (a dataset, a checkpoint, a diverged run).
//
// Note [Failing fast across ranks] (the tool's side; the communicator's in communicator.h)
// Under a multi-rank launch an error on one rank ends the whole job within seconds: the rank
// prints its line, naming itself ("anvil: error: rank 1 of 2: ..."), and calls
// Communicator::abort(status), which kills every rank (MPI_Abort). Its peers, which may be
// waiting in a collective, print nothing. When every rank fails in the same way (the same bad
// option or file everywhere), ranks other than 0 wait kPeerErrorDelay before printing, so that
// rank 0's abort usually ends them first and the job shows one line. An error that every rank
// reaches together with the same message (dist::RanksDisagree, the configuration handshake) is
// printed by rank 0 alone, and every rank then leaves in order, without an abort. An error
// before the communicator exists (a bad option) exits the process without MPI, which mpirun
// also turns into the end of the job.
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <iostream>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "anvil/anvil.h"
#include "engine/core/process_stats.h"
#include "engine/core/provenance.h"
#include "engine/core/parse_number.h"
#include "engine/distributed/handshake.h"
#include "kernels/cpu/peak/machine_peak.h"
#include "tools/anvil/environment.h"
#include "tools/anvil/trainer.h"

namespace {

using namespace anvil;

constexpr int kUsageError = 2;  // docs/training.md: usage errors exit 2, other failures 1

// One line on stderr, whatever the message holds.
int report_error(const std::string& message, int status) {
  std::string line = message;
  for (char& ch : line)
    if (ch == '\n' || ch == '\r') ch = ' ';
  std::cout << std::flush;
  // One write: std::cerr is unbuffered, and under mpirun a line written in three pieces was
  // seen split by Open MPI's abort banner (dist_train_faults, resume_missing).
  const std::string text = "anvil: error: " + line + "\n";
  std::cerr.write(text.data(), static_cast<std::streamsize>(text.size())).flush();
  return status;
}

constexpr auto kPeerErrorDelay = std::chrono::milliseconds(500);

// The error of this rank of `job` (null or one rank: the plain error line and status).
int report_job_error(const dist::CommunicatorPtr& job, const std::string& message, int status) {
  if (!job || job->size() == 1) return report_error(message, status);
  if (job->rank() != 0) std::this_thread::sleep_for(kPeerErrorDelay);
  report_error(fmt::format("rank {} of {}: {}", job->rank(), job->size(), message), status);
  job->abort(status);  // does not return under MPI
  return status;
}

// --seed as text: CLI11 reads "-1" into an unsigned integer as 2^64 - 1 without a word.
std::uint64_t parse_seed(const std::string& text) {
  const auto seed = parse_number<std::uint64_t>(text);
  ANVIL_CHECK_CONFIG(seed.has_value(), "--seed", "expected an integer in [0, ", UINT64_MAX,
                     "], got '", text, "'");
  return *seed;
}

// --variant op=name[,op=name...]: forced for the whole process, as ANVIL_VARIANT, and checked
// with it (check_forced_variant_ops: an op anvil does not have is an error).
void force_variants(const std::string& spec) {
  try {
    for (const auto& [op, name] : parse_variant_spec(spec)) set_forced_variant(op, name);
  } catch (const Error& e) {
    fail_config("--variant", e.what());
  }
}

void print_models(const std::string& name) {
  if (!name.empty()) {
    const auto s = models::summary(name);
    // The table starts with the name, the parameters and the FLOPs; the description is the one
    // thing it lacks.
    std::cout << models::info(name).description << "\n" << s.table();
    return;
  }
  // gpu: "yes" when the model has a GPU path (ModelInfo::gpu_path: every op has CUDA variants),
  // so that `anvil train --device cuda` and TrainingStep on cuda accept it.
  std::cout << fmt::format("{:<11} {:>12} {:>14} {:>6} {:>4}  {}\n", "model", "parameters",
                           "FLOPs/sample", "batch", "gpu", "description");
  for (const auto& m : models::list()) {
    const auto s = models::summary(m);
    std::cout << fmt::format("{:<11} {:>12} {:>14.4g} {:>6} {:>4}  {}\n", m, s.params,
                             s.flops_per_sample, models::info(m).cpu_batch,
                             models::info(m).gpu_path ? "yes" : "no", models::info(m).description);
  }
}

// `anvil --version`: the release, the revision and what it runs with (Note [Provenance]).
std::string version_text() {
  register_builtin_kernels();  // records the library versions
  std::string text = fmt::format("anvil {} (git {})", anvil_version(), anvil_git_revision());
  for (const auto& [key, value] : provenance())
    if (key.rfind("library.", 0) == 0 || key == "gpu")
      text +=
          fmt::format("\n  {:<16} {}", key.rfind("library.", 0) == 0 ? key.substr(8) : key, value);
  return text;  // CLI11 adds the last newline
}

void print_info(bool measure_peak) {
  register_builtin_kernels();  // fills the variant tables and records the library versions
  std::cout << "anvil " << anvil_version() << " (git " << anvil_git_revision() << ")\n\ndevices\n";
  std::cout << fmt::format("  cpu   {} ({} hardware threads)\n", cpu_model_name(),
                           std::thread::hardware_concurrency());
  std::cout << "  cuda  "
            << (cuda_available() ? std::string("available") : cuda_unavailable_reason()) << "\n";
  std::cout << "\nconfiguration\n";
  for (const auto& [k, v] : config_summary()) std::cout << fmt::format("  {:<24} {}\n", k, v);
  std::cout << "\nvariant tables (op: variants in the table's order; the first supported one runs "
               "by default)\n";
  for (auto* table : variant_tables()) {
    std::string names;
    for (const auto& v : table->list()) names += (names.empty() ? "" : ", ") + v.name;
    std::cout << fmt::format("  {:<22} {}\n", table->op(), names);
  }
  std::cout << "\nvariant tags (Note [Variant tags]; anvil_bench --anvil_skip_tag=TAG leaves them "
               "out)\n";
  for (auto* table : variant_tables())
    for (const auto& v : table->list())
      if (!v.tags.empty())
        std::cout << fmt::format("  {:<22} {:<34} {}\n", table->op(), v.name,
                                 fmt::join(v.tags, " "));
  std::cout << "\nops that never autotune (Note [Ops that do not autotune]; the others time "
               "their variants with ANVIL_AUTOTUNE=1)\n";
  for (auto* table : variant_tables())
    if (const std::string why = table->no_autotune_reason(); !why.empty())
      std::cout << fmt::format("  {:<22} {}\n", table->op(), why);
  if (!measure_peak) return;
  const int threads = get_num_threads();
  std::cout << fmt::format("\nmeasured peak ({} FMA loops and a STREAM triad, best of 3)\n",
                           fma_isa());
  std::cout << fmt::format("  FP32 FMA, 1 thread       {:.1f} GFLOP/s\n",
                           measure_fma_flops(1, 0.3) / 1e9);
  if (threads > 1)
    std::cout << fmt::format("  FP32 FMA, {} threads      {:.1f} GFLOP/s\n", threads,
                             measure_fma_flops(threads, 0.3) / 1e9);
  if (has_bf16_dot())  // the ceiling of the bf16 GEMM and convolution variants
    std::cout << fmt::format("  bf16 dot, 1 thread       {:.1f} GFLOP/s\n",
                             measure_bf16_dot_flops(1, 0.3) / 1e9);
  std::cout << fmt::format("  memory bandwidth, {} thr.  {:.1f} GB/s\n", threads,
                           measure_triad_bandwidth(threads, 16 << 20, 5) / 1e9);
}

// The command line; main() only adds a last handler around it.
int run_cli(int argc, char** argv) {
  CLI::App app{"anvil: a deep-learning engine with built-in benchmarks"};
  app.require_subcommand(1);
  app.set_version_flag(
      "--version", [] { return version_text(); },
      "the release, the git revision and the libraries, then exit");

  auto* models_cmd =
      app.add_subcommand("models", "list the models, or show one model's layer table");
  std::string model_name;
  models_cmd->add_option("name", model_name, "a model name");

  auto* info_cmd = app.add_subcommand(
      "info", "devices, threads, library versions, variant tables, measured peak");
  bool no_peak = false;
  info_cmd->add_flag("--no-peak", no_peak, "skip the peak measurement (about 2 s)");

  auto* train_cmd =
      app.add_subcommand("train", "train a model on real data and report time, accuracy, memory");
  tools::TrainConfig c;
  double target = 0;
  bool no_loader_thread = false, no_normalize = false;
  train_cmd->add_option("--model", c.model, "model name (anvil models)")->required();
  train_cmd->add_option("--dataset", c.dataset, "fashion-mnist, ptb, or a dataset folder")
      ->capture_default_str();
  // The limits of --epochs, --batch, --threads, --bucket-mb, --seed are checked by
  // run_training's check_config (trainer.h) with messages that name them.
  train_cmd
      ->add_option("--epochs", c.epochs,
                   fmt::format("epochs to train (1 to {})", tools::kMaxEpochs))
      ->capture_default_str();
  auto* batch_opt = train_cmd->add_option(
      "--batch", c.batch,
      fmt::format("mini-batch size, 1 to {} (default: the model's paper batch)", tools::kMaxBatch));
  train_cmd->add_option("--optimizer", c.optimizer, "sgd, adam or adamw (decoupled weight decay)")
      ->capture_default_str()
      ->check(CLI::IsMember({"sgd", "adam", "adamw"}));
  train_cmd->add_option("--lr", c.lr, "learning rate")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  train_cmd->add_option("--momentum", c.momentum, "SGD momentum")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.999));
  // The limits of the options below are checked by check_optimizer_config (optimizer_setup.h).
  double weight_decay = 0;
  auto* weight_decay_opt = train_cmd->add_option(
      "--weight-decay", weight_decay,
      "weight decay in [0, 1] of the weights (not of biases and norms): L2 for sgd and adam, "
      "decoupled for adamw (default 0; adamw 0.01)");
  train_cmd
      ->add_option("--lr-schedule", c.lr_schedule,
                   "per step: none (the per-epoch --lr-decay), step (x --lr-decay every "
                   "--step-epochs), multistep (x --lr-decay at each of --milestones) or cosine "
                   "(to 0 over --cosine-epochs)")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "step", "multistep", "cosine"}));
  train_cmd
      ->add_option("--milestones", c.milestones,
                   "epochs at which --lr-schedule multistep multiplies the lr by --lr-decay "
                   "(comma list, e.g. 30,60)")
      ->delimiter(',');
  auto* step_epochs_opt =
      train_cmd->add_option("--step-epochs", c.step_epochs,
                            "epochs between the decays of --lr-schedule step (default 1)");
  auto* cosine_epochs_opt =
      train_cmd->add_option("--cosine-epochs", c.cosine_epochs,
                            "epochs of the cosine of --lr-schedule cosine (default --epochs)");
  train_cmd->add_option("--warmup-steps", c.warmup_steps,
                        "ramp the lr up linearly over this many optimizer steps (0 = none)");
  train_cmd->add_option("--clip", c.clip_norm, "clip gradients to this global L2 norm (0 = off)")
      ->check(CLI::NonNegativeNumber);
  train_cmd
      ->add_option("--lr-decay", c.lr_decay,
                   "multiply the learning rate by this each epoch from --decay-after")
      ->check(CLI::Range(0.0, 1.0));
  train_cmd
      ->add_option("--decay-after", c.decay_after,
                   "first epoch (0-based count of epochs done) to decay after")
      ->check(CLI::NonNegativeNumber);
  auto* threads_opt = train_cmd->add_option(
      "--threads", c.threads,
      fmt::format("CPU threads, 1 to {} ({}; default: ANVIL_NUM_THREADS or OpenMP's)",
                  max_threads(), thread_limit_reason()));
  train_cmd
      ->add_option(
          "--device", c.device,
          "cpu, or cuda (cuda:0) for the models with a GPU path (the `gpu` column of `anvil "
          "models`)")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda"}));
  std::string seed_text = std::to_string(c.seed);
  train_cmd
      ->add_option("--seed", seed_text,
                   "seed of initialisation, data order and dropout (0 to 2^64 - 1)")
      ->capture_default_str();
  std::string variant_spec;
  train_cmd->add_option("--variant", variant_spec,
                        "force kernel variants, op=name[,op=name...] (as ANVIL_VARIANT; the ops "
                        "and variants: anvil info)");
  train_cmd
      ->add_option("--precision", c.precision,
                   "fp32; bf16: linear/matmul/conv2d in bf16 with f32 master weights (autocast); "
                   "fp16: the same in float16 with dynamic loss scaling (scale 2^16, halved on "
                   "an overflow, which skips the step, doubled after 2000 finite steps); bf16 "
                   "and fp16 on cpu only; tf32 is not supported yet")
      ->capture_default_str();
  train_cmd
      ->add_option("--on-divergence", c.on_divergence,
                   "a non-finite loss or gradient norm: stop (an error, exit status 1) or "
                   "continue; no checkpoint with non-finite weights is written either way")
      ->capture_default_str()
      ->check(CLI::IsMember({"stop", "continue"}));
  auto* target_opt =
      train_cmd
          ->add_option("--target-accuracy", target,
                       "report the training time until validation accuracy reaches this "
                       "(a fraction, e.g. 0.85)")
          ->check(CLI::Range(0.0, 1.0));
  train_cmd
      ->add_option("--val-split", c.val_split,
                   "fraction of the training data held out for validation")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.99));
  train_cmd
      ->add_option("--subset", c.subset,
                   "use only the first N training and test samples (tokens for PTB)")
      ->check(CLI::NonNegativeNumber);
  train_cmd->add_option("--checkpoint", c.checkpoint,
                        "save a checkpoint here at the end of every epoch");
  // No CLI::ExistingFile check: the checkpoint reader refuses a missing file, a directory or a
  // FIFO itself, with the one-line "anvil: error: ..." of every other bad input.
  train_cmd->add_option("--resume", c.resume,
                        "continue from this checkpoint (same options, more --epochs)");
  train_cmd->add_option("--json-log", c.json_log, "write the run's metrics as JSON here");
  train_cmd->add_flag("--no-loader-thread", no_loader_thread,
                      "prepare batches inline instead of in a thread");
  train_cmd->add_flag("--no-normalize", no_normalize, "do not standardise the inputs");
  // Data parallelism under mpirun (docs/distributed.md).
  bool no_overlap = false;
  train_cmd
      ->add_option("--dist", c.dist,
                   "communicator: auto (mpi under mpirun -np N > 1), single, mpi or nccl")
      ->check(CLI::IsMember({"auto", "single", "mpi", "nccl"}));
  train_cmd->add_option(
      "--bucket-mb", c.bucket_mb,
      fmt::format("gradient bucket cap in MiB, above 0 and at most {} (default 25)",
                  tools::kMaxBucketMb));
  train_cmd->add_flag("--no-overlap", no_overlap,
                      "all-reduce the gradients after backward instead of during it");
  train_cmd->add_flag("--shard-optimizer", c.shard_optimizer,
                      "ZeRO-1: each rank keeps optimizer state for 1/ranks of the parameters "
                      "(reduce-scatter, update, all-gather); not with --clip or checkpoints");
  train_cmd
      ->add_option("--grad-bucket-dtype", c.grad_bucket_dtype,
                   "wire format of the gradient all-reduce: f32 (default) or bf16 (gradients "
                   "rounded to bf16, summed in f32 per pair; half the bytes; not with "
                   "--shard-optimizer)")
      ->check(CLI::IsMember({"f32", "bf16"}));
  train_cmd->add_option(
      "--accumulate", c.accumulate,
      fmt::format("micro-batches per optimizer step, 1 to {}: gradients accumulate locally, then "
                  "one all-reduce and one step; --batch stays the global batch of a step",
                  tools::kMaxAccumulate));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    return report_error(e.what(), kUsageError);
  }

  dist::CommunicatorPtr job;  // set by run_training (Note [Failing fast across ranks])
  try {
    const bool train = static_cast<bool>(*train_cmd);
    if (train) {
      // 0 means "the default" in TrainConfig (check_config lets it pass); given, it is out of
      // range. Negative values reach check_config.
      ANVIL_CHECK_CONFIG(!(*batch_opt && c.batch == 0), "anvil train", "--batch must be in [1, ",
                         tools::kMaxBatch, "], got 0");
      ANVIL_CHECK_CONFIG(!(*step_epochs_opt && c.step_epochs == 0), "anvil train",
                         "--step-epochs must be in [1, ", tools::kMaxEpochs, "], got 0");
      ANVIL_CHECK_CONFIG(!(*cosine_epochs_opt && c.cosine_epochs == 0), "anvil train",
                         "--cosine-epochs must be in [1, ", tools::kMaxEpochs, "], got 0");
      ANVIL_CHECK_CONFIG(!(*threads_opt && c.threads == 0), "anvil train",
                         "--threads must be in [1, ", max_threads(), "] (", thread_limit_reason(),
                         "), got 0");
      c.seed = parse_seed(seed_text);
      if (!variant_spec.empty()) force_variants(variant_spec);
    }
    tools::check_environment(train && c.threads > 0);
    if (*models_cmd) {
      print_models(model_name);
    } else if (*info_cmd) {
      print_info(!no_peak);
    } else if (train) {
      if (*target_opt) c.target_accuracy = target;
      if (*weight_decay_opt) c.weight_decay = weight_decay;
      c.loader_thread = !no_loader_thread;
      c.normalize = !no_normalize;
      c.overlap = !no_overlap;
      // Under mpirun every rank's stdout is a terminal (a pty of the launcher) merged with the
      // others' output: a redrawn bar would swallow another rank's error line, so lines there.
      c.progress_bar = isatty(STDOUT_FILENO) != 0 && dist::launcher_world_size() <= 1;
      const auto report = tools::run_training(c, std::cout, &job);
      if (report.rank == 0) tools::print_summary(report, std::cout);  // rank 0 prints
    }
  } catch (const dist::RanksDisagree& e) {  // every rank has it: rank 0 says it
    return e.rank() == 0 ? report_error(e.what(), kUsageError) : kUsageError;
  } catch (const ConfigError& e) {
    return report_job_error(job, e.what(), kUsageError);
  } catch (const std::exception& e) {
    return report_job_error(job, e.what(), 1);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // What escapes run_cli's own handlers (e.g. setting up the options): a message, not a crash.
  try {
    return run_cli(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "anvil: error: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "anvil: error: unknown exception\n";
  }
  return 1;
}
