// folio/ops.hpp — operations and batches of operations, as exchanged between replicas.
//
// An `op` is a run of unit operations by one replica with consecutive seqs and Lamport values:
//  * insert: items (replica, seq+k), k < len; item 0 goes after `ref` (its origin, or document_start),
//    item k after item k-1. Their values are the batch's next `len` entries of `content`.
//  * remove: deletes the items ref, ref±1, ... (len of them; `backward` for runs made by backspacing).
// A batch is a causally ordered list of ops plus the inserted values. Applying a batch never fails on
// missing causal dependencies: such ops are held as pending until what they need arrives.
//
// Thread-safety: plain values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "error.hpp"
#include "id.hpp"

namespace folio {

enum class op_kind : std::uint8_t { insert = 0, remove = 1 };

struct op {
  op_kind kind = op_kind::insert;
  op_id id;                   ///< id of the first unit operation
  std::uint32_t lamport = 0;  ///< Lamport value of the first unit; unit k has lamport + k
  std::uint32_t len = 0;      ///< number of unit operations (items inserted or removed), >= 1
  op_id ref;                  ///< insert: origin of the first item; remove: first target item
  bool backward = false;      ///< remove only: targets are ref.seq, ref.seq-1, ... instead of +1

  /// The id of the k-th target of a remove.
  op_id target(std::uint32_t k) const noexcept { return {ref.replica, backward ? ref.seq - k : ref.seq + k}; }
  friend bool operator==(const op&, const op&) = default;
};

namespace detail {
/// The unit operations of `ops` (a sequence of ops, each with a `len`): op_batch's and the tree
/// engine's batches (detail/tree/tree_doc.hpp) count theirs with it.
template <class Ops>
std::size_t unit_count(const Ops& ops) noexcept {
  std::size_t n = 0;
  for (const auto& o : ops) n += o.len;
  return n;
}

/// The one rule of what a record holds (document::units, what a decoder counts against its limit): an
/// op adds each of its `fresh` units not integrated yet, except a remove, which adds one entry to its
/// log whatever its length (or none, when it merges into its author's previous entry: at most one).
/// For every kind of op (op, tree_op). O(1).
constexpr std::uint64_t held_units(bool is_remove, std::uint64_t fresh) noexcept { return is_remove ? 1 : fresh; }
}  // namespace detail

/// Ops plus the values their inserts carry (concatenated in op order).
/// T is char32_t for text and std::string (one canonical JSON value) for arrays.
template <class T>
struct op_batch {
  std::vector<op> ops;
  std::vector<T> content;

  bool empty() const noexcept { return ops.empty(); }
  /// Number of unit operations in the batch.
  std::size_t unit_count() const noexcept { return detail::unit_count(ops); }
  friend bool operator==(const op_batch&, const op_batch&) = default;
};

/// The unit operations a local edit produced: seqs [first, first + count) of the local replica.
/// Turn it into a batch to send with `ops(change)`.
struct local_change {
  replica_id replica = 0;
  std::uint32_t first = 0;
  std::uint32_t count = 0;
  bool empty() const noexcept { return count == 0; }
};

namespace detail {
/// Local edits: throws "[folio.overflow]" unless `units` more unit operations fit a replica whose next
/// seq is `next_seq` in a document whose clock (largest Lamport value) is `clock`. An edit making
/// several ops checks its whole count before the first, so it never stops half made.
inline void reserve_counters(std::uint64_t next_seq, std::uint64_t clock, std::uint64_t units) {
  if (units > max_counter || next_seq + units > std::uint64_t(max_counter) + 1 || clock + units > max_counter)
    fail(error_code::overflow, "operation counter would exceed 2^31");
}
}  // namespace detail

/// ok: integrated (or held pending); invalid: refused, a rule broken (message, op_index);
/// too_large: refused, nothing integrated, because the record would hold more unit operations than
/// it can store and read back (document::max_units; only with apply_options::max_units).
enum class apply_status { ok, invalid, too_large };

/// Outcome of applying a batch. Counts are unit operations.
struct apply_result {
  apply_status status = apply_status::ok;
  std::size_t applied = 0;    ///< newly integrated (including pending ops this batch released)
  std::size_t duplicate = 0;  ///< already integrated before; ignored
  std::size_t pending = 0;    ///< held until their causal dependencies arrive (total now held)
  std::size_t op_index = 0;   ///< with `invalid`: index of the offending op in the batch
  std::string message;        ///< with `invalid` or `too_large`: what rule it broke

  explicit operator bool() const noexcept { return status == apply_status::ok; }
};

}  // namespace folio
