// folio/detail/sequence/rga.hpp — the replicated growable array (RGA) behind text and array.
//
// Model (docs/INTERNALS.md has the long form):
//  * Every item ever inserted stays in the sequence; a remove only marks it deleted (a tombstone).
//  * An item is inserted right after its origin, skipping the items that follow the origin and have a
//    larger key (lamport, replica, seq). Because a child's Lamport value always exceeds its origin's,
//    this scan yields the same order on every replica, whatever the delivery order.
//  * Items are stored as runs: consecutive seqs and Lamport values of one replica, each item the origin
//    of the next, all live or all deleted. Runs sit in the leaves of a B-tree whose nodes count live
//    items (position -> run, O(log n)) and keep the smallest key below them (the scan skips whole
//    subtrees: O(log n) per insert, however many siblings it passes); a per-replica paged index maps
//    seq ranges to leaves (id -> run, O(log n) with a bounded page).
//  * A remove marks its targets deleted. Per replica, the seq ranges of its removes (the seqs that are
//    not items) and stretches of its items known to be deleted let a remove check its targets in
//    O(log n) and pass the deleted ones without visiting their runs again.
//  * The op log keeps every operation in the (causal) order it was integrated, run-length merged;
//    `ops_since` reads it, so nothing has to be reconstructed from the tree.
//
// Files, by role (diamond-types splits its list CRDT the same way):
//  * detail/replica/replica_core.hpp — replica table, version, clock, integrate preamble, parked ops (shared
//    with the tree engine, detail/tree/tree_doc.hpp);
//  * detail/sequence/run_tree.hpp — the B-tree of runs: positions, the RGA scan, splitting and marking runs;
//  * detail/sequence/id_index.hpp — per replica, item id -> leaf;
//  * detail/sequence/op_log.hpp — the op log (ops_since reads it) and the seq -> content slot map;
//  * detail/sequence/content_log.hpp — per replica, the values inserted; detail/sequence/batch_removes.hpp — what an
//    incoming batch removes;
//  * this file — the engine tying them: local edits, reading, integration of remote ops;
//  * detail/sequence/rga_invariants.hpp — check_invariants(), the checker of the invariants below.
//
// Invariants (verified by `check_invariants()`):
//  1. the run tree's (detail/sequence/run_tree.hpp): live counts, minimum keys, fill, links, position cache;
//  2. every item id maps through the index to the leaf holding it;
//  3. each item's origin (from the log) is the nearest item to its left with a smaller key;
//  4. per replica, the log covers seqs 0..next_seq-1 exactly once, the remove seq ranges are the log's
//     removes with their running unit counts, and the content log has a slot per insert unit;
//  5. known deleted stretches are disjoint, do not touch, and hold deleted items only.
//
// Thread-safety: none; a document is used by one thread at a time.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../../error.hpp"
#include "../../id.hpp"
#include "../../ops.hpp"
#include "../../version.hpp"
#include "batch_removes.hpp"
#include "content_log.hpp"
#include "../util/hash.hpp"
#include "id_index.hpp"
#include "op_log.hpp"
#include "../replica/replica_core.hpp"
#include "run_tree.hpp"
#include "../../utf8.hpp"

namespace folio::detail {

/// rga's per-replica state.
template <class T>
struct rga_replica : replica_base {
  content_log<T> content;              ///< values of the insert units in seq order (see slot)
  id_index index;                      ///< item -> leaf of the run tree
  std::vector<std::uint32_t> log_pos;  ///< op log positions of this replica's ops, by seq
  replica_removes removes;             ///< which seqs are removes (not items)
  /// Stretches [first, second) of this replica's items known to be deleted, disjoint and not touching:
  /// the targets of removes that spanned more than one run (integrate_remove passes them whole).
  /// Other deleted items are not recorded.
  std::map<std::uint32_t, std::uint32_t> known_deleted;

  /// The content slot of insert unit `seq` (replica_removes::slot).
  std::size_t slot(std::uint32_t seq) const noexcept { return removes.slot(seq); }
};
/// An op rga holds for a missing dependency.
template <class T>
struct rga_parked {
  op o;
  std::vector<T> values;
  batch_removes removes;  ///< the removes of its batch that target its items
  bool placeholders;
  op_id awaits;  ///< the missing op it waits for
};
template <class T>
class rga : public run_tree<rga<T>>, public replica_core<rga_replica<T>, rga_parked<T>> {
  using core = replica_core<rga_replica<T>, rga_parked<T>>;
  using tree = run_tree<rga<T>>;
  friend tree;  // key_of, index_assign
  using replica_state = rga_replica<T>;
  using parked = rga_parked<T>;
  using core::reps_, core::parked_, core::clock_;
  using core::replica_index, core::find_replica;
  using tree::root_, tree::first_leaf_, tree::cache_leaf_, tree::cache_start_, tree::cache_idx_, tree::id_hint_;
  using tree::locate_live, tree::first_below, tree::normalize, tree::add_live, tree::insert_runs, tree::split_insert, tree::mark_deleted, tree::bad;

 public:
  using core::self, core::version, core::pending, core::rejected, core::clock, core::version_total;
  using tree::size, tree::run_count;

  explicit rga(replica_id me) : core(me) {}

  // ---- local edits ----------------------------------------------------------------------------

  /// Inserts `n` values before position `pos` (0 = front, size() = end). Amortised O(log n); O(1)
  /// when continuing the previous insert. Throws folio::error "[folio.range]" if pos > size().
  local_change insert(std::size_t pos, const T* values, std::size_t n) {
    if (pos > size()) fail(error_code::range, "insert position " + std::to_string(pos) + " > size " + std::to_string(size()));
    if constexpr (std::is_same_v<T, char32_t>)
      for (std::size_t k = 0; k < n; ++k)
        if (!valid_code_point(values[k])) fail(error_code::value, "not a Unicode scalar value");
    replica_state& me = reps_[0];
    const local_change change{me.id, me.next_seq, static_cast<std::uint32_t>(n)};
    if (n == 0) return change;
    reserve_counters(n);
    const std::uint32_t seq = me.next_seq, lam = clock_ + 1, len = static_cast<std::uint32_t>(n);
    const run fresh{0, seq, lam, len};
    std::uint32_t orep = no_replica, oseq = 0;
    if (pos == 0) {
      insert_runs(first_leaf_, 0, &fresh, 1, 1);
      cache_leaf_ = first_leaf_, cache_start_ = 0, cache_idx_ = -1;
    } else {
      const place p = locate_live(pos - 1);
      run& r = p.leaf->runs[p.idx];
      orep = r.replica, oseq = r.seq + p.off;
      if (p.off + 1 < r.len()) {
        split_insert(p, fresh);
      } else if (r.replica == 0 && r.seq + r.len() == seq && r.lamport + r.len() == lam) {
        r.set_len(r.len() + len);
        add_live(p.leaf, len);
        extend_index(0, seq, len, p.leaf);
      } else {
        insert_runs(p.leaf, p.idx + 1, &fresh, 1, 1);
      }
    }
    me.content.append(values, n);
    log_append(log_entry{0, seq, len, lam, orep, oseq, op_kind::insert, false});
    core::advance_local(len);
    return change;
  }

  /// Removes `n` values starting at `pos`. O(log n + runs touched).
  /// Throws folio::error "[folio.range]" if pos + n > size().
  local_change erase(std::size_t pos, std::size_t n) {
    if (pos > size() || n > size() - pos)
      fail(error_code::range, "erase range " + std::to_string(pos) + "+" + std::to_string(n) + " > size " + std::to_string(size()));
    replica_state& me = reps_[0];
    const local_change change{me.id, me.next_seq, static_cast<std::uint32_t>(n)};
    if (n == 0) return change;
    reserve_counters(n);
    const std::uint32_t seq = me.next_seq, lam = clock_ + 1;
    place p = locate_live(pos);
    std::uint32_t done = 0;
    while (done < n) {
      normalize(p);
      run& r = p.leaf->runs[p.idx];
      if (r.deleted() || p.off >= r.len()) {
        ++p.idx, p.off = 0;
        continue;
      }
      const std::uint32_t take = std::min<std::uint32_t>(r.len() - p.off, static_cast<std::uint32_t>(n) - done);
      log_append(log_entry{0, seq + done, take, lam + done, r.replica, r.seq + p.off, op_kind::remove, false});
      p = mark_deleted(p, take);
      done += take;
    }
    note_remove(0, seq, static_cast<std::uint32_t>(n));
    core::advance_local(static_cast<std::uint32_t>(n));
    return change;
  }

  // ---- remote operations ----------------------------------------------------------------------

  /// How `apply` gets the values of inserts.
  enum class content_mode { from_batch, placeholders };

  /// Integrates a batch: duplicates are skipped, ops with missing dependencies are held as pending and
  /// released when they arrive (in this or a later call). A batch lists each replica's ops in seq order,
  /// each id once (batch_order), as every encoder writes them. Each op is atomic; on the first invalid op
  /// (a reference to something that is not an item, a Lamport value not above its origin's, a counter
  /// overflow, content of the wrong size) it stops and reports it. Callers needing all-or-nothing
  /// apply to a fresh copy or reload on `invalid`. A batch of one op that is the next of its replica
  /// (a remote keystroke) is integrated by try_integrate_next, the rest by integrate_batch.
  apply_result apply(const op_batch<T>& b, content_mode mode = content_mode::from_batch) {
    apply_result res;
    if (mode != content_mode::from_batch || b.ops.size() != 1 || !try_integrate_next(b.ops[0], b.content, res)) integrate_batch(b, mode, res);
    return res;
  }
  /// `apply` the general way, which takes every batch, into `res` (a fresh apply_result).
  void integrate_batch(const op_batch<T>& b, content_mode mode, apply_result& res) {
    tree::forget_position();
    if (mode == content_mode::from_batch) {
      std::size_t need = 0;
      for (const op& o : b.ops)
        if (o.kind == op_kind::insert) need += o.len;
      if (need != b.content.size()) {
        res.status = apply_status::invalid, res.op_index = b.ops.size();
        res.message = "batch content has " + std::to_string(b.content.size()) + " values, inserts need " + std::to_string(need);
        return;
      }
      if (!valid_values(b.content)) {
        res.status = apply_status::invalid, res.op_index = b.ops.size(),
        res.message = "batch content holds a value that is not a Unicode scalar value";
        return;
      }
    }
    std::size_t coff = 0;
    batch_order order;
    const batch_removes removes = mode == content_mode::from_batch ? batch_removes(b.ops) : batch_removes();
    std::string why;  // set only on the op that stops the batch
    for (std::size_t i = 0; i < b.ops.size(); ++i) {
      const op& o = b.ops[i];
      const T* vals = nullptr;
      if (o.kind == op_kind::insert && mode == content_mode::from_batch) vals = b.content.data() + coff, coff += o.len;
      const outcome oc = order.next(o.id, o.len, why) ? integrate(o, vals, removes, mode == content_mode::placeholders, res, why) : outcome::invalid;
      if (oc == outcome::invalid) {
        res.status = apply_status::invalid, res.op_index = i, res.message = std::move(why);
        break;
      }
    }
    finish_batch(res);
  }
  /// Integrates `o`, a batch's only op, with the batch's `content`, when the op is the next one of a
  /// replica heard of before and its references are integrated, and nothing is parked (a remote
  /// keystroke): as integrate_batch would, by the same steps (counter_fault, check_refs,
  /// integrate_insert or integrate_remove, advance), without the batch's scaffolding that such an op
  /// cannot need (the order check, the batch's removes, the preamble for duplicates and parking, the
  /// release of parked ops), which outweighs the integration itself for one op. False, with nothing
  /// changed but the lookup caches (id_hint_, the last replica found), for anything else (a fault
  /// included), which integrate_batch then takes (and names). While an op is parked every batch goes
  /// to integrate_batch. Public, as integrate_batch is, so that tests hold the two to the same results;
  /// document::apply calls it too, with the op it read from a keystroke's bytes (no batch). Inlined
  /// into both callers: it is on the path of every remote keystroke.
  [[gnu::always_inline]] bool try_integrate_next(const op& o, const std::vector<T>& content, apply_result& res) {
    const bool insert = o.kind == op_kind::insert;
    if (!parked_.empty() || content.size() != (insert ? o.len : 0) || (insert && o.backward) || !valid_values(content)) return false;
    if (counter_fault(o, false, counter_range_fault)) return false;
    const std::uint32_t rep = find_replica(o.id.replica);
    if (rep == no_replica || reps_[rep].next_seq != o.id.seq) return false;
    std::uint32_t origin_lamport = 0;
    place first{};
    op_id missing;
    std::string why;  // written only on a fault, which is left to integrate_batch
    if (check_refs(o, origin_lamport, first, missing, why) != dep::ready) return false;
    if (insert && o.lamport <= origin_lamport) return false;
    tree::forget_position();
    if (insert)
      integrate_insert(rep, o, content.data(), first);
    else
      integrate_remove(rep, o, first);
    core::advance(rep, o.lamport, o.len, res);
    return true;
  }

  /// Calls f(op index, value) for each value of `b` that can show here once `b` is integrated: the
  /// value of an item not integrated yet that no remove of `b` targets. The others never show — an
  /// integrated item keeps its value (`apply` compares the batch's with it), a removed item stays
  /// removed — and may be placeholders (same_as_integrated). This is what a value rule judges
  /// (document::apply). Stops when f returns false, and returns false then. O(m log m + values log m)
  /// for m removes.
  template <class F>
  bool for_each_showable_value(const op_batch<T>& b, F&& f) const {
    const batch_removes removes(b.ops);
    std::size_t next = 0;  // the content of insert ops, in op order
    for (std::size_t i = 0; i < b.ops.size(); ++i) {
      const op& o = b.ops[i];
      if (o.kind != op_kind::insert) continue;
      const std::uint32_t rep = find_replica(o.id.replica);
      const std::uint64_t have = rep == no_replica ? 0 : reps_[rep].next_seq;
      for (std::uint32_t k = 0; k < o.len && next < b.content.size(); ++k, ++next) {
        const std::uint64_t seq = std::uint64_t(o.id.seq) + k;
        if (seq >= have && !removes.contains(o.id.replica, seq) && !f(i, b.content[next])) return false;
      }
    }
    return true;
  }

  /// The unit operations of `ops` (a batch's) that would change this replica, counted until `need`
  /// of them are found: insert units not integrated yet, and the distinct items its removes target
  /// that are not deleted here (live items, or items not integrated yet). A remove of items removed
  /// already changes nothing and counts nothing, however long its range. What the Lamport headroom
  /// rule allows a batch (document::apply). O(ops + m log m) for m removes, plus O(log n) per run or
  /// known deleted stretch the targets pass; a stretch of several runs found deleted is recorded as
  /// known deleted (as integrate_remove records one), so that passing it again costs O(log n).
  std::uint64_t changing_units(const std::vector<op>& ops, std::uint64_t need) {
    std::uint64_t n = 0;
    for (const op& o : ops) {
      if (o.kind != op_kind::insert) continue;
      const std::uint32_t rep = find_replica(o.id.replica);
      const std::uint64_t have = rep == no_replica ? 0 : reps_[rep].next_seq, end = std::uint64_t(o.id.seq) + o.len;
      if (end > have) n += end - std::max<std::uint64_t>(have, o.id.seq);
    }
    batch_removes(ops).for_each_range([&](replica_id r, std::uint64_t first, std::uint64_t end) {
      if (n < need) n += not_deleted(r, first, end, need - n);
    });
    return n;
  }

  /// How many of the seqs [first, end) of replica `r` are not deleted items here — live items, and
  /// seqs not integrated yet — counted until `need` are found; the count stops at a seq that is not
  /// an item (a remove's: check_refs refuses a remove that targets it). Deleted runs inside known
  /// stretches are passed at once; a deleted stretch of several runs it walks is recorded as known.
  std::uint64_t not_deleted(replica_id r, std::uint64_t first, std::uint64_t end, std::uint64_t need) {
    const std::uint32_t rep = find_replica(r);
    const std::uint64_t have = rep == no_replica ? 0 : reps_[rep].next_seq;
    std::uint64_t n = end > have ? end - std::max(first, have) : 0;
    end = std::min(end, have);
    if (rep == no_replica || first >= end) return n;
    std::uint64_t dead_from = first;  // the deleted stretch being walked: [dead_from, s), of dead_pieces runs
    int dead_pieces = 0;
    auto close_dead = [&](std::uint64_t s) {
      if (dead_pieces > 1) know_deleted(rep, static_cast<std::uint32_t>(dead_from), static_cast<std::uint32_t>(s));
      dead_pieces = 0;
    };
    std::uint64_t s = first;
    while (s < end && n < need) {
      const auto& known = reps_[rep].known_deleted;
      if (const auto k = known.upper_bound(static_cast<std::uint32_t>(s)); k != known.begin() && std::prev(k)->second > s) {
        if (dead_pieces == 0) dead_from = s;
        dead_pieces += 2;  // a known stretch joins the stretch walked
        s = std::prev(k)->second;
        continue;
      }
      const place p = locate_id(rep, static_cast<std::uint32_t>(s));
      if (!p.leaf) break;  // not an item
      const run& run_here = p.leaf->runs[p.idx];
      const std::uint64_t take = std::min<std::uint64_t>(end - s, run_here.len() - p.off);
      if (run_here.deleted()) {
        if (dead_pieces++ == 0) dead_from = s;
      } else {
        close_dead(s);
        n += take;
      }
      s += take;
    }
    close_dead(std::min(s, end));
    return n;
  }

  /// The operations a replica at version `since` lacks, in an order that integrates without pending
  /// (the local integration order). With `upto`, only operations that version contains. O(k log k)
  /// for k ops returned. Without content (for document encoding) when `with_content` is false.
  op_batch<T> ops_since(const version_vector& since, const version_vector* upto = nullptr, bool with_content = true) const {
    return log_.template emit<T>(log_.since(reps_, since, upto), reps_, with_content, upto);
  }

  /// ops_since(since, upto)'s ops, in its order, each passed to `f(const op&, auto&& each_value)`
  /// instead of gathered in a batch; `each_value(g)` calls g(value) for each of an insert's values, in
  /// order (valid during the call). Holds nothing per op (op_log::for_each_since). Each call reads the
  /// ops afresh, so a writer that must see them more than once calls it again.
  template <class F>
  void for_each_op_since(const version_vector& since, const version_vector* upto, F&& f) const {
    log_.for_each_since(reps_, since, upto, [&](const op& o, std::size_t pos) {
      f(o, [&](auto&& g) { log_.values_at(reps_, pos, o, g); });
    });
  }

  /// The operations of one local change.
  op_batch<T> ops(const local_change& c) const {
    const std::uint32_t rep = find_replica(c.replica);
    if (rep == no_replica || c.count == 0) return {};
    const std::uint32_t end = std::min(c.first + c.count, reps_[rep].next_seq);
    log_picks picks;
    log_.collect(reps_[rep].log_pos, c.first, end, picks);
    std::sort(picks.begin(), picks.end());
    version_vector upto;
    upto.observe(c.replica, end);
    return log_.template emit<T>(picks, reps_, true, &upto);
  }

  // ---- reading --------------------------------------------------------------------------------

  /// Calls f(value) for each live value in order. O(n).
  template <class F>
  void for_each(F&& f) const {
    for_each_item([&](op_id, const T& v) { f(v); });
  }

  /// The live value at `pos`. O(log n). Throws "[folio.range]" past the end.
  T at(std::size_t pos) const {
    if (pos >= size()) fail(error_code::range, "position " + std::to_string(pos) + " >= size " + std::to_string(size()));
    const place p = locate_live(pos);
    const run& r = p.leaf->runs[p.idx];
    const replica_state& rs = reps_[r.replica];
    return rs.content[rs.slot(r.seq + p.off)];
  }

  /// Ids of the live items [pos, pos + n) as runs of consecutive seqs of one replica, in document
  /// order: (first id, count). O(log n + runs). Throws "[folio.range]" past the end.
  std::vector<std::pair<op_id, std::uint32_t>> live_ids(std::size_t pos, std::size_t n) const {
    std::vector<std::pair<op_id, std::uint32_t>> out;
    for_each_live_piece(pos, n, [&](const run& r, std::uint32_t off, std::uint32_t take) { out.push_back({op_id{reps_[r.replica].id, r.seq + off}, take}); });
    return out;
  }

  /// The id of the live item at `pos`. O(log n). Throws "[folio.range]" past the end.
  op_id id_at(std::size_t pos) const {
    if (pos >= size()) fail(error_code::range, "position " + std::to_string(pos) + " >= size " + std::to_string(size()));
    const place p = locate_live(pos);
    const run& r = p.leaf->runs[p.idx];
    return {reps_[r.replica].id, r.seq + p.off};
  }
  /// Where item `id` is: the live items before it, which is its position while it is live and, once
  /// removed, the position it had (where an insert at its place would go); `live` says which. Nullopt
  /// for an id that is not an item here (not integrated yet, or a remove's). O(log n): the id index
  /// finds its leaf, the parent links count what precedes it (run_tree::live_before).
  std::optional<std::size_t> index_of(op_id id, bool* live = nullptr) const {
    const std::uint32_t rep = find_replica(id.replica);
    if (rep == no_replica || id.seq >= reps_[rep].next_seq) return std::nullopt;
    const place p = locate_id(rep, id.seq);
    if (!p.leaf) return std::nullopt;
    if (live) *live = !p.leaf->runs[p.idx].deleted();
    return this->live_before(p);
  }
  /// Calls f(op_id, const T&) for each live item of [pos, pos + n), in order. O(log n + n). Throws
  /// "[folio.range]" past the end.
  template <class F>
  void for_each_item_in(std::size_t pos, std::size_t n, F&& f) const {
    for_each_live_piece(pos, n, [&](const run& r, std::uint32_t off, std::uint32_t take) {
      const replica_state& rs = reps_[r.replica];
      const std::size_t at = rs.slot(r.seq + off);
      for (std::uint32_t k = 0; k < take; ++k) f(op_id{rs.id, r.seq + off + k}, rs.content[at + k]);
    });
  }
  /// Calls f(run, off, take) for each piece of a live run that the live items [pos, pos + n) cover, in
  /// order: items [off, off + take) of the run. O(log n + runs). Throws "[folio.range]" past the end.
  template <class F>
  void for_each_live_piece(std::size_t pos, std::size_t n, F&& f) const {
    if (pos > size() || n > size() - pos)
      fail(error_code::range, "range " + std::to_string(pos) + "+" + std::to_string(n) + " > size " + std::to_string(size()));
    if (n == 0) return;
    place p = locate_live(pos);
    for (std::size_t done = 0; done < n;) {
      normalize(p);
      const run& r = p.leaf->runs[p.idx];
      if (r.deleted() || p.off >= r.len()) {
        ++p.idx, p.off = 0;
        continue;
      }
      const std::uint32_t take = static_cast<std::uint32_t>(std::min<std::size_t>(r.len() - p.off, n - done));
      f(r, p.off, take);
      done += take, ++p.idx, p.off = 0;
    }
  }

  /// Calls f(op_id, const T&) for each live item in order. O(n).
  template <class F>
  void for_each_item(F&& f) const {
    for_each_live_run([&](const run& r) {
      const replica_state& rs = reps_[r.replica];
      const std::size_t at = rs.slot(r.seq);
      for (std::uint32_t k = 0; k < r.len(); ++k) f(op_id{rs.id, r.seq + k}, rs.content[at + k]);
    });
  }

  /// Calls f(content, slot, n) for each live run in document order: the run's values are slots
  /// [slot, slot + n) of `content`, its replica's content_log. O(runs).
  template <class F>
  void for_each_live_span(F&& f) const {
    for_each_live_run([&](const run& r) { f(reps_[r.replica].content, reps_[r.replica].slot(r.seq), std::size_t(r.len())); });
  }

  /// Calls f(content, slot, n) for each run of removed items in document order, as for_each_live_span
  /// does for live ones (their values may be placeholders: content_mode::placeholders). O(runs).
  template <class F>
  void for_each_removed_span(F&& f) const {
    for_each_run(true, [&](const run& r) { f(reps_[r.replica].content, reps_[r.replica].slot(r.seq), std::size_t(r.len())); });
  }
  /// Calls f(op_id item, const T& value, const std::vector<op_id>& removes) for every item integrated,
  /// live or removed, in document order; `removes` holds the ids of the remove unit operations that
  /// targeted the item (every one integrated, in no particular order; empty for a live item). A removed
  /// item's value is a placeholder unless the document kept it (decoded from kept_values::all, or
  /// integrated here). Expected O(items + remove units) time; O(remove units) memory for the table of
  /// targets, built from one pass over the op log.
  template <class F>
  void for_each_item_with_removes(F&& f) const {
    struct remover {
      op_id id;
      std::uint32_t next;  ///< 1 + the index of the item's next remover, 0 at the end
    };
    std::vector<remover> removers;
    std::unordered_map<std::uint64_t, std::uint32_t> newest;  // (local replica, seq) -> 1 + index of a remover
    log_.for_each_since(reps_, version_vector{}, nullptr, [&](const op& o, std::size_t) {
      if (o.kind != op_kind::remove) return;
      const std::uint64_t rep = find_replica(o.ref.replica);
      if (rep == no_replica) return;
      for (std::uint32_t k = 0; k < o.len; ++k) {
        std::uint32_t& head = newest[rep << 32 | o.target(k).seq];
        removers.push_back({op_id{o.id.replica, o.id.seq + k}, head});
        head = static_cast<std::uint32_t>(removers.size());
      }
    });
    std::vector<op_id> ids;
    for (const leaf_node* l = first_leaf_; l; l = l->next)
      for (int i = 0; i < l->count; ++i) {
        const run& r = l->runs[i];
        const replica_state& rs = reps_[r.replica];
        const std::size_t at = rs.slot(r.seq);
        for (std::uint32_t k = 0; k < r.len(); ++k) {
          ids.clear();
          if (r.deleted())
            if (const auto it = newest.find(std::uint64_t(r.replica) << 32 | (r.seq + k)); it != newest.end())
              for (std::uint32_t at_remover = it->second; at_remover; at_remover = removers[at_remover - 1].next) ids.push_back(removers[at_remover - 1].id);
          f(op_id{rs.id, r.seq + k}, rs.content[at + k], ids);
        }
      }
  }

  /// Removed items: inserted, then deleted. O(1).
  std::uint64_t removed_count() const noexcept { return inserted_ - size(); }

  /// Replaces the values of the live items in document order (document decoding, where only live
  /// content is stored). False if the count differs from size().
  bool assign_live_values(const std::vector<T>& values) { return assign_values(false, values); }
  /// Replaces the values of the removed items in document order (decoding a document that keeps
  /// them: encode(kept_values::all)). False if the count differs from removed_count().
  bool assign_removed_values(const std::vector<T>& values) { return assign_values(true, values); }

  std::size_t log_size() const noexcept { return log_.size(); }

  /// What the record holds, in units: every inserted item, and one per entry of the op log that is a
  /// remove (however many items it targets: a remove of items removed already adds no item and, run-
  /// length merged with its author's previous remove, maybe no entry). Memory and the work of reading
  /// the record back are linear in it: the per-seq tables skip the seqs of removes (id_index,
  /// replica_removes). O(1).
  std::uint64_t units() const noexcept { return inserted_ + remove_entries_; }
  /// The units the record's edits changed: items inserted plus items deleted. A replica's op takes one
  /// more than the largest Lamport value it has seen, and what it has seen changed at least as many, so
  /// in a history delivered causally no Lamport value passes this (the headroom rule,
  /// document::apply_options::bounded_lamport). O(1).
  std::uint64_t changed() const noexcept { return 2 * inserted_ - size(); }

  /// Heap bytes held (tree, index, log, content, replica table).
  std::size_t memory_usage() const {
    std::size_t bytes = tree::tree_memory_usage();
    bytes += log_.memory_usage() + core::table_memory_usage();
    for (const replica_state& r : reps_) {
      bytes += r.content.memory_usage() + r.log_pos.capacity() * sizeof(std::uint32_t);
      bytes += r.removes.memory_usage();
      bytes += r.known_deleted.size() * (sizeof(std::pair<std::uint32_t, std::uint32_t>) + 4 * sizeof(void*));
      bytes += r.index.memory_usage();
    }
    for (const parked& p : parked_) bytes += sizeof(parked) + p.values.capacity() * sizeof(T) + p.removes.memory_usage();
    return bytes;
  }

  /// Verifies every invariant listed at the top of this file; throws "[folio.invariant]" on the first
  /// violation. O(n log n); for tests and fuzzers. Defined in detail/sequence/rga_invariants.hpp.
  void check_invariants() const;

 private:
  /// Calls f(run) for each live run in document order (its replica state is reps_[run.replica]); the
  /// one walk over live runs of the readers and of assign_live_values. O(runs).
  template <class F>
  void for_each_live_run(F&& f) const {
    for_each_run(false, std::forward<F>(f));
  }
  /// Calls f(run) for each run, in document order, that is `deleted` or, if not, live. O(runs).
  template <class F>
  void for_each_run(bool deleted, F&& f) const {
    for (const leaf_node* l = first_leaf_; l; l = l->next)
      for (int i = 0; i < l->count; ++i)
        if (l->runs[i].deleted() == deleted) f(l->runs[i]);
  }
  /// The values of the removed (`deleted`) or live items, in document order, replaced by `values`;
  /// false, with nothing changed, if their count differs. O(runs + values).
  bool assign_values(bool deleted, const std::vector<T>& values) {
    if (values.size() != (deleted ? removed_count() : size())) return false;
    std::size_t v = 0;
    for_each_run(deleted, [&](const run& r) {
      replica_state& rs = reps_[r.replica];
      rs.content.assign(rs.slot(r.seq), values.data() + v, r.len());
      v += r.len();
    });
    return true;
  }


  enum class dep { ready, missing, invalid };

  item_key key_of(const run& r, std::uint32_t k) const noexcept { return {r.lamport + k, reps_[r.replica].id, r.seq + k}; }

  /// True if the integrated item (rep, seq) is removed. O(log n).
  bool removed_here(std::uint32_t rep, std::uint32_t seq) const noexcept {
    const place p = locate_id(rep, seq);
    return p.leaf && p.leaf->runs[p.idx].deleted();
  }

  /// The origin (local replica, seq) of item (rep, seq), read from the log.
  std::pair<std::uint32_t, std::uint32_t> origin_of(std::uint32_t rep, std::uint32_t seq) const { return log_.origin_of(reps_[rep].log_pos, rep, seq); }

  void reserve_counters(std::size_t n) const { detail::reserve_counters(reps_[0].next_seq, clock_, n); }

  // ---- the id index and the log ---------------------------------------------------------------

  /// The item (rep, seq), or a place with a null leaf if it is not an integrated item. O(1) when the
  /// run found last (id_hint_) holds it — a remote typist's next keystroke names the item its last
  /// one made — else O(log page + leaf_capacity).
  place locate_id(std::uint32_t rep, std::uint32_t seq) const noexcept {
    if (id_hint_.leaf && id_hint_.idx < id_hint_.leaf->count) {
      const run& r = id_hint_.leaf->runs[id_hint_.idx];
      if (r.replica == rep && seq - r.seq < r.len()) return {id_hint_.leaf, id_hint_.idx, seq - r.seq};
    }
    const place p = locate_in_index(rep, seq);
    if (p.leaf) id_hint_ = {p.leaf, p.idx, 0};
    return p;
  }
  /// locate_id through the id index alone (what check_invariants verifies: the hint would answer for it).
  place locate_in_index(std::uint32_t rep, std::uint32_t seq) const noexcept {
    leaf_node* l = reps_[rep].index.leaf_of(seq);
    if (!l) return {};
    for (int i = 0; i < l->count; ++i) {
      const run& r = l->runs[i];
      if (r.replica == rep && seq - r.seq < r.len()) return {l, i, seq - r.seq};
    }
    return {};
  }

  /// Makes items [s, e) of replica `rep` map to leaf `l` in the index (id_index::assign).
  void index_assign(std::uint32_t rep, std::uint32_t s, std::uint32_t e, leaf_node* l) { reps_[rep].index.assign(s, e, l, reps_[rep].next_seq); }
  /// Maps items [s, s + n) appended to a run whose item s - 1 is in `l` (id_index::extend).
  void extend_index(std::uint32_t rep, std::uint32_t s, std::uint32_t n, leaf_node* l) { reps_[rep].index.extend(s, n, l, reps_[rep].next_seq); }
  /// Appends to the log (op_log::append), counting what the record holds (units).
  void log_append(const log_entry& e) {
    const bool entry = log_.append(e, reps_[e.replica].log_pos);
    if (e.kind == op_kind::insert)
      inserted_ += e.len;
    else
      remove_entries_ += entry;
  }

  // ---- integration ----------------------------------------------------------------------------

  /// Checks that an insert's origin, or a remove's targets (rep of `ref`, ref.seq ± k, k < len), are
  /// integrated items, and finds the first fault in the op's order. On `ready`, `at` is the place of an
  /// insert's origin (null leaf for document_start), with `lamport` its Lamport value (0 for
  /// document_start), or of a remove's lowest target if its targets lie in one run (else a null leaf);
  /// on `missing`, `missing` is the first reference not integrated yet; on `invalid`, `why` names the
  /// first that is not an item. O(log n): a remove's integrated targets are items unless one of their
  /// replica's removes falls among them (replica_removes), so no run beyond the first is visited.
  dep check_refs(const op& o, std::uint32_t& lamport, place& at, op_id& missing, std::string& why) const {
    if (o.kind == op_kind::insert && o.ref == document_start) return lamport = 0, dep::ready;
    if (o.ref.replica == 0) return why = "reference to replica 0", dep::invalid;
    const std::uint32_t rep = find_replica(o.ref.replica);
    const std::uint32_t next = rep == no_replica ? 0 : reps_[rep].next_seq;
    auto not_integrated = [&](std::uint32_t seq) {  // an op's own replica has integrated everything before it
      if (o.ref.replica == o.id.replica) return why = "operation refers to itself or a later operation of its replica", dep::invalid;
      return missing = {o.ref.replica, seq}, dep::missing;
    };
    auto not_item = [&](std::uint32_t seq) {
      return why = "reference (" + std::to_string(o.ref.replica) + ", " + std::to_string(seq) + ") is not an inserted item", dep::invalid;
    };
    if (o.kind == op_kind::insert) {
      if (o.ref.seq >= next) return not_integrated(o.ref.seq);
      const place p = locate_id(rep, o.ref.seq);
      if (!p.leaf) return not_item(o.ref.seq);
      at = p, lamport = p.leaf->runs[p.idx].lamport + p.off;
      return dep::ready;
    }
    if (o.backward ? o.ref.seq < o.len - 1 : std::uint64_t(o.ref.seq) + o.len > std::uint64_t(max_counter) + 1)
      return why = "remove target range out of bounds", dep::invalid;
    if (const std::uint32_t lo = o.backward ? o.ref.seq - (o.len - 1) : o.ref.seq; lo + (o.len - 1) < next) {
      const place p = locate_id(rep, lo);  // the usual remove: its targets are (part of) one run
      if (p.leaf && p.leaf->runs[p.idx].len() - p.off >= o.len) return at = p, dep::ready;
    }
    if (o.backward) {  // targets ref.seq down to lo
      if (o.ref.seq >= next) return not_integrated(o.ref.seq);
      const auto& rs = reps_[rep].removes.ranges;
      auto it = std::upper_bound(rs.begin(), rs.end(), o.ref.seq, [](std::uint32_t s, const auto& r) { return s < r.first; });
      if (it != rs.begin() && (--it)->second > o.ref.seq - (o.len - 1)) return not_item(std::min(it->second - 1, o.ref.seq));
      return dep::ready;
    }
    const std::uint32_t last = o.ref.seq + (o.len - 1);  // targets ref.seq up to last
    if (o.ref.seq < next) {
      const auto& rs = reps_[rep].removes.ranges;
      auto it = std::upper_bound(rs.begin(), rs.end(), o.ref.seq, [](std::uint32_t s, const auto& r) { return s < r.second; });
      if (it != rs.end() && it->first <= std::min(last, next - 1)) return not_item(std::max(it->first, o.ref.seq));
    }
    if (last >= next) return not_integrated(std::max(o.ref.seq, next));
    return dep::ready;
  }

  /// How a counter fault of a sequence op reads (valid_counters).
  static constexpr const char* counter_range_fault = "operation counter beyond 2^31";
  /// False if a value of text content is not a Unicode scalar value (array values are opaque here).
  static bool valid_values(const std::vector<T>& content) noexcept {
    if constexpr (std::is_same_v<T, char32_t>)
      for (char32_t c : content)
        if (!valid_code_point(c)) return false;
    return true;
  }

  /// Integrates one op of a batch whose removes are `removes` (for a pending op, the part of them
  /// that concerns it).
  outcome integrate(const op& in, const T* vals, const batch_removes& removes, bool placeholders, apply_result& res, std::string& why) {
    if (!valid_counters(in, false, counter_range_fault, why)) return outcome::invalid;
    if (in.kind == op_kind::insert && in.backward) return why = "insert marked backward", outcome::invalid;
    const std::uint32_t rep = replica_index(in.id.replica);
    return core::admit(
        rep, in, res, [&](op_id awaits) { park(in, vals, removes, placeholders, awaits); },
        [&] { return same_as_integrated(rep, in, vals, removes, why); },
        [&](std::uint32_t skip) {
          if (skip == 0) return integrate_ready(rep, in, vals, removes, placeholders, res, why);
          op o = in;  // partly known: drop the known prefix
          if (o.kind == op_kind::insert)
            o.ref = {o.id.replica, o.id.seq + skip - 1};
          else
            o.ref = o.target(skip);
          o.id.seq += skip, o.lamport += skip, o.len -= skip;
          return integrate_ready(rep, o, vals ? vals + skip : nullptr, removes, placeholders, res, why);
        });
  }

  /// Integrates `o`, the next op of replica `rep`, once its references are (else parks it).
  outcome integrate_ready(std::uint32_t rep, const op& o, const T* vals, const batch_removes& removes, bool placeholders, apply_result& res,
                          std::string& why) {
    std::uint32_t origin_lamport = 0;
    place first{};
    op_id missing;
    switch (check_refs(o, origin_lamport, first, missing, why)) {
      case dep::missing:
        return park(o, vals, removes, placeholders, missing), outcome::parked;
      case dep::invalid:
        return outcome::invalid;
      case dep::ready:
        break;
    }
    if (o.kind == op_kind::insert) {
      if (o.lamport <= origin_lamport) return why = "insert's Lamport value is not above its origin's", outcome::invalid;
      integrate_insert(rep, o, vals, first);
    } else {
      integrate_remove(rep, o, first);
    }
    core::advance(rep, o.lamport, o.len, res);
    return outcome::done;
  }

  /// True if the units of `in` already integrated (seqs below its replica's next_seq) are the ops
  /// integrated under those ids: same kind, Lamport values, origin or targets, and values. An op id
  /// names one operation forever; a replica that lost its state and made other ops under the same ids
  /// would otherwise be skipped as a duplicate and differ from everyone for good.
  ///
  /// Values are compared exactly, T{} included (U+0000 is a character like any other), except where a
  /// value may be unknown. A document decoded from its encoding keeps no values of removed items: their
  /// slots hold a placeholder, T{}, and so does a batch made from it. A placeholder exists only for a
  /// removed item, and a batch made by encode_since(v) for the version v of its receiver carries one
  /// only for an item removed here already (its remove is in v) or removed by the batch itself (its
  /// remove is not in v, so it is in the batch) — docs/INTERNALS.md. So T{} against another value
  /// on an item removed here or by `removes` (the batch's) is a value not known, not a difference:
  /// such an item never shows again, whatever its value. Anywhere else T{} is a value.
  ///
  /// O(log entries spanned + values compared, + log n per placeholder met); the ops of one batch name
  /// distinct ids (batch_order), so a batch costs at most the log once plus its own size.
  bool same_as_integrated(std::uint32_t rep, const op& in, const T* vals, const batch_removes& removes, std::string& why) const {
    const replica_state& rs = reps_[rep];
    const std::uint32_t known = std::min(in.len, rs.next_seq - in.id.seq);
    auto differs = [&](std::uint32_t k, const char* what) { return reused_op_id(in.id.replica, in.id.seq + k, what, why); };
    auto id_of = [&](std::uint32_t r, std::uint32_t seq) { return r == no_replica ? document_start : op_id{reps_[r].id, seq}; };
    auto it = entry_holding(rs.log_pos, in.id.seq, log_);
    for (std::uint32_t k = 0; k < known; ++it) {
      const log_entry& e = log_[*it];
      const std::uint32_t j = in.id.seq + k - e.seq, n = std::min(known - k, e.len - j);  // units j.. of entry e
      if (e.kind != in.kind) return differs(k, "kind");
      if (e.lamport + j != in.lamport + k) return differs(k, "Lamport value");
      if (in.kind == op_kind::insert) {
        // Within a run each item's origin is the item before it; only a run's first item names one.
        const op_id mine = k == 0 ? in.ref : op_id{in.id.replica, in.id.seq + k - 1};
        const op_id theirs = j == 0 ? id_of(e.ref_replica, e.ref_seq) : op_id{in.id.replica, in.id.seq + k - 1};
        if (mine != theirs) return differs(k, "origin");
        if (vals)
          for (std::uint32_t u = 0, at = std::uint32_t(rs.slot(in.id.seq + k)); u < n; ++u) {
            const T& a = vals[k + u];
            const std::uint32_t seq = in.id.seq + k + u;
            const T& b = rs.content[at + u];
            if (a == b) continue;
            if ((a == T{} || b == T{}) && (removes.contains(in.id.replica, seq) || removed_here(rep, seq))) continue;  // a value not known
            return differs(k + u, "value");
          }
      } else {
        // Both are runs of consecutive targets: the same first target and, past one unit, the same direction.
        if (in.target(k) != id_of(e.ref_replica, e.backward ? e.ref_seq - j : e.ref_seq + j)) return differs(k, "target");
        if (n > 1 && in.backward != e.backward) return differs(k + 1, "target");
      }
      k += n;
    }
    return true;
  }

  void park(const op& o, const T* vals, const batch_removes& removes, bool placeholders, op_id awaits) {
    parked p{o, {}, {}, placeholders, awaits};
    if (o.kind == op_kind::insert && vals) p.values.assign(vals, vals + o.len), p.removes = removes.within(o.id.replica, o.id.seq, o.len);
    parked_.push_back(std::move(p));
  }

  void finish_batch(apply_result& res) {
    core::finish_batch(res, [&](parked& p) {
      std::string why;
      return integrate(p.o, p.values.empty() ? nullptr : p.values.data(), p.removes, p.placeholders, res, why);
    });
  }

  /// Integrates a ready insert whose origin is at `origin` (null leaf: document start).
  void integrate_insert(std::uint32_t rep, const op& o, const T* vals, place origin) {
    replica_state& rs = reps_[rep];
    const item_key nk{o.lamport, o.id.replica, o.id.seq};
    const run fresh{rep, o.id.seq, o.lamport, o.len};
    leaf_node* l;
    int i;
    if (!origin.leaf) {
      l = first_leaf_, i = 0;
    } else {
      const run& r = origin.leaf->runs[origin.idx];
      if (origin.off + 1 < r.len() && key_of(r, origin.off + 1) < nk) {
        split_insert(origin, fresh);
        goto placed;
      }
      l = origin.leaf, i = origin.idx + 1;
    }
    // RGA scan: skip every following item with a larger key.
    std::tie(l, i) = first_below(l, i, nk);
    if (origin.leaf) {
      run& r = origin.leaf->runs[origin.idx];
      const bool right_after =
          (l == origin.leaf && i == origin.idx + 1) || (i == 0 && l == origin.leaf->next && origin.idx + 1 == origin.leaf->count);
      if (right_after && origin.off + 1 == r.len() && r.replica == rep && !r.deleted() && r.seq + r.len() == o.id.seq &&
          r.lamport + r.len() == o.lamport) {
        r.set_len(r.len() + o.len);
        add_live(origin.leaf, o.len);
        extend_index(rep, o.id.seq, o.len, origin.leaf);
        goto placed;
      }
    }
    if (i == 0 && l->prev) l = l->prev, i = l->count;  // prefer appending to the previous leaf
    insert_runs(l, i, &fresh, 1, 1);
  placed:
    if (vals)
      rs.content.append(vals, o.len);
    else
      rs.content.push_placeholders(o.len);
    const std::uint32_t oref = o.ref == document_start ? no_replica : find_replica(o.ref.replica);
    log_append(log_entry{rep, o.id.seq, o.len, o.lamport, oref, o.ref.seq, op_kind::insert, false});
  }

  /// Integrates a ready remove (`at`: the place of its lowest target, if check_refs found it): marks its
  /// targets deleted, passing over deleted runs and over the stretches known to be deleted
  /// (known_deleted), in O(log n) each. A remove that passed more than one run or stretch records its
  /// targets as one stretch, so no later remove passes those runs again: a remove costs O(log n) plus
  /// O(log n) for each run it newly deletes and, once over a document's life, for each run deleted
  /// otherwise (a local erase, a remove of one run), where walking every run of its range made n
  /// removes of one n-run range cost n^2.
  void integrate_remove(std::uint32_t rep, const op& o, place at) {
    const std::uint32_t trep = find_replica(o.ref.replica);
    const std::uint32_t lo = o.backward ? o.ref.seq - (o.len - 1) : o.ref.seq, end = lo + o.len;
    const auto& known = reps_[trep].known_deleted;
    int pieces = 0;
    for (std::uint32_t s = lo; s < end; ++pieces) {
      const place p = pieces == 0 && at.leaf ? at : locate_id(trep, s);
      const run& r = p.leaf->runs[p.idx];
      const std::uint32_t take = std::min(end - s, r.len() - p.off);
      if (!r.deleted()) {
        mark_deleted(p, take);
      } else if (const auto k = known.upper_bound(s); k != known.begin() && std::prev(k)->second > s + take) {
        s = std::prev(k)->second;  // the known stretch holding s reaches past this run
        continue;
      }
      s += take;
    }
    if (pieces > 1) know_deleted(trep, lo, end);
    note_remove(rep, o.id.seq, o.len);
    log_append(log_entry{rep, o.id.seq, o.len, o.lamport, trep, o.ref.seq, op_kind::remove, o.backward});
  }

  /// Records that the items [lo, end) of replica `rep` are deleted, merging the stretches it overlaps
  /// or touches. O(log s + stretches merged).
  void know_deleted(std::uint32_t rep, std::uint32_t lo, std::uint32_t end) {
    auto& known = reps_[rep].known_deleted;
    auto first = known.upper_bound(lo);
    if (first != known.begin() && std::prev(first)->second >= lo) lo = (--first)->first;
    auto past = first;
    for (; past != known.end() && past->first <= end; ++past) end = std::max(end, past->second);
    known.emplace_hint(known.erase(first, past), lo, end);
  }

  /// Records that seqs [seq, seq + n) of replica `rep` are a remove (not items).
  void note_remove(std::uint32_t rep, std::uint32_t seq, std::uint32_t n) { reps_[rep].removes.note(seq, n); }


  op_log log_;
  std::uint64_t inserted_ = 0;        ///< items, deleted or not: the insert units of the log
  std::uint64_t remove_entries_ = 0;  ///< entries of the log that are removes
};

}  // namespace folio::detail

#include "rga_invariants.hpp"  // defines check_invariants(), declared above
