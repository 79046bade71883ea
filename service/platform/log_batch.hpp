// service/platform/log_batch.hpp — access lines held for one write, as nginx's access_log buffer= and
// flush= hold them: the held lines are written when `capacity` bytes are held, when the oldest has waited
// `interval`, before any other line (so the log keeps its order), and at exit. A crash loses at most the
// last `interval` of access lines; error lines are never held. The clock is the caller's (times are
// arguments), so the bound is tested without waiting.
// Thread-safety: none; log.cpp holds its lock around every call.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace folio::service::log {

class line_batch {
 public:
  using clock = std::chrono::steady_clock;

  line_batch(std::size_t capacity, clock::duration interval) : capacity_(capacity), interval_(interval) {}

  /// Holds `line` (its newline included), added at `now`. True when the batch is due at `now`.
  bool add(std::string_view line, clock::time_point now) {
    if (held_.empty()) oldest_ = now;
    held_.append(line);
    return due(now);
  }
  /// Whether the held lines must be written at `now`: `capacity` bytes held, or the oldest held for `interval`.
  bool due(clock::time_point now) const { return !held_.empty() && (held_.size() >= capacity_ || now - oldest_ >= interval_); }
  /// When the held lines are due at the latest; none when nothing is held.
  std::optional<clock::time_point> deadline() const {
    if (held_.empty()) return std::nullopt;
    return oldest_ + interval_;
  }
  std::string_view held() const noexcept { return held_; }
  /// Empties the batch, keeping its room (up to `capacity`, which one write takes).
  void clear() {
    held_.clear();
    if (held_.capacity() > 2 * capacity_) held_.shrink_to_fit();
  }

 private:
  std::size_t capacity_;
  clock::duration interval_;
  std::string held_;
  clock::time_point oldest_{};
};

}  // namespace folio::service::log
