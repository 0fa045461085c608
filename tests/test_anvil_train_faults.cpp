// SPDX-License-Identifier: Apache-2.0
// Faults of `anvil train` in process (tools/anvil/trainer.h), beside the end-to-end checks of
// tests/cli/test_anvil_limits.sh: knobs out of their limits are anvil::ConfigError (the CLI's
// exit status 2) before anything is read; a diverging run stops and keeps the last good
// checkpoint (Note [Divergence]); outputs and split sizes are checked before the first epoch
// (Note [Outputs checked up front], Note [Splits too small for the model]).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "anvil/anvil.h"
#include "engine/core/parse_number.h"
#include "helpers/datasets.h"
#include "tools/anvil/output_paths.h"
#include "tools/anvil/trainer.h"

using namespace anvil;
namespace fs = std::filesystem;

namespace {

tools::TrainConfig tiny_run() {
  tools::TrainConfig c;
  c.model = "mlp_mnist";
  c.dataset = test::fashion_mnist_dir();
  c.subset = 400;  // 320 training, 80 validation, 400 test images
  c.batch = 40;
  c.threads = 1;
  c.seed = 2;
  return c;
}

fs::path temp_dir(const std::string& name) {
  fs::path d =
      fs::temp_directory_path() / ("anvil_test_faults_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string file_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// run_training must refuse `c` with a ConfigError whose message contains `text`.
void require_config_error(const tools::TrainConfig& c, const std::string& text) {
  std::ostringstream log;
  try {
    tools::run_training(c, log);
    FAIL("run_training accepted a configuration with " << text);
  } catch (const ConfigError& e) {
    REQUIRE_THAT(e.what(), Catch::Contains(text));
  }
  REQUIRE(log.str().empty());  // refused before anything was printed or read
}

}  // namespace

TEST_CASE("parse_number takes the whole text or nothing", "[train][limits]") {
  REQUIRE(parse_number<int>("42") == 42);
  REQUIRE_FALSE(parse_number<int>("x"));
  REQUIRE_FALSE(parse_number<int>("99999999999"));  // std::stoi threw a bare "stoi" here
  REQUIRE_FALSE(parse_number<int>("4 "));
  REQUIRE_FALSE(parse_number<int>(""));
  REQUIRE_FALSE(parse_number<std::uint64_t>("-1"));  // not wrapped to 2^64 - 1
  REQUIRE(parse_number<double>("1.5") == 1.5);
}

TEST_CASE("anvil train: knobs out of their limits are ConfigErrors naming knob and value",
          "[train][limits]") {
  auto c = tiny_run();
  c.threads = 100000;  // crashed inside libgomp
  require_config_error(c, "--threads must be in [1, " + std::to_string(max_threads()) + "] (" +
                              thread_limit_reason() + "), got 100000");
  c = tiny_run();
  c.epochs = tools::kMaxEpochs + 1;
  require_config_error(c, "--epochs must be in [1, 1000000], got 1000001");
  c = tiny_run();
  c.batch = tools::kMaxBatch + 1;
  require_config_error(c, "--batch must be in [1, 1048576], got 1048577");
  c = tiny_run();
  c.bucket_mb = std::numeric_limits<double>::infinity();
  require_config_error(c, "--bucket-mb must be in (0, 65536] MiB, got inf");
  c = tiny_run();
  c.on_divergence = "ignore";
  require_config_error(c, "--on-divergence must be stop or continue, got 'ignore'");
  c = tiny_run();
  c.model = "nosuchnet";
  require_config_error(c, "unknown model 'nosuchnet'");
  REQUIRE_THROWS_AS(set_num_threads(max_threads() + 1), ConfigError);
}

TEST_CASE("a variant forced for an op anvil does not have is an error naming the op",
          "[train][limits]") {
  set_forced_variant("nosuchop", "x");
  try {
    check_forced_variant_ops();
    FAIL("a forced variant for 'nosuchop' was accepted");
  } catch (const ConfigError& e) {
    REQUIRE_THAT(e.what(), Catch::Contains("'nosuchop'") && Catch::Contains("gemm"));
  }
  set_forced_variant("nosuchop", "");
  REQUIRE_NOTHROW(check_forced_variant_ops());
}

TEST_CASE("anvil train: divergence stops the run and keeps the last good checkpoint",
          "[train][divergence]") {
  const fs::path dir = temp_dir("divergence");
  const fs::path ckpt = dir / "ck.safetensors";
  std::ostringstream log;
  auto good = tiny_run();
  good.checkpoint = ckpt.string();
  tools::run_training(good, log);
  const std::string good_bytes = file_bytes(ckpt);

  auto bad = tiny_run();
  bad.lr = 1e30;  // the loss is NaN from the second step on
  bad.checkpoint = ckpt.string();
  REQUIRE_THROWS_WITH(tools::run_training(bad, log),
                      Catch::Contains("training diverged at epoch 1, step 2: loss nan"));
  REQUIRE(file_bytes(ckpt) == good_bytes);  // no NaN weights written over it

  bad.on_divergence = "continue";
  bad.epochs = 2;
  bad.checkpoint = (dir / "continued.safetensors").string();
  const auto r = tools::run_training(bad, log);
  REQUIRE(r.diverged == std::optional<std::string>("epoch 1, step 2: loss nan"));
  REQUIRE(r.epochs.size() == 2);
  REQUIRE_FALSE(fs::exists(bad.checkpoint));
  fs::remove_all(dir);
}

TEST_CASE("anvil train: outputs are checked before the first epoch", "[train][outputs]") {
  const fs::path dir = temp_dir("outputs");
  std::ostringstream log;
  auto c = tiny_run();
  c.checkpoint = (dir / "missing" / "ck.safetensors").string();
  REQUIRE_THROWS_WITH(tools::run_training(c, log),
                      Catch::Contains("--checkpoint " + c.checkpoint + ": the folder") &&
                          Catch::Contains("does not exist"));
  c = tiny_run();
  c.json_log = (dir / "missing" / "log.json").string();
  REQUIRE_THROWS_WITH(tools::run_training(c, log), Catch::Contains("--json-log"));
  c = tiny_run();
  c.checkpoint = c.json_log = (dir / "same").string();
  REQUIRE_THROWS_WITH(tools::run_training(c, log), Catch::Contains("is the same file as"));
  REQUIRE(log.str().find("epoch 1/") == std::string::npos);  // no epoch ran

  // Unique per process, beside the target.
  REQUIRE(tools::temporary_path("a/log.json") == "a/log.json.tmp." + std::to_string(::getpid()));
  fs::create_directory(dir / "log.json.tmp");  // the old fixed name, in the way
  c = tiny_run();
  c.json_log = (dir / "log.json").string();
  REQUIRE_NOTHROW(tools::run_training(c, log));
  REQUIRE(fs::is_regular_file(c.json_log));
  fs::remove_all(dir);
}

TEST_CASE("anvil train: splits too small for the model are refused before training",
          "[train][outputs]") {
  std::ostringstream log;
  tools::TrainConfig c;
  c.model = "ptb_small";
  c.dataset = test::ptb_dir();
  c.subset = 4000;
  c.val_split = 0.005;  // 20 validation tokens: 1 per stream of the batch of 20
  c.lr = 1;
  c.threads = 1;
  REQUIRE_THROWS_WITH(tools::run_training(c, log), Catch::Contains("the validation split of ptb") &&
                                                       Catch::Contains("has 20 tokens, too few"));
  REQUIRE(log.str().find("epoch 1/") == std::string::npos);  // not after the first epoch
}
