// folio/id.hpp — replica ids, operation ids and the Lamport order of inserted items.
//
// Every operation a replica makes gets the id (replica, seq): `seq` counts that replica's operations
// densely from 0, so a version vector can say "everything of replica R below seq S". Separately, every
// operation carries a Lamport timestamp; the RGA orders concurrent inserts at the same place by
// (lamport, replica, seq), which is a strict total order on items that every replica computes the same way.
//
// Thread-safety: plain values.
#pragma once

#include <compare>
#include <cstdint>

namespace folio {

/// Globally unique id of a replica (a client, a server process, a session). 0 is reserved for
/// "no replica" (the document start used as an insert origin); valid replicas are 1 .. 2^64-1.
using replica_id = std::uint64_t;

/// Id of one unit operation: the `seq`-th operation made by `replica` (0-based, dense).
struct op_id {
  replica_id replica = 0;  ///< author of the operation; 0 only in `document_start`
  std::uint32_t seq = 0;   ///< position in the author's own history, 0-based and without gaps

  friend constexpr bool operator==(const op_id&, const op_id&) = default;
  friend constexpr auto operator<=>(const op_id&, const op_id&) = default;
};

/// The origin of an item inserted at the very beginning of a sequence.
inline constexpr op_id document_start{0, 0};

/// Largest seq or Lamport value an operation may carry. Kept well below 2^32 so that
/// `value + length` never wraps; decoders and `apply` reject anything beyond it.
inline constexpr std::uint32_t max_counter = 0x7fff'ffffu;

/// The order in which the RGA places concurrent siblings: a larger key is placed further left.
/// Lamport first (a newer insert goes before older ones at the same origin), then replica, then seq.
struct item_key {
  std::uint32_t lamport = 0;
  replica_id replica = 0;
  std::uint32_t seq = 0;

  friend constexpr auto operator<=>(const item_key&, const item_key&) = default;
};

}  // namespace folio
