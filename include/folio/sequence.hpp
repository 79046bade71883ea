// folio/sequence.hpp — the public face of the RGA shared by `text` and `array`.
//
// A `sequence<T>` is one replica's copy of a replicated sequence: local edits by position return the
// ids of the operations they made (`ops(change)` turns them into a batch to send); remote batches are
// integrated in any order with `apply`; `ops_since(version)` answers what a peer lacks; `encode` and
// `decode` store the whole document with its causal history.
//
// Complexity: position and id lookups O(log n); a local edit that continues the previous one O(1)
// amortised; `apply` O(ops · log n) plus O(log n) per run its removes newly delete (amortised: a run
// deleted otherwise is passed once more at most), however many concurrent siblings an insert passes.
// Memory is about 16 bytes per run of items plus one value per inserted item (text: 1 byte while all
// code points are < 256).
// Thread-safety: none; one thread at a time per document (reads included: lookups refresh a cache).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "detail/sequence/rga.hpp"
#include "encoding.hpp"
#include "ops.hpp"
#include "version.hpp"

namespace folio {

class document;

template <class T>
class sequence {
  friend class document;  // whose apply hands a decoded keystroke to impl_.try_integrate_next

 public:
  using value_type = T;

  /// An empty sequence edited as replica `self` (non-zero, unique among the document's replicas).
  /// Throws "[folio.replica]" for 0. Allocates one leaf.
  explicit sequence(replica_id self) : impl_(self) {}

  replica_id replica() const noexcept { return impl_.self(); }
  /// Live values. O(1).
  std::size_t size() const noexcept { return impl_.size(); }
  bool empty() const noexcept { return size() == 0; }
  /// The operations integrated so far, per replica. O(1), or O(r log r) to rebuild after a change.
  const version_vector& version() const { return impl_.version(); }

  /// Inserts `n` values before `pos`. Throws "[folio.range]" if pos > size(), and for text
  /// "[folio.value]" for a value that is not a Unicode scalar value (nothing is inserted then).
  /// O(log n), O(1) when continuing the previous insert; allocates only when a node or log grows.
  local_change insert(std::size_t pos, const T* values, std::size_t n) { return impl_.insert(pos, values, n); }
  local_change insert(std::size_t pos, const std::vector<T>& values) { return impl_.insert(pos, values.data(), values.size()); }
  /// Removes `n` values from `pos`. Throws "[folio.range]" if pos + n > size().
  /// O(log n + runs touched); removed values stay in memory (tombstones) but leave the encoding.
  local_change erase(std::size_t pos, std::size_t n) { return impl_.erase(pos, n); }

  /// Integrates a remote batch in any order, idempotently; ops whose dependencies are missing wait as
  /// pending (see detail::rga::apply for the exact contract). O(ops · log n); allocates for new runs
  /// and pending ops. Never throws for bad ops: they come back as `invalid` with the op index.
  apply_result apply(const op_batch<T>& batch) { return impl_.apply(batch); }
  /// Calls f(op index, value) for each value of `batch` that can show here once it is integrated (an
  /// item not integrated yet that the batch does not itself remove); stops, returning false, when f
  /// returns false. What a rule on values judges (document::apply). O(units log removes).
  template <class F>
  bool for_each_showable_value(const op_batch<T>& batch, F&& f) const {
    return impl_.for_each_showable_value(batch, std::forward<F>(f));
  }
  /// What a replica at `since` lacks, in causal order. O(r log L + k log k); allocates the batch.
  op_batch<T> ops_since(const version_vector& since) const { return impl_.ops_since(since); }
  /// What a replica at `since` lacks of the operations in `upto`.
  op_batch<T> ops_between(const version_vector& since, const version_vector& upto) const { return impl_.ops_since(since, &upto); }
  /// The batch of one local change (empty if its ops are unknown here). Allocates the batch.
  op_batch<T> ops(const local_change& change) const { return impl_.ops(change); }

  /// What the sequence holds: its inserted items (deleted or not) and one per remove in its op log,
  /// whatever the remove's length — what decode counts against max_ops. O(1).
  std::uint64_t units() const noexcept { return impl_.units(); }
  /// Items inserted plus items deleted: what the Lamport headroom rule measures a clock against
  /// (document::apply_options::bounded_lamport). O(1).
  std::uint64_t changed() const noexcept { return impl_.changed(); }
  /// What integrating `batch` would add to changed(): its units not integrated yet, except that a
  /// remove counts only the distinct items it targets that are not deleted yet — the batch's changing
  /// units of the Lamport headroom rule. Changes nothing visible (it may note deleted stretches, a
  /// cache). O(ops log ops) plus the targets' runs.
  std::uint64_t changing_units(const op_batch<T>& batch) { return impl_.changing_units(batch.ops, UINT64_MAX); }
  /// Largest Lamport value integrated (a local op takes clock() + 1). O(1).
  std::uint32_t clock() const noexcept { return impl_.clock(); }
  /// pending(): unit operations waiting for causal dependencies; rejected(): operations (one each,
  /// whatever its length) dropped as invalid once those arrived.
  std::size_t pending() const noexcept { return impl_.pending(); }
  std::size_t rejected() const noexcept { return impl_.rejected(); }

  /// The live value at `pos`. O(log n). Throws "[folio.range]".
  T at(std::size_t pos) const { return impl_.at(pos); }
  /// Ids of the live values [pos, pos + n) as runs of consecutive ids of one replica, in document
  /// order: (first id, count). An id names its value on every replica, so comparing the ids before and
  /// after a change tells which values it inserted and removed. O(log n + runs). Throws "[folio.range]"
  /// past the end.
  std::vector<std::pair<op_id, std::uint32_t>> live_ids(std::size_t pos, std::size_t n) const { return impl_.live_ids(pos, n); }
  /// The id of the live value at `pos` (an anchor: the value keeps its id wherever concurrent edits
  /// move it). O(log n). Throws "[folio.range]" past the end.
  op_id id_at(std::size_t pos) const { return impl_.id_at(pos); }
  /// The position of value `id` now: its index while live; once removed, the number of live values
  /// before it (where it was). Nullopt for an id that names no value here (not integrated yet, or the
  /// id of a remove). `live`, when given, says whether it is live. O(log n).
  std::optional<std::size_t> index_of(op_id id, bool* live = nullptr) const { return impl_.index_of(id, live); }
  /// Calls f(const T&) for each live value in order. O(n).
  template <class F>
  void for_each(F&& f) const {
    impl_.for_each(std::forward<F>(f));
  }
  /// Calls f(op_id item, const T& value, const std::vector<op_id>& removes) for every item ever
  /// inserted, live or removed, in document order, with the ids of the remove unit operations that
  /// targeted it (none for a live item). An item is in a version v when v contains its id and none of
  /// its removes: what a diff between two versions reads (docs/INTERNALS.md, "Checkout and rebase").
  /// A removed item's value is T{} unless the document kept it (kept_values::all). Expected O(items +
  /// remove units); allocates a table of the removes' targets.
  template <class F>
  void for_each_item_with_removes(F&& f) const {
    impl_.for_each_item_with_removes(std::forward<F>(f));
  }
  std::vector<T> values() const {
    std::vector<T> v;
    v.reserve(size());
    impl_.for_each([&](const T& x) { v.push_back(x); });
    return v;
  }

  /// Verifies all invariants (docs/INTERNALS.md); throws "[folio.invariant] ..." on a violation.
  void check_invariants() const { impl_.check_invariants(); }
  /// Heap bytes held by this replica.
  std::size_t memory_usage() const { return impl_.memory_usage(); }
  /// Runs in document order and entries in the op log (for diagnostics and benchmarks).
  std::size_t run_count() const noexcept { return impl_.run_count(); }
  std::size_t log_size() const noexcept { return impl_.log_size(); }

  /// The whole document: op log (full causal history) + live values (format version 2), and with
  /// kept_values::all the removed items' values too, in document order (version 3). Pending ops are
  /// not included. O(L + n), n the values written; allocates the output.
  /// `content_key` is the name of the record's root (docs/API.md, the /v2/crdt endpoints), kept with the document.
  std::string encode(std::string_view content_key = "content", kept_values kept = kept_values::live) const {
    std::string out;
    detail::put_header(out, detail::kind_document, detail::value_type_of<T>(), kept);
    detail::put_content_key(out, content_key);
    detail::put_document_ops(out, impl_.ops_since(version_vector{}, nullptr, false).ops);
    detail::put_document_content(out, values());
    if (kept == kept_values::all) {
      std::vector<T> removed;
      removed.reserve(static_cast<std::size_t>(impl_.removed_count()));
      impl_.for_each_removed_span([&](const auto& content, std::size_t at, std::size_t n) {
        for (std::size_t k = 0; k < n; ++k) removed.push_back(content[at + k]);
      });
      detail::put_document_content(out, removed);
    }
    return out;
  }

  /// Default for `decode`'s `max_ops`: every inserted item costs memory (a value slot) even when its
  /// value was dropped from the encoding, so a few bytes could otherwise claim 2^31 items.
  static constexpr std::size_t default_max_ops = std::is_same_v<T, char32_t> ? std::size_t(1) << 26 : std::size_t(1) << 22;

  /// Rebuilds a document from untrusted bytes as replica `self`. A document whose op log holds more
  /// than `max_ops` units (its inserted items and one per remove: units()) is refused (too_large).
  /// Removed items get their values from a version 3 document, placeholders (T{}) from the others.
  /// `out` is left unchanged on failure.
  /// The document's root name goes to `content_key` when given.
  static decode_result decode(std::string_view bytes, replica_id self, sequence& out, std::size_t max_ops = default_max_ops,
                              std::string* content_key = nullptr) {
    detail::byte_reader r(bytes);
    op_batch<T> log;
    std::vector<T> live;
    std::string key;
    unsigned char version = 0;
    if (!detail::read_header(r, detail::kind_document, detail::value_type_of<T>(), &version) || !detail::read_content_key(r, key)) return r.result();
    const std::size_t ops_at = r.offset();
    if (!detail::read_document_ops(r, log.ops, version)) return r.result();
    std::uint64_t inserted = 0, removes = 0;  // the log, one op per entry: what the document holds (units())
    for (const op& o : log.ops) o.kind == op_kind::insert ? inserted += o.len : ++removes;
    if (inserted + removes > max_ops) return decode_result{decode_status::too_large, ops_at, "document holds more operations than the limit"};
    const std::size_t content_at = r.offset();  // live values are at most the items inserted: the content section's bound
    if (!detail::read_document_content(r, live, version, inserted)) return r.result();
    const std::size_t removed_at = r.offset();  // so are the removed values (version 3)
    std::vector<T> removed;
    if (version == 3 && !detail::read_document_content(r, removed, version, inserted, "removed values", "after the removed values")) return r.result();
    if (!r.at_end()) return r.fail(decode_status::trailing_bytes, "after document"), r.result();
    detail::rga<T> doc(self);
    const apply_result res = doc.apply(log, detail::rga<T>::content_mode::placeholders);
    if (!res || res.pending != 0) return decode_result{decode_status::inconsistent, ops_at, "op log does not integrate"};
    if (!doc.assign_live_values(live)) return decode_result{decode_status::inconsistent, content_at, "live value count differs from the op log"};
    if (version == 3 && !doc.assign_removed_values(removed))
      return decode_result{decode_status::inconsistent, removed_at, "removed value count differs from the op log"};
    out.impl_ = std::move(doc);
    if (content_key) *content_key = std::move(key);
    return {};
  }

 protected:
  detail::rga<T> impl_;
};

}  // namespace folio
