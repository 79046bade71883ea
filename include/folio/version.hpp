// folio/version.hpp — version vectors: "for each replica, how many of its operations I have".
//
// A replica's operations are numbered densely from 0 and are only ever integrated in that order, so one
// number per replica (the next seq expected, i.e. the count) describes exactly which operations a replica
// has integrated. Entries are kept sorted by replica id; a replica absent from the vector counts as 0.
//
// Thread-safety: a plain value; concurrent reads are fine, writes need external synchronisation.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "detail/encoding/varint.hpp"
#include "error.hpp"
#include "id.hpp"

namespace folio {

/// How two versions relate. `before` means every operation of the left one is in the right one, and
/// the right one has more.
enum class version_order { equal, before, after, concurrent };

class version_vector {
 public:
  struct entry {
    replica_id replica;
    std::uint32_t count;  ///< operations of `replica` integrated: seqs 0 .. count-1
    friend bool operator==(const entry&, const entry&) = default;
  };

  /// Operations of `r` integrated (0 if `r` is absent). O(log n).
  std::uint32_t get(replica_id r) const noexcept {
    auto it = find(r);
    return it != entries_.end() && it->replica == r ? it->count : 0;
  }

  /// True if operation `id` is covered by this version. O(log n).
  bool contains(op_id id) const noexcept { return id.seq < get(id.replica); }

  /// Raises `r`'s count to at least `count` (never lowers it). O(n) when `r` is new, else O(log n).
  void observe(replica_id r, std::uint32_t count) {
    if (count == 0) return;
    auto it = find(r);
    if (it != entries_.end() && it->replica == r)
      it->count = std::max(it->count, count);
    else
      entries_.insert(it, entry{r, count});
  }

  /// Pointwise maximum: afterwards this version contains everything either contained. O(n + m).
  void merge(const version_vector& other) {
    for (const entry& e : other.entries_) observe(e.replica, e.count);
  }

  /// Partial order of versions. O(n + m).
  version_order compare(const version_vector& other) const noexcept {
    bool less = false, greater = false;
    auto a = entries_.begin(), b = other.entries_.begin();
    while (a != entries_.end() || b != other.entries_.end()) {
      if (b == other.entries_.end() || (a != entries_.end() && a->replica < b->replica)) {
        greater = true, ++a;
      } else if (a == entries_.end() || b->replica < a->replica) {
        less = true, ++b;
      } else {
        if (a->count < b->count) less = true;
        if (a->count > b->count) greater = true;
        ++a, ++b;
      }
    }
    if (less && greater) return version_order::concurrent;
    if (less) return version_order::before;
    if (greater) return version_order::after;
    return version_order::equal;
  }

  const std::vector<entry>& entries() const noexcept { return entries_; }
  bool empty() const noexcept { return entries_.empty(); }
  friend bool operator==(const version_vector&, const version_vector&) = default;

  /// Appends the encoding: varint n, then n x (varint replica, varint count), replicas ascending.
  void encode(std::string& out) const {
    detail::put_varint(out, entries_.size());
    for (const entry& e : entries_) {
      detail::put_varint(out, e.replica);
      detail::put_varint(out, e.count);
    }
  }
  std::string encode() const {
    std::string out;
    encode(out);
    return out;
  }

  /// Decodes untrusted bytes (the whole input must be one version vector). Refuses replica 0,
  /// replicas out of order or repeated, counts of 0 or above `max_counter`, and trailing bytes.
  static decode_result decode(std::string_view bytes, version_vector& out) {
    detail::byte_reader r(bytes);
    if (!read(r, out)) return r.result();
    if (!r.at_end()) r.fail(decode_status::trailing_bytes, "after version vector");
    return r.result();
  }

  /// Reads one version vector from `r` (for embedding in larger formats).
  static bool read(detail::byte_reader& r, version_vector& out) {
    out.entries_.clear();
    const std::uint64_t n = r.varint("version entry count");
    if (n > r.remaining() / 2) return r.fail(decode_status::too_large, "version entry count");
    out.entries_.reserve(static_cast<std::size_t>(n));  // n <= remaining()
    for (std::uint64_t i = 0; i < n && r.ok(); ++i) {
      const replica_id rep = r.varint("version replica");
      const auto count = static_cast<std::uint32_t>(r.varint("version count", max_counter + 1ull));
      if (!r.ok()) break;
      if (rep == 0) return r.fail(decode_status::inconsistent, "version replica 0 is reserved");
      if (!out.entries_.empty() && out.entries_.back().replica >= rep) return r.fail(decode_status::inconsistent, "version replicas not ascending");
      if (count == 0) return r.fail(decode_status::inconsistent, "version count 0");
      out.entries_.push_back(entry{rep, count});
    }
    return r.ok();
  }

 private:
  std::vector<entry>::const_iterator find(replica_id r) const noexcept {
    return std::lower_bound(entries_.begin(), entries_.end(), r, [](const entry& e, replica_id v) { return e.replica < v; });
  }
  std::vector<entry>::iterator find(replica_id r) noexcept {
    return std::lower_bound(entries_.begin(), entries_.end(), r, [](const entry& e, replica_id v) { return e.replica < v; });
  }

  std::vector<entry> entries_;
};

}  // namespace folio
