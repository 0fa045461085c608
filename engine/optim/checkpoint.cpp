// SPDX-License-Identifier: Apache-2.0
// Checkpoints (engine/optim/checkpoint.h): model tensors, optimizer and scheduler state, the
// loss scaler and the default generator mapped onto one safetensors file.
#include "engine/optim/checkpoint.h"

#include <optional>
#include <set>

#include "engine/autograd/grad_mode.h"
#include "engine/core/random.h"
#include "engine/core/safetensors.h"
#include "engine/optim/optimizer_state.h"
#include "engine/optim/grad_scaler.h"

namespace anvil::optim {
namespace {

const std::string kModelPrefix = "model.";
const std::string kOptimPrefix = "optim.";
const std::string kSchedulerPrefix = "scheduler.";
const std::string kAnvilPrefix = "anvil.";
const std::string kVersionKey = "anvil.format_version";
const std::string kRngKey = "anvil.rng.default";
// Modules' own non-tensor state (nn::Module::named_extra_state: Dropout generators).
const std::string kModuleStatePrefix = "anvil.module.";
// The loss scaler (GradScaler::state_metadata), fp16 training.
const std::string kScalerPrefix = "anvil.grad_scaler.";

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

bool reserved(const std::string& key) {
  return starts_with(key, kAnvilPrefix) || starts_with(key, kOptimPrefix) ||
         starts_with(key, kSchedulerPrefix);
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
  if (const auto t = metadata.find(kSchedulerPrefix + "type"); t != metadata.end())
    info.scheduler = t->second;
  for (const auto& [k, val] : metadata)
    if (!reserved(k)) info.extra.emplace(k, val);
  info.metadata = std::move(metadata);
  return info;
}

}  // namespace

void save_checkpoint(const std::string& path, const nn::Module& model, const Optimizer* opt,
                     const std::map<std::string, std::string>& extra_metadata,
                     const GradScaler* scaler) {
  save_checkpoint(path, model, opt, nullptr, extra_metadata, scaler);
}

void save_checkpoint(const std::string& path, const nn::Module& model, const Optimizer* opt,
                     const LRScheduler* scheduler,
                     const std::map<std::string, std::string>& extra_metadata,
                     const GradScaler* scaler) {
  const char* where = "save_checkpoint";
  std::map<std::string, std::string> metadata;
  for (const auto& [k, v] : extra_metadata) {
    ANVIL_CHECK(!reserved(k), where, path, ": extra metadata key '", k,
                "' uses a reserved prefix (anvil., optim., scheduler.)");
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
  if (scheduler != nullptr)
    for (const auto& [k, v] : scheduler->state_metadata()) metadata[kSchedulerPrefix + k] = v;
  if (scaler != nullptr)
    for (const auto& [k, v] : scaler->state_metadata()) metadata[kScalerPrefix + k] = v;
  save_safetensors(path, tensors, metadata);
}

// Note [Transactional checkpoint load]
// load_checkpoint changes the model, the optimizer and the default generator only when the
// whole file fits: it parses and checks everything first (the file's format, every model
// tensor's name, shape and dtype, the generator text, every module's extra state such as a
// Dropout generator, and - inside Optimizer::load_state, which checks before it commits - the
// optimizer's options and state tensors), and only then writes. The one fallible step that
// writes is Optimizer::load_state, so it runs last of all checks; after it returns, the copies
// into the model (same shape, dtype and device: staged above) and the generator assignments
// cannot fail. tests/test_checkpoint.cpp corrupts each part of a checkpoint in turn and checks
// that the model, its buffers, the optimizer and both kinds of generator are bitwise unchanged.
CheckpointInfo load_checkpoint(const std::string& path, nn::Module& model, Optimizer* opt,
                               GradScaler* scaler) {
  return load_checkpoint(path, model, opt, nullptr, scaler);
}

// A loss scaler's state is loaded into a copy first and assigned with the commit.
CheckpointInfo load_checkpoint(const std::string& path, nn::Module& model, Optimizer* opt,
                               LRScheduler* scheduler, GradScaler* scaler) {
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
    fail(where, path, ": '", kRngKey, "': ", e.what());
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
  try {
    model.check_extra_state(module_states);  // e.g. every Dropout generator text parses
  } catch (const Error& e) {
    fail(where, path, ": ", e.what());
  }

  // Staging: a model tensor on another device gets its new value there first, so that a failed
  // transfer (device out of memory) happens before the commit below.
  std::vector<Tensor> sources;
  sources.reserve(targets.size());
  for (const auto& [name, t] : targets) {
    const Tensor& s = saved.at(name);
    if (t.device() == s.device()) {
      sources.push_back(s);
    } else {
      Tensor staged = Tensor::empty(t.sizes(), t.dtype(), t.device());
      staged.copy_(s);
      sources.push_back(std::move(staged));
    }
  }

  // The scheduler's state is checked here and committed after the optimizer's.
  LRScheduler::Loaded schedule;
  if (scheduler != nullptr) {
    ANVIL_CHECK(!info.scheduler.empty(), where, path,
                ": the checkpoint holds no scheduler state (saved without a scheduler)");
    try {
      schedule =
          scheduler->check_state(detail::with_prefix_removed(info.metadata, kSchedulerPrefix));
    } catch (const Error& e) {
      fail(where, path, ": ", e.what());
    }
  }
  std::optional<GradScaler> staged_scaler;
  if (scaler != nullptr) {
    std::map<std::string, std::string> scaler_state;
    for (const auto& [k, v] : info.metadata)
      if (starts_with(k, kScalerPrefix)) scaler_state.emplace(k.substr(kScalerPrefix.size()), v);
    ANVIL_CHECK(!scaler_state.empty(), where, path,
                ": the checkpoint holds no loss-scaler state (no '", kScalerPrefix,
                "*' metadata: saved without a GradScaler)");
    staged_scaler = *scaler;
    try {
      staged_scaler->load_state(scaler_state);
    } catch (const Error& e) {
      fail(where, path, ": ", e.what());
    }
  }

  // The optimizer last among the steps that can fail: load_state checks everything and then
  // commits, so when it throws the optimizer is unchanged, and when it returns nothing
  // else can fail (Note [Transactional checkpoint load]).
  if (opt != nullptr) {
    ANVIL_CHECK(!info.optimizer.empty(), where, path,
                ": the checkpoint holds no optimizer state (saved without an optimizer)");
    std::map<std::string, std::string> optim_metadata;
    for (const auto& [k, v] : info.metadata)
      if (starts_with(k, kOptimPrefix)) optim_metadata.emplace(k.substr(kOptimPrefix.size()), v);
    try {
      opt->load_state(optim_tensors, optim_metadata);
    } catch (const Error& e) {
      fail(where, path, ": ", e.what());
    }
  }

  // Commit. In place: optimizers hold these same tensors. Same device and shape, so the copies
  // cannot fail; the extra state was validated above.
  NoGradGuard no_grad;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    Tensor dst = targets[i].second;
    dst.copy_(sources[i]);
  }
  default_generator() = restored;
  model.load_extra_state(module_states);
  if (scheduler != nullptr) scheduler->commit(schedule);  // sets the lrs it had when saved
  if (staged_scaler) *scaler = *staged_scaler;
  return info;
}

CheckpointInfo read_checkpoint_info(const std::string& path) {
  return info_from(path, load_safetensors_metadata(path));
}

}  // namespace anvil::optim
