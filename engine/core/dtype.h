// SPDX-License-Identifier: Apache-2.0
#pragma once
// Element types. float32 is the working type; float64 exists for gradient checks and the
// reference kernels; int32/int64 hold labels and token ids; bf16/f16 are 16-bit storage types
// for mixed precision (engine/core/half_types.h), computed on in f32.
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string_view>
#include <utility>

#include "engine/core/error.h"
#include "engine/core/half_types.h"

namespace anvil {

// Note [16-bit dtypes and the visitors]
// bf16 and f16 are storage types (Note [Half storage types]): a kernel written as a template
// over its element type and reached through visit_dtype would compute in 16 bits, or not compile.
// So the old visitors keep their four types: visit_dtype throws for bf16/f16 (every caller
// checks its dtype first and refuses them with its own name; reaching the throw is a missing
// check), is_floating stays "f32 or f64", the types the floating kernels compute in. Code that
// only stores, moves, converts or prints elements uses visit_all_dtypes, which adds the two;
// is_half tells the 16-bit ones apart, and is_any_floating covers all four floating types.
enum class DType : std::uint8_t { f32, f64, i32, i64, bf16, f16 };

// Every dtype, for loops over them (tests, readers).
inline constexpr DType kAllDTypes[] = {DType::f32, DType::f64,  DType::i32,
                                       DType::i64, DType::bf16, DType::f16};

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
    case DType::bf16:
    case DType::f16:
      return 2;
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
    case DType::bf16:
      return "bf16";
    case DType::f16:
      return "f16";
  }
  return "?";
}

// f32 or f64: the types floating kernels compute in (Note [16-bit dtypes and the visitors]).
constexpr bool is_floating(DType t) { return t == DType::f32 || t == DType::f64; }
// The 16-bit floating storage types.
constexpr bool is_half(DType t) { return t == DType::bf16 || t == DType::f16; }
constexpr bool is_any_floating(DType t) { return is_floating(t) || is_half(t); }

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
template <>
struct DTypeOf<BFloat16> {
  static constexpr DType value = DType::bf16;
};
template <>
struct DTypeOf<Float16> {
  static constexpr DType value = DType::f16;
};

// Calls fn(T{}) with T the C++ type of `t`, for the four computing dtypes f32, f64, i32, i64;
// throws for bf16 and f16 (Note [16-bit dtypes and the visitors]).
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
    case DType::bf16:
    case DType::f16:
      break;
  }
  fail("visit_dtype", dtype_name(t),
       " reached a kernel that computes in f32, f64, i32 or i64 only (its op "
       "should have refused it; cast with .to(DType::f32) first)");
}

// Calls fn(T{}) with T the C++ type of `t`, every dtype including BFloat16 and Float16: for
// code that stores, moves, converts or prints elements, never for arithmetic on them.
template <typename Fn>
decltype(auto) visit_all_dtypes(DType t, Fn&& fn) {
  switch (t) {
    case DType::bf16:
      return fn(BFloat16{});
    case DType::f16:
      return fn(Float16{});
    default:
      return visit_dtype(t, std::forward<Fn>(fn));
  }
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
