// folio/detail/replica/rebase.hpp — moving a local change made on a checkout of a document (an earlier
// version of it, edited as the same replica) onto the document itself, as that replica's next ops
// (document::rebase; docs/INTERNALS.md, "Checkout and rebase").
//
// The change's ops are the units (self, s), s >= `from` (the checkout's entry for self when the change
// began). Here they become (self, s + seq_shift), seq_shift = the document's entry for self - `from`,
// in their own ids and in every reference to them (insert origins, remove targets, the creators of the
// objects they edit, set/unset preds); every other reference names an op the checkout held, which the
// document holds too, and stays. Every Lamport value rises by `lamport_shift`, which puts the change's
// first op above the document's clock: a constant shift keeps the order of the change's own ops and
// each above its origin, and the ops are then what the replica would have made after everything the
// document holds, so they integrate as any peer's batch does and every replica orders them the same.
//
// Thread-safety: plain functions over the caller's ops.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../../error.hpp"
#include "../../id.hpp"
#include "../../ops.hpp"
#include "../../version.hpp"
#include "../tree/tree_op.hpp"

namespace folio::detail {

struct rebase_shift {
  replica_id self = 0;
  std::uint32_t from = 0;           ///< the first seq of the change (its units are seqs from..)
  std::uint32_t seq_shift = 0;      ///< added to the seq of each id of the change
  std::uint32_t lamport_shift = 0;  ///< added to every Lamport value of the change

  bool moves(op_id id) const noexcept { return id.replica == self && id.seq >= from; }
  op_id operator()(op_id id) const noexcept { return moves(id) ? op_id{id.replica, id.seq + seq_shift} : id; }
};

/// The smallest Lamport value of `ops` and the largest last unit's (lamport + len - 1). O(ops).
template <class Op>
std::pair<std::uint32_t, std::uint64_t> lamport_span(const std::vector<Op>& ops) noexcept {
  std::uint32_t low = UINT32_MAX;
  std::uint64_t high = 0;
  for (const Op& o : ops) low = std::min(low, o.lamport), high = std::max(high, std::uint64_t(o.lamport) + o.len - 1);
  return {low, high};
}

/// Rewrites `ops` (op or tree_op: one local change of replica s.self) by `s`, after checking that each
/// op is the change's own and that each reference that does not move names an op `held` contains
/// (the document the ops go to). Throws "[folio.value]" naming the first fault before rewriting
/// anything. O(ops + references, each O(log replicas)).
template <class Op>
void rebase_ops(std::vector<Op>& ops, const rebase_shift& s, const version_vector& held) {
  constexpr bool tree = std::is_same_v<Op, tree_op>;
  const auto kept = [&](op_id ref, const char* what) {
    if (ref.replica == 0 || s.moves(ref) || held.contains(ref)) return;
    fail(error_code::value, std::string("rebase: the change refers to ") + what + " (" + std::to_string(ref.replica) + ", " +
                                std::to_string(ref.seq) + ") that this document does not hold: the base is not a checkout of this document");
  };
  for (const Op& o : ops) {
    if (!s.moves(o.id)) fail(error_code::value, "rebase: the change holds an operation that is not one of its own");
    bool remove = false;
    if constexpr (tree) {
      remove = o.kind == tree_op_kind::remove;
      kept(o.object.creator, "an object's creator");
      for (const op_id& p : o.preds) kept(p, "an observed entry");
      if (o.kind == tree_op_kind::set || o.kind == tree_op_kind::unset) continue;
    } else {
      remove = o.kind == op_kind::remove;
    }
    if (remove) {
      // A remove's targets are one run of one replica's ids: all of them move, or none.
      if (s.moves(o.target(0)) != s.moves(o.target(o.len - 1)))
        fail(error_code::value, "rebase: a remove of the change targets both items the change made and items it did not");
      kept(o.target(0), "a removed item"), kept(o.target(o.len - 1), "a removed item");
    } else {
      kept(o.ref, "an origin");
    }
  }
  for (Op& o : ops) {
    o.id = s(o.id), o.ref = s(o.ref), o.lamport += s.lamport_shift;
    if constexpr (tree) {
      o.object.creator = s(o.object.creator);
      for (op_id& p : o.preds) p = s(p);
    }
  }
}

}  // namespace folio::detail
