// SPDX-License-Identifier: Apache-2.0
#pragma once
// Progress of a training epoch: a redrawn bar on a terminal, or a plain line every 10 % when the
// output is a file or a pipe (logs stay readable).
#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>

namespace anvil::tools {

class Progress {
 public:
  Progress(std::ostream& out, bool redraw, std::string label, std::int64_t total);
  // `done` of `total` steps finished; `loss` is the running mean loss.
  void update(std::int64_t done, double loss);
  // Ends the bar's line (a terminal) so that the next output starts on a fresh line.
  void finish();

 private:
  std::ostream& out_;
  bool redraw_;
  std::string label_;
  std::int64_t total_;
  int next_tenth_ = 1;  // plain mode: the next 10 % mark to print
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace anvil::tools
