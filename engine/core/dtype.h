// SPDX-License-Identifier: Apache-2.0
#pragma once
// Element types. float32 is the working type; float64 exists for gradient checks and the
// reference kernels; int32/int64 hold labels and token ids.
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string_view>

#include "engine/core/error.h"

namespace anvil {

enum class DType : std::uint8_t { f32, f64, i32, i64 };

constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32:
      return 4;
    case DType::f64:
      return 8;
    case DType::i32:
      return 4;
    case DType::i64:
      return 8;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
    case DType::i32:
      return "i32";
    case DType::i64:
      return "i64";
  }
  return "?";
}

constexpr bool is_floating(DType t) { return t == DType::f32 || t == DType::f64; }

inline std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

// C++ type -> DType.
template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::f32;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::f64;
};
template <>
struct DTypeOf<std::int32_t> {
  static constexpr DType value = DType::i32;
};
template <>
struct DTypeOf<std::int64_t> {
  static constexpr DType value = DType::i64;
};

// Calls fn(T{}) with T the C++ type of `t` (all four dtypes).
template <typename Fn>
decltype(auto) visit_dtype(DType t, Fn&& fn) {
  switch (t) {
    case DType::f32:
      return fn(float{});
    case DType::f64:
      return fn(double{});
    case DType::i32:
      return fn(std::int32_t{});
    case DType::i64:
      return fn(std::int64_t{});
  }
  return fn(float{});
}

// Calls fn(T{}) with T = float or double, the C++ type of a floating dtype; throws for the
// others (kernels that compute in f32 and f64 only, whose supports() declined the rest).
template <typename Fn>
decltype(auto) visit_floating(DType t, Fn&& fn) {
  if (t == DType::f64) return fn(double{});
  ANVIL_CHECK(t == DType::f32, "visit_floating", "expected f32 or f64, got ", dtype_name(t));
  return fn(float{});
}
// The same for the integer dtypes (class ids, indices): T = std::int32_t or std::int64_t.
template <typename Fn>
decltype(auto) visit_integer(DType t, Fn&& fn) {
  if (t == DType::i64) return fn(std::int64_t{});
  ANVIL_CHECK(t == DType::i32, "visit_integer", "expected i32 or i64, got ", dtype_name(t));
  return fn(std::int32_t{});
}

}  // namespace anvil
