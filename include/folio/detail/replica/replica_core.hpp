// folio/detail/replica/replica_core.hpp — what both engines (detail/sequence/rga.hpp, the sequence; detail/tree/tree_doc.hpp,
// the tree) keep about replicas: the replica table, the version vector, the Lamport clock, the ops
// held for missing dependencies and how an op is admitted and released.
//
// Model:
//  * Replica table. Every replica an engine has heard of gets a local index (0 is this replica) in the
//    order it was first seen; `State` (derived from replica_base) is the engine's per-replica state,
//    `next_seq` the count of that replica's unit ops integrated. A replica's ops integrate in seq
//    order, so its integrated ops are exactly seqs [0, next_seq).
//  * The version vector is (id, next_seq) of every replica, rebuilt lazily after a change.
//  * The integrate preamble (admit): an op whose author has not integrated the op before it is parked;
//    a unit already integrated must be the op integrated under that id (the engine's same_as_integrated)
//    and is counted as a duplicate; the units not integrated yet go on to the engine.
//  * Parked ops wait for the op they name in `awaits`; release_parked retries them when it arrives.
//
// Invariants: index_of_[reps_[i].id] == i; version() == {(r.id, r.next_seq)}; clock_ is the largest
// Lamport value integrated; every parked op waits for an op not integrated when it was parked.
//
// Complexity: table lookups O(1) (keyed hash, detail/util/hash.hpp: replica ids are chosen by peers);
// version() O(1) unless dirty, O(r log r) for r replicas otherwise; release_parked O(ops x their
// dependencies x the engine's integrate).
//
// Thread-safety: none; an engine is used by one thread at a time.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "../../error.hpp"
#include "../../id.hpp"
#include "../../ops.hpp"
#include "../../version.hpp"
#include "../util/hash.hpp"
#include "id_table.hpp"

namespace folio::detail {

/// No replica: the local index of document_start's replica (an origin at the start).
inline constexpr std::uint32_t no_replica = UINT32_MAX;

/// How integrating one op ended.
enum class outcome { done, parked, invalid };

/// Checks that a batch lists each replica's ops in seq order, each id once — what every encoder writes
/// (ops_since emits the log in integration order). It bounds the work of comparing ops with the ones
/// already integrated (same_as_integrated) to the log once per batch: without it a batch of many
/// copies of one long run would compare the whole run once per copy. Shared by rga and tree_doc.
class batch_order {
 public:
  /// False, with `why`, if ops [id.seq, id.seq + len) of id.replica come at or below an earlier op's.
  bool next(op_id id, std::uint32_t len, std::string& why) {
    std::uint64_t& end = end_of(id.replica);
    if (end != unseen && id.seq < end) return out_of_order(id, end, why);
    end = std::uint64_t(id.seq) + len;
    return true;
  }

 private:
  [[gnu::noinline, gnu::cold]] static bool out_of_order(op_id id, std::uint64_t end, std::string& why) {
    why = "operations of replica " + std::to_string(id.replica) + " are not in seq order in the batch (" + std::to_string(id.seq) + " after " +
          std::to_string(end - 1) + ")";
    return false;
  }
  static constexpr std::uint64_t unseen = UINT64_MAX;
  /// The replica's entry (unseen when new): looked up in a few inline slots — a typical batch has one
  /// or two replicas, and allocates nothing — then, past them, in a hash map (a batch of many
  /// replicas stays linear).
  std::uint64_t& end_of(replica_id r) {
    for (std::size_t i = 0; i < used_; ++i)
      if (few_[i].replica == r) return few_[i].end;
    if (used_ < few_.size()) return few_[used_++] = {r, unseen}, few_[used_ - 1].end;
    return *many_.try_emplace(r, unseen).first;
  }
  struct entry {  // trivial, so that few_ is not zeroed for every batch (std::pair would be)
    replica_id replica;
    std::uint64_t end;
  };
  std::array<entry, 4> few_;  ///< the first used_ are set

  std::size_t used_ = 0;
  id_table<std::uint64_t> many_;  ///< per replica: one past the last seq listed (allocates when first used)
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

/// What every engine keeps per replica; engines derive their replica state from it.
struct replica_base {
  replica_id id = 0;
  std::uint32_t next_seq = 0;  ///< unit ops integrated (== the version entry)
};

/// The checks of an op's own id and counters, the first of the integrate preamble: not of replica 0,
/// not empty, seqs and Lamport values within 2^31 (and, with `lamport_from_1`, Lamport values from 1).
/// The fault, or nullptr; `range_message` names a counter fault (each engine keeps its own wording).
template <class Op>
const char* counter_fault(const Op& in, bool lamport_from_1, const char* range_message) noexcept {
  if (in.id.replica == 0) return "operation from replica 0";
  if (in.len == 0) return "operation of length 0";
  if (std::uint64_t(in.id.seq) + in.len > std::uint64_t(max_counter) + 1 || (lamport_from_1 && in.lamport == 0) ||
      std::uint64_t(in.lamport) + in.len > std::uint64_t(max_counter) + 1)
    return range_message;
  return nullptr;
}
/// counter_fault, with the fault in `why`.
template <class Op>
bool valid_counters(const Op& in, bool lamport_from_1, const char* range_message, std::string& why) {
  const char* fault = counter_fault(in, lamport_from_1, range_message);
  return !fault || (why = fault, false);
}

/// The replica table, version, clock and parked ops of an engine (see the top of this file). `State`
/// derives from replica_base; `Parked` has the op (`o`, with id and len) and the id it `awaits`.
/// Engines derive from it: their own code reads reps_ and rep_index_ directly.
template <class State, class Parked>
class replica_core {
 public:
  replica_id self() const noexcept { return reps_[0].id; }
  /// O(1) after the first call following a change; O(r log r) for r replicas otherwise.
  const version_vector& version() const {
    if (version_dirty_) {
      version_ = version_vector{};
      for (const State& r : reps_) version_.observe(r.id, r.next_seq);
      version_dirty_ = false;
    }
    return version_;
  }
  /// Unit operations held because their causal dependencies have not arrived.
  std::size_t pending() const noexcept {
    std::size_t n = 0;
    for (const Parked& p : parked_) n += p.o.len;
    return n;
  }
  /// Operations (one each, whatever its length) dropped because, once their dependencies arrived,
  /// they proved invalid.
  std::size_t rejected() const noexcept { return rejected_; }
  /// Largest Lamport value integrated (a local op of the sequence takes clock() + 1).
  std::uint32_t clock() const noexcept { return clock_; }
  /// Unit operations integrated, of every replica: the sum of the version's counts, kept as they
  /// advance (the seqs of a remove count however many items it targets; what a record holds is the
  /// engine's units()). O(1).
  std::uint64_t version_total() const noexcept { return units_; }

 protected:
  explicit replica_core(replica_id me) {
    if (me == 0) fail(error_code::replica, "replica id 0 is reserved");
    replica_index(me);
  }
  replica_core(replica_core&&) noexcept = default;
  replica_core& operator=(replica_core&&) noexcept = default;
  ~replica_core() = default;

  /// Local index of replica `id`, added to the table if new.
  std::uint32_t replica_index(replica_id id) {
    if (const std::uint32_t known = find_replica(id); known != no_replica) return known;
    const auto index = static_cast<std::uint32_t>(reps_.size());
    rep_index_.try_emplace(id, index);
    reps_.emplace_back();
    reps_.back().id = id;
    return index;
  }
  /// Local index of `id`, or no_replica. The last replica found is remembered: a stream of one
  /// client's batches looks up the same replica again and again.
  std::uint32_t find_replica(replica_id id) const {
    if (id == last_found_.first && id != 0) return last_found_.second;
    return find_replica_in_table(id);
  }
  /// find_replica past the last replica found.
  [[gnu::noinline]] std::uint32_t find_replica_in_table(replica_id id) const {
    const std::uint32_t* index = rep_index_.find(id);
    if (!index) return no_replica;
    last_found_ = {id, *index};
    return *index;
  }
  /// True if op `id` is integrated.
  bool integrated(const op_id& id) const {
    const std::uint32_t i = find_replica(id.replica);
    return i != no_replica && id.seq < reps_[i].next_seq;
  }

  /// The integrate preamble once the op's own fields are valid (valid_counters and the engine's
  /// checks), for `in` of replica index `rep`: parked (`park(awaits)`) if its author's previous op is
  /// missing; invalid if the units of it already integrated are not the ops integrated under those
  /// ids (`same()` false, with the engine's why); done if every unit is integrated (duplicates).
  /// Otherwise `go(skip)` integrates the units from `skip` on (the first `skip` were integrated
  /// before: counted as duplicates, and the engine trims them off).
  template <class Op, class Park, class Same, class Go>
  outcome admit(std::uint32_t rep, const Op& in, apply_result& res, Park&& park, Same&& same, Go&& go) {
    const std::uint32_t next = reps_[rep].next_seq;
    if (in.id.seq > next) return park(op_id{in.id.replica, in.id.seq - 1}), outcome::parked;
    if (in.id.seq < next && !same()) return outcome::invalid;
    if (in.id.seq + in.len <= next) return res.duplicate += in.len, outcome::done;
    const std::uint32_t skip = next - in.id.seq;
    res.duplicate += skip;
    return go(skip);
  }

  /// Records that units [next_seq, next_seq + len) of replica `rep`, with Lamport values from
  /// `lamport`, are integrated.
  void advance(std::uint32_t rep, std::uint32_t lamport, std::uint32_t len, apply_result& res) {
    reps_[rep].next_seq += len;
    units_ += len;
    clock_ = std::max(clock_, lamport + len - 1);
    version_dirty_ = true;
    res.applied += len;
  }
  /// The same for `n` local units, which take the next Lamport values.
  void advance_local(std::uint32_t n) {
    reps_[0].next_seq += n;
    units_ += n;
    clock_ += n;
    version_dirty_ = true;
  }

  /// The end of a batch: releases the parked ops if it integrated anything (`retry(p)` integrates p
  /// again, parking it anew if it still misses something) and reports what still waits.
  template <class Retry>
  void finish_batch(apply_result& res, Retry&& retry) {
    if (res.applied != 0 && !parked_.empty()) release_parked(retry);
    res.pending = pending();
  }

  /// Releases the parked ops: each is tried once, then again only when its awaited replica's next seq
  /// has passed the one it waits for: O(ops x their dependencies x log), not quadratic, as trying every
  /// parked op until a pass made no progress would be for a batch listing each op before the one it
  /// needs. An op that proves invalid is dropped and counted
  /// in rejected(). What still waits at the end is left in `parked_`, in the order it came.
  template <class Retry>
  void release_parked(Retry&& retry) {
    std::deque<Parked> ready(std::make_move_iterator(parked_.begin()), std::make_move_iterator(parked_.end()));
    parked_.clear();
    // Per awaited replica, a min-heap by (seq awaited, arrival order): the ops that wait for it.
    struct waiter {
      std::uint32_t seq;
      std::size_t arrival;
      Parked p;
    };
    const auto later = [](const waiter& a, const waiter& b) { return a.seq != b.seq ? a.seq > b.seq : a.arrival > b.arrival; };
    id_table<std::uint32_t> heap_of;  // awaited replica -> its heap in `heaps`
    std::vector<std::vector<waiter>> heaps;
    std::size_t arrival = 0;
    while (!ready.empty()) {
      Parked p = std::move(ready.front());
      ready.pop_front();
      const replica_id author = p.o.id.replica;
      switch (retry(p)) {
        case outcome::parked: {
          Parked q = std::move(parked_.back());
          parked_.pop_back();
          const op_id awaits = q.awaits;
          const auto [at, added] = heap_of.try_emplace(awaits.replica, static_cast<std::uint32_t>(heaps.size()));
          if (added) heaps.emplace_back();
          std::vector<waiter>& h = heaps[*at];
          h.push_back(waiter{awaits.seq, arrival++, std::move(q)});
          std::push_heap(h.begin(), h.end(), later);
          break;
        }
        case outcome::done: {
          const std::uint32_t* at = heap_of.find(author);
          if (!at) break;
          std::vector<waiter>& h = heaps[*at];
          const std::uint32_t next = reps_[find_replica(author)].next_seq;
          while (!h.empty() && h.front().seq < next) {
            std::pop_heap(h.begin(), h.end(), later);
            ready.push_back(std::move(h.back().p));
            h.pop_back();
          }
          break;
        }
        case outcome::invalid:
          ++rejected_;
          break;
      }
    }
    std::vector<waiter> left;
    for (std::vector<waiter>& h : heaps)
      for (waiter& w : h) left.push_back(std::move(w));
    std::sort(left.begin(), left.end(), [](const waiter& a, const waiter& b) { return a.arrival < b.arrival; });
    for (waiter& w : left) parked_.push_back(std::move(w.p));
  }

  /// Heap bytes of the table (states counted by capacity; their own heap blocks are the engine's).
  std::size_t table_memory_usage() const noexcept {
    return reps_.capacity() * sizeof(State) + rep_index_.memory_usage();
  }

  std::vector<State> reps_;  ///< index 0 is this replica
  id_table<std::uint32_t> rep_index_;
  mutable std::pair<replica_id, std::uint32_t> last_found_{0, 0};  ///< find_replica's last answer (replica 0: none); replicas are never removed
  std::vector<Parked> parked_;       ///< ops held for a missing dependency, in the order they came
  mutable version_vector version_;   ///< rebuilt from reps_ when dirty
  mutable bool version_dirty_ = false;
  std::uint32_t clock_ = 0;  ///< largest Lamport value integrated
  std::uint64_t units_ = 0;  ///< the sum of reps_' next_seq
  std::size_t rejected_ = 0;
};

}  // namespace folio::detail
