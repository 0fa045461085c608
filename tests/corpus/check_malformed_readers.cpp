// SPDX-License-Identifier: Apache-2.0
// The in-process half of the malformed-input corpus (tests/corpus/malformed_corpus.py writes the
// files and the manifest): every case goes through the reader `anvil train` would use (IDX/MNIST
// folders, CIFAR-10 folders, IMDB, PTB, checkpoints into mlp_mnist + Adam), which must throw
// anvil::Error with ONE line naming the malformed file and matching the case's pattern, with the
// peak RSS growing by less than 64 MB; a failed checkpoint load must leave the model and the
// optimizer bitwise unchanged. Usage: check_malformed_readers MANIFEST.tsv; exit 1 on a failure.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "data/cifar.h"
#include "data/idx.h"
#include "data/imdb.h"
#include "data/ptb.h"
#include "anvil/anvil.h"
#include "engine/core/process_stats.h"
#include "models/registry.h"

using namespace anvil;

namespace {

constexpr double kMaxGrowthMb = 64.0;

struct Case {
  std::string id, kind, target, dir, pattern;
};

std::string bytes_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.nbytes());
}

std::vector<std::string> state_of(const nn::Module& net, const optim::Optimizer& opt) {
  std::vector<std::string> out;
  for (const auto& [n, t] : net.named_parameters()) out.push_back(n + bytes_of(t));
  for (const auto& [n, t] : net.named_buffers()) out.push_back(n + bytes_of(t));
  for (const auto& [n, t] : opt.state()) out.push_back(n + bytes_of(t));
  for (const auto& [k, v] : opt.state_metadata()) out.push_back(k + v);
  for (const auto& [k, v] : net.named_extra_state()) out.push_back(k + v);
  out.push_back(default_generator().state());
  return out;
}

// What `anvil train` reads for a case of this kind (tools/anvil/task_data.cpp).
void read_case(const Case& c, bool& changed) {
  const std::string d = c.dir + "/";
  if (c.kind == "mnist") {
    data::read_mnist_dir(c.dir, "train");
    data::read_mnist_dir(c.dir, "t10k");
  } else if (c.kind == "cifar") {
    data::read_cifar10_dir(c.dir, "train");
    data::read_cifar10_dir(c.dir, "test");
  } else if (c.kind == "imdb") {
    data::read_imdb(d + "train.tsv", d + "imdb_word_index.json", 10000, 80);
    data::read_imdb(d + "test.tsv", d + "imdb_word_index.json", 10000, 80);
  } else if (c.kind == "ptb") {
    const auto vocab = data::Vocabulary::build({d + "ptb.valid.txt", d + "ptb.test.txt"});
    data::read_ptb_ids(d + "ptb.valid.txt", vocab);
    data::read_ptb_ids(d + "ptb.test.txt", vocab);
  } else if (c.kind == "checkpoint") {
    manual_seed(5);
    auto net = models::create("mlp_mnist");
    optim::Adam opt(net->parameters(), {});
    const auto before = state_of(*net, opt);
    try {
      optim::load_checkpoint(c.target, *net, &opt);
    } catch (...) {
      changed = state_of(*net, opt) != before;
      throw;
    }
  } else {
    fail("check_malformed_readers", "unknown kind '", c.kind, "'");
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: check_malformed_readers MANIFEST.tsv\n";
    return 2;
  }
  std::ifstream in(argv[1]);
  std::vector<Case> cases;
  for (std::string line; std::getline(in, line);) {
    std::istringstream ss(line);
    Case c;
    std::getline(ss, c.id, '\t');
    std::getline(ss, c.kind, '\t');
    std::getline(ss, c.target, '\t');
    std::getline(ss, c.dir, '\t');
    std::getline(ss, c.pattern, '\t');
    cases.push_back(c);
  }
  if (cases.empty()) {
    std::cerr << "check_malformed_readers: no cases in " << argv[1] << "\n";
    return 2;
  }
  int failures = 0;
  for (const Case& c : cases) {
    std::string problem, message;
    bool changed = false;
    reset_peak_rss();
    const double rss0 = current_rss_bytes();
    try {
      read_case(c, changed);
      problem = "no error";
    } catch (const Error& e) {
      message = e.what();
    } catch (const std::exception& e) {
      problem = std::string("not an anvil::Error but ") + typeid(e).name() + ": " + e.what();
    }
    const double growth_mb = (peak_rss_bytes() - rss0) / (1024.0 * 1024.0);
    // Every problem is reported, not only the first: a reader that allocates hugely must fail
    // on its memory even when its message also changed (as the pre-fix gzip reader's did).
    const auto add = [&problem](const std::string& p) {
      problem += (problem.empty() ? "" : "; ") + p;
    };
    if (problem.empty()) {
      if (message.find('\n') != std::string::npos) add("the message is more than one line");
      if (message.find(c.target) == std::string::npos) add("the message does not name " + c.target);
      if (!std::regex_search(message, std::regex(c.pattern)))
        add("the message does not match /" + c.pattern + "/");
      if (changed) add("the failed load changed the model, the optimizer or the generator");
    }
    if (growth_mb > kMaxGrowthMb) add("peak RSS grew by " + std::to_string(growth_mb) + " MB");
    if (problem.empty()) {
      std::printf("ok %s (+%.1f MB): %.160s\n", c.id.c_str(), growth_mb, message.c_str());
    } else {
      ++failures;
      std::printf("FAIL %s: %s: %s\n", c.id.c_str(), problem.c_str(), message.c_str());
    }
  }
  std::printf("check_malformed_readers: %zu cases, %d failed\n", cases.size(), failures);
  return failures == 0 ? 0 : 1;
}
