// folio/detail/rga.hpp — the replicated growable array (RGA) behind text and array.
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
// Invariants (verified by `check()`):
//  1. node live counts are the sums of their children, node minimum keys the minimum of their children's
//     (a leaf's: of its runs' first keys); leaves hold 1..leaf_capacity runs (a lone root leaf may be
//     empty); inner nodes hold 2..inner_capacity children; parent/prev/next links agree;
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
#include <deque>
#include <iterator>
#include <map>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../error.hpp"
#include "../id.hpp"
#include "../ops.hpp"
#include "../version.hpp"
#include "content_log.hpp"
#include "hash.hpp"
#include "utf8.hpp"

namespace folio::detail {

inline constexpr int leaf_capacity = 32;
inline constexpr int inner_capacity = 16;
inline constexpr unsigned index_page_bits = 8;  // 256 seqs per index page
inline constexpr std::uint32_t no_replica = UINT32_MAX;

/// A run of items in document order. 16 bytes.
struct run {
  std::uint32_t replica;  ///< local replica index of the author (not the global id)
  std::uint32_t seq;      ///< seq of the first item; item k is (replica, seq + k)
  std::uint32_t lamport;  ///< Lamport value of the first item; item k has lamport + k (orders siblings)
  std::uint32_t len_del;  ///< bits 0-30: item count (>= 1); bit 31: all items deleted (tombstones)

  static constexpr std::uint32_t deleted_bit = 0x8000'0000u;
  std::uint32_t len() const noexcept { return len_del & ~deleted_bit; }
  bool deleted() const noexcept { return (len_del & deleted_bit) != 0; }
  std::uint32_t live() const noexcept { return deleted() ? 0 : len(); }
  void set_len(std::uint32_t n) noexcept { len_del = (len_del & deleted_bit) | n; }
  /// The items [k, len) as a run of their own.
  run tail(std::uint32_t k) const noexcept { return run{replica, seq + k, lamport + k, len_del - k}; }
};

/// Above every item's key: the smallest key of a node without items.
inline constexpr item_key above_every_key{UINT32_MAX, UINT64_MAX, UINT32_MAX};

struct inner_node;
struct node {
  inner_node* parent = nullptr;
  item_key min_key = above_every_key;  ///< smallest key of the items below (deleted ones included)
  std::uint32_t live = 0;              ///< live items below this node
  std::uint16_t count = 0;  ///< runs (leaf) or children (inner)
  bool is_leaf = true;
};
struct leaf_node : node {
  leaf_node* prev = nullptr;
  leaf_node* next = nullptr;
  run runs[leaf_capacity];
};
struct inner_node : node {
  node* child[inner_capacity];
};

/// An item: runs[idx] of `leaf`, `off` items into the run.
struct place {
  leaf_node* leaf = nullptr;
  int idx = 0;
  std::uint32_t off = 0;
};

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

/// Checks that a batch lists each replica's ops in seq order, each id once — what every encoder writes
/// (ops_since emits the log in integration order). It bounds the work of comparing ops with the ones
/// already integrated (same_as_integrated) to the log once per batch: without it a batch of many
/// copies of one long run would compare the whole run once per copy. Shared by rga and tree_doc.
class batch_order {
 public:
  /// False, with `why`, if ops [id.seq, id.seq + len) of id.replica come at or below an earlier op's.
  bool next(op_id id, std::uint32_t len, std::string& why) {
    auto [it, fresh] = end_.try_emplace(id.replica, 0);
    if (!fresh && id.seq < it->second) {
      why = "operations of replica " + std::to_string(id.replica) + " are not in seq order in the batch (" + std::to_string(id.seq) + " after " +
            std::to_string(it->second - 1) + ")";
      return false;
    }
    it->second = std::uint64_t(id.seq) + len;
    return true;
  }

 private:
  std::unordered_map<replica_id, std::uint64_t, id_hash> end_;  ///< per replica: one past the last seq listed
};

/// How a parked op fared when tried again (release_parked_ops).
enum class retried { integrated, parked, invalid };

/// Releases the parked ops of rga and tree_doc. `parked` is the engine's list of ops held for a
/// missing dependency, each with the id it waits for (`awaits`); `retry(p)` integrates p again, and an
/// op still missing something is appended to `parked` by it (with what it now waits for). Each op is
/// tried once, then again only when its replica's next seq (`next_seq(replica)`) has passed the one it
/// waits for: O(ops x their dependencies x log), where trying every parked op until a pass made no
/// progress was quadratic for a batch listing each op before the one it needs (8,000 such ops took
/// 1.8 s, 1,000 took 18 ms). What still waits at the end is left in `parked`, in the order it came.
template <class Parked, class Retry, class NextSeq>
void release_parked_ops(std::vector<Parked>& parked, Retry&& retry, NextSeq&& next_seq) {
  std::deque<Parked> ready(std::make_move_iterator(parked.begin()), std::make_move_iterator(parked.end()));
  parked.clear();
  // Per awaited replica, by the seq awaited: (arrival order, op).
  std::unordered_map<replica_id, std::multimap<std::uint32_t, std::pair<std::size_t, Parked>>, id_hash> waiting;
  std::size_t arrival = 0;
  while (!ready.empty()) {
    Parked p = std::move(ready.front());
    ready.pop_front();
    const replica_id author = p.o.id.replica;
    switch (retry(p)) {
      case retried::parked: {
        Parked q = std::move(parked.back());
        parked.pop_back();
        const op_id awaits = q.awaits;
        waiting[awaits.replica].emplace(awaits.seq, std::pair<std::size_t, Parked>(arrival++, std::move(q)));
        break;
      }
      case retried::integrated: {
        const auto w = waiting.find(author);
        if (w == waiting.end()) break;
        auto& by_seq = w->second;
        const auto end = by_seq.lower_bound(next_seq(author));
        for (auto it = by_seq.begin(); it != end; ++it) ready.push_back(std::move(it->second.second));
        by_seq.erase(by_seq.begin(), end);
        if (by_seq.empty()) waiting.erase(w);
        break;
      }
      case retried::invalid:
        break;
    }
  }
  std::vector<std::pair<std::size_t, Parked>> left;
  for (auto& [r, by_seq] : waiting)
    for (auto& [s, e] : by_seq) left.push_back(std::move(e));
  std::sort(left.begin(), left.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& e : left) parked.push_back(std::move(e.second));
}

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

/// Refuses an op whose id (replica, seq) is integrated with another `what` (same_as_integrated of
/// rga and tree_doc): sets `why` and returns false.
inline bool reused_op_id(replica_id replica, std::uint32_t seq, const char* what, std::string& why) {
  why = "operation id (" + std::to_string(replica) + ", " + std::to_string(seq) + ") is taken by an operation with another " + what +
        "; a replica must never reuse an operation id";
  return false;
}

/// In `log_pos`, one replica's log entries in seq order (indices into `log`), the one holding `seq`
/// (which the replica has integrated). O(log n).
template <class Log>
std::vector<std::uint32_t>::const_iterator entry_holding(const std::vector<std::uint32_t>& log_pos, std::uint32_t seq, const Log& log) {
  return std::upper_bound(log_pos.begin(), log_pos.end(), seq, [&](std::uint32_t s, std::uint32_t pos) { return s < log[pos].seq; }) - 1;
}

template <class T>
class rga {
 public:
  explicit rga(replica_id self) {
    if (self == 0) fail("folio.replica", "replica id 0 is reserved");
    auto* l = new leaf_node;
    root_ = first_leaf_ = l;
    replica_index(self);
  }
  ~rga() { destroy(root_); }
  rga(const rga&) = delete;
  rga& operator=(const rga&) = delete;
  rga(rga&& o) noexcept { steal(o); }
  rga& operator=(rga&& o) noexcept {
    if (this != &o) {
      destroy(root_);
      steal(o);
    }
    return *this;
  }

  replica_id self() const noexcept { return reps_[0].id; }
  std::size_t size() const noexcept { return root_->live; }
  /// O(1) after the first call following a change; O(r log r) for r replicas otherwise.
  const version_vector& version() const {
    if (version_dirty_) {
      version_ = version_vector{};
      for (const replica_state& r : reps_) version_.observe(r.id, r.next_seq);
      version_dirty_ = false;
    }
    return version_;
  }
  /// Unit operations held because their causal dependencies have not arrived.
  std::size_t pending() const noexcept {
    std::size_t n = 0;
    for (const parked& p : parked_) n += p.o.len;
    return n;
  }
  /// Unit operations dropped because, once their dependencies arrived, they proved invalid.
  std::size_t rejected() const noexcept { return rejected_; }

  // ---- local edits ----------------------------------------------------------------------------

  /// Inserts `n` values before position `pos` (0 = front, size() = end). Amortised O(log n); O(1)
  /// when continuing the previous insert. Throws folio::error "[folio.range]" if pos > size().
  local_change insert(std::size_t pos, const T* values, std::size_t n) {
    if (pos > size()) fail("folio.range", "insert position " + std::to_string(pos) + " > size " + std::to_string(size()));
    if constexpr (std::is_same_v<T, char32_t>)
      for (std::size_t k = 0; k < n; ++k)
        if (!valid_code_point(values[k])) fail("folio.value", "not a Unicode scalar value");
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
    finish_local(len);
    return change;
  }

  /// Removes `n` values starting at `pos`. O(log n + runs touched).
  /// Throws folio::error "[folio.range]" if pos + n > size().
  local_change erase(std::size_t pos, std::size_t n) {
    if (pos > size() || n > size() - pos)
      fail("folio.range", "erase range " + std::to_string(pos) + "+" + std::to_string(n) + " > size " + std::to_string(size()));
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
    finish_local(static_cast<std::uint32_t>(n));
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
  /// apply to a fresh copy or reload on `invalid`.
  apply_result apply(const op_batch<T>& b, content_mode mode = content_mode::from_batch) {
    apply_result res;
    cache_leaf_ = nullptr, cache_idx_ = -1;
    if (mode == content_mode::from_batch) {
      std::size_t need = 0;
      for (const op& o : b.ops)
        if (o.kind == op_kind::insert) need += o.len;
      if (need != b.content.size()) {
        res.status = apply_status::invalid, res.op_index = b.ops.size();
        res.message = "batch content has " + std::to_string(b.content.size()) + " values, inserts need " + std::to_string(need);
        return res;
      }
      if constexpr (std::is_same_v<T, char32_t>)
        for (char32_t c : b.content)
          if (!valid_code_point(c)) {
            res.status = apply_status::invalid, res.op_index = b.ops.size(),
            res.message = "batch content holds a value that is not a Unicode scalar value";
            return res;
          }
    }
    std::size_t coff = 0;
    batch_order order;
    const batch_removes removes = mode == content_mode::from_batch ? batch_removes(b.ops) : batch_removes();
    for (std::size_t i = 0; i < b.ops.size(); ++i) {
      const op& o = b.ops[i];
      const T* vals = nullptr;
      if (o.kind == op_kind::insert && mode == content_mode::from_batch) vals = b.content.data() + coff, coff += o.len;
      std::string why;
      const outcome oc = order.next(o.id, o.len, why) ? integrate(o, vals, removes, mode == content_mode::placeholders, res, why) : outcome::invalid;
      if (oc == outcome::invalid) {
        res.status = apply_status::invalid, res.op_index = i, res.message = std::move(why);
        break;
      }
    }
    if (res.applied != 0 && !parked_.empty()) release_parked(res);
    res.pending = pending();
    return res;
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

  /// The operations a replica at version `since` lacks, in an order that integrates without pending
  /// (the local integration order). With `upto`, only operations that version contains. O(k log k)
  /// for k ops returned. Without content (for document encoding) when `with_content` is false.
  op_batch<T> ops_since(const version_vector& since, const version_vector* upto = nullptr, bool with_content = true) const {
    std::vector<std::pair<std::uint32_t, std::uint32_t>> picks;  // (log position, first unit)
    for (std::uint32_t r = 0; r < reps_.size(); ++r) {
      const std::uint32_t to = upto ? std::min(upto->get(reps_[r].id), reps_[r].next_seq) : reps_[r].next_seq;
      collect(r, since.get(reps_[r].id), to, picks);
    }
    std::sort(picks.begin(), picks.end());
    return emit(picks, with_content, upto);
  }

  /// The operations of one local change.
  op_batch<T> ops(const local_change& c) const {
    std::vector<std::pair<std::uint32_t, std::uint32_t>> picks;
    auto it = rep_index_.find(c.replica);
    if (it == rep_index_.end() || c.count == 0) return {};
    const std::uint32_t end = std::min(c.first + c.count, reps_[it->second].next_seq);
    collect(it->second, c.first, end, picks);
    std::sort(picks.begin(), picks.end());
    version_vector upto;
    upto.observe(c.replica, end);
    return emit(picks, true, &upto);
  }

  // ---- reading --------------------------------------------------------------------------------

  /// Calls f(value) for each live value in order. O(n).
  template <class F>
  void for_each(F&& f) const {
    for (const leaf_node* l = first_leaf_; l; l = l->next)
      for (int i = 0; i < l->count; ++i) {
        const run& r = l->runs[i];
        if (r.deleted()) continue;
        const replica_state& rs = reps_[r.replica];
        const std::size_t at = rs.slot(r.seq);
        for (std::uint32_t k = 0; k < r.len(); ++k) f(rs.content[at + k]);
      }
  }

  /// The live value at `pos`. O(log n). Throws "[folio.range]" past the end.
  T at(std::size_t pos) const {
    if (pos >= size()) fail("folio.range", "position " + std::to_string(pos) + " >= size " + std::to_string(size()));
    const place p = locate_live(pos);
    const run& r = p.leaf->runs[p.idx];
    const replica_state& rs = reps_[r.replica];
    return rs.content[rs.slot(r.seq + p.off)];
  }

  /// Largest Lamport value integrated (a local op takes clock() + 1).
  std::uint32_t clock() const noexcept { return clock_; }

  /// Ids of the live items [pos, pos + n) as runs of consecutive seqs of one replica, in document
  /// order: (first id, count). O(log n + runs). Throws "[folio.range]" past the end.
  std::vector<std::pair<op_id, std::uint32_t>> live_ids(std::size_t pos, std::size_t n) const {
    if (pos > size() || n > size() - pos)
      fail("folio.range", "range " + std::to_string(pos) + "+" + std::to_string(n) + " > size " + std::to_string(size()));
    std::vector<std::pair<op_id, std::uint32_t>> out;
    if (n == 0) return out;
    place p = locate_live(pos);
    for (std::size_t done = 0; done < n;) {
      normalize(p);
      const run& r = p.leaf->runs[p.idx];
      if (r.deleted() || p.off >= r.len()) {
        ++p.idx, p.off = 0;
        continue;
      }
      const std::uint32_t take = static_cast<std::uint32_t>(std::min<std::size_t>(r.len() - p.off, n - done));
      out.push_back({op_id{reps_[r.replica].id, r.seq + p.off}, take});
      done += take, ++p.idx, p.off = 0;
    }
    return out;
  }

  /// Calls f(op_id, const T&) for each live item in order. O(n).
  template <class F>
  void for_each_item(F&& f) const {
    for (const leaf_node* l = first_leaf_; l; l = l->next)
      for (int i = 0; i < l->count; ++i) {
        const run& r = l->runs[i];
        if (r.deleted()) continue;
        const replica_state& rs = reps_[r.replica];
        const std::size_t at = rs.slot(r.seq);
        for (std::uint32_t k = 0; k < r.len(); ++k) f(op_id{rs.id, r.seq + k}, rs.content[at + k]);
      }
  }

  /// Replaces the values of the live items in document order (document decoding, where only live
  /// content is stored). False if the count differs from size().
  bool assign_live_values(const std::vector<T>& values) {
    if (values.size() != size()) return false;
    std::size_t v = 0;
    for (leaf_node* l = first_leaf_; l; l = l->next)
      for (int i = 0; i < l->count; ++i) {
        const run& r = l->runs[i];
        if (r.deleted()) continue;
        replica_state& rs = reps_[r.replica];
        rs.content.assign(rs.slot(r.seq), values.data() + v, r.len());
        v += r.len();
      }
    return true;
  }

  /// Number of runs in document order (tombstone runs included).
  std::size_t run_count() const noexcept {
    std::size_t n = 0;
    for (const leaf_node* l = first_leaf_; l; l = l->next) n += l->count;
    return n;
  }
  std::size_t log_size() const noexcept { return log_.size(); }

  /// Heap bytes held (tree, index, log, content, replica table).
  std::size_t memory_usage() const {
    std::size_t bytes = count_nodes(root_);
    bytes += log_.capacity() * sizeof(log_entry) + reps_.capacity() * sizeof(replica_state);
    bytes += rep_index_.size() * (sizeof(std::pair<replica_id, std::uint32_t>) + 2 * sizeof(void*)) + rep_index_.bucket_count() * sizeof(void*);
    for (const replica_state& r : reps_) {
      bytes += r.content.memory_usage() + r.log_pos.capacity() * sizeof(std::uint32_t);
      bytes += r.remove_seqs.capacity() * sizeof(r.remove_seqs[0]) + r.removes_before_page.capacity() * sizeof(r.removes_before_page[0]);
      bytes += r.known_deleted.size() * (sizeof(std::pair<std::uint32_t, std::uint32_t>) + 4 * sizeof(void*));
      bytes += r.index.capacity() * sizeof(std::vector<index_entry>);
      for (const auto& page : r.index) bytes += page.capacity() * sizeof(index_entry);
    }
    for (const parked& p : parked_) bytes += sizeof(parked) + p.values.capacity() * sizeof(T) + p.removes.memory_usage();
    return bytes;
  }

  /// Verifies every invariant listed at the top of this file; throws "[folio.invariant]" on the first
  /// violation. O(n log n); for tests and fuzzers.
  void check() const {
    std::vector<const leaf_node*> leaves;
    check_node(root_, nullptr, leaves);
    const leaf_node* prev = nullptr;
    for (std::size_t i = 0; i < leaves.size(); ++i) {
      if (leaves[i]->prev != prev) bad("leaf prev link");
      if (i + 1 < leaves.size() ? leaves[i]->next != leaves[i + 1] : leaves[i]->next != nullptr) bad("leaf next link");
      prev = leaves[i];
    }
    if (first_leaf_ != leaves.front()) bad("first leaf");
    if (cache_leaf_) {
      std::size_t start = 0;
      for (const leaf_node* l : leaves) {
        if (l == cache_leaf_) break;
        start += l->live;
      }
      if (start != cache_start_) bad("position cache");
      if (cache_idx_ >= 0) {
        if (cache_idx_ >= cache_leaf_->count) bad("run cache index");
        std::size_t run_start = start;
        for (int i = 0; i < cache_idx_; ++i) run_start += cache_leaf_->runs[i].live();
        if (run_start != cache_run_start_) bad("run cache position");
      }
    }
    // 2. index, 4. per-replica coverage
    std::vector<std::uint64_t> items(reps_.size());
    for (const leaf_node* l : leaves)
      for (int i = 0; i < l->count; ++i) {
        const run& r = l->runs[i];
        if (r.len() == 0 || r.replica >= reps_.size()) bad("run length or replica");
        if (std::uint64_t(r.seq) + r.len() > reps_[r.replica].next_seq) bad("run beyond replica's ops");
        for (std::uint32_t k : {0u, r.len() - 1}) {
          const place p = locate_id(r.replica, r.seq + k);
          if (p.leaf != l || p.idx != i) bad("index does not map item to its leaf");
        }
        items[r.replica] += r.len();
      }
    for (std::uint32_t rep = 0; rep < reps_.size(); ++rep) {
      const replica_state& rs = reps_[rep];
      if (version().get(rs.id) != rs.next_seq) bad("version vector");
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
      if (removes != rs.remove_seqs) bad("remove seqs do not match the log");
      std::uint64_t removed = 0;
      for (std::size_t p = 0, i = 0; p < rs.removes_before_page.size(); ++p) {
        for (; i < removes.size() && removes[i].first < (std::uint64_t(p) << index_page_bits); ++i) removed += removes[i].second - removes[i].first;
        if (rs.removes_before_page[p].ranges != i || rs.removes_before_page[p].units != removed) bad("removes before a page");
      }
      if (!removes.empty() && rs.removes_before_page.size() != (removes.back().first >> index_page_bits) + 1) bad("remove pages");
      if (rs.removed_units != next - inserted) bad("remove unit count");
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

 private:
  struct index_entry {
    std::uint32_t seq;  ///< first seq of the range; the range ends at the next entry's seq
    leaf_node* leaf;
  };
  struct removes_before {
    std::uint32_t ranges, units;
  };
  struct replica_state {
    replica_id id;
    std::uint32_t next_seq = 0;                   ///< ops integrated (== version entry)
    content_log<T> content;                       ///< values of the insert units in seq order (see slot)
    std::vector<std::vector<index_entry>> index;  ///< page (seq >> index_page_bits) -> sorted ranges
    std::vector<std::uint32_t> log_pos;           ///< log_ positions of this replica's ops, by seq
    /// Seq ranges [first, second) of this replica's removes, in seq order, touching ones merged: the
    /// seqs that are not items (check_refs finds a remove's faults in O(log n) with them).
    std::vector<std::pair<std::uint32_t, std::uint32_t>> remove_seqs;
    std::uint32_t removed_units = 0;  ///< seqs that are removes (they hold no content slot)
    /// Stretches [first, second) of this replica's items known to be deleted, disjoint and not touching:
    /// the targets of removes that spanned more than one run (integrate_remove passes them whole).
    /// Other deleted items are not recorded.
    std::map<std::uint32_t, std::uint32_t> known_deleted;

    /// removes_before_page[p]: the remove ranges that start before seq p·2^index_page_bits and their
    /// units, for the pages up to the one where the last range starts (later pages: all of them).
    std::vector<removes_before> removes_before_page;

    /// The content slot of insert unit `seq`: seq less the remove units before it. O(1) plus the
    /// remove ranges that start in seq's page before it (at most half a page, usually none). A run's
    /// seqs are all inserts, so its slots are consecutive.
    std::size_t slot(std::uint32_t seq) const noexcept {
      const std::size_t page = seq >> index_page_bits;
      if (page >= removes_before_page.size()) return seq - removed_units;  // every remove range ends before seq
      std::uint32_t units = removes_before_page[page].units;
      for (std::size_t i = removes_before_page[page].ranges; i < remove_seqs.size() && remove_seqs[i].first < seq; ++i)
        units += remove_seqs[i].second - remove_seqs[i].first;
      return seq - units;
    }
  };
  struct parked {
    op o;
    std::vector<T> values;
    batch_removes removes;  ///< the removes of its batch that target its items
    bool placeholders;
    op_id awaits;  ///< the missing op it waits for
  };
  enum class outcome { done, parked, invalid };
  enum class dep { ready, missing, invalid };

  [[noreturn]] static void bad(const char* what) { fail("folio.invariant", what); }

  void steal(rga& o) noexcept {
    root_ = std::exchange(o.root_, nullptr);
    first_leaf_ = std::exchange(o.first_leaf_, nullptr);
    reps_ = std::move(o.reps_);
    rep_index_ = std::move(o.rep_index_);
    log_ = std::move(o.log_);
    parked_ = std::move(o.parked_);
    version_ = std::move(o.version_);
    version_dirty_ = o.version_dirty_;
    clock_ = o.clock_, rejected_ = o.rejected_;
    cache_leaf_ = std::exchange(o.cache_leaf_, nullptr), cache_start_ = o.cache_start_;
    cache_idx_ = std::exchange(o.cache_idx_, -1), cache_run_start_ = o.cache_run_start_;
  }
  static void destroy(node* n) noexcept {
    if (!n) return;
    if (n->is_leaf) {
      delete static_cast<leaf_node*>(n);
      return;
    }
    auto* in = static_cast<inner_node*>(n);
    for (int i = 0; i < in->count; ++i) destroy(in->child[i]);
    delete in;
  }
  static std::size_t count_nodes(const node* n) noexcept {
    if (n->is_leaf) return sizeof(leaf_node);
    auto* in = static_cast<const inner_node*>(n);
    std::size_t b = sizeof(inner_node);
    for (int i = 0; i < in->count; ++i) b += count_nodes(in->child[i]);
    return b;
  }
  std::uint32_t check_node(const node* n, const inner_node* parent, std::vector<const leaf_node*>& leaves) const {
    if (n->parent != parent) bad("parent link");
    std::uint64_t live = 0;
    item_key min = above_every_key;
    if (n->is_leaf) {
      auto* l = static_cast<const leaf_node*>(n);
      if (l->count > leaf_capacity || (l->count == 0 && n != root_)) bad("leaf run count");
      for (int i = 0; i < l->count; ++i) live += l->runs[i].live();
      min = leaf_min(l);
      leaves.push_back(l);
    } else {
      auto* in = static_cast<const inner_node*>(n);
      if (in->count < 2 || in->count > inner_capacity) bad("inner child count");
      for (int i = 0; i < in->count; ++i) live += check_node(in->child[i], in, leaves), min = std::min(min, in->child[i]->min_key);
    }
    if (live != n->live) bad("live count");
    if (min != n->min_key) bad("smallest key of a node");
    return n->live;
  }

  item_key key_of(const run& r, std::uint32_t k) const noexcept { return {r.lamport + k, reps_[r.replica].id, r.seq + k}; }

  /// Local index of replica `id`, added to the table if new.
  std::uint32_t replica_index(replica_id id) {
    auto [it, added] = rep_index_.try_emplace(id, static_cast<std::uint32_t>(reps_.size()));
    if (added) {
      reps_.emplace_back();
      reps_.back().id = id;
    }
    return it->second;
  }
  /// Local index of `id`, or no_replica.
  std::uint32_t find_replica(replica_id id) const {
    auto it = rep_index_.find(id);
    return it == rep_index_.end() ? no_replica : it->second;
  }

  /// True if the integrated item (rep, seq) is removed. O(log n).
  bool removed_here(std::uint32_t rep, std::uint32_t seq) const noexcept {
    const place p = locate_id(rep, seq);
    return p.leaf && p.leaf->runs[p.idx].deleted();
  }

  /// The origin (local replica, seq) of item (rep, seq), read from the log.
  std::pair<std::uint32_t, std::uint32_t> origin_of(std::uint32_t rep, std::uint32_t seq) const {
    const log_entry& e = log_[*entry_holding(reps_[rep].log_pos, seq, log_)];
    if (e.kind != op_kind::insert) bad("item id belongs to a remove");
    if (seq == e.seq) return {e.ref_replica, e.ref_seq};
    return {rep, seq - 1};
  }

  void reserve_counters(std::size_t n) const { detail::reserve_counters(reps_[0].next_seq, clock_, n); }
  void finish_local(std::uint32_t n) {
    replica_state& me = reps_[0];
    me.next_seq += n;
    clock_ += n;
    version_dirty_ = true;
  }

  // ---- tree navigation ------------------------------------------------------------------------

  /// The live item at `pos` (< size()). Uses and refreshes the position cache.
  place locate_live(std::size_t pos) const {
    leaf_node* l;
    std::size_t start;
    if (cache_leaf_ && pos >= cache_start_ && pos - cache_start_ < cache_leaf_->live) {
      l = cache_leaf_, start = cache_start_;
      if (cache_idx_ >= 0 && pos >= cache_run_start_ && pos - cache_run_start_ < l->runs[cache_idx_].live())
        return {l, cache_idx_, static_cast<std::uint32_t>(pos - cache_run_start_)};
    } else {
      node* n = root_;
      start = 0;
      while (!n->is_leaf) {
        auto* in = static_cast<inner_node*>(n);
        int c = 0;
        while (c + 1 < in->count && pos - start >= in->child[c]->live) start += in->child[c++]->live;
        n = in->child[c];
      }
      l = static_cast<leaf_node*>(n);
      cache_leaf_ = l, cache_start_ = start, cache_idx_ = -1;
    }
    std::size_t rel = pos - start;
    int i = 0;
    for (;; ++i) {
      const std::uint32_t lv = l->runs[i].live();
      if (rel < lv) break;
      rel -= lv;
    }
    cache_idx_ = i, cache_run_start_ = pos - rel;
    return {l, i, static_cast<std::uint32_t>(rel)};
  }

  /// The item (rep, seq), or a place with a null leaf if it is not an integrated item.
  place locate_id(std::uint32_t rep, std::uint32_t seq) const noexcept {
    const auto& pages = reps_[rep].index;
    const std::size_t pg = seq >> index_page_bits;
    if (pg >= pages.size()) return {};
    const auto& page = pages[pg];
    auto it = std::upper_bound(page.begin(), page.end(), seq, [](std::uint32_t s, const index_entry& e) { return s < e.seq; });
    if (it == page.begin()) return {};
    leaf_node* l = (it - 1)->leaf;
    for (int i = 0; i < l->count; ++i) {
      const run& r = l->runs[i];
      if (r.replica == rep && seq - r.seq < r.len()) return {l, i, seq - r.seq};
    }
    return {};
  }

  /// The RGA scan: the first run at or after runs[i] of `l` whose first key is below `k` (the first
  /// item there with a smaller key: keys rise along a run), or the end of the last leaf if there is
  /// none. Runs of the leaf are scanned; beyond it, whole subtrees whose smallest key is larger are
  /// skipped: up to the nearest ancestor with a later child holding a smaller key, then down to that
  /// child's first such child. O(log n) whatever the siblings passed (walking runs was linear in them).
  std::pair<leaf_node*, int> first_below(leaf_node* l, int i, const item_key& k) const noexcept {
    for (; i < l->count; ++i)
      if (key_of(l->runs[i], 0) < k) return {l, i};
    if (!l->next) return {l, i};  // the end (typing at the end of the document)
    node* n = l;
    for (;;) {
      inner_node* p = n->parent;
      if (!p) {  // nothing smaller follows: the end of the last leaf
        for (n = root_; !n->is_leaf;) n = static_cast<inner_node*>(n)->child[static_cast<inner_node*>(n)->count - 1];
        l = static_cast<leaf_node*>(n);
        return {l, l->count};
      }
      int c = 1;
      while (p->child[c - 1] != n) ++c;
      while (c < p->count && !(p->child[c]->min_key < k)) ++c;
      if (c < p->count) {
        n = p->child[c];
        break;
      }
      n = p;
    }
    while (!n->is_leaf) {
      auto* in = static_cast<inner_node*>(n);
      int c = 0;
      while (!(in->child[c]->min_key < k)) ++c;
      n = in->child[c];
    }
    l = static_cast<leaf_node*>(n);
    i = 0;
    while (!(key_of(l->runs[i], 0) < k)) ++i;
    return {l, i};
  }

  /// Moves a place past the end of its leaf onto the next leaf.
  static void normalize(place& p) noexcept {
    while (p.idx >= p.leaf->count && p.leaf->next) p.idx -= p.leaf->count, p.leaf = p.leaf->next;
  }

  // ---- tree mutation --------------------------------------------------------------------------

  static void add_live(node* n, std::int64_t delta) noexcept {
    for (; n; n = n->parent) n->live = static_cast<std::uint32_t>(n->live + delta);
  }

  /// Accounts for an item with key `k` placed below `n`. The ancestors whose minimum is already
  /// smaller end the walk: theirs are smaller still.
  static void lower_min(node* n, const item_key& k) noexcept {
    for (; n && k < n->min_key; n = n->parent) n->min_key = k;
  }
  /// The smallest key in `l`: its runs' first keys (keys rise along a run). Replica ids are looked up
  /// only to break ties of Lamport values.
  item_key leaf_min(const leaf_node* l) const noexcept {
    const run* best = nullptr;
    for (const run* r = l->runs; r != l->runs + l->count; ++r)
      if (!best || r->lamport < best->lamport || (r->lamport == best->lamport && key_of(*r, 0) < key_of(*best, 0))) best = r;
    return best ? key_of(*best, 0) : above_every_key;
  }

  /// Makes items [s, e) of replica `rep` map to leaf `l` in the index.
  void index_assign(std::uint32_t rep, std::uint32_t s, std::uint32_t e, leaf_node* l) {
    auto& pages = reps_[rep].index;
    const std::size_t last = (e - 1) >> index_page_bits;
    if (pages.size() <= last) pages.resize(last + 1);
    for (std::size_t pg = s >> index_page_bits; pg <= last; ++pg) {
      const std::uint64_t page_lo = std::uint64_t(pg) << index_page_bits, page_hi = page_lo + (1u << index_page_bits);
      const auto lo = static_cast<std::uint32_t>(std::max<std::uint64_t>(s, page_lo));
      const std::uint64_t hi = std::min<std::uint64_t>(e, page_hi);
      auto& page = pages[pg];
      // Past every entry, with nothing existing after the range (new items): append or nothing.
      if ((page.empty() || page.back().seq < lo) && (hi >= page_hi || hi >= reps_[rep].next_seq)) {
        if (page.empty() || page.back().leaf != l) page.push_back({lo, l});
        continue;
      }
      auto by_seq = [](const index_entry& x, std::uint64_t v) { return x.seq < v; };
      const std::size_t a = std::lower_bound(page.begin(), page.end(), lo, by_seq) - page.begin();
      std::size_t b = std::lower_bound(page.begin(), page.end(), hi, by_seq) - page.begin();
      // Fast path: the range already maps to l.
      if (a > 0 && page[a - 1].leaf == l && a == b) continue;
      leaf_node* after = nullptr;  // what `hi` mapped to, to keep it if hi starts no entry of its own
      // Seqs at or past next_seq do not exist yet (ops integrate in seq order), so they need no entry;
      // this also lets extensions of the newest run skip the index entirely (see extend_index).
      const bool keep_after = hi < page_hi && hi < reps_[rep].next_seq && b > 0 && !(b < page.size() && page[b].seq == hi);
      if (keep_after) after = page[b - 1].leaf;
      index_entry repl[2];
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
  /// in the page of s - 1 (no entry can follow it there, see index_assign).
  void extend_index(std::uint32_t rep, std::uint32_t s, std::uint32_t n, leaf_node* l) {
    if (((s - 1) >> index_page_bits) != ((s + n - 1) >> index_page_bits)) index_assign(rep, s, s + n, l);
  }

  /// Inserts `m` (1..2) runs before runs[idx] of `l`, splitting the leaf if needed. Adds their live
  /// items to the counts. Bit k of `fresh` says run k holds new items; the others are pieces split off
  /// a run of `l`, whose ids already map to `l` unless the split moves them. Returns the place of the
  /// first inserted run.
  place insert_runs(leaf_node* l, int idx, const run* rs, int m, unsigned fresh) {
    if (l == cache_leaf_ && idx <= cache_idx_) cache_idx_ = -1;  // runs before the cached one change
    bool moved_leaf = false;
    if (l->count + m > leaf_capacity) {
      const int old = l->count;
      const int mid = idx == old ? old : old / 2;                  // appending at a leaf's end starts a fresh leaf
      if (l == cache_leaf_ && cache_idx_ >= mid) cache_idx_ = -1;  // the cached run moves away
      auto* r = new leaf_node;
      std::uint32_t moved = 0;
      for (int i = mid; i < old; ++i) r->runs[i - mid] = l->runs[i], moved += l->runs[i].live();
      r->count = static_cast<std::uint16_t>(old - mid);
      l->count = static_cast<std::uint16_t>(mid);
      l->live -= moved;
      r->live = moved;
      r->next = l->next, r->prev = l;
      if (l->next) l->next->prev = r;
      l->next = r;
      l->min_key = leaf_min(l), r->min_key = leaf_min(r);
      insert_child(l, r);
      for (int i = 0; i < r->count; ++i) index_assign(r->runs[i].replica, r->runs[i].seq, r->runs[i].seq + r->runs[i].len(), r);
      if (idx > mid || mid == old) l = r, idx -= mid, moved_leaf = true;
    }
    for (int i = l->count - 1; i >= idx; --i) l->runs[i + m] = l->runs[i];
    std::uint32_t live = 0;
    for (int k = 0; k < m; ++k) l->runs[idx + k] = rs[k], live += rs[k].live();
    l->count = static_cast<std::uint16_t>(l->count + m);
    add_live(l, live);
    for (int k = 0; k < m; ++k) lower_min(l, key_of(rs[k], 0));
    for (int k = 0; k < m; ++k)
      if (moved_leaf || (fresh >> k & 1)) index_assign(rs[k].replica, rs[k].seq, rs[k].seq + rs[k].len(), l);
    return {l, idx, 0};
  }

  /// Inserts `right` into left's parent just after `left`, splitting inner nodes up to the root.
  void insert_child(node* left, node* right) {
    for (;;) {
      inner_node* p = left->parent;
      if (!p) {
        auto* root = new inner_node;
        root->is_leaf = false;
        root->count = 2;
        root->child[0] = left, root->child[1] = right;
        root->live = left->live + right->live;
        root->min_key = std::min(left->min_key, right->min_key);
        left->parent = right->parent = root;
        root_ = root;
        return;
      }
      int i = 0;
      while (p->child[i] != left) ++i;
      if (p->count < inner_capacity) {
        for (int k = p->count - 1; k > i; --k) p->child[k + 1] = p->child[k];
        p->child[i + 1] = right;
        right->parent = p;
        ++p->count;
        return;
      }
      node* all[inner_capacity + 1];
      for (int k = 0, j = 0; k < p->count; ++k) {
        all[j++] = p->child[k];
        if (k == i) all[j++] = right;
      }
      auto* q = new inner_node;
      q->is_leaf = false;
      const int total = p->count + 1, half = total / 2;
      p->count = static_cast<std::uint16_t>(half);
      q->count = static_cast<std::uint16_t>(total - half);
      p->live = q->live = 0;
      p->min_key = q->min_key = above_every_key;
      for (int k = 0; k < total; ++k) {
        inner_node* owner = k < half ? p : q;
        owner->child[k < half ? k : k - half] = all[k];
        all[k]->parent = owner;
        owner->live += all[k]->live;
        owner->min_key = std::min(owner->min_key, all[k]->min_key);
      }
      left = p, right = q;
    }
  }

  /// Splits the run at p after p.off items and inserts `fresh` between the halves.
  void split_insert(const place& p, const run& fresh) {
    run& r = p.leaf->runs[p.idx];
    const run tail = r.tail(p.off + 1);
    r.set_len(p.off + 1);
    add_live(p.leaf, -static_cast<std::int64_t>(tail.live()));
    const run two[2] = {fresh, tail};
    insert_runs(p.leaf, p.idx + 1, two, 2, 1);
  }

  /// True if `b` continues `a`: same author, next seq and Lamport value, same deleted state.
  static bool continues(const run& a, const run& b) noexcept {
    return a.replica == b.replica && a.seq + a.len() == b.seq && a.lamport + a.len() == b.lamport && a.deleted() == b.deleted();
  }

  /// Removes runs[idx] of `l` (its items went into a neighbouring run of the same leaf). The run cache
  /// then names the run that followed, which starts where the dropped one did, if there is one.
  void drop_run(leaf_node* l, int idx) noexcept {
    for (int i = idx; i + 1 < l->count; ++i) l->runs[i] = l->runs[i + 1];
    --l->count;
    if (l == cache_leaf_ && cache_idx_ >= l->count) cache_idx_ = -1;
  }

  /// Marks `take` items from p deleted (the run at p is live, p.off + take <= len). Returns the place
  /// just after them (possibly one past the end of a leaf). Deleted items join a neighbouring tombstone
  /// run they continue (the usual result of backspacing), so tombstones do not fragment.
  place mark_deleted(place p, std::uint32_t take) {
    // Deleting before the cached run shifts its start; deleting in it or after it does not (items
    // only turn into tombstones, and a dropped run's successor starts where it did).
    if (p.leaf == cache_leaf_ && p.idx < cache_idx_) cache_idx_ = -1;
    leaf_node* l = p.leaf;
    run& r = l->runs[p.idx];
    const std::uint32_t len = r.len();
    add_live(l, -static_cast<std::int64_t>(take));
    run* prev = p.idx > 0 ? &l->runs[p.idx - 1] : nullptr;
    run* next = p.idx + 1 < l->count ? &l->runs[p.idx + 1] : nullptr;
    run gone = r.tail(p.off);
    gone.len_del = take | run::deleted_bit;
    if (p.off == 0 && prev && continues(*prev, gone)) {  // grow the tombstone run on the left
      prev->set_len(prev->len() + take);
      if (take == len) {
        drop_run(l, p.idx);
        return {l, p.idx, 0};
      }
      r = r.tail(take);
      return {l, p.idx, 0};
    }
    if (p.off + take == len && next && continues(gone, *next)) {  // grow the tombstone run on the right
      *next = run{gone.replica, gone.seq, gone.lamport, (next->len() + take) | run::deleted_bit};
      if (p.off == 0) {  // the whole run went: drop it
        drop_run(l, p.idx);
        return {l, p.idx + 1, 0};
      }
      r.set_len(p.off);
      return {l, p.idx + 2, 0};
    }
    if (p.off == 0 && take == len) {
      r.len_del |= run::deleted_bit;
      return {l, p.idx + 1, 0};
    }
    if (p.off == 0) {  // [deleted][rest]
      const run rest = r.tail(take);
      r.len_del = take | run::deleted_bit;
      add_live(l, -static_cast<std::int64_t>(rest.live()));
      return insert_runs(l, p.idx + 1, &rest, 1, 0);
    }
    const run rest = r.tail(p.off + take);
    r.set_len(p.off);
    const std::uint32_t moved = len - p.off - take;
    add_live(l, -static_cast<std::int64_t>(moved));
    const run two[2] = {gone, rest};
    place q = insert_runs(l, p.idx + 1, two, moved ? 2 : 1, 0);
    return {q.leaf, q.idx + 1, 0};
  }

  // ---- op log ---------------------------------------------------------------------------------

  /// Appends to the log, extending the last entry when the new one continues it.
  void log_append(const log_entry& e) {
    if (!log_.empty()) {
      log_entry& last = log_.back();
      if (last.kind == e.kind && last.replica == e.replica && last.seq + last.len == e.seq && last.lamport + last.len == e.lamport) {
        if (e.kind == op_kind::insert) {
          if (e.ref_replica == e.replica && e.ref_seq + 1 == e.seq) {
            last.len += e.len;
            return;
          }
        } else if (e.ref_replica == last.ref_replica) {
          const std::uint32_t lt = last.last_target();
          if ((!last.backward || last.len == 1) && (!e.backward || e.len == 1) && e.ref_seq == lt + 1) {
            last.backward = false, last.len += e.len;
            return;
          }
          if ((last.backward || last.len == 1) && (e.backward || e.len == 1) && lt != 0 && e.ref_seq == lt - 1) {
            last.backward = true, last.len += e.len;
            return;
          }
        }
      }
    }
    reps_[e.replica].log_pos.push_back(static_cast<std::uint32_t>(log_.size()));
    log_.push_back(e);
  }

  /// Adds to `picks` the log entries of replica `rep` holding seqs [from, to).
  void collect(std::uint32_t rep, std::uint32_t from, std::uint32_t to, std::vector<std::pair<std::uint32_t, std::uint32_t>>& picks) const {
    if (from >= to) return;
    const auto& lp = reps_[rep].log_pos;
    auto it = std::upper_bound(lp.begin(), lp.end(), from, [&](std::uint32_t s, std::uint32_t pos) { return s < log_[pos].seq; });
    if (it != lp.begin()) --it;
    for (; it != lp.end() && log_[*it].seq < to; ++it) {
      const log_entry& e = log_[*it];
      if (e.seq + e.len <= from) continue;
      picks.emplace_back(*it, from > e.seq ? from - e.seq : 0);
    }
  }

  op_batch<T> emit(const std::vector<std::pair<std::uint32_t, std::uint32_t>>& picks, bool with_content, const version_vector* upto) const {
    op_batch<T> b;
    b.ops.reserve(picks.size());
    for (auto [pos, skip] : picks) {
      const log_entry& e = log_[pos];
      const replica_state& rs = reps_[e.replica];
      std::uint32_t len = e.len - skip;
      if (upto) len = std::min(len, upto->get(rs.id) - (e.seq + skip));
      op o;
      o.kind = e.kind, o.id = {rs.id, e.seq + skip}, o.lamport = e.lamport + skip, o.len = len, o.backward = e.backward;
      if (e.kind == op_kind::insert) {
        if (skip)
          o.ref = {rs.id, e.seq + skip - 1};
        else
          o.ref = e.ref_replica == no_replica ? document_start : op_id{reps_[e.ref_replica].id, e.ref_seq};
        if (with_content)
          for (std::size_t k = 0, at = rs.slot(o.id.seq); k < len; ++k) b.content.push_back(rs.content[at + k]);
      } else {
        o.ref = {reps_[e.ref_replica].id, e.backward ? e.ref_seq - skip : e.ref_seq + skip};
      }
      b.ops.push_back(o);
    }
    return b;
  }

  // ---- integration ----------------------------------------------------------------------------

  /// Checks that an insert's origin, or a remove's targets (rep of `ref`, ref.seq ± k, k < len), are
  /// integrated items, and finds the first fault in the op's order. On `ready`, `at` is the place of an
  /// insert's origin (null leaf for document_start), with `lamport` its Lamport value (0 for
  /// document_start), or of a remove's lowest target if its targets lie in one run (else a null leaf);
  /// on `missing`, `missing` is the first reference not integrated yet; on `invalid`, `why` names the
  /// first that is not an item. O(log n): a remove's integrated targets are items unless one of their
  /// replica's removes falls among them (remove_seqs), so no run beyond the first is visited.
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
      const auto& rs = reps_[rep].remove_seqs;
      auto it = std::upper_bound(rs.begin(), rs.end(), o.ref.seq, [](std::uint32_t s, const auto& r) { return s < r.first; });
      if (it != rs.begin() && (--it)->second > o.ref.seq - (o.len - 1)) return not_item(std::min(it->second - 1, o.ref.seq));
      return dep::ready;
    }
    const std::uint32_t last = o.ref.seq + (o.len - 1);  // targets ref.seq up to last
    if (o.ref.seq < next) {
      const auto& rs = reps_[rep].remove_seqs;
      auto it = std::upper_bound(rs.begin(), rs.end(), o.ref.seq, [](std::uint32_t s, const auto& r) { return s < r.second; });
      if (it != rs.end() && it->first <= std::min(last, next - 1)) return not_item(std::max(it->first, o.ref.seq));
    }
    if (last >= next) return not_integrated(std::max(o.ref.seq, next));
    return dep::ready;
  }

  /// Integrates one op of a batch whose removes are `removes` (for a pending op, the part of them
  /// that concerns it).
  outcome integrate(const op& in, const T* vals, const batch_removes& removes, bool placeholders, apply_result& res, std::string& why) {
    if (in.id.replica == 0) return why = "operation from replica 0", outcome::invalid;
    if (in.len == 0) return why = "operation of length 0", outcome::invalid;
    if (std::uint64_t(in.id.seq) + in.len > std::uint64_t(max_counter) + 1 || std::uint64_t(in.lamport) + in.len > std::uint64_t(max_counter) + 1)
      return why = "operation counter beyond 2^31", outcome::invalid;
    if (in.kind == op_kind::insert && in.backward) return why = "insert marked backward", outcome::invalid;
    const std::uint32_t rep = replica_index(in.id.replica);
    replica_state& rs = reps_[rep];
    if (in.id.seq < rs.next_seq && !same_as_integrated(rep, in, vals, removes, why)) return outcome::invalid;
    if (in.id.seq + in.len <= rs.next_seq) return res.duplicate += in.len, outcome::done;
    op o = in;
    if (o.id.seq < rs.next_seq) {  // partly known: drop the known prefix
      const std::uint32_t skip = rs.next_seq - o.id.seq;
      res.duplicate += skip;
      if (o.kind == op_kind::insert)
        o.ref = {o.id.replica, o.id.seq + skip - 1};
      else
        o.ref = o.target(skip);
      if (vals) vals += skip;
      o.id.seq += skip, o.lamport += skip, o.len -= skip;
    }
    if (o.id.seq > rs.next_seq) return park(o, vals, removes, placeholders, {o.id.replica, o.id.seq - 1}), outcome::parked;
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
    rs.next_seq += o.len;
    clock_ = std::max(clock_, o.lamport + o.len - 1);
    version_dirty_ = true;
    res.applied += o.len;
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

  void release_parked(apply_result& res) {
    release_parked_ops(
        parked_,
        [&](parked& p) {
          std::string why;
          switch (integrate(p.o, p.values.empty() ? nullptr : p.values.data(), p.removes, p.placeholders, res, why)) {
            case outcome::invalid:
              return ++rejected_, retried::invalid;
            case outcome::parked:
              return retried::parked;
            case outcome::done:
              break;
          }
          return retried::integrated;
        },
        [&](replica_id r) { return reps_[find_replica(r)].next_seq; });
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

  /// Records that seqs [seq, seq + n) of replica `rep` are a remove (not items). O(1) amortised.
  void note_remove(std::uint32_t rep, std::uint32_t seq, std::uint32_t n) {
    replica_state& r = reps_[rep];
    auto& rs = r.remove_seqs;
    if (!rs.empty() && rs.back().second == seq) {
      rs.back().second += n;
    } else {
      // Pages after the previous range's start and up to this one's: every range so far starts before them.
      r.removes_before_page.resize((seq >> index_page_bits) + 1, removes_before{static_cast<std::uint32_t>(rs.size()), r.removed_units});
      rs.emplace_back(seq, seq + n);
    }
    r.removed_units += n;
  }

  node* root_ = nullptr;
  leaf_node* first_leaf_ = nullptr;
  std::vector<replica_state> reps_;  ///< index 0 is this replica
  std::unordered_map<replica_id, std::uint32_t, id_hash> rep_index_;
  std::vector<log_entry> log_;  ///< every op, in integration order (a causal order)
  std::vector<parked> parked_;
  mutable version_vector version_;  ///< rebuilt from reps_ when dirty
  mutable bool version_dirty_ = false;
  std::uint32_t clock_ = 0;  ///< largest Lamport value integrated
  std::size_t rejected_ = 0;
  mutable leaf_node* cache_leaf_ = nullptr;  ///< leaf of the last position lookup ...
  mutable std::size_t cache_start_ = 0;      ///< ... and the live items before it;
  mutable int cache_idx_ = -1;               ///< run of that lookup in cache_leaf_ (-1: none) ...
  mutable std::size_t cache_run_start_ = 0;  ///< ... and the live items before it. Reset by any
                                             ///< change that moves that run or what precedes it.
};

}  // namespace folio::detail
