// folio/detail/sequence/page_directory.hpp — which pages of one replica's seq range a per-page table keeps
// (detail/sequence/id_index.hpp, replica_removes in detail/sequence/op_log.hpp).
//
// Model: a replica's seqs are cut into pages of 2^index_page_bits. A table keeps a slot only for the
// pages it needs, added in rising page order (a replica's ops integrate in seq order). Kept pages form
// blocks of consecutive pages; a page added past a gap starts a new block. A remove's seqs are not
// items, so the pages a long remove spans need no slot: with the directory, what such a remove costs a
// table is one block (8 bytes) however long its range, where a dense table would hold a slot for every
// page it spans.
//
// Invariants: blocks rise in page and slot; each block holds at least one page; `kept_` is the number
// of slots; tail_page_, tail_slot_ are the last block's and end_page_ is one past its last page.
//
// Complexity: find O(1) when the page lies in the last block (the usual case: a replica without long
// removes has one block), else O(log blocks); keep O(1) amortised.
//
// Thread-safety: none.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace folio::detail {

inline constexpr unsigned index_page_bits = 8;  // 256 seqs per index page

/// The pages a per-page table keeps (see the top of this file).
class page_directory {
 public:
  static constexpr std::uint32_t none = UINT32_MAX;

  /// Where page `pg` lies: `slot` is the slot of the last kept page at or before pg (none if no page at
  /// or before pg is kept) and `exact` whether that page is pg itself.
  struct place {
    std::uint32_t slot;
    bool exact;
  };

  place find(std::uint32_t pg) const noexcept {
    if (pg >= tail_page_) {  // the last block (tail_page_ is none while nothing is kept)
      const std::uint32_t off = pg - tail_page_;
      return off < kept_ - tail_slot_ ? place{tail_slot_ + off, true} : place{kept_ - 1, false};
    }
    if (blocks_.empty() || pg < blocks_.front().page) return {none, false};
    const std::size_t b = std::size_t(std::upper_bound(blocks_.begin(), blocks_.end(), pg, [](std::uint32_t p, const block& x) { return p < x.page; }) - blocks_.begin()) - 1;
    const std::uint32_t end = blocks_[b + 1].slot;  // b is not the last block: the block's slots are [slot, end)
    const std::uint32_t off = pg - blocks_[b].page;
    if (off < end - blocks_[b].slot) return {blocks_[b].slot + off, true};
    return {end - 1, false};
  }
  /// The slot of page `pg`, or none if it is not kept.
  std::uint32_t slot(std::uint32_t pg) const noexcept {
    const place p = find(pg);
    return p.exact ? p.slot : none;
  }

  /// One past the last kept page (0 if none).
  std::uint32_t end_page() const noexcept { return end_page_; }
  /// Slots held.
  std::uint32_t size() const noexcept { return kept_; }

  /// Keeps pages [lo, hi] (lo >= end_page(), lo <= hi); their slots are size() onwards, in order.
  void keep(std::uint32_t lo, std::uint32_t hi) {
    if (blocks_.empty() || lo != end_page_) blocks_.push_back({lo, kept_}), tail_page_ = lo, tail_slot_ = kept_;
    kept_ += hi - lo + 1;
    end_page_ = hi + 1;
  }

  /// Calls f(page, slot) for every kept page, in order (the invariant checkers).
  template <class F>
  void for_each(F&& f) const {
    for (std::size_t b = 0; b < blocks_.size(); ++b) {
      const std::uint32_t end = b + 1 < blocks_.size() ? blocks_[b + 1].slot : kept_;
      for (std::uint32_t s = blocks_[b].slot; s < end; ++s) f(blocks_[b].page + (s - blocks_[b].slot), s);
    }
  }

  std::size_t memory_usage() const noexcept { return blocks_.capacity() * sizeof(block); }

 private:
  struct block {
    std::uint32_t page;  ///< first page of the block
    std::uint32_t slot;  ///< its slot; the block runs to the next block's slot (or kept_)
  };
  std::vector<block> blocks_;
  std::uint32_t kept_ = 0;
  std::uint32_t tail_page_ = none, tail_slot_ = 0;  ///< the last block's (find's usual case, kept apart from blocks_)
  std::uint32_t end_page_ = 0;                       ///< one past the last kept page
};

}  // namespace folio::detail
