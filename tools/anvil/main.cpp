// SPDX-License-Identifier: Apache-2.0
// `anvil`: the command-line tool. Subcommands:
//   anvil models [NAME]   the model zoo (parameters, FLOPs per sample) or one model's layer table
//   anvil train ...       train a model on real data and report the papers' metrics (trainer.h)
//   anvil info            devices, threads, library versions, variant tables, measured peak
// Every error is one line on stderr ("anvil: error: ...") and exit status 1; a usage error is
// CLI11's message and its non-zero status.
#include <unistd.h>

#include <iostream>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "anvil/anvil.h"
#include "engine/core/process_stats.h"
#include "kernels/cpu/peak/machine_peak.h"
#include "tools/anvil/trainer.h"

namespace {

using namespace anvil;

void print_models(const std::string& name) {
  if (!name.empty()) {
    const auto s = models::summary(name);
    std::cout << fmt::format("{}: {}\n{} parameters, {:.4g} forward FLOPs per sample\n\n", name,
                             models::info(name).description, s.params, s.flops_per_sample)
              << s.table();
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

void print_info(bool measure_peak) {
  register_builtin_kernels();  // fills the variant tables and records the library versions
  std::cout << "anvil " << ANVIL_VERSION << "\n\ndevices\n";
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
  std::cout << fmt::format("  memory bandwidth, {} thr.  {:.1f} GB/s\n", threads,
                           measure_triad_bandwidth(threads, 16 << 20, 5) / 1e9);
}

// The command line; main() only adds a last handler around it.
int run_cli(int argc, char** argv) {
  CLI::App app{"anvil: a deep-learning engine with built-in benchmarks"};
  app.require_subcommand(1);

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
  const auto positive = CLI::Range(1, 1 << 30);
  train_cmd->add_option("--epochs", c.epochs, "epochs to train")
      ->capture_default_str()
      ->check(positive);
  train_cmd->add_option("--batch", c.batch, "mini-batch size (default: the model's paper batch)")
      ->check(positive);
  train_cmd->add_option("--optimizer", c.optimizer, "sgd or adam")
      ->capture_default_str()
      ->check(CLI::IsMember({"sgd", "adam"}));
  train_cmd->add_option("--lr", c.lr, "learning rate")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  train_cmd->add_option("--momentum", c.momentum, "SGD momentum")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.999));
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
  train_cmd->add_option("--threads", c.threads, "CPU threads (default: ANVIL_NUM_THREADS or all)")
      ->check(positive);
  train_cmd
      ->add_option(
          "--device", c.device,
          "cpu, or cuda (cuda:0) for the models with a GPU path (the `gpu` column of `anvil "
          "models`)")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda"}));
  train_cmd->add_option("--seed", c.seed, "seed of initialisation, data order and dropout")
      ->capture_default_str();
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
  train_cmd->add_option("--bucket-mb", c.bucket_mb, "gradient bucket cap in MiB (default 25)");
  train_cmd->add_flag("--no-overlap", no_overlap,
                      "all-reduce the gradients after backward instead of during it");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  try {
    if (*models_cmd) {
      print_models(model_name);
    } else if (*info_cmd) {
      print_info(!no_peak);
    } else if (*train_cmd) {
      if (*target_opt) c.target_accuracy = target;
      c.loader_thread = !no_loader_thread;
      c.normalize = !no_normalize;
      c.overlap = !no_overlap;
      c.progress_bar = isatty(STDOUT_FILENO) != 0;
      const auto report = tools::run_training(c, std::cout);
      if (report.rank == 0) tools::print_summary(report, std::cout);  // rank 0 prints
    }
  } catch (const std::exception& e) {
    std::cout << std::flush;
    std::cerr << "anvil: error: " << e.what() << "\n" << std::flush;
    return 1;
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
