// SPDX-License-Identifier: Apache-2.0
#pragma once
// anvil::Tensor: a refcounted handle to (storage, shape, strides, offset, dtype, device).
//
// Note [Tensor invariants]
// - sizes.size() == strides.size() == dim(); strides are in elements, row-major by default.
// - Every element index i (0 <= i_d < sizes[d]) maps to storage element
//   offset + sum_d i_d * strides[d], which lies inside the storage. A stride may be 0 (expand).
// - Views (transpose, permute, reshape of contiguous data, slice, expand) share the storage.
// - Autograd state lives in `autograd` and is null for tensors that need no gradient, so
//   inference and kernels never touch it (engine/autograd/ owns its meaning).
// Member functions that create new tensors (views, arithmetic) record autograd nodes when
// grad mode is on; they are implemented in engine/autograd/. Raw, never-recording versions of
// the views live in engine/core/views.h.
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "engine/core/allocator.h"
#include "engine/core/device.h"
#include "engine/core/dtype.h"
#include "engine/core/error.h"

namespace anvil {

using Shape = std::vector<std::int64_t>;

std::string shape_str(const Shape& s);  // "[64,2048]"
std::int64_t shape_numel(const Shape& s);
Shape contiguous_strides(const Shape& s);

// A block of bytes on one device, freed through its allocator when the last user goes.
class StorageImpl {
 public:
  StorageImpl(std::size_t bytes, Device device);              // allocates
  StorageImpl(std::size_t bytes, Allocator& allocator);       // allocates from `allocator`
  StorageImpl(void* data, std::size_t bytes, Device device);  // borrows, never frees
  ~StorageImpl();
  StorageImpl(const StorageImpl&) = delete;
  StorageImpl& operator=(const StorageImpl&) = delete;

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  Device device_;
  Allocator* allocator_ = nullptr;  // null for borrowed memory
};
using Storage = std::shared_ptr<StorageImpl>;

// Base of the autograd layer's per-tensor state (see engine/autograd/autograd_meta.h).
struct AutogradMetaBase {
  virtual ~AutogradMetaBase() = default;
};

struct TensorImpl {
  Storage storage;
  Shape sizes;
  Shape strides;
  std::int64_t offset = 0;  // in elements
  DType dtype = DType::f32;
  std::unique_ptr<AutogradMetaBase> autograd;  // null unless gradients are involved
};

// Note [Shapes-only construction]
// While a ShapesOnlyGuard lives on this thread, fill_() and the random fills (uniform, normal,
// randint) leave memory untouched. A model built only to read its shapes, FLOPs and problem
// lists (models::summary, models::problems) then costs address space but no
// resident pages; filled, its blocks would stay resident in the caching allocator and inflate
// every later peak-RSS figure of the process. Values read under the guard are garbage.
class ShapesOnlyGuard {
 public:
  ShapesOnlyGuard();
  ~ShapesOnlyGuard();
  ShapesOnlyGuard(const ShapesOnlyGuard&) = delete;
  ShapesOnlyGuard& operator=(const ShapesOnlyGuard&) = delete;

 private:
  bool previous_;
};
bool shapes_only();  // true while a ShapesOnlyGuard lives on this thread

class Tensor {
 public:
  Tensor() = default;  // undefined tensor: defined() == false
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- factories (CPU unless a device is given) ------------------------------------
  static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
  // Uninitialised, from `allocator` (on its device), e.g. page-locked host memory
  // (CudaBackend::pinned_host_allocator, Note [Pinned batches] in data/loader.h).
  static Tensor empty_in(Allocator& allocator, const Shape& shape, DType dtype = DType::f32);
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
  static Tensor ones(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
  static Tensor full(const Shape& shape, double value, DType dtype = DType::f32,
                     Device device = Device::cpu());
  // 0, 1, ..., n-1 (or start, start+step, ... < end).
  static Tensor arange(double end, DType dtype = DType::f32);
  static Tensor arange(double start, double end, double step, DType dtype = DType::f32);
  // Copies `values` into a new tensor of `shape`.
  static Tensor from_vector(const std::vector<float>& values, const Shape& shape);
  static Tensor from_vector(const std::vector<double>& values, const Shape& shape);
  static Tensor from_vector(const std::vector<std::int64_t>& values, const Shape& shape);
  static Tensor from_vector(const std::vector<std::int32_t>& values, const Shape& shape);
  static Tensor from_vector(const std::vector<BFloat16>& values, const Shape& shape);
  static Tensor from_vector(const std::vector<Float16>& values, const Shape& shape);
  static Tensor scalar(double value, DType dtype = DType::f32);
  // Wraps memory the caller owns and keeps alive (no copy, never freed by anvil).
  static Tensor from_blob(void* data, const Shape& shape, DType dtype,
                          Device device = Device::cpu());

  // ---- metadata -----------------------------------------------------------------------
  bool defined() const { return impl_ != nullptr; }
  const Shape& sizes() const { return impl().sizes; }
  const Shape& strides() const { return impl().strides; }
  std::int64_t size(std::int64_t d) const;  // negative d counts from the end
  std::int64_t stride(std::int64_t d) const;
  std::int64_t dim() const { return static_cast<std::int64_t>(impl().sizes.size()); }
  std::int64_t numel() const { return shape_numel(impl().sizes); }
  std::int64_t offset() const { return impl().offset; }
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().storage ? impl().storage->device() : Device::cpu(); }
  std::size_t element_size() const { return dtype_size(dtype()); }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * element_size(); }
  bool is_contiguous() const;
  const Storage& storage() const { return impl().storage; }
  bool shares_storage_with(const Tensor& other) const;

  // Pointer to the first element (offset applied), on the tensor's device: what kernels and the
  // CUDA backend take. data<T>() is for host code that reads or writes the elements: it checks T
  // against dtype() and refuses a tensor that is not in host memory (a CUDA tensor's address
  // dereferenced on the host is a crash or garbage, never an error); copy it with
  // .to(Device::cpu()) first.
  void* data_ptr() const;
  template <typename T>
  T* data() const {
    ANVIL_CHECK(device().is_cpu(), "Tensor::data", "the tensor is on ", device(),
                ", not in host memory; copy it with .to(Device::cpu()) first");
    ANVIL_CHECK(DTypeOf<T>::value == dtype(), "Tensor::data", "requested ",
                dtype_name(DTypeOf<T>::value), " but tensor is ", dtype_name(dtype()));
    return static_cast<T*>(data_ptr());
  }
  // The single value of a one-element tensor, converted to double.
  double item() const;

  // ---- views and copies (differentiable; see engine/autograd/tensor_methods.cpp) -------
  Tensor transpose(std::int64_t d0, std::int64_t d1) const;
  Tensor t() const;  // transpose of a 2-D tensor
  Tensor permute(const Shape& order) const;
  Tensor reshape(const Shape& shape) const;  // a view when possible, else a copy; one -1 allowed
  Tensor view(const Shape& shape) const;     // a view or an error
  Tensor slice(std::int64_t dim, std::int64_t start, std::int64_t end, std::int64_t step = 1) const;
  Tensor select(std::int64_t dim, std::int64_t index) const;  // removes `dim`
  Tensor expand(const Shape& shape) const;                    // broadcast view (stride 0)
  Tensor unsqueeze(std::int64_t dim) const;
  Tensor squeeze(std::int64_t dim) const;
  Tensor flatten(std::int64_t start_dim = 0, std::int64_t end_dim = -1) const;
  Tensor contiguous() const;  // itself when contiguous, else a contiguous copy
  Tensor clone() const;       // always a copy (contiguous)
  Tensor to(DType dtype) const;
  Tensor to(Device device) const;

  // ---- in-place, never recorded by autograd ------------------------------------------
  Tensor& fill_(double value);
  Tensor& zero_() { return fill_(0.0); }
  // Copies src (broadcast to this shape, any dtype/device) into this tensor's elements.
  Tensor& copy_(const Tensor& src);

  // ---- autograd (engine/autograd/) ----------------------------------------------------
  bool requires_grad() const;
  Tensor& set_requires_grad(bool on = true);
  const Tensor& grad() const;  // undefined until a backward pass reached this leaf
  Tensor& mutable_grad();
  void backward(const Tensor& grad_output = Tensor(), bool retain_graph = false) const;
  Tensor detach() const;  // same storage, no autograd history
  bool is_leaf() const;

  // ---- identity -------------------------------------------------------------------------
  TensorImpl& impl() const {
    ANVIL_CHECK(impl_ != nullptr, "Tensor", "operation on an undefined tensor");
    return *impl_;
  }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }

  std::string str() const;  // shape, dtype, device and (up to a limit) the values

 private:
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Checks shared by ops: throw anvil::Error naming `where` with the offending values.
void check_defined(const Tensor& t, const char* where, const char* name);
void check_dtype(const Tensor& t, DType expected, const char* where, const char* name);
void check_dim(const Tensor& t, std::int64_t dim, const char* where, const char* name);
void check_same_device(const Tensor& a, const Tensor& b, const char* where);
std::int64_t wrap_dim(std::int64_t d, std::int64_t ndim, const char* where);

}  // namespace anvil
