// folio/detail/sequence/op_log.hpp — the op log of the sequence engine (detail/sequence/rga.hpp) and the map from a
// replica's insert seqs to the slots of its content log (detail/sequence/content_log.hpp).
//
// Model:
//  * The log keeps every operation in the (causal) order it was integrated, run-length merged: an
//    entry continues the previous one when it is the same kind by the same author with the next seqs
//    and Lamport values, and (insert) each item's origin is the one before it or (remove) its targets
//    continue the previous ones in one direction. `ops_since` reads it (since, emit), so nothing has
//    to be reconstructed from the tree; per replica, `log_pos` lists its entries in seq order, which
//    finds the op holding an id in O(log n) (entry_holding).
//  * A replica's seqs are inserts (items, each with a content slot) or removes (no slot).
//    replica_removes keeps the seq ranges of its removes, so an insert's slot is its seq less the
//    remove units before it, and a remove's targets can be checked against "is this seq an item".
//
// Invariants (verified by rga::check_invariants): per replica, log_pos covers seqs 0..next_seq-1
// exactly once; the remove ranges are the log's removes, touching ones merged, with their running
// unit counts per page; the content log has a slot per insert unit.
//
// Thread-safety: none.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "../../error.hpp"
#include "../../id.hpp"
#include "../../ops.hpp"
#include "../../version.hpp"
#include "id_index.hpp"
#include "page_directory.hpp"
#include "../replica/replica_core.hpp"

namespace folio::detail {

/// One entry of the op log. 28 bytes.
struct log_entry {
  std::uint32_t replica;      ///< local index of the author
  std::uint32_t seq;          ///< first unit's seq
  std::uint32_t len;          ///< unit count
  std::uint32_t lamport;      ///< first unit's Lamport value
  std::uint32_t ref_replica;  ///< local index, or no_replica for document_start
  std::uint32_t ref_seq;      ///< insert: origin of the first item; remove: first target
  op_kind kind;
  bool backward;  ///< remove: targets descend

  std::uint32_t last_target() const noexcept { return backward ? ref_seq - (len - 1) : ref_seq + (len - 1); }
};

/// Log entries picked for a batch: (log position, first unit taken).
using log_picks = std::vector<std::pair<std::uint32_t, std::uint32_t>>;

/// The seqs of one replica that are removes (see the top of this file).
struct replica_removes {
  struct before {
    std::uint32_t ranges, units;
  };
  /// Seq ranges [first, second) of the replica's removes, in seq order, touching ones merged: the
  /// seqs that are not items (rga::check_refs finds a remove's faults in O(log n) with them).
  std::vector<std::pair<std::uint32_t, std::uint32_t>> ranges;
  std::uint32_t units = 0;  ///< seqs that are removes (they hold no content slot)
  /// Which pages before_page keeps: those up to the one where the last range starts (later pages: all
  /// of them), except pages wholly inside a range (they hold no insert, so slot never asks for them).
  page_directory pages;
  /// before_page[pages.slot(p)]: the remove ranges that start before seq p·2^index_page_bits and
  /// their units.
  std::vector<before> before_page;

  /// The content slot of insert unit `seq`: seq less the remove units before it. O(1) in the last
  /// block of pages (else O(log blocks)) plus the remove ranges that start in seq's page before it (at
  /// most half a page, usually none). A run's seqs are all inserts, so its slots are consecutive.
  std::size_t slot(std::uint32_t seq) const noexcept {
    const std::uint32_t page = seq >> index_page_bits;
    if (page >= pages.end_page()) return seq - units;  // every remove range ends before seq
    // Kept: seq's page; otherwise the last kept page before it, with every range starting between.
    const page_directory::place at = pages.find(page);
    std::uint32_t n = before_page[at.slot].units;
    for (std::size_t i = before_page[at.slot].ranges; i < ranges.size() && ranges[i].first < seq; ++i) n += ranges[i].second - ranges[i].first;
    return seq - n;
  }

  /// Records that seqs [seq, seq + n) are a remove (not items). O(1) amortised: what a range adds to
  /// before_page is bounded by the pages it does not wholly span.
  void note(std::uint32_t seq, std::uint32_t n) {
    if (!ranges.empty() && ranges.back().second == seq) {
      ranges.back().second += n;
    } else {
      // Pages after those kept and up to this range's: every range so far starts before them. Those
      // wholly inside the previous range (pages [inside_lo, inside_end)) hold no insert: not kept.
      const std::uint32_t last = seq >> index_page_bits, from = pages.end_page();
      std::uint32_t inside_lo = 0, inside_end = 0;
      if (!ranges.empty())
        inside_lo = static_cast<std::uint32_t>((std::uint64_t(ranges.back().first) + (1u << index_page_bits) - 1) >> index_page_bits),
        inside_end = ranges.back().second >> index_page_bits;
      const before fill{static_cast<std::uint32_t>(ranges.size()), units};
      auto keep = [&](std::uint32_t lo, std::uint32_t hi) {
        if (lo > hi) return;
        pages.keep(lo, hi);
        before_page.resize(pages.size(), fill);
      };
      if (inside_lo < inside_end && from < inside_end) {  // the range starts past the previous one's end
        if (from < inside_lo) keep(from, inside_lo - 1);
        keep(std::max(from, inside_end), last);
      } else {
        keep(from, last);
      }
      ranges.emplace_back(seq, seq + n);
    }
    units += n;
  }

  std::size_t memory_usage() const noexcept {
    return ranges.capacity() * sizeof(ranges[0]) + before_page.capacity() * sizeof(before_page[0]) + pages.memory_usage();
  }
};

/// The op log (see the top of this file).
class op_log {
 public:
  const log_entry& operator[](std::size_t i) const noexcept { return entries_[i]; }
  std::size_t size() const noexcept { return entries_.size(); }
  std::size_t memory_usage() const noexcept { return entries_.capacity() * sizeof(log_entry); }

  /// Appends `e`, extending the last entry when `e` continues it; `log_pos` is e's author's. True if
  /// it took an entry of its own.
  bool append(const log_entry& e, std::vector<std::uint32_t>& log_pos) {
    if (!entries_.empty()) {
      log_entry& last = entries_.back();
      if (last.kind == e.kind && last.replica == e.replica && last.seq + last.len == e.seq && last.lamport + last.len == e.lamport) {
        if (e.kind == op_kind::insert) {
          if (e.ref_replica == e.replica && e.ref_seq + 1 == e.seq) {
            last.len += e.len;
            return false;
          }
        } else if (e.ref_replica == last.ref_replica) {
          const std::uint32_t lt = last.last_target();
          if ((!last.backward || last.len == 1) && (!e.backward || e.len == 1) && e.ref_seq == lt + 1) {
            last.backward = false, last.len += e.len;
            return false;
          }
          if ((last.backward || last.len == 1) && (e.backward || e.len == 1) && lt != 0 && e.ref_seq == lt - 1) {
            last.backward = true, last.len += e.len;
            return false;
          }
        }
      }
    }
    log_pos.push_back(static_cast<std::uint32_t>(entries_.size()));
    entries_.push_back(e);
    return true;
  }

  /// The origin (local replica, seq) of item (rep, seq), whose replica's entries are `log_pos`.
  std::pair<std::uint32_t, std::uint32_t> origin_of(const std::vector<std::uint32_t>& log_pos, std::uint32_t rep, std::uint32_t seq) const {
    const log_entry& e = entries_[*entry_holding(log_pos, seq, *this)];
    if (e.kind != op_kind::insert) fail(error_code::invariant, "item id belongs to a remove");
    if (seq == e.seq) return {e.ref_replica, e.ref_seq};
    return {rep, seq - 1};
  }

  /// Adds to `picks` the entries of one replica (its `log_pos`: `lp`) holding seqs [from, to).
  void collect(const std::vector<std::uint32_t>& lp, std::uint32_t from, std::uint32_t to, log_picks& picks) const {
    if (from >= to) return;
    auto it = std::upper_bound(lp.begin(), lp.end(), from, [&](std::uint32_t s, std::uint32_t pos) { return s < entries_[pos].seq; });
    if (it != lp.begin()) --it;
    for (; it != lp.end() && entries_[*it].seq < to; ++it) {
      const log_entry& e = entries_[*it];
      if (e.seq + e.len <= from) continue;
      picks.emplace_back(*it, from > e.seq ? from - e.seq : 0);
    }
  }

  /// The entries a replica at version `since` lacks (with `upto`: only those that version holds), in
  /// log order, of the replica table `reps` (each with id, next_seq and log_pos). O(k log k) for k picked.
  template <class Replicas>
  log_picks since(const Replicas& reps, const version_vector& since, const version_vector* upto) const {
    log_picks picks;
    for (std::uint32_t r = 0; r < reps.size(); ++r) {
      const std::uint32_t to = upto ? std::min(upto->get(reps[r].id), reps[r].next_seq) : reps[r].next_seq;
      collect(reps[r].log_pos, since.get(reps[r].id), to, picks);
    }
    std::sort(picks.begin(), picks.end());
    return picks;
  }

  /// The ops of `picks` as a batch, cut at `upto`; with their values (read from each replica's content
  /// and slot) when `with_content`.
  template <class T, class Replicas>
  op_batch<T> emit(const log_picks& picks, const Replicas& reps, bool with_content, const version_vector* upto) const {
    op_batch<T> b;
    b.ops.reserve(picks.size());
    for (auto [pos, skip] : picks) {
      const op o = op_of(pos, skip, reps, upto);
      if (with_content && o.kind == op_kind::insert) {
        const auto& rs = reps[entries_[pos].replica];
        for (std::size_t k = 0, at = rs.slot(o.id.seq); k < o.len; ++k) b.content.push_back(rs.content[at + k]);
      }
      b.ops.push_back(o);
    }
    return b;
  }

  /// The ops emit(since(reps, since, upto), ...) would hold, in the same order, each passed to
  /// `f(const op&, std::size_t pos)` (pos: the op's log entry, for its values: values_at) instead of
  /// gathered. Picks at most `gather` entries by since() (O(k log k)); a version that lacks more units
  /// than that is answered by one scan of the log in order (O(L)), which holds nothing per op.
  template <class Replicas, class F>
  void for_each_since(const Replicas& reps, const version_vector& since, const version_vector* upto, F&& f, std::uint64_t gather = 1 << 16) const {
    std::vector<std::uint32_t> from(reps.size()), to(reps.size());
    std::uint64_t units = 0;
    for (std::uint32_t r = 0; r < reps.size(); ++r) {
      from[r] = since.get(reps[r].id);
      to[r] = upto ? std::min(upto->get(reps[r].id), reps[r].next_seq) : reps[r].next_seq;
      if (to[r] > from[r]) units += to[r] - from[r];
    }
    if (units <= gather) {
      for (auto [pos, skip] : this->since(reps, since, upto)) f(op_of(pos, skip, reps, upto), std::size_t(pos));
      return;
    }
    for (std::uint32_t pos = 0; pos < entries_.size(); ++pos) {  // collect()'s rule, entry by entry in log order
      const log_entry& e = entries_[pos];
      const std::uint32_t lo = from[e.replica], hi = to[e.replica];
      if (lo >= hi || e.seq >= hi || e.seq + e.len <= lo) continue;
      f(op_of(pos, lo > e.seq ? lo - e.seq : 0, reps, upto), std::size_t(pos));
    }
  }
  /// The values of insert `o` (an op for_each_since passed with entry `pos`): f(value) for each, in order.
  template <class Replicas, class F>
  void values_at(const Replicas& reps, std::size_t pos, const op& o, F&& f) const {
    const auto& rs = reps[entries_[pos].replica];
    for (std::size_t k = 0, at = rs.slot(o.id.seq); k < o.len; ++k) f(rs.content[at + k]);
  }

 private:
  /// The op of entry `pos` from its unit `skip` on, cut at `upto`.
  template <class Replicas>
  op op_of(std::uint32_t pos, std::uint32_t skip, const Replicas& reps, const version_vector* upto) const {
    const log_entry& e = entries_[pos];
    const auto& rs = reps[e.replica];
    std::uint32_t len = e.len - skip;
    if (upto) len = std::min(len, upto->get(rs.id) - (e.seq + skip));
    op o;
    o.kind = e.kind, o.id = {rs.id, e.seq + skip}, o.lamport = e.lamport + skip, o.len = len, o.backward = e.backward;
    if (e.kind == op_kind::insert) {
      if (skip)
        o.ref = {rs.id, e.seq + skip - 1};
      else
        o.ref = e.ref_replica == no_replica ? document_start : op_id{reps[e.ref_replica].id, e.ref_seq};
    } else {
      o.ref = {reps[e.ref_replica].id, e.backward ? e.ref_seq - skip : e.ref_seq + skip};
    }
    return o;
  }

  std::vector<log_entry> entries_;  ///< every op, in integration order (a causal order)
};

}  // namespace folio::detail
