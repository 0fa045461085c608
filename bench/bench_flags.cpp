// SPDX-License-Identifier: Apache-2.0
// anvil_bench's own --anvil_* flags (bench/bench_support.h): one table of names, help lines and
// checks, parsed with CLI11; everything else passes on to Google Benchmark.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "anvil/anvil.h"
#include "bench/bench_support.h"
#include "engine/dispatch/registration.h"
#include "harness/problem_descriptor.h"
#include "kernels/cpu/peak/machine_peak.h"

namespace anvil::bench {
namespace {

Options& mutable_options() {
  static Options o;
  return o;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep))
    if (!item.empty()) out.push_back(item);
  return out;
}

// "1,2,4" -> {1, 2, 4}; every entry a positive integer.
std::vector<std::int64_t> positive_list(const char* flag, const std::string& v) {
  std::vector<std::int64_t> out;
  for (const auto& item : split(v, ',')) {
    std::size_t used = 0;
    long long n = 0;
    try {
      n = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || n <= 0)
      throw std::invalid_argument(
          std::string(flag) + ": expected positive integers separated by commas, got '" + v + "'");
    out.push_back(n);
  }
  return out;
}

// "conv2d=cpu.im2col,cpu.onednn" into skip[op]; every name must be a variant of the op's table.
void parse_skip_variants(const std::string& v, std::map<std::string, std::set<std::string>>& skip) {
  const std::size_t eq = v.find('=');
  const std::string op = v.substr(0, eq);
  if (eq == std::string::npos || eq + 1 == v.size())
    throw std::invalid_argument("--anvil_skip_variant: expected op=name[,name...], got '" + v +
                                "'");
  register_builtin_kernels();
  const VariantTableBase* table = find_variant_table(op);
  if (!table) throw std::invalid_argument("--anvil_skip_variant: unknown op '" + op + "'");
  for (const auto& name : split(v.substr(eq + 1), ',')) {
    bool known = false;
    for (const auto& var : table->list()) known = known || var.name == name;
    if (!known)
      throw std::invalid_argument(
          detail::str_cat("--anvil_skip_variant: ", op, " has no variant '", name, "'"));
    skip[op].insert(name);
  }
}

bool on_off(const char* flag, const std::string& v) {
  if (v != "on" && v != "off")
    throw std::invalid_argument(std::string(flag) + ": expected on or off, got '" + v + "'");
  return v == "on";
}

// A finite number above 0, or also 0 when `zero_ok` (std::stod alone takes "-1", "nan" and
// ignores trailing text).
double checked_number(const char* flag, const char* what, const std::string& v,
                      bool zero_ok = false) {
  std::size_t used = 0;
  double x = 0;
  try {
    x = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || !(x > 0 || (zero_ok && x == 0)) || !std::isfinite(x))
    throw std::invalid_argument(std::string(flag) + ": expected " + what +
                                (zero_ok ? " >= 0" : " above 0") + ", got '" + v + "'");
  return x;
}

std::string one_of(const char* flag, const std::string& v,
                   const std::vector<std::string>& choices) {
  if (std::find(choices.begin(), choices.end(), v) != choices.end()) return v;
  std::string list;
  for (std::size_t i = 0; i < choices.size(); ++i)
    list += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
  throw std::invalid_argument(std::string(flag) + ": expected " + list + ", got '" + v + "'");
}

// One --anvil_* flag: its name, its line in --help, and how its text changes the options. The
// text is checked here, not by CLI11, so that each message names the flag and the value.
struct Flag {
  const char* name;
  const char* help;
  std::function<void(Options&, const std::string&)> apply;
};

const std::vector<Flag>& flags() {
  static const std::vector<Flag> table{
      {"--anvil_threads",
       "thread counts to sweep, e.g. 1,2,4 (default 1, 2, 4, ... up to the cores)",
       [](Options& o, const std::string& v) {
         o.threads.clear();
         for (auto t : positive_list("--anvil_threads", v))
           o.threads.push_back(static_cast<int>(t));
       }},
      {"--anvil_models",
       "models of the model/ step rows, e.g. fcn5,lstm32 (default fcn5; empty: none)",
       [](Options& o, const std::string& v) { o.models = split(v, ','); }},
      {"--anvil_batches",
       "mini-batch sizes of the model rows, e.g. 16,32 (default: paper CPU batch)",
       [](Options& o, const std::string& v) { o.batches = positive_list("--anvil_batches", v); }},
      {"--anvil_batch_sweep", "on: add each model's networks.md batch sweep (default off)",
       [](Options& o, const std::string& v) { o.batch_sweep = on_off("--anvil_batch_sweep", v); }},
      {"--anvil_variant", "force a kernel variant, op=name[,op=name...] (repeatable)",
       [](Options&, const std::string& v) {
         for (const auto& [op, name] : parse_variant_spec(v)) set_forced_variant(op, name);
       }},
      {"--anvil_fold_sgd", "off: time SGD as gradient then step, not folded into backward",
       [](Options& o, const std::string& v) { o.fold_sgd = on_off("--anvil_fold_sgd", v); }},
      {"--anvil_phases", "on: also time forward, backward and update apart (default off)",
       [](Options& o, const std::string& v) { o.phases = on_off("--anvil_phases", v); }},
      {"--anvil_kernels", "off: leave the kernel/ family out (default on)",
       [](Options& o, const std::string& v) { o.kernels = on_off("--anvil_kernels", v); }},
      {"--anvil_kernel_groups",
       "on: add the op drivers' problem groups as kernel/ rows (default off)",
       [](Options& o, const std::string& v) {
         o.kernel_groups = on_off("--anvil_kernel_groups", v);
       }},
      {"--anvil_kernel_min_time", "seconds each CPU kernel/ row runs (default 0.3)",
       [](Options& o, const std::string& v) {
         o.kernel_min_time = checked_number("--anvil_kernel_min_time", "seconds", v);
       }},
      {"--anvil_gpu_min_time", "seconds each GPU model row runs; TF32 rows half (default 1)",
       [](Options& o, const std::string& v) {
         o.gpu_min_time = checked_number("--anvil_gpu_min_time", "seconds", v);
       }},
      {"--anvil_test_broken_variant", "on: register the wrong-on-purpose GEMM variant test.broken",
       [](Options& o, const std::string& v) {
         o.test_broken_variant = on_off("--anvil_test_broken_variant", v);
       }},
      {"--anvil_gpu", "auto, on or off: register the GPU rows (default auto: when a GPU is usable)",
       [](Options& o, const std::string& v) {
         o.gpu = one_of("--anvil_gpu", v, {"auto", "on", "off"});
       }},
      {"--anvil_gpu_inputs",
       "GPU model step inputs: pinned, resident, pageable (default pinned,resident)",
       [](Options& o, const std::string& v) {
         o.gpu_inputs = split(v, ',');
         for (const auto& s : o.gpu_inputs)
           one_of("--anvil_gpu_inputs", s, {"pinned", "resident", "pageable"});
       }},
      {"--anvil_gemm_shapes",
       "GEMM shape groups: dlbench, a model name, deepbench or all (default dlbench,fcn5)",
       [](Options& o, const std::string& v) { o.gemm_shapes = split(v, ','); }},
      {"--anvil_problem", "time this problem, <op>:<descriptor>, in gemm/ and kernel/ (repeatable)",
       [](Options& o, const std::string& v) {
         o.problems.push_back({v, harness::parse_op_problem(v)});
       }},
      {"--anvil_problem_file",
       "time the problems of FILE, one <op>:<descriptor> a line (repeatable)",
       [](Options& o, const std::string& v) {
         for (auto& p : harness::read_problem_file(v)) o.problems.push_back(std::move(p));
       }},
      {"--anvil_skip_variant",
       "leave variants out of gemm/ and kernel/, op=name[,name...] (repeatable)",
       [](Options& o, const std::string& v) { parse_skip_variants(v, o.skip_variants); }},
      {"--anvil_skip_tag",
       "leave out of gemm/ and kernel/ every variant with one of these tags: tf32,"
       "nondeterministic,workspace,opt_in (Note [Variant tags]; repeatable)",
       [](Options& o, const std::string& v) {
         for (const auto& tag : split(v, ','))
           o.skip_tags.insert(one_of("--anvil_skip_tag", tag,
                                     {kTagTf32, kTagNondeterministic, kTagWorkspace, kTagOptIn}));
       }},
      {"--anvil_mode", "check (validate, time once) or perf (time, no validation); default both",
       [](Options& o, const std::string& v) {
         o.mode = one_of("--anvil_mode", v, {"check", "perf"});
       }},
      {"--anvil_precision",
       "autocast policies of the CPU model rows: fp32, bf16, fp16 (default fp32)",
       [](Options& o, const std::string& v) {
         o.precisions.clear();
         for (const auto& name : split(v, ',')) {
           const Precision p = parse_precision(name);  // throws naming the text and the choices
           if (p == Precision::tf32)
             throw std::invalid_argument(
                 "--anvil_precision: tf32 is a GPU tensor-core mode; the CPU model steps run fp32, "
                 "bf16 or fp16");
           if (std::find(o.precisions.begin(), o.precisions.end(), p) == o.precisions.end())
             o.precisions.push_back(p);
         }
       }},
      {"--anvil_peak", "FP32 FMA peak of one core in GFLOP/s (default or 0: measured at start-up)",
       [](Options& o, const std::string& v) {
         o.peak_gflops_per_core = checked_number("--anvil_peak", "GFLOP/s", v, /*zero_ok=*/true);
       }},
  };
  return table;
}

// Note [Benchmark min_time]
// Every anvil family times for its own duration, which Google Benchmark lets a registration set
// over --benchmark_min_time: gemm/ and gemm_remedy/ rows run 0.5 s (GPU GEMMs too), CPU kernel/
// rows --anvil_kernel_min_time, GPU kernel/ rows 0.05 s, GPU model rows --anvil_gpu_min_time,
// model/ CPU steps whole steps for 2 s inside one iteration (Note [Whole-step timing]), peak/ one
// iteration. The flag is therefore accepted but changes no anvil row; anvil_bench says so when it
// is given, and
// --help and docs/benchmarks.md point to the flags that do set the times.
constexpr const char* kMinTimeNote =
    "--benchmark_min_time does not change anvil's rows: gemm/ rows run 0.5 s, CPU kernel/ rows "
    "--anvil_kernel_min_time (GPU 0.05 s), GPU model rows --anvil_gpu_min_time, model/ CPU steps 2 "
    "s of whole "
    "steps, peak/ one iteration";

std::string& help_text() {
  static std::string text;
  return text;
}

}  // namespace

const Options& options() { return mutable_options(); }

void print_help() {
  std::fputs(help_text().c_str(), stdout);
  std::fputs("\nGoogle Benchmark's flags (passed through):\n", stdout);
  benchmark::PrintDefaultHelp();
}

Options parse_options(int& argc, char** argv) {
  Options& o = mutable_options();
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int t = 1; t <= hw; t *= 2) o.threads.push_back(t);  // 1, 2, 4, ... up to the hardware
  o.models = {"fcn5"};
  for (int i = 0; i < argc; ++i) o.command_line += (i ? " " : "") + std::string(argv[i]);

  CLI::App app{"anvil_bench: anvil's benchmark suite (Google Benchmark). anvil's flags:"};
  app.name("anvil_bench");
  app.set_help_flag();  // --help goes on to Google Benchmark, which calls print_help()
  app.allow_extras();   // every other flag is Google Benchmark's
  app.get_formatter()->column_width(40);  // each flag and its help on one line
  app.footer(std::string("Each flag takes --flag=VALUE (or --flag VALUE); an empty value is "
                         "allowed where a list may be empty.\n") +
             kMinTimeNote + ".\n");
  std::vector<std::pair<CLI::Option*, const Flag*>> declared;
  for (const Flag& f : flags()) {
    // expected(0, 1): "--anvil_models=" is an empty list, as before CLI11; no greedy lists.
    CLI::Option* opt = app.add_option(f.name, f.help)
                           ->type_name("VALUE")
                           ->expected(0, 1)
                           ->default_str("")
                           ->allow_extra_args(false)
                           ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    declared.emplace_back(opt, &f);
  }
  help_text() = app.help();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    throw std::invalid_argument(e.what());
  }
  // Apply in command-line order, as the flags are read: a later --anvil_precision replaces an
  // earlier one, and --anvil_problem and --anvil_problem_file keep their interleaving.
  std::map<const CLI::Option*, std::size_t> used;
  for (const CLI::Option* opt : app.parse_order()) {
    const auto it = std::find_if(declared.begin(), declared.end(),
                                 [&](const auto& d) { return d.first == opt; });
    const std::size_t k = used[opt]++;
    it->second->apply(o, opt->results().at(k));
  }

  const std::vector<std::string> rest = app.remaining();
  bool listing = false;  // --benchmark_list_tests or --help: no peak measurement (0.3 s)
  bool min_time = false;
  for (const auto& a : rest) {
    if (a.rfind("--anvil_", 0) == 0)
      throw std::invalid_argument("unknown flag '" + a + "' (anvil_bench --help lists them)");
    if (a == "--benchmark_list_tests" || a == "--benchmark_list_tests=true" || a == "--help")
      listing = true;
    min_time = min_time || a.rfind("--benchmark_min_time", 0) == 0;
  }
  // Google Benchmark gets argv[0] and the rest, in order (the pointers stay valid: they are
  // copies held by a static, as argv's own strings are for the life of main).
  static std::vector<std::string> kept;
  kept = rest;
  argc = 1;
  for (auto& a : kept) argv[argc++] = a.data();

  if (min_time && !listing) std::fprintf(stderr, "anvil_bench: note: %s.\n", kMinTimeNote);
  check_forced_variant_ops();  // --anvil_variant or ANVIL_VARIANT for an op anvil does not have
  if (o.peak_gflops_per_core > 0) {
    o.peak_source = "given with --anvil_peak";
  } else if (listing) {
    o.peak_source = "not measured: only listing the benchmarks";
  } else {
    o.peak_gflops_per_core = measure_fma_flops(1, 0.3) / 1e9;
    o.peak_source = std::string("measured at start-up, 1 thread, ") + fma_isa() + " FMA";
  }
  const bool bf16_rows =
      std::find(o.precisions.begin(), o.precisions.end(), Precision::bf16) != o.precisions.end();
  if (bf16_rows && !listing) o.peak_bf16_gflops_per_core = measure_bf16_dot_flops(1, 0.3) / 1e9;
  return o;
}

}  // namespace anvil::bench
