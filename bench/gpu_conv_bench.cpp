// SPDX-License-Identifier: Apache-2.0
// kernel/conv2d/<variant>/<pass>/<model>:<layer>/batch:<b>/device:cuda: every distinct conv layer
// of AlexNet, ResNet-50 and VGG16 at the model's smallest GPU batch (networks.md's sweep; the
// host-side inputs and the validation of the largest would take minutes), on
// `default` (what the op layer selects: cuda.cudnn, labelled with the algorithm its search chose,
// e.g. "cuda.cudnn[CUDNN_CONVOLUTION_FWD_ALGO_FFT]") and on every CUDA variant of the conv2d table
// (each cuDNN algorithm family, cuda.cudnn.tf32, cuda.custom.im2col), forward / backward data /
// backward weights. GPU time by CUDA events (time_gpu_loop). A variant that does not support a
// layer is SkipWithError with the table's reason (cuDNN's status).
//
// Validation before timing: the warm-up call's output is copied to the host and 16 sampled
// entries (plus 8 of db) are recomputed from the definition in double (bench/conv_reference.h),
// bound 1e-5 x sum|terms| scaled x10 for FFT / Winograd transforms and for the default (it may
// pick either) and x100 for TF32 (10-bit mantissa).
#include <variant>
#include <map>
#include <set>

#include "bench/bench_support.h"
#include "bench/conv_reference.h"
#include "bench/gpu_gemm_bench.h"
#include "bench/kernel_bench.h"
#include "bench/registrations.h"
#include "engine/core/cuda_backend.h"
#include "engine/core/views.h"
#include "engine/dispatch/conv_problem.h"
#include "engine/ops/elementwise.h"
#include "kernels/cudnn_conv_plan.h"
#include "models/registry.h"

namespace anvil::bench {
namespace {

// The device copies of the current host buffers (kernel::buffers_for), one set at a time.
struct DeviceConvBuffers {
  std::string id;
  Tensor x, w, b, dy, out, out_db;
};

Tensor to_gpu(const Tensor& t) {
  return t.defined() ? raw::to_device(t, gpu_bench_device()) : Tensor();
}

DeviceConvBuffers& device_buffers(const std::string& id, const kernel::ConvBuffers& host) {
  static DeviceConvBuffers cur;
  if (cur.id == id) return cur;
  cur = DeviceConvBuffers{};
  cur.x = to_gpu(host.x);
  cur.w = to_gpu(host.w);
  cur.b = to_gpu(host.b);
  cur.dy = to_gpu(host.dy);
  cur.out = Tensor::empty(host.out.sizes(), DType::f32, gpu_bench_device());
  if (host.out_db.defined())
    cur.out_db = Tensor::empty(host.out_db.sizes(), DType::f32, gpu_bench_device());
  cur.id = id;
  return cur;
}

double validation_scale(const std::string& label) {
  if (label.find("tf32") != std::string::npos) return 100.0;
  if (label.find("winograd") != std::string::npos || label.find("fft") != std::string::npos ||
      label.find("cuda.cudnn[") == 0 || label == kernels::kCudnnDefaultVariant)
    return 10.0;
  return 1.0;
}

void run_gpu_conv(benchmark::State& state, const std::string& id, ConvProblem p,
                  const std::string& variant) {
  try {
    ConvProblem host_p = p;
    host_p.device = Device::cpu();
    kernel::ConvBuffers& host = kernel::buffers_for(id, host_p);
    DeviceConvBuffers& dev = device_buffers(id, host);
    p.device = gpu_bench_device();
    if (p.pass != ConvPass::forward) p.fuse_relu = false;
    ConvProblem plain = p;
    plain.fuse_relu = false;
    const ConvTable::Variant* v = nullptr;
    if (variant == "default") {
      v = &conv_table().select(plain);
    } else {
      const std::string why = kernel::unsupported(conv_table(), variant, plain);
      if (!why.empty()) {
        state.SkipWithError(why.c_str());
        return;
      }
      v = conv_table().find(variant);
    }
    const bool fused = p.fuse_relu && (!v->supports || v->supports(p).ok);
    const bool separate_relu = p.fuse_relu && !fused;
    ConvArgs a;
    a.problem = separate_relu ? plain : p;
    a.x = dev.x.defined() ? dev.x.data_ptr() : nullptr;
    a.w = dev.w.defined() ? dev.w.data_ptr() : nullptr;
    a.b = dev.b.defined() ? dev.b.data_ptr() : nullptr;
    a.dy = dev.dy.defined() ? dev.dy.data_ptr() : nullptr;
    (p.pass == ConvPass::forward         ? a.y
     : p.pass == ConvPass::backward_data ? a.dx
                                         : a.dw) = dev.out.data_ptr();
    a.db = dev.out_db.defined() ? dev.out_db.data_ptr() : nullptr;
    auto step = [&] {
      v->fn(a);
      if (separate_relu) ops::unary_into(EwOp::relu, dev.out, dev.out);
    };
    kernel::fill_nan(dev.out);
    if (dev.out_db.defined()) kernel::fill_nan(dev.out_db);
    step();  // warm-up: the default's search, cuDNN's plans; and the call validated
    const std::string label = (variant == "default" && v->name == kernels::kCudnnDefaultVariant
                                   ? kernels::cudnn_default_label(plain)
                                   : v->name) +
                              (separate_relu ? " (relu not fused)" : "");
    state.SetLabel(label);
    host.out.copy_(dev.out);
    if (dev.out_db.defined()) host.out_db.copy_(dev.out_db);
    const std::string bad = kernel::sampled_mismatch(p, host, validation_scale(label), 16);
    if (!bad.empty()) {
      state.SkipWithError(
          ("validation against the double-precision definition failed: " + bad).c_str());
      return;
    }
    time_gpu_loop(state, p.flops(), step);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

std::vector<std::string> gpu_conv_models() { return {"alexnet", "resnet50", "vgg16"}; }

}  // namespace

void register_gpu_conv_benchmarks() {
  if (!gpu_benchmarks_enabled()) return;
  std::vector<std::string> variants{"default"};
  for (const auto& v : conv_table().variants())
    if (v.device == DeviceType::cuda) variants.push_back(v.name);
  for (const std::string& model : gpu_conv_models()) {
    const auto& batches = models::info(model).gpu_batches;
    if (batches.empty()) continue;
    const std::int64_t batch = batches.front();
    benchmark::AddCustomContext("anvil.gpu_conv_batch." + model, std::to_string(batch));
    std::set<std::string> seen;
    const std::string prefix = model + ":";
    for (const auto& np : models::problems(model, batch)) {
      const auto* conv = std::get_if<ConvProblem>(&np.problem);
      if (!conv) continue;
      const ConvProblem p0 = *conv;
      if (!seen.insert(p0.key()).second) continue;
      const std::string layer =
          np.name.rfind(prefix, 0) == 0 ? np.name.substr(prefix.size()) : np.name;
      for (ConvPass pass :
           {ConvPass::forward, ConvPass::backward_data, ConvPass::backward_weights}) {
        ConvProblem p = p0;
        p.pass = pass;
        const std::string id =
            detail::str_cat("gpu|", model, ":", layer, "|", conv_pass_name(pass));
        for (const auto& variant : variants) {
          const std::string name =
              detail::str_cat("kernel/conv2d/", variant, "/", conv_pass_name(pass), "/", model, ":",
                              layer, "/batch:", batch, "/", gpu_name_suffix());
          // Short: about 1200 benchmarks (37 layers x 3 passes x 11 variants); a conv at these
          // batches takes milliseconds, so 50 ms of GPU time is tens of calls.
          benchmark::RegisterBenchmark(
              name.c_str(), [=](benchmark::State& st) { run_gpu_conv(st, id, p, variant); })
              ->UseManualTime()
              ->Unit(benchmark::kMillisecond)
              ->MinWarmUpTime(0.02)
              ->MinTime(0.05);
        }
      }
    }
  }
}

}  // namespace anvil::bench
