// bench/support/replay.hpp — the editing-trace workloads that bench/trace_bench times and
// bench/instruction_counts counts, defined once so both measure the same work:
//   gap_buffer         the baseline: a gap buffer of code points (one contiguous array, the gap moved
//                      to each edit), what a plain editor does and the floor every ratio is against;
//   replay(t, doc)     every patch of the trace applied in order (erase, then insert) to anything with
//                      insert(pos, s, n) and erase(pos, n): the gap buffer, or folio::text as local edits;
//   keystroke_batches  every patch as its own encoded batch, in order (one client's keystrokes as the
//                      service receives them; a patch's delete and insert are two batches).
#pragma once

#include <algorithm>
#include <cstddef>
#include <folio/folio.hpp>
#include <string>
#include <vector>

#include "support/trace.hpp"

namespace folio::bench {

/// A gap buffer of code points. Insert and erase are O(distance the gap moves + n); amortised growth.
class gap_buffer {
 public:
  void insert(std::size_t pos, const char32_t* s, std::size_t n) {
    move_gap(pos);
    if (gap_end_ - gap_start_ < n) grow(n);
    std::copy(s, s + n, buf_.begin() + std::ptrdiff_t(gap_start_));
    gap_start_ += n;
  }
  void erase(std::size_t pos, std::size_t n) {
    move_gap(pos);
    gap_end_ += n;
  }
  std::size_t size() const { return buf_.size() - (gap_end_ - gap_start_); }

 private:
  void move_gap(std::size_t pos) {
    if (pos < gap_start_) {
      const std::size_t n = gap_start_ - pos;
      std::copy_backward(buf_.begin() + std::ptrdiff_t(pos), buf_.begin() + std::ptrdiff_t(gap_start_), buf_.begin() + std::ptrdiff_t(gap_end_));
      gap_start_ -= n, gap_end_ -= n;
    } else if (pos > gap_start_) {
      const std::size_t n = pos - gap_start_;
      std::copy(buf_.begin() + std::ptrdiff_t(gap_end_), buf_.begin() + std::ptrdiff_t(gap_end_ + n), buf_.begin() + std::ptrdiff_t(gap_start_));
      gap_start_ += n, gap_end_ += n;
    }
  }
  void grow(std::size_t need) {
    const std::size_t tail = buf_.size() - gap_end_;
    const std::size_t cap = std::max(buf_.size() * 2, buf_.size() + need + 64);
    buf_.resize(cap);
    std::copy_backward(buf_.begin() + std::ptrdiff_t(gap_end_), buf_.begin() + std::ptrdiff_t(gap_end_ + tail), buf_.end());
    gap_end_ = cap - tail;
  }
  std::vector<char32_t> buf_;
  std::size_t gap_start_ = 0, gap_end_ = 0;
};

/// Applies every patch of `t` to `doc`, in order.
template <class Doc>
void replay(const folio::testing::trace& t, Doc& doc) {
  for (const auto& tx : t.txns)
    for (const auto& p : tx.patches) {
      if (p.del) doc.erase(p.pos, p.del);
      if (!p.ins.empty()) doc.insert(p.pos, p.ins.data(), p.ins.size());
    }
}

/// Every patch of `t` as its own encoded batch (replica 1's ops), in order.
inline std::vector<std::string> keystroke_batches(const folio::testing::trace& t) {
  folio::text doc(1);
  std::vector<std::string> out;
  for (const auto& tx : t.txns)
    for (const auto& p : tx.patches) {
      if (p.del) out.push_back(folio::encode_batch(doc.ops(doc.erase(p.pos, p.del))));
      if (!p.ins.empty()) out.push_back(folio::encode_batch(doc.ops(doc.insert(p.pos, p.ins.data(), p.ins.size()))));
    }
  return out;
}

}  // namespace folio::bench
