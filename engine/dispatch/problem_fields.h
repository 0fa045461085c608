// SPDX-License-Identifier: Apache-2.0
#pragma once
// Problems as hashable values: equality and a hash from one list of fields.
//
// Note [Problem fields]
// A problem type is a plain struct. It compares with a defaulted operator== (every member, so a
// member added later can never be forgotten by equality) and lists its members once in
//   auto fields() const { return std::tie(dtype, device, m, n, ...); }
// from which problem_hash() is made. The hash may see fewer members than equality (a forgotten
// member only costs collisions, never a wrong answer), so correctness rests on operator== alone.
// These are what the selection memo (Note [Selection memo], variant_table.h) and the autotune
// cache are keyed by: no string is built on the per-op-call path. key() and repr() stay for the
// dispatch log, error messages and the kernels' own primitive caches.
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <tuple>

#include "engine/core/device.h"

namespace anvil {

// Folds v into the running hash h (the boost::hash_combine mixing step, 64-bit constant).
inline void hash_mix(std::size_t& h, std::size_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
}

inline std::size_t hash_field(const Device& d) {
  return std::hash<int>{}(static_cast<int>(d.type) * 1024 + d.index);
}
template <typename T>
std::size_t hash_field(const T& v) {
  return std::hash<T>{}(v);
}

// The hash of a tuple of fields, in order, finished with splitmix64's finaliser: std::hash of
// an integer is the integer itself, and problems differ in a few small fields.
template <typename... T>
std::size_t hash_fields(const std::tuple<T...>& fields) {
  std::size_t h = sizeof...(T);
  std::apply([&h](const auto&... f) { (hash_mix(h, hash_field(f)), ...); }, fields);
  std::uint64_t z = h;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return static_cast<std::size_t>(z ^ (z >> 31));
}

// A problem the selection memo (or any per-problem cache) can key by: equality, and fields()
// to hash.
template <typename P>
concept HashableProblem = requires(const P& p) {
  { p == p } -> std::convertible_to<bool>;
  hash_fields(p.fields());
};

template <HashableProblem P>
std::size_t problem_hash(const P& p) {
  return hash_fields(p.fields());
}

// For unordered containers keyed by a problem (or any struct with == and fields()).
struct ProblemHasher {
  template <HashableProblem P>
  std::size_t operator()(const P& p) const {
    return problem_hash(p);
  }
};

}  // namespace anvil
