// SPDX-License-Identifier: Apache-2.0
#pragma once
// Where a tensor's bytes live. CPU is always present; CUDA devices exist only after the CUDA
// backend library has been loaded on first GPU use (see engine/core/cuda_backend.h).
#include <ostream>
#include <string>

namespace anvil {

enum class DeviceType : unsigned char { cpu, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;  // CUDA ordinal; always 0 for the CPU

  static Device cpu() { return {DeviceType::cpu, 0}; }
  static Device cuda(int i = 0) { return {DeviceType::cuda, i}; }
  bool is_cpu() const { return type == DeviceType::cpu; }
  bool is_cuda() const { return type == DeviceType::cuda; }
  friend bool operator==(const Device&, const Device&) = default;

  // "cpu" or "cuda:0"
  std::string str() const {
    return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index);
  }
  // Parses "cpu", "cuda", "cuda:N"; throws anvil::Error otherwise.
  static Device parse(const std::string& text);
};

inline std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

}  // namespace anvil
