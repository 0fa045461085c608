// SPDX-License-Identifier: Apache-2.0
// Checkpoints (engine/optim/checkpoint.h): model tensors, optimizer state and the default
// generator mapped onto one safetensors file.
#include "engine/optim/checkpoint.h"

#include <set>

#include "engine/autograd/grad_mode.h"
#include "engine/core/random.h"
#include "engine/core/safetensors.h"

namespace anvil::optim {
namespace {

const std::string kModelPrefix = "model.";
const std::string kOptimPrefix = "optim.";
const std::string kAnvilPrefix = "anvil.";
const std::string kVersionKey = "anvil.format_version";
const std::string kRngKey = "anvil.rng.default";
// Modules' own non-tensor state (nn::Module::named_extra_state: Dropout generators).
const std::string kModuleStatePrefix = "anvil.module.";

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

NamedTensors model_tensors(const nn::Module& model) {
  NamedTensors out = model.named_parameters();
  for (auto& b : model.named_buffers()) out.push_back(std::move(b));
  return out;
}

CheckpointInfo info_from(const std::string& path, std::map<std::string, std::string> metadata) {
  const char* where = "load_checkpoint";
  CheckpointInfo info;
  const auto v = metadata.find(kVersionKey);
  ANVIL_CHECK(v != metadata.end(), where, path, ": not an anvil checkpoint (no '", kVersionKey,
              "' in its metadata)");
  ANVIL_CHECK(v->second == std::to_string(kCheckpointFormatVersion), where, path,
              ": checkpoint format version ", v->second, ", this build reads version ",
              kCheckpointFormatVersion);
  info.format_version = kCheckpointFormatVersion;
  if (const auto t = metadata.find(kOptimPrefix + "type"); t != metadata.end())
    info.optimizer = t->second;
  for (const auto& [k, val] : metadata)
    if (!starts_with(k, kAnvilPrefix) && !starts_with(k, kOptimPrefix)) info.extra.emplace(k, val);
  info.metadata = std::move(metadata);
  return info;
}

}  // namespace

void save_checkpoint(const std::string& path, const nn::Module& model, const Optimizer* opt,
                     const std::map<std::string, std::string>& extra_metadata) {
  const char* where = "save_checkpoint";
  std::map<std::string, std::string> metadata;
  for (const auto& [k, v] : extra_metadata) {
    ANVIL_CHECK(!starts_with(k, kAnvilPrefix) && !starts_with(k, kOptimPrefix), where, path,
                ": extra metadata key '", k, "' uses a reserved prefix (anvil., optim.)");
    metadata.emplace(k, v);
  }
  metadata[kVersionKey] = std::to_string(kCheckpointFormatVersion);
  metadata[kRngKey] = default_generator().state();
  for (const auto& [name, text] : model.named_extra_state())
    metadata[kModuleStatePrefix + name] = text;
  NamedTensors tensors;
  for (const auto& [name, t] : model_tensors(model)) tensors.emplace_back(kModelPrefix + name, t);
  if (opt != nullptr) {
    for (const auto& [name, t] : opt->state()) tensors.emplace_back(kOptimPrefix + name, t);
    for (const auto& [k, v] : opt->state_metadata()) metadata[kOptimPrefix + k] = v;
  }
  save_safetensors(path, tensors, metadata);
}

CheckpointInfo load_checkpoint(const std::string& path, nn::Module& model, Optimizer* opt) {
  const char* where = "load_checkpoint";
  SafetensorsFile file = load_safetensors(path);
  CheckpointInfo info = info_from(path, std::move(file.metadata));

  // Sort the file's tensors into model and optimizer ones.
  std::map<std::string, Tensor> saved;  // model tensors, without the prefix
  NamedTensors optim_tensors;
  for (auto& [name, t] : file.tensors) {
    if (starts_with(name, kModelPrefix))
      saved.emplace(name.substr(kModelPrefix.size()), std::move(t));
    else if (starts_with(name, kOptimPrefix))
      optim_tensors.emplace_back(name.substr(kOptimPrefix.size()), std::move(t));
    else
      fail(where, path, ": unexpected tensor '", name, "' (neither model.* nor optim.*)");
  }

  // Check the model against the file: same names, shapes and dtypes.
  const NamedTensors targets = model_tensors(model);
  std::set<std::string> expected;
  for (const auto& [name, t] : targets) {
    expected.insert(name);
    const auto it = saved.find(name);
    ANVIL_CHECK(it != saved.end(), where, path, ": the model's tensor '", kModelPrefix, name, "' ",
                shape_str(t.sizes()), " is missing from the checkpoint");
    const Tensor& s = it->second;
    ANVIL_CHECK(s.sizes() == t.sizes() && s.dtype() == t.dtype(), where, path, ": tensor '",
                kModelPrefix, name, "' is ", shape_str(s.sizes()), " ", dtype_name(s.dtype()),
                " in the checkpoint but ", shape_str(t.sizes()), " ", dtype_name(t.dtype()),
                " in the model");
  }
  for (const auto& [name, s] : saved)
    ANVIL_CHECK(expected.count(name), where, path, ": the checkpoint's tensor '", kModelPrefix,
                name, "' ", shape_str(s.sizes()),
                " is not in the model (a checkpoint of another model?)");

  const auto rng = info.metadata.find(kRngKey);
  ANVIL_CHECK(rng != info.metadata.end(), where, path, ": no '", kRngKey, "' in its metadata");
  Generator restored;
  try {
    restored.set_state(rng->second);
  } catch (const Error& e) {
    fail(where, path, ": ", e.what());
  }

  std::map<std::string, std::string> module_states;
  for (const auto& [k, v] : info.metadata)
    if (starts_with(k, kModuleStatePrefix))
      module_states.emplace(k.substr(kModuleStatePrefix.size()), v);
  for (const auto& [name, text] : model.named_extra_state()) {
    (void)text;
    ANVIL_CHECK(module_states.count(name) != 0, where, path, ": no '", kModuleStatePrefix, name,
                "' in its metadata (the state of the model's module ", name, ")");
  }

  if (opt != nullptr) {
    ANVIL_CHECK(!info.optimizer.empty(), where, path,
                ": the checkpoint holds no optimizer state (saved without an optimizer)");
    std::map<std::string, std::string> optim_metadata;
    for (const auto& [k, v] : info.metadata)
      if (starts_with(k, kOptimPrefix)) optim_metadata.emplace(k.substr(kOptimPrefix.size()), v);
    try {
      opt->load_state(optim_tensors, optim_metadata);  // checks everything before changing
    } catch (const Error& e) {
      fail(where, path, ": ", e.what());
    }
  }

  // Nothing can fail from here on. In place: optimizers hold these same tensors.
  NoGradGuard no_grad;
  for (const auto& [name, t] : targets) {
    Tensor dst = t;
    dst.copy_(saved.at(name));
  }
  default_generator() = restored;
  // Present (checked above); only a corrupted generator text could still throw here.
  try {
    model.load_extra_state(module_states);
  } catch (const Error& e) {
    fail(where, path, ": ", e.what());
  }
  return info;
}

CheckpointInfo read_checkpoint_info(const std::string& path) {
  return info_from(path, load_safetensors_metadata(path));
}

}  // namespace anvil::optim
