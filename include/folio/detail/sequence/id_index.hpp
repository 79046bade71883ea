// folio/detail/sequence/id_index.hpp — the id index of the sequence engine (detail/sequence/rga.hpp): for one replica,
// which leaf of the run tree (detail/sequence/run_tree.hpp) holds each of its items.
//
// Model: the replica's seqs are cut into pages of 2^index_page_bits; a page holds sorted entries
// (first seq, leaf), each mapping the seqs up to the next entry's to that leaf. Seqs that are not
// items (removes) map to whatever precedes them; the engine checks the leaf's runs. Seqs at or past the
// replica's next_seq do not exist yet (a replica's ops integrate in seq order), so they need no entry,
// and extending the newest run within its page needs no index work (extend). Only pages that hold
// items are kept (detail/sequence/page_directory.hpp): the pages a long remove spans cost nothing, so the index
// is bounded by the replica's items and removes, not by its seqs.
//
// Complexity: leaf_of O(log page) (a page holds at most 2^index_page_bits entries) plus the page's
// lookup (O(1) in the last block of pages, else O(log blocks)); assign O(pages spanned x page); extend
// O(1) unless the run crosses into a new page.
//
// Thread-safety: none.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "page_directory.hpp"

namespace folio::detail {

struct leaf_node;

/// One replica's id index (see the top of this file).
class id_index {
 public:
  /// The leaf an entry maps `seq` to, or null if none does (the caller finds seq in its runs). O(log page).
  leaf_node* leaf_of(std::uint32_t seq) const noexcept {
    const std::uint32_t at = dir_.slot(seq >> index_page_bits);
    if (at == page_directory::none) return nullptr;
    const auto& page = pages_[at];
    auto it = std::upper_bound(page.begin(), page.end(), seq, [](std::uint32_t s, const entry& e) { return s < e.seq; });
    return it == page.begin() ? nullptr : (it - 1)->leaf;
  }

  /// Makes items [s, e) map to leaf `l`; `next_seq` is the replica's (seqs from it on do not exist yet).
  void assign(std::uint32_t s, std::uint32_t e, leaf_node* l, std::uint32_t next_seq) {
    const std::uint32_t last = (e - 1) >> index_page_bits;
    if (last >= dir_.end_page()) {  // new items: the pages between the last kept one and s hold none
      dir_.keep(std::max(dir_.end_page(), s >> index_page_bits), last);
      pages_.resize(dir_.size());
    }
    for (std::uint32_t pg = s >> index_page_bits; pg <= last; ++pg) {
      const std::uint64_t page_lo = std::uint64_t(pg) << index_page_bits, page_hi = page_lo + (1u << index_page_bits);
      const auto lo = static_cast<std::uint32_t>(std::max<std::uint64_t>(s, page_lo));
      const std::uint64_t hi = std::min<std::uint64_t>(e, page_hi);
      auto& page = pages_[dir_.slot(pg)];  // kept: the page holds items [s, e)
      // Past every entry, with nothing existing after the range (new items): append or nothing.
      if ((page.empty() || page.back().seq < lo) && (hi >= page_hi || hi >= next_seq)) {
        if (page.empty() || page.back().leaf != l) page.push_back({lo, l});
        continue;
      }
      auto by_seq = [](const entry& x, std::uint64_t v) { return x.seq < v; };
      const std::size_t a = std::lower_bound(page.begin(), page.end(), lo, by_seq) - page.begin();
      std::size_t b = std::lower_bound(page.begin(), page.end(), hi, by_seq) - page.begin();
      // Fast path: the range already maps to l.
      if (a > 0 && page[a - 1].leaf == l && a == b) continue;
      leaf_node* after = nullptr;  // what `hi` mapped to, to keep it if hi starts no entry of its own
      // Seqs at or past next_seq do not exist yet (ops integrate in seq order), so they need no entry;
      // this also lets extensions of the newest run skip the index entirely (see extend).
      const bool keep_after = hi < page_hi && hi < next_seq && b > 0 && !(b < page.size() && page[b].seq == hi);
      if (keep_after) after = page[b - 1].leaf;
      entry repl[2];
      int m = 0;
      if (!(a > 0 && page[a - 1].leaf == l)) repl[m++] = {lo, l};
      if (keep_after && after != l) repl[m++] = {static_cast<std::uint32_t>(hi), after};
      if (!keep_after && b < page.size() && page[b].seq == hi && page[b].leaf == l) ++b;
      const std::size_t removed = b - a;
      if (removed >= static_cast<std::size_t>(m)) {
        std::copy(repl, repl + m, page.begin() + a);
        page.erase(page.begin() + a + m, page.begin() + b);
      } else {
        page.insert(page.begin() + b, repl + removed, repl + m);
        std::copy(repl, repl + removed, page.begin() + a);
      }
    }
  }

  /// Maps items [s, s + n) appended to a run whose item s - 1 is in `l`: nothing to do while they stay
  /// in the page of s - 1 (no entry can follow it there, see assign).
  void extend(std::uint32_t s, std::uint32_t n, leaf_node* l, std::uint32_t next_seq) {
    if (((s - 1) >> index_page_bits) != ((s + n - 1) >> index_page_bits)) assign(s, s + n, l, next_seq);
  }

  /// Heap bytes held.
  std::size_t memory_usage() const noexcept {
    std::size_t bytes = pages_.capacity() * sizeof(std::vector<entry>) + dir_.memory_usage();
    for (const auto& page : pages_) bytes += page.capacity() * sizeof(entry);
    return bytes;
  }

 private:
  struct entry {
    std::uint32_t seq;  ///< first seq of the range; the range ends at the next entry's seq
    leaf_node* leaf;
  };
  page_directory dir_;                      ///< which pages (seq >> index_page_bits) are kept: items' pages
  std::vector<std::vector<entry>> pages_;  ///< a kept page's slot (dir_) -> its sorted ranges
};

}  // namespace folio::detail
