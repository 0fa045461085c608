// SPDX-License-Identifier: Apache-2.0
// The autocast state (per thread), the list lookup and the decision each op's inputs get
// (Note [Autocast policy]).
#include "engine/autograd/autocast.h"

#include <iostream>
#include <mutex>
#include <set>

#include "engine/dispatch/selection.h"

namespace anvil {
namespace {

thread_local Precision current_precision = Precision::fp32;

// Prints each distinct decision once, or every one with ANVIL_VERBOSE=dispatch_all, as the
// variant selections do (Note [Dispatch log]).
void log_decision(std::string_view op, DType input, Precision precision) {
  const int verbosity = dispatch_verbosity();
  if (verbosity == 0) return;
  std::string line = describe_autocast(op, input, precision);
  static std::mutex mutex;
  static std::set<std::string> printed;
  const std::lock_guard<std::mutex> lock(mutex);
  if (verbosity == 1 && !printed.insert(line).second) return;
  std::cerr << line << '\n';
}

}  // namespace

std::string_view autocast_list_name(AutocastList list) {
  switch (list) {
    case AutocastList::low_precision:
      return "low_precision";
    case AutocastList::fp32:
      return "fp32";
    case AutocastList::unlisted:
      return "unlisted";
  }
  return "?";
}

AutocastList autocast_list_of(std::string_view op) {
  for (const AutocastOp& entry : kAutocastOps)
    if (entry.op == op) return entry.list;
  return AutocastList::unlisted;
}

Precision autocast_precision() { return current_precision; }
bool autocast_enabled() { return is_mixed(current_precision); }

AutocastGuard::AutocastGuard(Precision precision) : previous_(current_precision) {
  current_precision = precision;
}
AutocastGuard::~AutocastGuard() { current_precision = previous_; }

DType autocast_dtype(std::string_view op, DType input, Precision precision) {
  if (!is_mixed(precision) || !is_any_floating(input)) return input;
  switch (autocast_list_of(op)) {
    case AutocastList::low_precision:
      return low_precision_dtype(precision);
    case AutocastList::fp32:
      return is_half(input) ? DType::f32 : input;
    case AutocastList::unlisted:
      return input;
  }
  return input;
}

std::string describe_autocast(std::string_view op, DType input, Precision precision) {
  std::string line = "anvil autocast: op=";
  line += op;
  line += " list=";
  line += autocast_list_name(autocast_list_of(op));
  line += " precision=";
  line += precision_name(precision);
  line += " input=";
  line += dtype_name(input);
  line += " runs=";
  line += dtype_name(autocast_dtype(op, input, precision));
  return line;
}

Tensor autocast_input(std::string_view op, const Tensor& x) {
  if (!autocast_enabled() || !x.defined()) return x;
  log_decision(op, x.dtype(), current_precision);
  const DType target = autocast_dtype(op, x.dtype(), current_precision);
  return target == x.dtype() ? x : x.to(target);
}

}  // namespace anvil
