// SPDX-License-Identifier: Apache-2.0
// Progress bar / plain progress lines (progress.h).
#include "tools/anvil/progress.h"

#include <fmt/format.h>

namespace anvil::tools {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

Progress::Progress(std::ostream& out, bool redraw, std::string label, std::int64_t total)
    : out_(out),
      redraw_(redraw),
      label_(std::move(label)),
      total_(total > 0 ? total : 1),
      start_(std::chrono::steady_clock::now()) {}

void Progress::update(std::int64_t done, double loss) {
  const double fraction = static_cast<double>(done) / static_cast<double>(total_);
  const double elapsed = seconds_since(start_);
  if (redraw_) {
    // At most ~10 redraws a second, and always the last one.
    const auto now = std::chrono::steady_clock::now();
    if (done < total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(fraction * kWidth);
    out_ << fmt::format("\r{} [{}{}] {:3.0f}% {}/{} loss {:.4f} {:.1f} s", label_,
                        std::string(filled, '#'), std::string(kWidth - filled, '.'),
                        fraction * 100.0, done, total_, loss, elapsed)
         << std::flush;
    return;
  }
  if (fraction * 10.0 + 1e-9 < next_tenth_) return;
  while (fraction * 10.0 + 1e-9 >= next_tenth_) ++next_tenth_;
  out_ << fmt::format("{} {:3.0f}% {}/{} loss {:.4f} {:.1f} s\n", label_, fraction * 100.0, done,
                      total_, loss, elapsed)
       << std::flush;
}

void Progress::finish() {
  if (redraw_) out_ << '\n' << std::flush;
}

}  // namespace anvil::tools
