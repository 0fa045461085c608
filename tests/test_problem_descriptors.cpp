// SPDX-License-Identifier: Apache-2.0
// Problem descriptors (harness/problem_descriptor.h): parse(descriptor(p)) == p for every problem
// of every model of the zoo at two batches, on the CPU and on cuda:0 (no GPU needed: problems
// are values), the benchdnn defaults, and bad descriptors refused with one line naming the
// descriptor and what is wrong.
#include <catch2/catch.hpp>

#include <map>
#include <sstream>
#include <string>
#include <variant>

#include "harness/op_driver.h"
#include "harness/problem_descriptor.h"
#include "models/registry.h"

using namespace anvil;
using Catch::Contains;

namespace {

// The problem on another device (every problem type has a `device` member).
OpProblem on(OpProblem p, Device d) {
  std::visit([d](auto& q) { q.device = d; }, p);
  return p;
}

}  // namespace

TEST_CASE("every model problem round-trips through its descriptor", "[descriptors][models]") {
  std::size_t checked = 0;
  std::map<std::string, int> per_op;
  for (const auto& model : models::list()) {
    for (std::int64_t batch : {std::int64_t{1}, std::int64_t{3}}) {
      for (const auto& np : models::problems(model, batch)) {
        for (Device d : {Device::cpu(), Device::cuda(0), Device::cuda(1)}) {
          const OpProblem p = on(np.problem, d);
          const std::string text = harness::op_descriptor(p);
          INFO(np.name << " -> " << text);
          CHECK(text.find(' ') == std::string::npos);
          const OpProblem back = harness::parse_op_problem(text);
          CHECK(back == p);
          ++checked;
          ++per_op[op_name(p)];
        }
      }
    }
  }
  CHECK(checked > 1000);
  for (const char* op :
       {"gemm", "conv2d", "max_pool2d", "adaptive_avg_pool2d", "batch_norm2d", "lstm"})
    CHECK(per_op[op] > 0);
}

// The memory-bound tables' problems come from their drivers' groups (no model layer lists them).
TEST_CASE("every problem of every driver's groups round-trips through its descriptor",
          "[descriptors][drivers]") {
  std::map<std::string, int> per_op;
  for (const harness::OpDriver* d : harness::drivers())
    for (const auto& group : d->groups())
      for (const auto& np : d->group(group))
        for (const OpProblem& pass : d->passes(np.problem))
          for (Device dev : {Device::cpu(), Device::cuda(0), Device::cuda(1)}) {
            const OpProblem p = on(pass, dev);
            const std::string text = harness::op_descriptor(p);
            INFO(d->op() << " group " << group << ": " << np.name << " -> " << text);
            CHECK(text.find(' ') == std::string::npos);
            CHECK(harness::parse_op_problem(text) == p);
            ++per_op[op_name(p)];
          }
  CHECK(per_op.size() == harness::drivers().size());  // every driver's op
}

TEST_CASE("every pass, flag, dtype and device round-trips", "[descriptors]") {
  const char* texts[] = {
      "gemm:64x2048x26752:NT",
      "gemm:7x5x3:TT:b4:lda9:ldb11:ldc6:sa100:sb200:sc300:beta1:f64:cuda",
      "conv2d:mb16g2ic64ih56iw40oc32kh3kw1sh2sw1ph1pw0dh1dw0:bwd_w:bias:f64:cuda3",
      "conv2d:mb1ic3ih8oc4kh3ph1:bias:relu",
      "conv2d:mb2ic4ih9oc4kh3:bwd_d",
      "max_pool2d:mb16ic64ih112kh3sh2ph1:fwd_t:ceil",
      "avg_pool2d:mb2ic3ih7iw9kh3kw2sw1pw1:bwd:exclude_pad:f64",
      "adaptive_avg_pool2d:mb4ic8ih7iw5oh2ow3:fwd_t:cuda",
      "max_pool2d:mb2ic96ih55kh3sh2:bwd:bf16",
      "avg_pool2d:mb2ic3ih7kh3ph1:fwd_t:ceil:exclude_pad:f16",
      "adaptive_avg_pool2d:mb2ic512ih7oh7:bf16",
      "batch_norm2d:mb16ic64ih56:fwd_i",
      "batch_norm2d:mb16ic64ih56iw3:bwd:global:eps0.001:mom0.25",
      "batch_norm2d:mb2ic3ih4:eps1.0000000000000001e-07",
      "lstm:t32mb128ic256hc512:bwd:hh_bias:state:f64:cuda",
      "elementwise:n40000:add",
      "elementwise:n300:pow_scalar_backward:strided:f64:cuda",
      "elementwise:n7:maximum:i32",
      "reduce:o64r40i33:max:f64",
      "reduce:r0",
      "softmax:r3c7",
      "softmax:r64c2000:cross_entropy_forward:i32:cuda",
      "embedding:v10000d200n700:bwd:i32:f64",
      "embedding:v1d1n0",
      "dropout:n40001:p0.2:cuda2",
      "dropout:n5",
      "sgd_update:t7n103776:momentum",
      "adam_update:t2n32767:f64",
      "adam_update:t3n4:decoupled",
      "grad_norm:t1n1:cuda",
      "grad_scale:t4n2",
  };
  for (const char* t : texts) {
    INFO(t);
    const OpProblem p = harness::parse_op_problem(t);
    CHECK(harness::op_descriptor(p) == t);
    CHECK(harness::parse_op_problem(harness::op_descriptor(p)) == p);
  }
}

TEST_CASE("descriptors take benchdnn's defaults", "[descriptors]") {
  const auto c = std::get<ConvProblem>(harness::parse_problem("conv2d", "ic64ih56oc64kh3ph1"));
  CHECK(c.n == 2);  // benchdnn's minibatch
  CHECK((c.w == 56 && c.s == 3 && c.stride_h == 1 && c.stride_w == 1 && c.pad_w == 1));
  CHECK((c.dil_h == 1 && c.dil_w == 1 && c.groups == 1 && c.pass == ConvPass::forward));
  CHECK((!c.has_bias && !c.fuse_relu && c.dtype == DType::f32 && c.device == Device::cpu()));
  // `_` is ignored; the padding is deduced from the output size; dh counts the gaps.
  const auto d =
      std::get<ConvProblem>(harness::parse_problem("conv2d", "mb16_ic64ih56oh56_oc64_kh3_dh1"));
  CHECK((d.pad_h == 2 && d.pad_w == 2 && d.dil_h == 2 && d.p() == 56));
  const auto g = std::get<GemmProblem>(harness::parse_problem("gemm", "64x2048x26752:NT"));
  CHECK(g == [] {
    GemmProblem q = GemmProblem::dense(64, 2048, 26752, false, true);
    return q;
  }());
  CHECK(std::get<GemmProblem>(harness::parse_problem("gemm", "2x3x4")).mode() == "NN");
  const auto mp = std::get<PoolProblem>(harness::parse_problem("max_pool2d", "ic3ih8kh2"));
  CHECK((mp.sh == 2 && mp.oh == 4 && mp.pass == PoolPass::forward_inference));
  const auto bn = std::get<BatchNormProblem>(harness::parse_problem("batch_norm2d", "ic3ih4:bwd"));
  CHECK((bn.batch_stats && bn.eps == 1e-5 && bn.momentum == 0.1));
}

TEST_CASE("bad descriptors are refused with one line naming the descriptor and the fault",
          "[descriptors]") {
  struct Bad {
    const char* text;
    const char* why;
  };
  const Bad bad[] = {
      {"conv2d:mb16ic64ih56oc64kh3px1", "unknown letter 'px'"},
      {"conv2d:mb16ic64ihoc64kh3", "missing number after 'ih'"},
      {"conv2d:mb16ic64ih56oc64", "missing 'kh'"},
      {"conv2d:mb99999999999999999999ic3ih5oc3kh3", "overflows"},
      {"conv2d:mb2ic3ih5oc3kh3ph0oh9", "inconsistent sizes: oh9"},
      {"conv2d:mb2ic3ih5oc4kh3g2", "groups=2 must divide C=3"},
      {"conv2d:mb2ic3ih5oc3kh9", "larger than the padded input"},
      {"conv2d:mb2ic3ih5oc3kh3:bwd_d:bwd_w", "both 'bwd_d' and 'bwd_w'"},
      {"conv2d:mb2ic3ih5oc3kh3:fast", "unknown part 'fast'"},
      {"conv2d:mb2ic3ih5oc3kh3ic4", "'ic' given twice"},
      {"conv2d:mb2ic3ih5oc3kh3:bwd_d:relu", "relu fuses into the forward pass only"},
      {"conv2d:", "empty descriptor"},
      {"gemm:64x2048", "expected MxNxK"},
      {"gemm:64x2048x:NT", "missing number after 'Nx'"},
      {"gemm:4x4x4:NT:lda2", "lda=2 < 4"},
      {"gemm:4x4x0:NN:lda0", "lda=0 < 1 (max(1, columns of stored A))"},
      {"gemm:4x4x4:b0", "batch must be positive"},
      {"gemm:4x4x4:NT:cuda:cpu", "more than one device"},
      {"max_pool2d:mb2ic3ih5kh2ph2", "at most half the kernel"},
      {"max_pool2d:mb2ic3ih8kh2oh3", "inconsistent sizes: oh3"},
      {"max_pool2d:mb2ic3ih8kh2:exclude_pad", "exclude_pad applies to avg_pool2d only"},
      {"adaptive_avg_pool2d:mb2ic3ih8", "missing 'oh'"},
      {"adaptive_avg_pool2d:mb2ic3ih8oh2kh2", "unknown letter 'kh'"},
      {"batch_norm2d:mb1ic3ih1", "more than 1 value per channel"},
      {"batch_norm2d:mb2ic3ih4:eps", "unknown part 'eps'"},
      {"batch_norm2d:mb2ic3ih4:eps1e-5x", "missing number after 'eps'"},
      {"lstm:t0mb2ic3hc4", "sizes must be positive"},
      {"lstm:t2mb2ic3", "missing 'hc'"},
      {"layer_norm:mb2", "unknown op 'layer_norm'"},
      {"elementwise:n5", "missing the op"},
      {"elementwise:n5:log:i32", "log is defined on f32 and f64 only"},
      {"elementwise:n5:add:mul", "both 'add' and 'mul'"},
      {"reduce:o2i3", "missing 'r'"},
      {"reduce:r0:max", "max needs a non-empty reduced extent"},
      {"softmax:r2c3:softmin", "unknown part 'softmin'"},
      {"softmax:r2", "missing 'c'"},
      {"embedding:v0d4n3", "need a table of at least one row"},
      {"embedding:v4d4n3:bwd:i16", "unknown part 'i16'"},
      {"dropout:n10:p1", "must be in [0, 1)"},
      {"dropout:n10:p", "unknown part 'p'"},
      {"adam_update:t2n10:momentum", "momentum applies to sgd_update only"},
      {"sgd_update:t2n10:decoupled", "decoupled applies to adam_update only"},
      {"grad_norm:t0n5", "cannot hold"},
      {"mb16ic64", "expected <op>:<descriptor>"},
  };
  for (const auto& b : bad) {
    INFO(b.text);
    try {
      harness::parse_op_problem(b.text);
      FAIL("accepted " << b.text);
    } catch (const std::invalid_argument& e) {
      const std::string m = e.what();
      CHECK_THAT(m, Contains(b.why));
      CHECK(m.find('\n') == std::string::npos);
      const std::string t = b.text;
      CHECK_THAT(m, Contains(t.substr(t.find(':') + 1)));
    }
  }
}

TEST_CASE("batch files list one problem per line with # comments", "[descriptors]") {
  std::istringstream in(
      "# resnet50's layer3.0.conv2 and the DLBench GEMM\n"
      "conv2d:mb16ic256ih28oc256kh3sh2ph1   # strided 3x3\n"
      "\n"
      "   gemm:1024x2048x26752:NT\n");
  const auto list = harness::read_problem_list(in, "shapes.txt");
  REQUIRE(list.size() == 2);
  CHECK(list[0].name == "conv2d:mb16ic256ih28oc256kh3sh2ph1");
  CHECK(std::get<ConvProblem>(list[0].problem).p() == 14);
  CHECK(std::get<GemmProblem>(list[1].problem).k == 26752);
  std::istringstream bad("gemm:1x1x1\nconv2d:ic3\n");
  CHECK_THROWS_WITH(harness::read_problem_list(bad, "shapes.txt"),
                    Contains("shapes.txt:2: bad conv2d descriptor 'ic3': missing 'ih'"));
  CHECK_THROWS_WITH(harness::read_problem_file("/nonexistent/shapes.txt"),
                    Contains("cannot read the problem file"));
}
