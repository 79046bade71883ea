// folio/detail/util/myers.hpp — minimal edit script between two sequences (Myers' O(ND) algorithm, linear
// space, bisecting at the middle snake).
//
// Common prefix and suffix are trimmed first, so a small change in a large input costs O(n) plus the
// work on the changed middle. The recursion of the textbook version is replaced by an explicit stack.
// A work budget bounds pathological inputs (two unrelated values): past it, every subproblem left
// becomes one replace hunk, which is still correct, merely not minimal. The budget grows with the
// values (`diff_budget`), so the work a request can cause stays proportional to its size (a flat
// budget would let two small unrelated values cost as much as two large ones).
//
// Why not a packaged library: the engine depends on the standard library and pugixml only (README.md);
// Debian's dtl would add a dependency to every consumer of the headers.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace folio::detail {

/// Replace a[a_pos, a_pos + a_len) with b[b_pos, b_pos + b_len).
struct hunk {
  std::size_t a_pos, a_len, b_pos, b_len;
};

inline constexpr std::uint64_t diff_base_budget = 1'000'000;  ///< steps any diff may take
inline constexpr std::uint64_t diff_budget_per_item = 64;     ///< more steps per item of both values
inline constexpr std::uint64_t diff_max_budget = 200'000'000;  ///< the most any one diff may take

/// The inner-loop steps a diff of values with `items` items in all may take. Myers costs about
/// (n + m) + D² steps for D differing items, so the script is minimal whenever D is below about
/// sqrt(budget): 1,000 items for any values, about 2,700 for two of 50,000.
constexpr std::uint64_t diff_budget(std::uint64_t items) {
  return std::min(diff_max_budget, diff_base_budget + diff_budget_per_item * std::min<std::uint64_t>(items, diff_max_budget));
}

/// Hunks turning a into b, ascending and non-adjacent. Consumes `budget` (inner-loop steps), which
/// callers diffing several pairs for one value share.
template <class T>
std::vector<hunk> myers_diff(const T* a, std::size_t n, const T* b, std::size_t m, std::uint64_t& budget) {
  struct task {
    std::size_t a0, a1, b0, b1;
  };
  std::vector<hunk> out;
  std::vector<task> stack{{0, n, 0, m}};
  std::vector<std::int64_t> v1, v2;
  auto emit = [&](std::size_t a0, std::size_t a1, std::size_t b0, std::size_t b1) {
    if (a0 == a1 && b0 == b1) return;
    if (!out.empty() && out.back().a_pos + out.back().a_len == a0 && out.back().b_pos + out.back().b_len == b0) {
      out.back().a_len += a1 - a0, out.back().b_len += b1 - b0;
    } else {
      out.push_back({a0, a1 - a0, b0, b1 - b0});
    }
  };
  while (!stack.empty()) {
    task t = stack.back();
    stack.pop_back();
    while (t.a0 < t.a1 && t.b0 < t.b1 && a[t.a0] == b[t.b0]) ++t.a0, ++t.b0;
    while (t.a0 < t.a1 && t.b0 < t.b1 && a[t.a1 - 1] == b[t.b1 - 1]) --t.a1, --t.b1;
    const auto N = static_cast<std::int64_t>(t.a1 - t.a0), M = static_cast<std::int64_t>(t.b1 - t.b0);
    if (N == 0 || M == 0) {
      emit(t.a0, t.a1, t.b0, t.b1);
      continue;
    }
    const T* x = a + t.a0;
    const T* y = b + t.b0;
    // Bisect: walk forward and reverse D-paths until they overlap.
    const std::int64_t max_d = (N + M + 1) / 2, off = max_d, vlen = 2 * max_d + 2;
    v1.assign(static_cast<std::size_t>(vlen), -1);
    v2.assign(static_cast<std::size_t>(vlen), -1);
    // Indexed through pointers: the indices are signed 64-bit diagonals (in [0, vlen) once offset),
    // which a vector's size_t subscript would narrow where size_t has 32 bits.
    std::int64_t* const p1 = v1.data();
    std::int64_t* const p2 = v2.data();
    p1[off + 1] = 0, p2[off + 1] = 0;
    const std::int64_t delta = N - M;
    const bool front = (delta & 1) != 0;
    std::int64_t k1s = 0, k1e = 0, k2s = 0, k2e = 0, sx = -1, sy = -1;
    // The furthest reaching D-path on diagonal k from the (D-1)-paths in `p` (forward: p1, from the
    // start; reverse: p2, from the end, `same` comparing from the back), stored in p; (x, y) of its end.
    auto extend = [&](std::int64_t* p, std::int64_t k, std::int64_t d, auto&& same) {
      const std::int64_t ko = off + k;
      std::int64_t xe = (k == -d || (k != d && p[ko - 1] < p[ko + 1])) ? p[ko + 1] : p[ko - 1] + 1;
      std::int64_t ye = xe - k;
      const std::int64_t s = xe;
      while (xe < N && ye < M && same(xe, ye)) ++xe, ++ye;
      budget -= std::min<std::uint64_t>(budget, static_cast<std::uint64_t>(xe - s));
      p[ko] = xe;
      return std::pair<std::int64_t, std::int64_t>(xe, ye);
    };
    for (std::int64_t d = 0; d < max_d && sx < 0; ++d) {
      if (budget < static_cast<std::uint64_t>(2 * d + 2)) break;
      budget -= 2 * d + 2;
      for (std::int64_t k1 = -d + k1s; k1 <= d - k1e && sx < 0; k1 += 2) {
        const auto [x1, y1] = extend(p1, k1, d, [&](std::int64_t i, std::int64_t j) { return x[i] == y[j]; });
        if (x1 > N)
          k1e += 2;
        else if (y1 > M)
          k1s += 2;
        else if (front) {
          const std::int64_t k2o = off + delta - k1;
          if (k2o >= 0 && k2o < vlen && p2[k2o] != -1 && x1 >= N - p2[k2o]) sx = x1, sy = y1;
        }
      }
      for (std::int64_t k2 = -d + k2s; k2 <= d - k2e && sx < 0; k2 += 2) {
        const auto [x2, y2] = extend(p2, k2, d, [&](std::int64_t i, std::int64_t j) { return x[N - i - 1] == y[M - j - 1]; });
        if (x2 > N)
          k2e += 2;
        else if (y2 > M)
          k2s += 2;
        else if (!front) {
          const std::int64_t k1o = off + delta - k2;
          if (k1o >= 0 && k1o < vlen && p1[k1o] != -1) {
            const std::int64_t x1 = p1[k1o];
            if (x1 >= N - x2) sx = x1, sy = off + x1 - k1o;
          }
        }
      }
    }
    if (sx < 0) {  // no overlap within budget (or nothing in common): one replace hunk
      emit(t.a0, t.a1, t.b0, t.b1);
      continue;
    }
    const auto mx = static_cast<std::size_t>(sx), my = static_cast<std::size_t>(sy);
    stack.push_back({t.a0 + mx, t.a1, t.b0 + my, t.b1});  // right half after the left one
    stack.push_back({t.a0, t.a0 + mx, t.b0, t.b0 + my});
  }
  return out;
}

/// Hunks turning a into b within `diff_budget(n + m)`.
template <class T>
std::vector<hunk> myers_diff(const T* a, std::size_t n, const T* b, std::size_t m) {
  std::uint64_t budget = diff_budget(n + m);
  return myers_diff(a, n, b, m, budget);
}

}  // namespace folio::detail
