// SPDX-License-Identifier: Apache-2.0
// What `anvil train` reports (train_report.h): the JSON log and the closing summary.
#include "tools/anvil/train_report.h"

#include <cmath>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "tools/anvil/optimizer_setup.h"
#include "tools/anvil/output_paths.h"

namespace anvil::tools {
namespace {

constexpr const char* kWhere = "anvil train";

// The log's content: the tool and provenance, the configuration, each epoch, the result.
nlohmann::json report_json(const TrainConfig& c, const TrainReport& r) {
  using nlohmann::json;
  json epochs = json::array();
  for (const auto& e : r.epochs)
    epochs.push_back(
        {{"epoch", e.epoch},
         {"lr", e.lr},
         {"train_loss", e.train_loss},
         {"train_seconds", e.train_seconds},
         {"loader_wait_seconds", e.loader_wait_seconds},
         {"samples_per_second", e.samples_per_second},
         {"val_loss", e.val_loss},
         {"val_" + r.metric, std::isfinite(e.val_metric) ? json(e.val_metric) : json(nullptr)},
         {"rss_end_MB", e.rss_end_bytes / 1048576.0},
         {"rss_peak_MB", e.rss_peak_bytes / 1048576.0},
         {"allocator_peak_MB", e.allocator_peak_bytes / 1048576.0},
         {"gpu_allocator_peak_MB", e.gpu_allocator_peak_bytes / 1048576.0},
         {"loss_scale", e.loss_scale > 0 ? json(e.loss_scale) : json(nullptr)},
         {"skipped_steps", e.skipped_steps}});
  json config = {{"model", c.model},
                 {"dataset", c.dataset},
                 {"epochs", c.epochs},
                 {"optimizer", c.optimizer},
                 {"lr", c.lr},
                 {"momentum", c.momentum},
                 {"weight_decay", weight_decay_of(c)},
                 {"lr_schedule", c.lr_schedule},
                 {"lr_schedule_description", schedule_description(c)},
                 {"warmup_steps", c.warmup_steps},
                 {"clip", c.clip_norm},
                 {"lr_decay", c.lr_decay},
                 {"decay_after", c.decay_after},
                 {"threads", r.threads},
                 {"device", c.device},
                 {"seed", c.seed},
                 {"val_split", c.val_split},
                 {"subset", c.subset},
                 {"loader_thread", c.loader_thread},
                 {"normalize", c.normalize},
                 {"checkpoint", c.checkpoint},
                 {"resume", c.resume},
                 {"dist", c.dist},
                 {"bucket_mb", c.bucket_mb},
                 {"overlap", c.overlap},
                 {"accumulate", c.accumulate},
                 {"shard_optimizer", c.shard_optimizer},
                 {"grad_bucket_dtype", c.grad_bucket_dtype},
                 {"on_divergence", c.on_divergence},
                 {"precision", c.precision}};
  if (c.target_accuracy) config["target_accuracy"] = *c.target_accuracy;
  json result = {{"training_seconds", r.training_seconds},
                 {"testing_seconds", r.testing_seconds},
                 {"test_loss", r.test_loss},
                 {"test_" + r.metric, r.test_metric},
                 {"peak_rss_MB", r.peak_rss_bytes / 1048576.0},
                 {"allocator_peak_MB", r.allocator_peak_bytes / 1048576.0},
                 {"gpu_allocator_peak_MB", r.gpu_allocator_peak_bytes / 1048576.0},
                 {"cpu_utilisation_pct", r.cpu_utilisation * 100.0},
                 {"loader_wait_pct", r.loader_wait_fraction * 100.0},
                 {"samples_per_second_total", r.samples_per_second_total},
                 {"samples_per_second_per_rank", r.samples_per_second_per_rank},
                 {"comm_wait_pct", r.comm_wait_fraction * 100.0},
                 {"skipped_steps", r.skipped_steps}};
  result["time_to_target_seconds"] =
      r.time_to_target_seconds ? json(*r.time_to_target_seconds) : json(nullptr);
  json prov = json::object();
  for (const auto& [key, value] : r.provenance) prov[key] = value;
  return {
      {"tool", "anvil train"},
      {"provenance", prov},
      {"config", config},
      {"model", r.model},
      {"dataset", r.dataset},
      {"device", r.device},
      {"distributed",
       {{"backend", r.dist_backend}, {"ranks", r.ranks}, {"version", r.dist_version}}},
      {"parameters", r.parameters},
      {"metric", r.metric},
      {"samples", {{"train", r.train_samples}, {"val", r.val_samples}, {"test", r.test_samples}}},
      {"first_epoch", r.first_epoch},
      {"epochs", epochs},
      {"result", result},
      {"diverged", r.diverged ? json(*r.diverged) : json(nullptr)},
      {"finished", r.testing_seconds > 0}};
}

}  // namespace

void write_json_log(const TrainConfig& c, const TrainReport& r) {
  if (c.json_log.empty()) return;
  const std::string tmp = temporary_path(c.json_log);  // unique per process
  {
    std::ofstream f(tmp, std::ios::trunc);
    ANVIL_CHECK(f.good(), kWhere, "cannot write the JSON log ", tmp);
    f << report_json(c, r).dump(2) << '\n';
    ANVIL_CHECK(f.good(), kWhere, "writing the JSON log ", tmp, " failed");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, c.json_log, ec);
  ANVIL_CHECK(!ec, kWhere, "cannot move ", tmp, " to ", c.json_log, ": ", ec.message());
}

void print_summary(const TrainReport& r, std::ostream& out) {
  const bool acc = r.metric == "accuracy";
  out << fmt::format("\n== {} on {} ({} thread(s), {})\n", r.model, r.dataset, r.threads, r.device);
  out << fmt::format(
      "training time      {:.2f} s ({} epoch(s){})\n", r.training_seconds,
      r.first_epoch - 1 + static_cast<int>(r.epochs.size()),
      r.first_epoch > 1 ? fmt::format(", resumed after epoch {}", r.first_epoch - 1) : "");
  if (r.time_to_target_seconds)
    out << fmt::format("time to target     {:.2f} s\n", *r.time_to_target_seconds);
  out << fmt::format("testing time       {:.3f} s ({} test {})\n", r.testing_seconds,
                     r.test_samples, acc ? "samples" : "tokens");
  if (acc)
    out << fmt::format("test accuracy      {:.2f} % (loss {:.4f})\n", r.test_metric * 100.0,
                       r.test_loss);
  else
    out << fmt::format("test perplexity    {:.2f} (loss {:.4f})\n", r.test_metric, r.test_loss);
  out << fmt::format("peak memory        {:.0f} MB resident, {:.0f} MB anvil CPU allocator\n",
                     r.peak_rss_bytes / 1048576.0, r.allocator_peak_bytes / 1048576.0);
  if (r.device != "cpu")
    out << fmt::format("GPU memory         {:.0f} MB peak of anvil's caching allocator on {}\n",
                       r.gpu_allocator_peak_bytes / 1048576.0, r.device);
  out << fmt::format("CPU utilisation    {:.0f} % of {} thread(s)\n", r.cpu_utilisation * 100.0,
                     r.threads);
  out << fmt::format("data loader wait   {:.2f} % of training time\n",
                     r.loader_wait_fraction * 100.0);
  out << fmt::format("distributed        {} backend, {} rank(s) ({})\n", r.dist_backend, r.ranks,
                     r.dist_version);
  // A language model counts tokens, as its epoch lines do.
  out << fmt::format("throughput         {:.0f} {}/s total, {:.0f} per rank\n",
                     r.samples_per_second_total, acc ? "samples" : "tokens",
                     r.samples_per_second_per_rank);
  if (!r.epochs.empty() && r.epochs.back().loss_scale > 0)  // --precision fp16
    out << fmt::format("loss scaling       scale {} at the end, {} step(s) skipped in all\n",
                       r.epochs.back().loss_scale, r.skipped_steps);
  if (r.ranks > 1 || r.dist_backend == "nccl")
    out << fmt::format("communication wait {:.2f} % of training time (gradient all-reduce)\n",
                       r.comm_wait_fraction * 100.0);
}

}  // namespace anvil::tools
