// SPDX-License-Identifier: Apache-2.0
// Tensor storage, factories, metadata, copies and printing (engine/core/tensor.h).
// The differentiable member functions are in engine/autograd/tensor_methods.cpp.
#include "engine/core/tensor.h"

#include <cmath>
#include <cstring>
#include <iomanip>
#include <sstream>
#include <string_view>
#include <type_traits>

#include "engine/core/cuda_backend.h"
#include "engine/core/parse_number.h"
#include "engine/core/strided_loop.h"
#include "engine/core/transpose.h"
#include "engine/core/views.h"

namespace anvil {

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(s[i]);
  }
  return out + "]";
}

std::int64_t shape_numel(const Shape& s) {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  std::int64_t acc = 1;
  for (auto i = static_cast<std::int64_t>(s.size()) - 1; i >= 0; --i) {
    st[i] = acc;
    acc *= std::max<std::int64_t>(s[i], 1);
  }
  return st;
}

std::int64_t wrap_dim(std::int64_t d, std::int64_t ndim, const char* where) {
  ANVIL_CHECK(d >= -ndim && d < ndim, where, "dimension ", d, " out of range for a ", ndim,
              "-D tensor");
  return d < 0 ? d + ndim : d;
}

void check_defined(const Tensor& t, const char* where, const char* name) {
  ANVIL_CHECK(t.defined(), where, name, " is an undefined tensor");
}
void check_dtype(const Tensor& t, DType expected, const char* where, const char* name) {
  ANVIL_CHECK(t.dtype() == expected, where, "expected ", name, " of dtype ", dtype_name(expected),
              ", got ", dtype_name(t.dtype()));
}
void check_dim(const Tensor& t, std::int64_t dim, const char* where, const char* name) {
  ANVIL_CHECK(t.dim() == dim, where, "expected ", name, " to be ", dim, "-D, got ",
              shape_str(t.sizes()));
}
void check_same_device(const Tensor& a, const Tensor& b, const char* where) {
  ANVIL_CHECK(a.device() == b.device(), where, "tensors on different devices: ", a.device(),
              " and ", b.device());
}

// ---- storage ----------------------------------------------------------------------------

StorageImpl::StorageImpl(std::size_t bytes, Device device)
    : bytes_(bytes), device_(device), allocator_(&allocator_for(device)) {
  data_ = allocator_->allocate(bytes);
}
StorageImpl::StorageImpl(std::size_t bytes, Allocator& allocator)
    : bytes_(bytes), device_(allocator.device()), allocator_(&allocator) {
  data_ = allocator_->allocate(bytes);
}
StorageImpl::StorageImpl(void* data, std::size_t bytes, Device device)
    : data_(data), bytes_(bytes), device_(device) {}
StorageImpl::~StorageImpl() {
  if (allocator_ != nullptr) allocator_->deallocate(data_, bytes_);
}

Allocator& allocator_for(Device device) {
  if (device.is_cpu()) return cpu_allocator();
  return require_cuda("allocator_for").allocator(device.index);
}

// ---- factories --------------------------------------------------------------------------

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (auto d : shape)
    ANVIL_CHECK(d >= 0, "Tensor::empty", "negative dimension in shape ", shape_str(shape));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<StorageImpl>(shape_numel(shape) * dtype_size(dtype), device);
  impl->sizes = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::empty_in(Allocator& allocator, const Shape& shape, DType dtype) {
  for (auto d : shape)
    ANVIL_CHECK(d >= 0, "Tensor::empty_in", "negative dimension in shape ", shape_str(shape));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<StorageImpl>(shape_numel(shape) * dtype_size(dtype), allocator);
  impl->sizes = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  return full(shape, 0.0, dtype, device);
}
Tensor Tensor::ones(const Shape& shape, DType dtype, Device device) {
  return full(shape, 1.0, dtype, device);
}
Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.fill_(value);
  return t;
}
Tensor Tensor::scalar(double value, DType dtype) { return full({}, value, dtype); }

Tensor Tensor::arange(double end, DType dtype) { return arange(0.0, end, 1.0, dtype); }
Tensor Tensor::arange(double start, double end, double step, DType dtype) {
  ANVIL_CHECK(step != 0.0, "Tensor::arange", "step must not be 0");
  const double count = std::ceil((end - start) / step);
  const auto n = static_cast<std::int64_t>(std::max(0.0, count));
  Tensor t = empty({n}, dtype);
  visit_all_dtypes(dtype, [&](auto zero) {
    using T = decltype(zero);
    T* p = static_cast<T*>(t.data_ptr());
    for (std::int64_t i = 0; i < n; ++i)
      p[i] = static_cast<T>(start + step * static_cast<double>(i));
  });
  return t;
}

template <typename T>
static Tensor from_values(const std::vector<T>& values, const Shape& shape, const char* where) {
  ANVIL_CHECK(shape_numel(shape) == static_cast<std::int64_t>(values.size()), where, "shape ",
              shape_str(shape), " needs ", shape_numel(shape), " values, got ", values.size());
  Tensor t = Tensor::empty(shape, DTypeOf<T>::value);
  if (!values.empty()) std::memcpy(t.data_ptr(), values.data(), values.size() * sizeof(T));
  return t;
}
Tensor Tensor::from_vector(const std::vector<float>& v, const Shape& s) {
  return from_values(v, s, "Tensor::from_vector");
}
Tensor Tensor::from_vector(const std::vector<double>& v, const Shape& s) {
  return from_values(v, s, "Tensor::from_vector");
}
Tensor Tensor::from_vector(const std::vector<std::int64_t>& v, const Shape& s) {
  return from_values(v, s, "Tensor::from_vector");
}
Tensor Tensor::from_vector(const std::vector<std::int32_t>& v, const Shape& s) {
  return from_values(v, s, "Tensor::from_vector");
}
Tensor Tensor::from_vector(const std::vector<BFloat16>& v, const Shape& s) {
  return from_values(v, s, "Tensor::from_vector");
}
Tensor Tensor::from_vector(const std::vector<Float16>& v, const Shape& s) {
  return from_values(v, s, "Tensor::from_vector");
}

Tensor Tensor::from_blob(void* data, const Shape& shape, DType dtype, Device device) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage =
      std::make_shared<StorageImpl>(data, shape_numel(shape) * dtype_size(dtype), device);
  impl->sizes = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

// ---- metadata ---------------------------------------------------------------------------

std::int64_t Tensor::size(std::int64_t d) const {
  return sizes()[wrap_dim(d, dim(), "Tensor::size")];
}
std::int64_t Tensor::stride(std::int64_t d) const {
  return strides()[wrap_dim(d, dim(), "Tensor::stride")];
}

// Note [Empty tensors are contiguous]
// A tensor without elements is contiguous whatever its strides, as in PyTorch. Tensor::empty
// gives [3, 0] the strides {1, 1} (size-0 dims count as 1), which the stride walk below would
// call non-contiguous; Tensor::copy_ into such a CUDA tensor then staged the source into a new
// tensor of the same (non-contiguous) geometry and recursed without end: the hang of
// gpu(Tensor::zeros({3, 0})) on the H100 (issue 20 point 6).
bool Tensor::is_contiguous() const {
  if (numel() == 0) return true;  // Note [Empty tensors are contiguous]
  std::int64_t expected = 1;
  for (auto d = dim() - 1; d >= 0; --d) {
    if (sizes()[d] != 1 && strides()[d] != expected) return false;
    expected *= sizes()[d];
  }
  return true;
}

bool Tensor::shares_storage_with(const Tensor& other) const {
  return defined() && other.defined() && storage() == other.storage();
}

void* Tensor::data_ptr() const {
  const auto& s = impl().storage;
  if (!s || s->data() == nullptr) return nullptr;
  return static_cast<char*>(s->data()) + offset() * static_cast<std::int64_t>(element_size());
}

double Tensor::item() const {
  ANVIL_CHECK(numel() == 1, "Tensor::item", "tensor of shape ", shape_str(sizes()), " has ",
              numel(), " elements, not 1");
  Tensor c = device().is_cpu() ? *this : raw::to_device(*this, Device::cpu());
  return visit_all_dtypes(dtype(), [&](auto zero) {  // bf16/f16 widen exactly
    return convert_element<double>(*static_cast<const decltype(zero)*>(c.data_ptr()));
  });
}

// ---- in-place fills and copies ------------------------------------------------------------

namespace {
thread_local bool t_shapes_only = false;
}
ShapesOnlyGuard::ShapesOnlyGuard() : previous_(t_shapes_only) { t_shapes_only = true; }
ShapesOnlyGuard::~ShapesOnlyGuard() { t_shapes_only = previous_; }
bool shapes_only() { return t_shapes_only; }

Tensor& Tensor::fill_(double value) {
  if (shapes_only()) return *this;  // Note [Shapes-only construction]
  if (device().is_cuda()) {         // a kernel on the device's stream, any strides
    if (numel() == 0) return *this;
    require_cuda("Tensor::fill_")
        .fill_on_device(device().index, sizes().data(), static_cast<int>(dim()),
                        {data_ptr(), strides().data(), dtype()}, value);
    return *this;
  }
  visit_all_dtypes(dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T v = static_cast<T>(value);  // bf16/f16: RNE (Note [Half storage types])
    const auto L = make_strided_layout<1>(sizes(), {&strides()});
    T* base = static_cast<T*>(data_ptr());
    const std::int64_t n = L.inner_size(), s = L.inner_stride(0);
    for (std::int64_t r = 0; r < L.outer_count(); ++r) {
      T* p = base + L.outer_offsets(r)[0];
      for (std::int64_t i = 0; i < n; ++i) p[i * s] = v;
    }
  });
  return *this;
}

namespace {
// Strided CPU copy with dtype conversion; dst and src have the same shape.
void cpu_copy(const Tensor& dst, const Tensor& src) {
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous()) {
    if (dst.nbytes() > 0) std::memmove(dst.data_ptr(), src.data_ptr(), dst.nbytes());
    return;
  }
  // A dense matrix from a transposed one (x.t().contiguous()): tiles, not one strided column
  // walk per row (engine/core/transpose.h).
  if (dst.dtype() == src.dtype() && is_floating(dst.dtype()) && dst.dim() == 2 &&
      dst.is_contiguous() && src.strides()[0] == 1 && src.strides()[1] >= dst.sizes()[0] &&
      dst.sizes()[0] > 1 && dst.sizes()[1] > 1) {
    const std::int64_t r = dst.sizes()[0], c = dst.sizes()[1];  // src is [c, r] transposed
    if (dst.dtype() == DType::f32)
      transpose_2d(static_cast<const float*>(src.data_ptr()), c, r, src.strides()[1],
                   static_cast<float*>(dst.data_ptr()), c);
    else
      transpose_2d(static_cast<const double*>(src.data_ptr()), c, r, src.strides()[1],
                   static_cast<double*>(dst.data_ptr()), c);
    return;
  }
  visit_all_dtypes(dst.dtype(), [&](auto dzero) {
    visit_all_dtypes(src.dtype(), [&](auto szero) {
      using D = decltype(dzero);
      using S = decltype(szero);
      const auto L = make_strided_layout<2>(dst.sizes(), {&dst.strides(), &src.strides()});
      D* d = static_cast<D*>(dst.data_ptr());
      const S* s = static_cast<const S*>(src.data_ptr());
      const std::int64_t n = L.inner_size(), ds = L.inner_stride(0), ss = L.inner_stride(1);
      // Dense rows of the same dtype (e.g. a bias broadcast into every row of a linear layer's
      // output, [4096, 10000] for the LSTM decoder) are row memmoves. Big copies split their
      // rows over the threads: a 164 MB broadcast took 12-15 ms serially at 1 and 2 threads.
      const bool dense_rows = std::is_same_v<D, S> && ds == 1 && ss == 1;
#pragma omp parallel for schedule(static) if (L.outer_count() * n >= (1 << 18))
      for (std::int64_t r = 0; r < L.outer_count(); ++r) {
        const auto off = L.outer_offsets(r);
        if (dense_rows) {
          std::memmove(d + off[0], s + off[1], static_cast<std::size_t>(n) * sizeof(D));
          continue;
        }
        for (std::int64_t i = 0; i < n; ++i)
          d[off[0] + i * ds] = convert_element<D>(s[off[1] + i * ss]);
      }
    });
  });
}

// A host tensor with the geometry of a (possibly strided) CUDA tensor: the storage span the
// view covers is copied to the host in one transfer, then viewed with the same strides.
Tensor host_view_of_device(const Tensor& t) {
  if (t.numel() == 0) return Tensor::empty(t.sizes(), t.dtype());
  std::int64_t span = 1;  // elements from the first to the last one the view reaches
  for (std::int64_t d = 0; d < t.dim(); ++d) span += (t.sizes()[d] - 1) * t.strides()[d];
  Tensor host = Tensor::empty({span}, t.dtype());
  const auto* first = static_cast<const char*>(t.data_ptr());
  require_cuda("Tensor::copy_")
      .copy(host.data_ptr(), Device::cpu(), first, t.device(),
            static_cast<std::size_t>(span) * t.element_size());
  return raw::make_view(host, t.sizes(), t.strides(), 0);
}

}  // namespace

Tensor& Tensor::copy_(const Tensor& src_in) {
  check_defined(src_in, "Tensor::copy_", "source");
  Tensor s = raw::expand(src_in, sizes());
  if (numel() == 0) return *this;  // nothing to move, on any device pair
  if (device().is_cuda() && s.device() == device()) {
    // Same device: one strided copy kernel (any strides, stride-0 broadcast dims, any dtype
    // pair) on the device's stream; this is also linear's bias add (Note [Linear layout]).
    if (numel() == 0) return *this;
    require_cuda("Tensor::copy_")
        .copy_on_device(device().index, sizes().data(), static_cast<int>(dim()),
                        {data_ptr(), strides().data(), dtype()},
                        {s.data_ptr(), s.strides().data(), s.dtype()});
    return *this;
  }
  if (device().is_cuda() && !is_contiguous()) {
    // Into a strided CUDA view from elsewhere: stage the source densely on this device in this
    // dtype (the transfer paths below), then scatter it with the device copy above.
    Tensor staged = empty(sizes(), dtype(), device());
    staged.copy_(s);
    return copy_(staged);
  }
  // The CUDA backend moves raw bytes between devices: a device source that needs conversion or
  // gathering is brought to the host first, where cpu_copy handles any strides and dtypes.
  if (s.device().is_cuda() && (s.dtype() != dtype() || !s.is_contiguous() || device().is_cpu()))
    s = host_view_of_device(s);
  if (device().is_cpu()) {
    cpu_copy(*this, s);
    return *this;
  }
  if (s.device().is_cpu() && (s.dtype() != dtype() || !s.is_contiguous()))
    s = raw::to_dtype(raw::contiguous(s), dtype());
  require_cuda("Tensor::copy_").copy(data_ptr(), device(), s.data_ptr(), s.device(), nbytes());
  return *this;
}

// ---- printing -----------------------------------------------------------------------------

namespace {
constexpr std::int64_t kEdgeItems = 3;  // summarised dims show this many at each end

void print_values(std::ostream& os, const Tensor& t, std::int64_t dim, std::int64_t offset,
                  bool summarise, int indent) {
  const std::int64_t n = t.sizes()[dim];
  os << '[';
  for (std::int64_t i = 0; i < n; ++i) {
    if (summarise && n > 2 * kEdgeItems && i == kEdgeItems) {
      os << "..., ";
      i = n - kEdgeItems - 1;
      continue;
    }
    const std::int64_t off = offset + i * t.strides()[dim];
    if (dim + 1 == t.dim()) {
      visit_all_dtypes(t.dtype(), [&](auto zero) {  // bf16/f16 print their value as float
        using T = decltype(zero);
        os << static_cast<const T*>(t.storage()->data())[off];
      });
    } else {
      print_values(os, t, dim + 1, off, summarise, indent + 1);
    }
    if (i + 1 < n) os << (dim + 1 == t.dim() ? ", " : ",\n" + std::string(indent + 1, ' '));
  }
  os << ']';
}
}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "Tensor(undefined)";
  std::ostringstream os;
  os << "Tensor" << shape_str(sizes()) << ' ' << dtype() << ' ' << device();
  if (requires_grad()) os << " requires_grad";
  os << '\n' << std::setprecision(6);
  Tensor host = device().is_cpu() ? *this : raw::to_device(*this, Device::cpu());
  if (dim() == 0) {
    os << host.item();
  } else if (numel() == 0) {
    os << "[]";
  } else {
    print_values(os, host, 0, host.offset(), numel() > 1000, 0);
  }
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

Device Device::parse(const std::string& text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(0);
  if (text.rfind("cuda:", 0) == 0) {
    const auto i = parse_number<int>(std::string_view(text).substr(5));
    if (i.has_value() && *i >= 0) return cuda(*i);
  }
  fail("Device::parse", "unknown device '", text, "' (expected cpu, cuda or cuda:N)");
}

}  // namespace anvil
