// SPDX-License-Identifier: Apache-2.0
// Optimizer and scheduler state as text and named tensors (engine/optim/optimizer_state.h).
#include "engine/optim/optimizer_state.h"

namespace anvil::optim::detail {
namespace {

// The parameter index of `name` when it is "<prefix><decimal index>", else -1.
std::int64_t index_after(const std::string& name, const std::string& prefix) {
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return -1;
  const char* b = name.data() + prefix.size();
  const char* e = name.data() + name.size();
  if (*b == '0' && e - b > 1) return -1;  // one spelling per index
  std::int64_t i = -1;
  const auto r = std::from_chars(b, e, i);
  return (r.ec == std::errc() && r.ptr == e) ? i : -1;
}

}  // namespace

std::string text_of(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

const std::string& entry(const Metadata& md, const std::string& key, const char* where) {
  const auto it = md.find(key);
  ANVIL_CHECK(it != md.end(), where, "the state has no '", key, "'");
  return it->second;
}

bool read_bool(const Metadata& md, const std::string& key, const char* where) {
  const std::string& s = entry(md, key, where);
  ANVIL_CHECK(s == "true" || s == "false", where, "state '", key, "' = \"", s,
              "\" is not true/false");
  return s == "true";
}

Metadata with_prefix_removed(const Metadata& md, const std::string& prefix) {
  Metadata out;
  for (const auto& [k, v] : md)
    if (k.rfind(prefix, 0) == 0) out.emplace(k.substr(prefix.size()), v);
  return out;
}

std::vector<std::vector<Tensor>> collect_state(const NamedTensors& tensors,
                                               const std::vector<std::string>& prefixes,
                                               const std::vector<Tensor>& params,
                                               const char* where) {
  std::string expected;  // for the error message
  for (const auto& p : prefixes) expected += (expected.empty() ? "" : ", ") + p + "<i>";
  std::vector<std::vector<Tensor>> slots(prefixes.size(), std::vector<Tensor>(params.size()));
  for (const auto& [name, t] : tensors) {
    std::size_t k = 0;
    std::int64_t i = -1;
    for (std::size_t c = 0; c < prefixes.size() && i < 0; ++c) {
      i = index_after(name, prefixes[c]);
      k = c;
    }
    ANVIL_CHECK(i >= 0, where, "unexpected state tensor '", name, "' (expected ", expected, ")");
    ANVIL_CHECK(i < static_cast<std::int64_t>(params.size()), where, "state tensor '", name,
                "' is for parameter ", i, " but this optimizer has ", params.size(), " parameters");
    ANVIL_CHECK(!slots[k][i].defined(), where, "state tensor '", name, "' given twice");
    check_defined(t, where, name.c_str());
    const Tensor& p = params[i];
    ANVIL_CHECK(t.sizes() == p.sizes() && t.dtype() == p.dtype(), where, "state tensor '", name,
                "' is ", shape_str(t.sizes()), " ", dtype_name(t.dtype()), " but parameter ", i,
                " is ", shape_str(p.sizes()), " ", dtype_name(p.dtype()));
    slots[k][i] = Tensor::empty(p.sizes(), p.dtype(), p.device());
    slots[k][i].copy_(t);
  }
  return slots;
}

}  // namespace anvil::optim::detail
