// Softmax family (engine/ops/softmax.h): checks, then the row kernels.
#include "engine/ops/softmax.h"

#include "engine/core/views.h"
#include "kernels/cpu/omp/omp_kernels.h"

namespace anvil::ops {
namespace {
void check_float_cpu(const Tensor& x, const char* where) {
  check_defined(x, where, "input");
  ANVIL_CHECK(is_floating(x.dtype()), where, "needs a floating-point tensor, got ",
              dtype_name(x.dtype()));
  ANVIL_CHECK(x.device().is_cpu(), where, "runs on the CPU only for now, got ", x.device());
  ANVIL_CHECK(x.dim() >= 1, where, "needs at least 1 dimension, got a scalar");
}
template <typename Fn>
void with_float(DType t, Fn&& fn) {
  if (t == DType::f64) fn(double{});
  else fn(float{});
}
std::int64_t cols_of(const Tensor& x) { return x.dim() ? x.sizes().back() : 1; }
}  // namespace

static Tensor softmax_impl(const Tensor& x_in, bool log, const char* where) {
  check_float_cpu(x_in, where);
  Tensor x = raw::contiguous(x_in);
  Tensor y = Tensor::empty(x.sizes(), x.dtype());
  const std::int64_t cols = cols_of(x), rows = cols ? x.numel() / cols : 0;
  with_float(x.dtype(), [&](auto z) {
    using T = decltype(z);
    kernels::softmax_rows<T>(x.data<T>(), y.data<T>(), rows, cols, log);
  });
  return y;
}

Tensor softmax(const Tensor& x) { return softmax_impl(x, false, "softmax"); }
Tensor log_softmax(const Tensor& x) { return softmax_impl(x, true, "log_softmax"); }

Tensor softmax_backward(const Tensor& y_in, const Tensor& dy_in, bool log) {
  check_float_cpu(y_in, "softmax_backward");
  Tensor y = raw::contiguous(y_in), dy = raw::contiguous(dy_in);
  Tensor dx = Tensor::empty(y.sizes(), y.dtype());
  const std::int64_t cols = cols_of(y), rows = cols ? y.numel() / cols : 0;
  with_float(y.dtype(), [&](auto z) {
    using T = decltype(z);
    kernels::softmax_backward_rows<T>(y.data<T>(), dy.data<T>(), dx.data<T>(), rows, cols, log);
  });
  return dx;
}

namespace {
template <typename Fn>
void with_index(const Tensor& target, Fn&& fn) {
  if (target.dtype() == DType::i32) fn(std::int32_t{});
  else fn(std::int64_t{});
}
void check_ce(const Tensor& logits, const Tensor& target) {
  check_float_cpu(logits, "cross_entropy");
  check_defined(target, "cross_entropy", "target");
  ANVIL_CHECK(logits.dim() == 2, "cross_entropy", "expected logits [N, C], got ",
              shape_str(logits.sizes()));
  ANVIL_CHECK(target.dtype() == DType::i64 || target.dtype() == DType::i32, "cross_entropy",
              "expected class indices of dtype i64 or i32, got ", dtype_name(target.dtype()));
  ANVIL_CHECK(target.dim() == 1 && target.sizes()[0] == logits.sizes()[0], "cross_entropy",
              "expected target [", logits.sizes()[0], "] for logits ", shape_str(logits.sizes()),
              ", got ", shape_str(target.sizes()));
  check_same_device(logits, target, "cross_entropy");
}
}  // namespace

std::pair<Tensor, Tensor> cross_entropy_forward(const Tensor& logits_in, const Tensor& target_in) {
  check_ce(logits_in, target_in);
  Tensor x = raw::contiguous(logits_in), t = raw::contiguous(target_in);
  const std::int64_t rows = x.sizes()[0], cols = x.sizes()[1];
  Tensor loss = Tensor::empty({rows}, x.dtype()), lse = Tensor::empty({rows}, x.dtype());
  with_float(x.dtype(), [&](auto z) {
    using T = decltype(z);
    with_index(t, [&](auto iz) {
      using I = decltype(iz);
      kernels::cross_entropy_forward<T, I>(x.data<T>(), t.data<I>(), loss.data<T>(), lse.data<T>(),
                                           rows, cols);
    });
  });
  return {loss, lse};
}

Tensor cross_entropy_backward(const Tensor& logits_in, const Tensor& target_in, const Tensor& lse,
                              double scale) {
  check_ce(logits_in, target_in);
  Tensor x = raw::contiguous(logits_in), t = raw::contiguous(target_in);
  const std::int64_t rows = x.sizes()[0], cols = x.sizes()[1];
  Tensor dx = Tensor::empty(x.sizes(), x.dtype());
  with_float(x.dtype(), [&](auto z) {
    using T = decltype(z);
    with_index(t, [&](auto iz) {
      using I = decltype(iz);
      kernels::cross_entropy_backward<T, I>(x.data<T>(), t.data<I>(), lse.data<T>(), dx.data<T>(),
                                            rows, cols, scale);
    });
  });
  return dx;
}

}  // namespace anvil::ops
