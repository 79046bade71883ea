// folio/detail/sequence/batch_removes.hpp — the items an incoming batch of the sequence engine (detail/sequence/rga.hpp)
// removes: which of the values the batch carries can never show, so a placeholder value (a removed
// item's, see rga::same_as_integrated) is not taken for a difference and a value rule judges only the
// values that can show (rga::for_each_showable_value).
//
// Thread-safety: none.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "../../id.hpp"
#include "../../ops.hpp"

namespace folio::detail {

/// The items a batch's removes target, as sorted disjoint ranges per replica: which of the values the
/// batch carries can never show (rga::for_each_showable_value, rga::same_as_integrated). Gathered the
/// first time it is asked — most batches never are: only a value rule, a placeholder meeting a value
/// or an insert going pending asks — in O(m log m) for m removes; then a lookup is O(log m). The ops
/// it is made from must outlive it until then.
class batch_removes {
 public:
  batch_removes() = default;
  explicit batch_removes(const std::vector<op>& ops) : ops_(&ops) {}

  /// True if a remove of the batch targets item (replica, seq).
  bool contains(replica_id replica, std::uint64_t seq) const {
    gather();
    auto it = std::upper_bound(ranges_.begin(), ranges_.end(), std::pair(replica, seq),
                               [](const std::pair<replica_id, std::uint64_t>& v, const range& r) { return v.first != r.replica ? v.first < r.replica : v.second < r.first; });
    return it != ranges_.begin() && (it - 1)->replica == replica && seq < (it - 1)->end;
  }
  /// The ranges that hold any of the items (replica, seq + k), k < len: what an op held as pending
  /// keeps of its batch. O(log m + ranges copied).
  batch_removes within(replica_id replica, std::uint32_t seq, std::uint32_t len) const {
    gather();
    batch_removes out;
    auto it = std::partition_point(ranges_.begin(), ranges_.end(), [&](const range& r) { return r.replica < replica || (r.replica == replica && r.end <= seq); });
    for (; it != ranges_.end() && it->replica == replica && it->first < std::uint64_t(seq) + len; ++it) out.ranges_.push_back(*it);
    return out;
  }
  /// Calls f(replica, first, end) for each range [first, end) of targets, in (replica, seq) order:
  /// every item the batch's removes target, once. O(m log m) the first time, then O(ranges).
  template <class F>
  void for_each_range(F&& f) const {
    gather();
    for (const range& r : ranges_) f(r.replica, r.first, r.end);
  }
  std::size_t memory_usage() const noexcept { return ranges_.capacity() * sizeof(range); }

 private:
  struct range {
    replica_id replica;
    std::uint64_t first, end;  ///< seqs [first, end) of replica
  };

  void gather() const {
    if (!ops_) return;
    for (const op& o : *ops_)
      if (o.kind == op_kind::remove && o.len != 0) {
        const std::uint64_t first = !o.backward ? o.ref.seq : o.ref.seq >= o.len - 1 ? o.ref.seq - (o.len - 1) : 0;
        ranges_.push_back({o.ref.replica, first, first + o.len});
      }
    ops_ = nullptr;
    std::sort(ranges_.begin(), ranges_.end(), [](const range& a, const range& b) { return a.replica != b.replica ? a.replica < b.replica : a.first < b.first; });
    std::size_t out = 0;
    for (const range& r : ranges_)
      if (out != 0 && ranges_[out - 1].replica == r.replica && r.first <= ranges_[out - 1].end)
        ranges_[out - 1].end = std::max(ranges_[out - 1].end, r.end);
      else
        ranges_[out++] = r;
    ranges_.resize(out);
  }

  mutable const std::vector<op>* ops_ = nullptr;  ///< the batch's ops, until gathered
  mutable std::vector<range> ranges_;
};

}  // namespace folio::detail
