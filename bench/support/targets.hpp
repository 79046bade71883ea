// bench/support/targets.hpp — the targets the issues set for a figure, printed beside it with a
// verdict, so that a run says by itself which targets it meets and which it misses.
#pragma once

#include <cstdio>
#include <initializer_list>
#include <string>

namespace folio::bench {

/// An upper bound set by an issue: the figure must stay at or under `must`, and aims for `aim` where
/// the issue sets a tighter one (0: none).
struct bound {
  double must;
  double aim;
  const char* issue;  ///< where it was set, e.g. "issue 2"
};

/// "<= 8x / <= 4x (issue 2): aim met; ..." for each bound; "no target" when there is none.
inline std::string judge(double value, std::initializer_list<bound> bounds, const char* unit) {
  std::string out;
  for (const bound& b : bounds) {
    char buf[160];
    const char* verdict = b.aim > 0 ? (value <= b.aim ? "aim met" : value <= b.must ? "must met, aim MISSED" : "MISSED")
                                    : (value <= b.must ? "met" : "MISSED");
    if (b.aim > 0)
      std::snprintf(buf, sizeof buf, "<= %g%s / <= %g%s (%s): %s", b.must, unit, b.aim, unit, b.issue, verdict);
    else
      std::snprintf(buf, sizeof buf, "<= %g%s (%s): %s", b.must, unit, b.issue, verdict);
    out += (out.empty() ? "" : "; ") + std::string(buf);
  }
  return out.empty() ? "no target" : out;
}

}  // namespace folio::bench
