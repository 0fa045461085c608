// SPDX-License-Identifier: Apache-2.0
// Host code never reads or writes a CUDA tensor's memory through a host pointer: a CPU kernel or
// host loop handed a device address crashes or returns garbage on a GPU machine, never an
// anvil::Error. These run without a GPU: a "CUDA tensor" here is host memory wrapped by
// Tensor::from_blob(..., Device::cuda(0)), which makes no CUDA call. A check that fires before
// any device work throws; code that would touch the memory instead computes silently on the
// host buffer and the test fails. (Refusals that come after a device allocation, e.g. conv2d's
// forward, are in tests/cuda/test_cuda_host_paths.cpp and need a GPU.)
#include <catch2/catch.hpp>

#include <vector>

#include "data/loader.h"
#include "engine/dispatch/batch_norm_problem.h"
#include "engine/dispatch/conv_problem.h"
#include "engine/dispatch/dropout_problem.h"
#include "engine/dispatch/elementwise_problem.h"
#include "engine/dispatch/embedding_problem.h"
#include "engine/dispatch/gemm_problem.h"
#include "engine/dispatch/lstm_problem.h"
#include "engine/dispatch/optimizer_problem.h"
#include "engine/dispatch/pool_problem.h"
#include "engine/dispatch/reduce_problem.h"
#include "engine/dispatch/softmax_problem.h"
#include "engine/ops/batch_norm.h"
#include "engine/ops/conv.h"
#include "engine/ops/lstm.h"
#include "engine/ops/pool.h"
#include "helpers/gradcheck.h"
#include "kernels/register.h"

using namespace anvil;
using Catch::Contains;

namespace {

const Device kGpu = Device::cuda(0);

// Host memory posing as device memory (see the file comment); the buffers outlive the tensors.
struct FakeDevice {
  std::vector<std::vector<double>> buffers;
  Tensor tensor(const Shape& shape, DType dtype = DType::f32) {
    buffers.emplace_back(static_cast<std::size_t>(shape_numel(shape) + 1), 0.0);
    return Tensor::from_blob(buffers.back().data(), shape, dtype, kGpu);
  }
};

// Every CPU variant of `table` refuses a CUDA problem, and so does the table when no CUDA
// variant is registered (a machine without the backend loaded): an error naming the op.
template <typename Table, typename Problem>
void check_cpu_variants_refuse(Table& table, Problem p) {
  INFO(table.op());
  p.device = kGpu;
  const auto cands = table.candidates(p);
  bool any_cuda = false;
  for (std::size_t i = 0; i < cands.size(); ++i) {
    INFO(cands[i].name);
    if (table.variants()[i].device == DeviceType::cuda) {
      any_cuda = true;
      continue;
    }
    CHECK_FALSE(cands[i].support.ok);
    CHECK_THAT(cands[i].support.reason, Contains("runs on cpu"));
  }
  if (!any_cuda)
    CHECK_THROWS_WITH(table.select(p), Contains(table.op()) && Contains("runs on cpu"));
}

}  // namespace

TEST_CASE("every variant table refuses its CPU variants for a CUDA problem", "[cuda][dispatch]") {
  register_builtin_kernels();
  check_cpu_variants_refuse(gemm_table(), GemmProblem::dense(8, 8, 8, false, true));
  check_cpu_variants_refuse(elementwise_table(),
                            ElementwiseProblem{.op = EwOp::sigmoid, .numel = 8});
  check_cpu_variants_refuse(reduce_table(), ReduceProblem{.outer = 2, .reduce = 4});
  check_cpu_variants_refuse(
      softmax_table(),
      SoftmaxProblem{.op = SoftmaxOp::cross_entropy_forward, .rows = 2, .cols = 4});
  check_cpu_variants_refuse(dropout_table(), DropoutProblem{.numel = 8, .p = 0.2});
  for (OptimOp op : {OptimOp::sgd, OptimOp::adam, OptimOp::grad_norm, OptimOp::grad_scale})
    check_cpu_variants_refuse(optimizer_table(op),
                              OptimizerProblem{.op = op, .tensors = 1, .numel = 8});
  Conv2dOptions cp;
  cp.padding = {1, 1};
  check_cpu_variants_refuse(conv_table(),
                            ops::conv2d_problem({2, 3, 8, 8}, {4, 3, 3, 3}, true, cp));
  for (PoolKind kind : {PoolKind::max, PoolKind::avg})
    check_cpu_variants_refuse(
        pool_table(kind), make_pool_problem(kind, {2, 3, 8, 8}, {2, 2}, {2, 2}, {0, 0}, false, true,
                                            DType::f32, Device::cpu(), "test"));
  check_cpu_variants_refuse(
      pool_table(PoolKind::adaptive_avg),
      make_adaptive_pool_problem({2, 3, 8, 8}, {1, 1}, DType::f32, Device::cpu(), "test"));
  check_cpu_variants_refuse(
      batch_norm2d_table(),
      make_batch_norm_problem({2, 3, 4, 4}, true, 0.1, 1e-5, DType::f32, Device::cpu(), "test"));
  check_cpu_variants_refuse(lstm_table(), LstmProblem{.T = 2, .B = 2, .I = 3, .H = 4});
  check_cpu_variants_refuse(embedding_table(), EmbeddingProblem{.rows = 5, .dim = 3, .n = 4});
}

TEST_CASE("host code refuses a CUDA tensor before touching its memory", "[cuda][errors]") {
  register_builtin_kernels();
  FakeDevice dev;

  SECTION("Tensor::data is host memory only; data_ptr stays the device address") {
    const Tensor g = dev.tensor({2, 3});
    CHECK_THROWS_WITH(g.data<float>(), Contains("Tensor::data") && Contains("cuda:0"));
    CHECK(g.data_ptr() == dev.buffers.back().data());
    CHECK_NOTHROW(Tensor::zeros({2}).data<float>());
  }

  SECTION("embedding and its backward (CPU kernels only)") {
    const Tensor ids = Tensor::from_vector(std::vector<std::int64_t>{0, 3}, {2});
    CHECK_THROWS_WITH(ops::embedding(dev.tensor({4, 3}), ids),
                      Contains("embedding") && Contains("cuda:0"));
    CHECK_THROWS_WITH(ops::embedding_backward(dev.tensor({2, 3}), ids, 4),
                      Contains("embedding_backward") && Contains("cuda:0"));
  }

  SECTION("conv2d backward with a gradient on another device than the operands") {
    Conv2dOptions cp;
    const Tensor w = Tensor::ones({4, 3, 3, 3}), x = Tensor::ones({2, 3, 5, 5});
    CHECK_THROWS_WITH(ops::conv2d_backward_data(dev.tensor({2, 4, 3, 3}), w, x.sizes(), cp),
                      Contains("conv2d backward") && Contains("cuda:0"));
    CHECK_THROWS_WITH(
        ops::conv2d_backward_weights(x, dev.tensor({2, 4, 3, 3}), w.sizes(), true, cp),
        Contains("conv2d backward") && Contains("cuda:0"));
  }

  SECTION("pooling backward with a gradient on another device than the forward") {
    const Tensor x = Tensor::ones({1, 2, 4, 4});
    for (PoolKind kind : {PoolKind::max, PoolKind::avg}) {
      const auto fwd = ops::pool2d_forward(
          x, ops::pool2d_problem(kind, x, {2, 2}, {2, 2}, {0, 0}, false, true, "test"), true);
      CHECK_THROWS_WITH(ops::pool2d_backward(dev.tensor({1, 2, 2, 2}), fwd),
                        Contains(pool_op_name(kind)) && Contains("cuda:0"));
    }
  }

  SECTION("batch norm backward with a gradient on another device than the forward") {
    const Tensor x = Tensor::ones({2, 3, 2, 2});
    const auto fwd =
        ops::batch_norm2d_forward(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
    CHECK_THROWS_WITH(ops::batch_norm2d_backward(dev.tensor({2, 3, 2, 2}), x, Tensor(), fwd),
                      Contains("batch_norm2d") && Contains("cuda:0"));
  }

  SECTION("an LSTM variant of the CPU is not run on CUDA inputs") {
    const ops::LstmInputs in{dev.tensor({2, 1, 3}), Tensor(),        Tensor(), dev.tensor({8, 3}),
                             dev.tensor({8, 2}),    dev.tensor({8}), Tensor()};
    for (const auto& v : lstm_table().variants()) {
      if (v.device != DeviceType::cpu) continue;
      INFO(v.name);
      CHECK_THROWS_WITH(ops::lstm_forward(v, in, false),
                        Contains("lstm_forward") && Contains("runs on cpu"));
    }
  }

  SECTION("the DataLoader gathers batches on the host") {
    data::TensorDataset ds{dev.tensor({4, 3}), Tensor::zeros({4}, DType::i64)};
    CHECK_THROWS_WITH(data::DataLoader(ds, data::LoaderOptions{.batch = 2}),
                      Contains("DataLoader") && Contains("cuda:0"));
  }

  SECTION("the test helpers: gradcheck refuses device leaves") {
    Tensor x = dev.tensor({3}, DType::f64);
    x.set_requires_grad(true);
    const auto r =
        test::gradcheck("device leaf", [](const std::vector<Tensor>& in) { return in[0]; }, {x});
    CHECK_FALSE(r.ok);
    CHECK_THAT(r.message, Contains("cuda:0"));
  }
}

TEST_CASE("Device::parse takes cpu, cuda and cuda:N, and nothing around them", "[device][errors]") {
  CHECK(Device::parse("cpu") == Device::cpu());
  CHECK(Device::parse("cuda") == Device::cuda(0));
  CHECK(Device::parse("cuda:3") == Device::cuda(3));
  // std::stoi took the first two as cuda:1; the last overflowed into an exception of its own.
  for (const char* bad : {"cuda: 1", "cuda:+1", "cuda:-1", "cuda:", "cuda:1x", "cuda:99999999999"})
    CHECK_THROWS_WITH(Device::parse(bad), Contains("unknown device") && Contains(bad));
}
