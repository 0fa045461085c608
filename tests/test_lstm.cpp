// SPDX-License-Identifier: Apache-2.0
// Embedding, LSTM layer variants, BCE with logits, the recurrent nn modules and the LSTM models:
// float64 gradient checks, every "lstm" variant against `ref` (forward and backward), memory
// release after a long backward, error messages, exact parameter counts and short training runs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "anvil/anvil.h"
#include "engine/autograd/autograd_meta.h"
#include "engine/autograd/node.h"
#include "engine/dispatch/lstm_problem.h"
#include "engine/nn/recurrent.h"
#include "models/lstm_language_model.h"
#include "models/training_step.h"
#include "engine/ops/lstm.h"
#include "helpers/gradcheck.h"
#include "helpers/lstm_layer_case.h"
#include "helpers/lstm_variant_check.h"
#include "helpers/variant_harness.h"

using namespace anvil;
using anvil::test::gradcheck;
using anvil::test::kLeafNames;
using anvil::test::layer_leaves;
using anvil::test::LayerCase;
using anvil::test::max_abs_diff;
using anvil::test::run_layer;
using anvil::test::uniform_leaf;
using anvil::test::weighted_loss;

namespace {

std::vector<std::string> lstm_variant_names() {
  register_builtin_kernels();
  std::vector<std::string> names;
  for (const auto& v : lstm_table().variants()) names.push_back(v.name);
  return names;
}

// Support of `variant` for every pass of a problem; "" when all are supported.
std::string unsupported_reason(const std::string& variant, LstmProblem p) {
  const auto* v = lstm_table().find(variant);
  if (!v) return "not registered";
  for (LstmPass pass :
       {LstmPass::forward_inference, LstmPass::forward_training, LstmPass::backward}) {
    p.pass = pass;
    if (v->device != p.device_type()) return "runs on another device";
    if (v->supports) {
      const Support s = v->supports(p);
      if (!s.ok) return s.reason;
    }
  }
  return "";
}

// Runs one f32 layer case with the oracle (`ref`, Note [LSTM oracle]) and with the lstm variant
// forced now (forward, backward of a weighted loss, then inference) and compares outputs, final
// states and every gradient; "" when all agree. The bounds are strict (< tol).
std::string check_forced_against_oracle(const LayerCase& c, std::uint64_t seed, double grad_tol) {
  const auto strict = [](double tol) { return std::nextafter(tol, 0.0); };
  const test::LstmRun r = test::run_lstm_oracle(c, DType::f32, seed);
  const test::LstmRun v = test::run_lstm_case(c, DType::f32, Device::cpu(), seed);
  std::string bad = test::compare_lstm_runs(r, v, strict(1e-5), strict(grad_tol));
  // Inference (no graph) gives the same outputs.
  NoGradGuard no_grad;
  const LstmLayerOutput inf = run_layer(v.in);
  bad += test::compare("inference y", inf.y, v.out.y, strict(1e-6)) +
         test::compare("inference c_n", inf.c_n, v.out.c_n, strict(1e-6));
  return bad;
}

void check_variant_against_ref(const std::string& variant, const LayerCase& c, std::uint64_t seed,
                               double grad_tol) {
  ForceVariant force("lstm", variant);
  const std::string bad = check_forced_against_oracle(c, seed, grad_tol);
  INFO(bad);
  CHECK(bad.empty());
}

}  // namespace

// ---- gradient checks (float64)
// -------------------------------------------------------------------

TEST_CASE("embedding gradcheck in float64 with repeated ids", "[lstm][gradcheck]") {
  Tensor ids = Tensor::from_vector(std::vector<std::int64_t>{3, 1, 3, 0, 4, 3}, {2, 3});
  Tensor w = uniform_leaf({6, 5}, -1, 1, 11);
  ANVIL_CHECK_GRADCHECK(
      "embedding", [ids](const std::vector<Tensor>& in) { return embedding(in[0], ids); }, {w});
  // Rows never named get exactly zero gradient; used rows get the sum of their uses.
  Tensor w2 = uniform_leaf({6, 5}, -1, 1, 12);
  Tensor out = embedding(w2, ids);
  sum(out).backward();
  const Tensor& g = w2.grad();
  REQUIRE(g.sizes() == Shape{6, 5});
  for (std::int64_t j = 0; j < 5; ++j) {
    CHECK(g.select(0, 2).select(0, j).item() == 0.0);
    CHECK(g.select(0, 5).select(0, j).item() == 0.0);
    CHECK(g.select(0, 3).select(0, j).item() == 3.0);
    CHECK(g.select(0, 1).select(0, j).item() == 1.0);
  }
}

TEST_CASE("binary cross-entropy with logits gradcheck and stability", "[lstm][gradcheck]") {
  Tensor x = uniform_leaf({4, 3}, -4, 4, 21);
  Tensor t = uniform_leaf({4, 3}, 0, 1, 22);
  ANVIL_CHECK_GRADCHECK(
      "bce_with_logits",
      [](const std::vector<Tensor>& in) { return binary_cross_entropy_with_logits(in[0], in[1]); },
      {x, t});
  // Large logits neither overflow nor lose the value: x = 100, t = 0 -> loss 100.
  Tensor big = Tensor::from_vector(std::vector<double>{100.0, -100.0}, {2});
  Tensor tt = Tensor::from_vector(std::vector<double>{0.0, 1.0}, {2});
  CHECK(binary_cross_entropy_with_logits(big, tt).item() == Approx(100.0));
  Tensor zero = Tensor::from_vector(std::vector<double>{0.0}, {1});
  Tensor half = Tensor::from_vector(std::vector<double>{1.0}, {1});
  CHECK(binary_cross_entropy_with_logits(zero, half).item() == Approx(std::log(2.0)));
}

TEST_CASE("lstm_layer gradcheck in float64 for every variant with f64 support",
          "[lstm][gradcheck]") {
  const std::vector<LayerCase> cases = {{3, 2, 3, 2, false, false},
                                        {3, 2, 3, 2, true, false},
                                        {2, 3, 2, 3, true, true},
                                        {1, 1, 2, 2, false, true}};
  for (const std::string& name : lstm_variant_names()) {
    for (const LayerCase& c : cases) {
      LstmProblem p{c.T,       c.B, c.I, c.H, c.two_biases, c.state, LstmPass::forward_training,
                    DType::f64};
      const std::string why = unsupported_reason(name, p);
      if (!why.empty()) {
        WARN("lstm variant " << name << " skipped for gradcheck of " << p.repr() << ": " << why);
        continue;
      }
      ForceVariant force("lstm", name);
      std::vector<Tensor> leaves = layer_leaves(c, DType::f64, 100 + c.T * 7 + c.H);
      std::vector<Tensor> used;
      std::vector<int> slot;
      for (int i = 0; i < 7; ++i)
        if (leaves[i].defined()) {
          used.push_back(leaves[i]);
          slot.push_back(i);
        }
      INFO("variant " << name << " " << p.repr());
      ANVIL_CHECK_GRADCHECK("lstm_layer/" + name,
                            [slot](const std::vector<Tensor>& in) {
                              std::vector<Tensor> full(7);
                              for (std::size_t k = 0; k < slot.size(); ++k) full[slot[k]] = in[k];
                              LstmLayerOutput o = run_layer(full);
                              return weighted_loss(o, 5);
                            },
                            used, {.eps = 1e-6, .atol = 1e-7, .rtol = 1e-5});
    }
  }
}

TEST_CASE("two-layer LSTM stack gradcheck in float64", "[lstm][gradcheck]") {
  for (const std::string& name : {std::string("ref"), std::string("cpu.fused")}) {
    ForceVariant force("lstm", name);
    Generator g(8);
    auto a = layer_leaves({3, 2, 3, 2, true, false}, DType::f64, 31);
    auto b = layer_leaves({3, 2, 2, 2, true, true}, DType::f64, 32);
    std::vector<Tensor> used = {a[0], a[1], a[2], a[3], a[4], a[5],
                                b[1], b[2], b[3], b[4], b[5], b[6]};
    INFO("variant " << name);
    ANVIL_CHECK_GRADCHECK(
        "lstm_stack/" + name,
        [](const std::vector<Tensor>& in) {
          LstmLayerOutput l0 = lstm_layer(in[0], in[1], in[2], in[3], in[4], in[5]);
          LstmLayerOutput l1 = lstm_layer(l0.y, in[6], in[7], in[8], in[9], in[10], in[11]);
          return weighted_loss(l1, 9) + sum(l0.c_n * l0.h_n);
        },
        used, {.eps = 1e-6, .atol = 1e-7, .rtol = 1e-5});
  }
}

// ---- variants against ref
// -------------------------------------------------------------------------

// Every lstm variant on every pass of the lstm driver's problems against ref in f64 is the op
// drivers' loop (tests/test_op_drivers.cpp, harness/drivers/lstm_driver.cpp).

// ref is a kernel like every other variant (Note [LSTM ref variant]): its table entry's fn runs
// forward (inference and training) and backward through the ops layer, and agrees with the
// default variant on a small problem with initial state and both biases.
TEST_CASE("the lstm ref variant runs through the ops layer and matches the default variant",
          "[lstm][variants]") {
  register_builtin_kernels();
  const LayerCase c{4, 3, 5, 6, true, true};
  std::vector<Tensor> leaves = layer_leaves(c, DType::f32, 77);
  const ops::LstmInputs in{leaves[0].detach(), leaves[1].detach(), leaves[2].detach(),
                           leaves[3].detach(), leaves[4].detach(), leaves[5].detach(),
                           leaves[6].detach()};
  const LstmProblem p = ops::lstm_problem_for(in, LstmPass::forward_training);
  const LstmTable::Variant& def = ops::select_lstm_variant(p);
  const LstmTable::Variant* ref = lstm_table().find("ref");
  REQUIRE(ref != nullptr);
  REQUIRE(def.name != "ref");
  INFO("default variant " << def.name << ", " << p.repr());
  const ops::LstmForwardResult fr = ops::lstm_forward(*ref, in, true);
  const ops::LstmForwardResult fd = ops::lstm_forward(def, in, true);
  CHECK(fr.variant == "ref");
  REQUIRE(fr.saved != nullptr);
  CHECK(max_abs_diff(fr.y, fd.y) < 1e-5);
  CHECK(max_abs_diff(fr.h_n, fd.h_n) < 1e-5);
  CHECK(max_abs_diff(fr.c_n, fd.c_n) < 1e-5);
  const ops::LstmForwardResult inf = ops::lstm_forward(*ref, in, false);
  CHECK(inf.saved == nullptr);
  CHECK(max_abs_diff(inf.y, fr.y) == 0.0);
  CHECK(max_abs_diff(inf.c_n, fr.c_n) == 0.0);
  Generator g(78);
  const Tensor dy = uniform({c.T, c.B, c.H}, -1, 1, DType::f32, &g);
  const Tensor dh_n = uniform({c.B, c.H}, -1, 1, DType::f32, &g);
  const Tensor dc_n = uniform({c.B, c.H}, -1, 1, DType::f32, &g);
  const ops::LstmGrads gr = ops::lstm_backward(*ref, in, fr, dy, dh_n, dc_n);
  const ops::LstmGrads gd = ops::lstm_backward(def, in, fd, dy, dh_n, dc_n);
  const Tensor* got[] = {&gr.dx, &gr.dh0, &gr.dc0, &gr.dw_ih, &gr.dw_hh, &gr.db_ih, &gr.db_hh};
  const Tensor* want[] = {&gd.dx, &gd.dh0, &gd.dc0, &gd.dw_ih, &gd.dw_hh, &gd.db_ih, &gd.db_hh};
  for (int i = 0; i < 7; ++i) {
    INFO("gradient of " << kLeafNames[i]);
    REQUIRE(got[i]->defined());
    REQUIRE(want[i]->defined());
    CHECK(max_abs_diff(*got[i], *want[i]) < 2e-5 * (1.0 + std::sqrt(double(c.T * c.B))));
  }
  // A backward of another variant's forward is refused by name.
  CHECK_THROWS_WITH(ops::lstm_backward(*ref, in, fd, dy, dh_n, dc_n),
                    Catch::Contains("ref") && Catch::Contains(def.name));
}

// cpu.fused and cpu.fused.packed split the recurrence by batch rows over the threads (Note
// [Batch-row-parallel recurrence]): uneven blocks (B = 37 over 2 and 3 threads), blocks of the
// minimum size (B = 32 over 2) and one block (1 thread) all agree with ref, with and without
// initial state; H = 100 gives the packed W_hh^T a partial register tile (4H = 400 columns).
TEST_CASE("cpu.fused(.packed) agree with ref at one to three threads with uneven row blocks",
          "[lstm][variants][threads]") {
  const int saved_threads = get_num_threads();
  for (const char* variant : {"cpu.fused", "cpu.fused.packed"}) {
    for (int threads : {1, 2, 3}) {
      set_num_threads(threads);
      for (const LayerCase& c :
           {LayerCase{6, 37, 11, 16, true, false}, LayerCase{4, 32, 8, 24, false, true},
            LayerCase{3, 34, 20, 100, true, true}}) {
        INFO(variant << ", " << threads << " threads, T=" << c.T << " B=" << c.B << " I=" << c.I
                     << " H=" << c.H);
        check_variant_against_ref(variant, c, 99,
                                  2e-5 * (1.0 + std::sqrt(static_cast<double>(c.T * c.B))));
      }
    }
  }
  set_num_threads(saved_threads);
}

// cpu.fused.packed (Note [Prepacked recurrent weight]) trains like cpu.fused: two copies of one
// small language model (B = 40, so two row blocks at 2 threads; H = 64), five SGD steps each
// (lr 1, gradient clipping at 5) on one batch, at 1 and 2 threads. The two differ at most in the
// rounding of the recurrent products, so losses and every parameter after five steps must agree
// to within kTrainTol (float32). Measured: bitwise equal at this size (both GEMMs sum the K = 64
// terms in order, one FMA chain per element); the tolerance leaves room for other kernels' orders.
TEST_CASE("cpu.fused.packed trains like cpu.fused over five steps at one and two threads",
          "[lstm][variants][training]") {
  constexpr double kTrainTol = 1e-4;
  const int saved_threads = get_num_threads();
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    std::vector<std::vector<Tensor>> params;
    std::vector<std::vector<double>> losses;
    for (const char* variant : {"cpu.fused", "cpu.fused.packed"}) {
      ForceVariant force("lstm", variant);
      Generator g(21);
      models::LstmLanguageModel net(100, 32, 64, 2, false, &g);
      optim::SGD opt(net.parameters(), 1.0);
      const std::int64_t B = 40, T = 6;
      std::vector<nn::NamedProblem> layers;
      net.lstm().problems({T, B, 32}, "lm", layers);
      REQUIRE(layers.size() == 2);
      for (const nn::NamedProblem& np : layers)  // the forced variant is the one that runs
        CHECK(ops::select_lstm_variant(std::get<LstmProblem>(np.problem)).name == variant);
      Tensor ids = randint({B, T}, 0, 100, DType::i64, &g);
      Tensor targets = randint({B, T}, 0, 100, DType::i64, &g);
      losses.emplace_back();
      for (int step = 0; step < 5; ++step) {
        net.reset_state();
        opt.zero_grad();
        Tensor loss = cross_entropy(net.forward(ids), targets.flatten()) * static_cast<double>(T);
        loss.backward();
        optim::clip_grad_norm_(net.parameters(), 5.0);
        opt.step();
        losses.back().push_back(loss.item());
      }
      params.emplace_back();
      for (const Tensor& p : net.parameters()) params.back().push_back(p.clone());
    }
    INFO(threads << " threads");
    for (int step = 0; step < 5; ++step)
      CHECK(std::abs(losses[0][step] - losses[1][step]) <
            kTrainTol * (1 + std::abs(losses[0][step])));
    CHECK(losses[0][4] < losses[0][0]);  // it did train
    REQUIRE(params[0].size() == params[1].size());
    double worst = 0;
    for (std::size_t i = 0; i < params[0].size(); ++i)
      worst = std::max(worst, max_abs_diff(params[0][i], params[1][i]));
    INFO("largest parameter difference after five steps " << worst);
    CHECK(worst < kTrainTol);
  }
  set_num_threads(saved_threads);
}

// A GEMM forced with a (per-thread) ForceVariant guard reaches the recurrent GEMMs that
// cpu.fused runs on its other threads: with gemm=ref forced, the 2-thread forward (rows split
// over two threads) is bitwise the 1-thread one (ref's dot products do not depend on the rows
// around them; oneDNN's differ from ref's in the last bits).
TEST_CASE("cpu.fused passes a forced gemm variant on to its row-block threads",
          "[lstm][variants][threads]") {
  const int saved_threads = get_num_threads();
  const LayerCase c{3, 32, 64, 64, true, false};
  std::vector<Tensor> in = layer_leaves(c, DType::f32, 123);
  NoGradGuard no_grad;
  ForceVariant fused("lstm", "cpu.fused");
  ForceVariant ref_gemm("gemm", "ref");
  set_num_threads(1);
  const Tensor y1 = run_layer(in).y;
  set_num_threads(2);
  const Tensor y2 = run_layer(in).y;
  set_num_threads(saved_threads);
  CHECK(max_abs_diff(y1, y2) == 0.0);
}

TEST_CASE("a forced lstm variant that cannot run a problem is an error with its reason",
          "[lstm][variants]") {
  ForceVariant force("lstm", "cpu.onednn");
  auto in = layer_leaves({2, 2, 3, 4, false, false}, DType::f64, 1);
  CHECK_THROWS_WITH(run_layer(in), Catch::Contains("cpu.onednn") && Catch::Contains("f32"));
  ForceVariant force2("lstm", "cpu.nonesuch");
  auto in32 = layer_leaves({2, 2, 3, 4, false, false}, DType::f32, 1);
  CHECK_THROWS_WITH(run_layer(in32), Catch::Contains("cpu.nonesuch"));
}

TEST_CASE("the default lstm variant: cpu.onednn for one-thread inference, cpu.fused otherwise",
          "[lstm][variants]") {
  // See Note [LSTM heuristic]
  register_builtin_kernels();
  const int saved_threads = get_num_threads();
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (LstmPass pass :
         {LstmPass::forward_inference, LstmPass::forward_training, LstmPass::backward}) {
      LstmProblem p{32, 128, 256, 256, false, true, pass, DType::f32};
      const bool onednn =
          threads == 1 && pass == LstmPass::forward_inference && lstm_table().find("cpu.onednn");
      INFO(threads << " threads, " << lstm_pass_name(pass));
      CHECK(lstm_table().select(p).name == (onednn ? "cpu.onednn" : "cpu.fused"));
    }
    LstmProblem f64{4,         3, 5, 7, false, false, LstmPass::forward_inference,
                    DType::f64};  // oneDNN: f32 only
    CHECK(lstm_table().select(f64).name == "cpu.fused");
  }
  set_num_threads(saved_threads);
}

TEST_CASE("the lstm table lists ref last and every variant has a description", "[lstm][variants]") {
  auto names = lstm_variant_names();
  REQUIRE(names.size() >= 3);
  CHECK(names.back() == "ref");
  CHECK(std::find(names.begin(), names.end(), "cpu.fused") != names.end());
  CHECK(std::find(names.begin(), names.end(), "cpu.onednn") != names.end());
  LstmProblem p{32, 128, 256, 256, false, false, LstmPass::forward_training, DType::f32};
  CHECK(p.repr() == "lstm f32 cpu forward_training T=32 B=128 I=256 H=256 biases=1 state=0");
  CHECK(p.flops() == Approx(2.0 * 32 * 128 * 1024 * 512 + 10.0 * 32 * 128 * 256));
  LstmProblem q = p;
  q.pass = LstmPass::backward;
  CHECK(p.key() != q.key());
}

// ---- memory and long sequences
// --------------------------------------------------------------------

TEST_CASE("backward through T=64 and two layers releases its memory", "[lstm][memory]") {
  for (const std::string& name : lstm_variant_names()) {
    LstmProblem p{64, 16, 32, 32, false, false, LstmPass::forward_training, DType::f32};
    const std::string why = unsupported_reason(name, p);
    if (!why.empty()) {
      WARN("lstm variant " << name << " skipped for the memory test: " << why);
      continue;
    }
    INFO("variant " << name);
    Generator g(4);
    nn::LSTM lstm(32, 32, 2, false, &g);
    Tensor x = normal({64, 16, 32}, 0, 1, DType::f32, &g);
    ForceVariant force("lstm", name);
    // One warm-up step (oneDNN primitive caches, block cache), then measure.
    for (int round = 0; round < 2; ++round) {
      lstm.zero_grad();
      const std::int64_t before = memory_stats().current;
      {
        Tensor loss = sum(lstm.forward(x));
        CHECK(memory_stats().current > before);  // the graph holds saved state
        loss.backward();
        CHECK(std::isfinite(loss.item()));
      }
      // Only the parameter gradients remain.
      std::int64_t grad_bytes = 0;
      for (const auto& prm : lstm.parameters()) {
        REQUIRE(prm.grad().defined());
        grad_bytes += static_cast<std::int64_t>(prm.grad().nbytes());
      }
      const std::int64_t after = memory_stats().current;
      INFO("round " << round << ": before " << before << " after " << after << " grads "
                    << grad_bytes);
      CHECK(after - before <= grad_bytes + 4096);
    }
  }
}

// ---- errors
// ------------------------------------------------------------------------------------------

TEST_CASE("bad lstm and embedding inputs are rejected with clear messages", "[lstm][errors]") {
  auto in = layer_leaves({2, 3, 4, 5, true, false}, DType::f32, 2);
  CHECK_THROWS_WITH(
      lstm_layer(in[0].select(0, 0), in[1], in[2], in[3], in[4], in[5]),
      Catch::Contains("lstm_layer") && Catch::Contains("[T, B, I]") && Catch::Contains("[3,4]"));
  Tensor x_bad = normal({2, 3, 6});
  CHECK_THROWS_WITH(lstm_layer(x_bad, in[1], in[2], in[3], in[4], in[5]),
                    Catch::Contains("w_ih is [20,4]") && Catch::Contains("[20,6]"));
  CHECK_THROWS_WITH(lstm_layer(in[0], normal({3, 4}), in[2], in[3], in[4], in[5]),
                    Catch::Contains("h0 is [3,4]") && Catch::Contains("[3,5]"));
  CHECK_THROWS_WITH(lstm_layer(in[0], in[1], Tensor(), in[3], in[4], in[5]),
                    Catch::Contains("both h0 and c0"));
  CHECK_THROWS_WITH(lstm_layer(in[0], in[1], in[2], in[3], in[4], normal({19})),
                    Catch::Contains("b_ih is [19]"));
  CHECK_THROWS_WITH(lstm_layer(in[0].to(DType::f64), Tensor(), Tensor(), in[3], in[4], in[5]),
                    Catch::Contains("dtype mismatch") && Catch::Contains("f64"));
  CHECK_THROWS_WITH(lstm_layer(in[0], in[1], in[2], in[3], normal({20, 4}), in[5]),
                    Catch::Contains("w_hh [4H, H]"));

  Tensor w = normal({10, 4});
  CHECK_THROWS_WITH(
      embedding(w, Tensor::from_vector(std::vector<std::int64_t>{1, 10}, {2})),
      Catch::Contains("embedding") && Catch::Contains("id 10") && Catch::Contains("0..9"));
  CHECK_THROWS_WITH(embedding(w, Tensor::from_vector(std::vector<std::int64_t>{-1}, {1})),
                    Catch::Contains("id -1"));
  CHECK_THROWS_WITH(embedding(w, normal({3})), Catch::Contains("int64 or int32"));
  CHECK_THROWS_WITH(embedding(normal({10}), Tensor::from_vector(std::vector<std::int64_t>{1}, {1})),
                    Catch::Contains("[V, D]"));
  CHECK_THROWS_WITH(binary_cross_entropy_with_logits(normal({3}), normal({4})),
                    Catch::Contains("binary_cross_entropy_with_logits") && Catch::Contains("[4]"));
  // int32 ids work as well.
  CHECK(embedding(w, Tensor::from_vector(std::vector<std::int32_t>{9, 0}, {2})).sizes() ==
        Shape{2, 4});
}

// ---- nn modules and models
// ------------------------------------------------------------------------

TEST_CASE("LSTM module parameters, shapes, state and kernel problems", "[lstm][nn]") {
  Generator g(1);
  nn::LSTM lstm(6, 5, 2, true, &g);
  auto named = lstm.named_parameters();
  REQUIRE(named.size() == 8);
  CHECK(named[0].first == "weight_ih_l0");
  CHECK(named[0].second.sizes() == Shape{20, 6});
  CHECK(named[3].first == "bias_hh_l0");
  CHECK(named[4].first == "weight_ih_l1");
  CHECK(named[4].second.sizes() == Shape{20, 5});
  const double k = 1.0 / std::sqrt(5.0);
  for (const auto& [n, t] : named)
    for (double v : anvil::test::values_f64(t)) REQUIRE(std::abs(v) <= k);
  Tensor x = normal({4, 3, 6});
  auto [y, st] = lstm.forward(x, nn::LstmState{});
  CHECK(y.sizes() == Shape{4, 3, 5});
  REQUIRE(st.h.size() == 2);
  CHECK(st.c[1].sizes() == Shape{3, 5});
  CHECK(max_abs_diff(st.h[1], y.select(0, 3)) == 0.0);
  // Running the two halves with carried state equals running the whole sequence.
  NoGradGuard no_grad;
  auto [y1, s1] = lstm.forward(x.slice(0, 0, 2), nn::LstmState{});
  auto [y2, s2] = lstm.forward(x.slice(0, 2, 4), s1);
  CHECK(max_abs_diff(y2, y.slice(0, 2, 4)) < 1e-6);
  std::vector<nn::NamedProblem> probs;
  lstm.problems({4, 3, 6}, "net:lstm.", probs);
  REQUIRE(probs.size() == 2);
  CHECK(probs[0].name == "net:lstm.l0");
  CHECK(probs[1].name == "net:lstm.l1");
  CHECK(std::string(op_name(probs[0].problem)) == "lstm");
  const auto& p1 = std::get<LstmProblem>(probs[1].problem);
  CHECK(p1.I == 5);
  CHECK(p1.two_biases);
}

TEST_CASE("LSTM models have the exact parameter counts", "[lstm][models]") {
  CHECK(models::create("lstm32")->num_parameters() == 6180624);
  CHECK(models::create("lstm64")->num_parameters() == 6180624);
  // networks.md's count with PyTorch's two bias vectors per layer.
  CHECK(models::LstmLanguageModel(10000, 256, 256, 2, true).num_parameters() == 6182672);
  // ptb_small: one bias vector per layer gives exactly 4,651,600 (two would give 4,653,200).
  CHECK(models::create("ptb_small")->num_parameters() == 4651600);
  CHECK(models::LstmLanguageModel(10000, 200, 200, 2, true).num_parameters() == 4653200);
  CHECK(models::create("lstm_imdb")->num_parameters() == 213301);
  const auto& info = models::info("lstm32");
  CHECK(info.input == models::InputKind::tokens);
  CHECK(info.sample_shape == Shape{32});
  CHECK(info.cpu_batch == 128);
  CHECK(models::info("ptb_small").cpu_batch == 20);
  CHECK(models::info("lstm_imdb").cpu_batch == 500);
  auto probs = models::problems("lstm64", 128);
  REQUIRE(probs.size() == 5);  // two LSTM layers, then the decoder's three GEMMs
  CHECK(probs[0].name == "lstm64:lstm.l0");
  CHECK(probs[2].name == "lstm64:decoder.forward");
  CHECK(std::get<GemmProblem>(probs[2].problem).m == 64 * 128);
  const auto& p = std::get<LstmProblem>(probs[0].problem);
  CHECK((p.T == 64 && p.B == 128 && p.I == 256 && p.H == 256 && !p.two_biases));
  auto s = models::summary("lstm32");
  CHECK(s.params == 6180624);
  // ptb_small init is U(-0.1, 0.1) everywhere.
  for (const auto& prm : models::create("ptb_small")->parameters())
    for (double v : anvil::test::values_f64(prm)) REQUIRE(std::abs(v) <= 0.1);
}

// A learning outcome, not a smoke run: a small LSTM language model (the models' architecture,
// vocabulary 64) fits one fixed batch of random tokens (seed 21), state reset every step, with
// SGD lr 1 and gradient clipping at 5 as the LSTM models train; the per-token loss must fall
// from ~ln 64 = 4.16 to below a third of its first value within 40 steps.
TEST_CASE("a small LSTM language model fits a fixed batch: loss falls at least 3x",
          "[lstm][models][training]") {
  Generator g(21);
  models::LstmLanguageModel lm(64, 32, 32, 2, false, &g);
  const std::int64_t B = 4, T = 12;
  const Tensor ids = randint({B, T}, 0, 64, DType::i64, &g);
  const Tensor targets = randint({B, T}, 0, 64, DType::i64, &g);
  optim::SGD opt(lm.parameters(), 1.0);
  double first = 0, last = 0;
  for (int step = 0; step < 40; ++step) {
    lm.reset_state();
    opt.zero_grad();
    Tensor loss = lm.sequence_loss(ids, targets);  // summed over T
    if (step == 0) first = loss.item() / T;
    loss.backward();
    optim::clip_grad_norm_(lm.parameters(), 5.0);
    opt.step();
  }
  {
    NoGradGuard no_grad;
    lm.reset_state();
    last = lm.sequence_loss(ids, targets).item() / T;
  }
  INFO("per-token loss " << first << " -> " << last);
  CHECK(first == Approx(std::log(64.0)).epsilon(0.1));
  CHECK(last < first / 3);
}

TEST_CASE("one training step of each LSTM model runs", "[lstm][models][training]") {
  Generator g(12);
  for (const std::string name : {"lstm32", "lstm64", "ptb_small"}) {
    INFO(name);
    auto net = models::create(name);
    const std::int64_t T = models::info(name).sample_shape[0], B = 3;
    Tensor ids = randint({B, T}, 0, 10000, DType::i64, &g);
    Tensor targets = randint({B, T}, 0, 10000, DType::i64, &g);
    optim::SGD opt(net->parameters(), 1.0);
    opt.zero_grad();
    Tensor logits = net->forward(ids);
    REQUIRE(logits.sizes() == Shape{B * T, 10000});
    Tensor loss = cross_entropy(logits, targets.flatten()) * static_cast<double>(T);
    CHECK(loss.item() / T == Approx(std::log(10000.0)).epsilon(0.15));
    loss.backward();
    const double norm = optim::clip_grad_norm_(net->parameters(), 5.0);
    CHECK(std::isfinite(norm));
    opt.step();
    // The state is carried (detached) into the next call: the second call's graph does not
    // reach back into the first one, whose saved tensors backward has released.
    Tensor loss2 = cross_entropy(net->forward(ids), targets.flatten());
    loss2.backward();
    // Through the Module hook (Note [Sequence-model hooks]): the registry's model resets its
    // state, so the next call starts from zeros as the first did.
    net->reset_state();
    NoGradGuard no_grad;
    const Tensor from_zeros = net->forward(ids);
    const Tensor carried = net->forward(ids);
    net->reset_state();
    CHECK(max_abs_diff(net->forward(ids), from_zeros) == 0);
    CHECK(max_abs_diff(carried, from_zeros) > 0);
  }
  // lstm_imdb: one logit per sequence and binary cross-entropy.
  auto imdb = models::create("lstm_imdb");
  Tensor ids = randint({4, 50}, 0, 5000, DType::i64, &g);
  Tensor y = Tensor::from_vector(std::vector<float>{0, 1, 1, 0}, {4, 1});
  optim::Adam opt(imdb->parameters(), {.lr = 1e-2});
  Tensor logits = imdb->forward(ids);
  REQUIRE(logits.sizes() == Shape{4, 1});
  Tensor loss = binary_cross_entropy_with_logits(logits, y);
  loss.backward();
  opt.step();
  CHECK(std::isfinite(loss.item()));
}

namespace {
// Whether the autograd graph of `t` holds a node named `name` (a walk over the next edges).
bool graph_has_node(const Tensor& t, const std::string& name) {
  const AutogradMeta* meta = autograd_meta(t);
  if (meta == nullptr || meta->grad_fn == nullptr) return false;
  std::vector<const Node*> todo{meta->grad_fn.get()}, seen;
  while (!todo.empty()) {
    const Node* n = todo.back();
    todo.pop_back();
    if (std::find(seen.begin(), seen.end(), n) != seen.end()) continue;
    seen.push_back(n);
    if (n->name() == name) return true;
    for (const Edge& e : n->next())
      if (e.valid()) todo.push_back(e.node.get());
  }
  return false;
}
}  // namespace

// See Note [Sequence-model hooks]: what the training loops ask of any module instead of
// downcasting.
TEST_CASE("sequence-model hooks: the LM carries and resets state, others have no fused loss",
          "[lstm][models]") {
  Generator g(31);
  auto lm = std::make_shared<models::LstmLanguageModel>(20, 8, 6, 2, false, &g);
  const Tensor ids = randint({3, 5}, 0, 20, DType::i64, &g);
  const Tensor targets = randint({3, 5}, 0, 20, DType::i64, &g);
  (void)lm->forward(ids);
  // The carried state: one h and c [B, H] per layer, detached from the graph.
  REQUIRE(lm->state().h.size() == 2);
  CHECK(lm->state().h[0].sizes() == Shape{3, 6});
  CHECK(!lm->state().h[0].requires_grad());
  CHECK(lm->state().h[0].is_leaf());
  // A container's reset_state reaches the model inside it.
  nn::Sequential wrapper{lm};
  wrapper.reset_state();
  CHECK(lm->state().empty());
  // model_forward_loss takes the LM's fused decoder + loss (one LinearCrossEntropyBackward
  // node); a wrapper without the hook gets the composed loss of its forward, of equal value.
  const auto& info = models::info("lstm32");
  CHECK(lm->has_sequence_loss());
  const Tensor fused = models::model_forward_loss(info, *lm, ids, targets);
  CHECK(graph_has_node(fused, "LinearCrossEntropyBackward"));
  CHECK(!wrapper.has_sequence_loss());
  lm->reset_state();
  const Tensor composed = models::model_forward_loss(info, wrapper, ids, targets);
  CHECK(!graph_has_node(composed, "LinearCrossEntropyBackward"));
  CHECK(composed.item() == Approx(fused.item()).epsilon(1e-5));
  // A module without a sequence loss says so, naming its type.
  nn::Linear linear(4, 2);
  CHECK_THROWS_WITH(linear.sequence_loss(ids, targets),
                    Catch::Contains("Linear") && Catch::Contains("no sequence loss"));
}

TEST_CASE("a few SGD steps of a tiny lstm32-like model lower the loss",
          "[lstm][models][training]") {
  for (const std::string& name : lstm_variant_names()) {
    INFO("variant " << name);
    ForceVariant force("lstm", name);
    Generator g(5);
    models::LstmLanguageModel net(50, 16, 16, 2, false, &g);
    optim::SGD opt(net.parameters(), 1.0);
    const std::int64_t B = 4, T = 8;
    Tensor ids = randint({B, T}, 0, 50, DType::i64, &g);
    Tensor targets = randint({B, T}, 0, 50, DType::i64, &g);
    double first = 0, last = 0;
    for (int step = 0; step < 30; ++step) {
      net.reset_state();  // the same batch each time: learn it
      opt.zero_grad();
      Tensor loss = cross_entropy(net.forward(ids), targets.flatten()) * static_cast<double>(T);
      loss.backward();
      optim::clip_grad_norm_(net.parameters(), 5.0);
      opt.step();
      (step == 0 ? first : last) = loss.item() / T;
    }
    INFO("loss per step " << first << " -> " << last);
    CHECK(first == Approx(std::log(50.0)).epsilon(0.2));
    CHECK(last < first - 1.0);
  }
}
