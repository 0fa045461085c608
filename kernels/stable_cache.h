// SPDX-License-Identifier: Apache-2.0
#pragma once
// StableCache: a process-lifetime map from a hashable problem key to an immutable entry, for the
// per-problem state of library variants (cuDNN choices and their descriptors, kernels/cuda/).
//
// Note [Stable cache entries]
// A variant's hot path looks its problem up once per call and then uses the entry without any
// lock: find() returns a pointer, and the mutex covers only the map's lookup and insert. That is
// safe because an entry is complete before it is published (insert() takes it whole) and is never
// modified, moved or destroyed afterwards: the map holds unique_ptrs, so a rehash moves the
// pointers and not the entries, and forget_all() (for tests) moves the entries to a list that
// lives as long as the cache instead of destroying them. Users keep their caches in leaked
// statics (as cudnn_handle() does), so entries that own cuDNN descriptors are never destroyed
// after the CUDA runtime or libcudnn is gone at process exit. Two threads that miss on the same
// key both build an entry; the first insert wins and the other is dropped, so both return the
// one in the map.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace anvil::kernels {

template <typename Key, typename Value, typename Hash>
class StableCache {
 public:
  // The entry of `key`, or nullptr.
  const Value* find(const Key& key) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    return it == map_.end() ? nullptr : it->second.get();
  }

  // Stores `value` under `key` unless an entry is there already. Returns the entry in the cache
  // and whether it is `value` (false: another thread inserted first and `value` was dropped).
  std::pair<const Value*, bool> insert(const Key& key, std::unique_ptr<const Value> value) {
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, inserted] = map_.try_emplace(key, std::move(value));
    return {it->second.get(), inserted};
  }

  // Calls f(key, value) for every entry, under the lock (f must not use this cache).
  template <typename F>
  void for_each(F&& f) const {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [k, v] : map_) f(k, *v);
  }

  // Later finds miss; the entries stay alive (Note [Stable cache entries]).
  void forget_all() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& kv : map_) forgotten_.push_back(std::move(kv.second));
    map_.clear();
  }

  std::size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return map_.size();
  }

 private:
  mutable std::mutex mu_;
  std::unordered_map<Key, std::unique_ptr<const Value>, Hash> map_;
  std::vector<std::unique_ptr<const Value>> forgotten_;
};

}  // namespace anvil::kernels
