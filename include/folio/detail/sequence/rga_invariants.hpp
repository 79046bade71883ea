// folio/detail/sequence/rga_invariants.hpp — rga::check_invariants(): verifies the invariants listed at the top of
// detail/sequence/rga.hpp (the run tree's own via run_tree::check_tree), throwing "[folio.invariant]" at the first
// violation. O(n log n) time, O(n) memory; for tests, fuzzers and `folio-admin check`, never on a hot path.
// Included at the end of rga.hpp.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "rga.hpp"

namespace folio::detail {

template <class T>
void rga<T>::check_invariants() const {
  // 1. the run tree
  const std::vector<const leaf_node*> leaves = tree::check_tree();
  // 2. index, 4. per-replica coverage
  std::vector<std::uint64_t> items(reps_.size());
  for (const leaf_node* l : leaves)
    for (int i = 0; i < l->count; ++i) {
      const run& r = l->runs[i];
      if (r.len() == 0 || r.replica >= reps_.size()) bad("run length or replica");
      if (std::uint64_t(r.seq) + r.len() > reps_[r.replica].next_seq) bad("run beyond replica's ops");
      for (std::uint32_t k : {0u, r.len() - 1}) {
        const place p = locate_in_index(r.replica, r.seq + k);
        if (p.leaf != l || p.idx != i) bad("index does not map item to its leaf");
      }
      items[r.replica] += r.len();
    }
  std::uint64_t unit_total = 0;
  for (std::uint32_t rep = 0; rep < reps_.size(); ++rep) {
    const replica_state& rs = reps_[rep];
    if (version().get(rs.id) != rs.next_seq) bad("version vector");
    unit_total += rs.next_seq;
    std::uint64_t next = 0, inserted = 0;
    std::vector<std::pair<std::uint32_t, std::uint32_t>> removes;
    for (std::uint32_t pos : rs.log_pos) {
      const log_entry& e = log_[pos];
      if (e.replica != rep || e.seq != next || e.len == 0) bad("log coverage");
      next += e.len;
      if (e.kind == op_kind::insert)
        inserted += e.len;
      else if (!removes.empty() && removes.back().second == e.seq)
        removes.back().second += e.len;
      else
        removes.emplace_back(e.seq, e.seq + e.len);
    }
    if (next != rs.next_seq || inserted != items[rep]) bad("log does not match items");
    if (removes != rs.removes.ranges) bad("remove seqs do not match the log");
    std::uint64_t removed = 0;
    std::size_t i = 0;
    std::uint32_t expect_page = 0;  // pages not kept must lie wholly inside a range
    if (rs.removes.before_page.size() != rs.removes.pages.size()) bad("remove pages");
    rs.removes.pages.for_each([&](std::uint32_t p, std::uint32_t slot) {
      for (; i < removes.size() && removes[i].first < (std::uint64_t(p) << index_page_bits); ++i) removed += removes[i].second - removes[i].first;
      if (rs.removes.before_page[slot].ranges != i || rs.removes.before_page[slot].units != removed) bad("removes before a page");
      for (; expect_page < p; ++expect_page) {
        const std::uint64_t lo = std::uint64_t(expect_page) << index_page_bits, hi = lo + (1u << index_page_bits);
        if (i == 0 || removes[i - 1].first > lo || removes[i - 1].second < hi) bad("remove page skipped that holds items");
      }
      expect_page = p + 1;
    });
    if (rs.removes.pages.end_page() != (removes.empty() ? 0 : (removes.back().first >> index_page_bits) + 1)) bad("remove pages");
    if (rs.removes.units != next - inserted) bad("remove unit count");
    if (rs.content.size() != inserted) bad("content log size");
    // 5. known deleted stretches
    std::int64_t prev_end = -1;
    for (const auto& [lo, end] : rs.known_deleted) {
      if (lo >= end || lo <= prev_end) bad("known deleted stretches overlap or touch");
      for (std::uint32_t s = lo; s < end;) {
        const place p = locate_id(rep, s);
        if (!p.leaf || !p.leaf->runs[p.idx].deleted()) bad("known deleted stretch holds an item that is not deleted");
        s += p.leaf->runs[p.idx].len() - p.off;
      }
      prev_end = end;
    }
  }
  if (unit_total != core::version_total()) bad("unit count");
  std::uint64_t inserted = 0, remove_entries = 0;
  for (std::size_t i = 0; i < log_.size(); ++i) (log_[i].kind == op_kind::insert ? inserted += log_[i].len : ++remove_entries);
  if (inserted != inserted_ || remove_entries != remove_entries_) bad("held unit count");
  // 3. RGA order: origin == nearest item to the left with a smaller key.
  std::vector<run> stack;  // runs (cut to the prefix still eligible) that may be a later item's origin
  for (const leaf_node* l : leaves)
    for (int i = 0; i < l->count; ++i) {
      const run& r = l->runs[i];
      const item_key k0 = key_of(r, 0);
      std::uint32_t orep = no_replica, oseq = 0;
      while (!stack.empty()) {
        run& s = stack.back();
        if (key_of(s, 0) > k0) {
          stack.pop_back();
          continue;
        }
        std::uint32_t j = s.len() - 1;  // largest j with key(s, j) < k0 (keys rise along a run)
        while (key_of(s, j) > k0) --j;
        s.set_len(j + 1);
        orep = s.replica, oseq = s.seq + j;
        break;
      }
      const auto [erep, eseq] = origin_of(r.replica, r.seq);
      if (erep != orep || (orep != no_replica && eseq != oseq)) bad("item is not placed after its origin (RGA order)");
      stack.push_back(r);
    }
  for (const parked& p : parked_)
    if (p.o.len == 0) bad("empty parked op");
}

}  // namespace folio::detail
