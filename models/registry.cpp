// SPDX-License-Identifier: Apache-2.0
// The model registry (models/registry.h).
#include "models/registry.h"

#include <map>
#include <mutex>
#include <sstream>

#include "models/zoo.h"

namespace anvil::models {
namespace {

std::mutex& mu() {
  static std::mutex m;
  return m;
}
std::map<std::string, ModelInfo>& table() {
  static std::map<std::string, ModelInfo> t;
  return t;
}
// Built-ins are added on first use (no static self-registration, see DESIGN.md).
void ensure_builtins() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (auto& m : builtin_fcn_models()) register_model(std::move(m));
    for (auto& m : builtin_cnn_models()) register_model(std::move(m));
    for (auto& m : builtin_lstm_models()) register_model(std::move(m));
  });
}

}  // namespace

void register_model(ModelInfo m) {
  ANVIL_CHECK(!m.name.empty() && m.build, "register_model", "a model needs a name and a builder");
  std::lock_guard<std::mutex> lock(mu());
  ANVIL_CHECK(table().count(m.name) == 0, "register_model", "model '", m.name,
              "' already registered");
  table().emplace(m.name, std::move(m));
}

std::vector<std::string> list() {
  ensure_builtins();
  std::lock_guard<std::mutex> lock(mu());
  std::vector<std::string> names;
  for (const auto& [n, m] : table()) names.push_back(n);
  return names;
}

const ModelInfo& info(const std::string& name) {
  ensure_builtins();
  std::lock_guard<std::mutex> lock(mu());
  auto it = table().find(name);
  if (it == table().end()) {
    std::string known;
    for (const auto& [n, m] : table()) known += (known.empty() ? "" : ", ") + n;
    fail("models::info", "unknown model '", name, "'; known models: ", known);
  }
  return it->second;
}

nn::ModulePtr create(const std::string& name, const ModelOptions& options) {
  const ModelInfo& m = info(name);
  Generator gen(options.seed);
  return m.build(options, gen);
}

ModelSummary summary(const std::string& name) {
  const ModelInfo& m = info(name);
  ShapesOnlyGuard shapes_only;  // Note [Shapes-only construction]
  nn::ModulePtr net = create(name);
  ModelSummary s;
  s.name = name;
  s.params = net->num_parameters();
  Shape shape = m.sample_shape;
  shape.insert(shape.begin(), 1);
  s.flops_per_sample = net->forward_flops(shape);
  // One row per top-level child (a whole module when the model is not a container).
  const auto& children = net->children();
  if (children.empty()) {
    s.layers.push_back({name, net->type_name(), net->extra_repr(), net->output_shape(shape),
                        s.params, s.flops_per_sample});
  }
  for (const auto& [child_name, child] : children) {
    LayerRow row{child_name,
                 child->type_name(),
                 child->extra_repr(),
                 child->output_shape(shape),
                 child->num_parameters(),
                 child->forward_flops(shape)};
    shape = row.output_shape;
    s.layers.push_back(std::move(row));
  }
  return s;
}

std::string ModelSummary::table() const {
  std::ostringstream os;
  os << name << ": " << params << " parameters, " << flops_per_sample / 1e6
     << " MFLOP forward per sample\n";
  os << "layer  type        output        params       MFLOP  args\n";
  for (const auto& r : layers) {
    os << r.name << std::string(r.name.size() < 7 ? 7 - r.name.size() : 1, ' ') << r.type
       << std::string(r.type.size() < 12 ? 12 - r.type.size() : 1, ' ');
    const std::string shape = shape_str(r.output_shape);
    os << shape << std::string(shape.size() < 14 ? 14 - shape.size() : 1, ' ') << r.params << "  "
       << r.flops / 1e6 << "  " << r.repr << '\n';
  }
  return os.str();
}

std::vector<nn::NamedProblem> problems(const std::string& name, std::int64_t batch) {
  ANVIL_CHECK(batch > 0, "models::problems", "batch must be positive, got ", batch);
  const ModelInfo& m = info(name);
  ShapesOnlyGuard shapes_only;  // Note [Shapes-only construction]
  nn::ModulePtr net = create(name);
  Shape shape = m.sample_shape;
  shape.insert(shape.begin(), batch);
  std::vector<nn::NamedProblem> out;
  net->problems(shape, name + ":", out);
  return out;
}

}  // namespace anvil::models
