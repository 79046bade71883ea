// folio/detail/encoding/op_codec.hpp — the op table that every wire encoding of operations is made of: text
// and array records (encoding.hpp, sequence_op_format) and map and xml records (tree_encoding.hpp,
// tree_op_format). docs/FORMAT.md has the field tables.
//
//   replica count n, then n replica ids (varints; non-zero, distinct; in order of first appearance
//   among the ops' ids and the replicas they name), op count m, then m records. A record is a flags
//   byte, then the delta-coded fields the flags say are not implied, in this order:
//     replica index   else the previous record's replica
//     seq             else where this replica's previous record ended (its first record must give it)
//     Lamport         a zigzag delta from the previous record's lamport + len; else that value
//     len             else 1
//   then the record type's own fields (its format's payload).
//
// Where these four flag bits sit, the other bits of the flags byte and the payload are the format's:
// a Format type gives `header_bits bits` and hooks. Writing (put_op_table):
//   void add_references(replica_table_writer&, const Op&)   the replicas an op names besides its own,
//                                                           in the order they first appear
//   std::uint8_t own_flags(const Op&)                       the format's flag bits
//   void put_payload(std::string&, const Op&, std::uint8_t flags, const replica_table_writer&)
// Reading (read_op_table), from untrusted bytes:
//   void reserve(std::uint64_t ops)                         op count, checked against the bytes left
//   bool check_flags(byte_reader&, std::uint8_t flags)      refuses bits the format does not allow
//   bool read_payload(byte_reader&, std::uint8_t flags, const op_header&, std::span<const replica_id>)
//                                                           reads the rest, hands the op on if r.ok()
// Every count is checked against the bytes left before anything is allocated, every index and counter
// against its range; the first failure is latched in the byte_reader (offset, status, field name).
// O(n + m) expected for n replicas and m records (hashed replica lookup when writing, a sort when
// reading the table).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../../error.hpp"
#include "../../id.hpp"
#include "../replica/id_table.hpp"
#include "../util/small_vector.hpp"
#include "varint.hpp"

namespace folio::detail {

/// The replica table of an encoding being written: ids in order of first appearance, each found by
/// hash (a document gains a replica per editing session, so a scan of the table per op would be
/// quadratic; replica ids are chosen by peers, hence the keyed id_hash).
class replica_table_writer {
 public:
  /// Adds `id` if new (any id, 0 included: a forged op of replica 0 is written as it is and refused
  /// by the reader). Returns its index.
  std::size_t add(replica_id id) {
    if (id == last_id_ && !ids_.empty()) return last_index_;
    const auto [index, added] = index_.try_emplace(id, ids_.size());
    if (added) ids_.push_back(id);
    last_id_ = id, last_index_ = *index;
    return *index;
  }
  /// Adds a replica that a reference names; 0 (the document start, the root object) is no replica.
  void add_reference(replica_id id) {
    if (id != 0) add(id);
  }
  /// Index of a replica added before.
  std::size_t index(replica_id id) const {
    if (id == last_id_ && !ids_.empty()) return last_index_;
    const std::size_t* i = index_.find(id);
    if (!i) fail(error_code::internal, "replica " + std::to_string(id) + " was not added to the table");
    return *i;
  }
  /// A reference's replica: 0 for none (replica 0), else index + 1.
  std::size_t ref_index(replica_id id) const { return id == 0 ? 0 : index(id) + 1; }
  std::size_t size() const noexcept { return ids_.size(); }
  /// Count, then the ids.
  void put(std::string& out) const {
    put_varint(out, ids_.size());
    for (replica_id id : ids_) put_varint(out, id);
  }

 private:
  std::vector<replica_id> ids_;
  id_table<std::size_t> index_;
  replica_id last_id_ = 0;  ///< the last id added or found, and its index (runs of one replica's ops)
  std::size_t last_index_ = 0;
};

/// Reads a replica table (count, then that many replica ids as varints; non-zero and distinct) into
/// `reps`, for the op tables of every value type (read_op_table). A failure is reported where a reader
/// going id by id would first see it: the id that repeats an earlier one, the id 0, or the byte that
/// ends the table early, whichever comes first. O(n log n) for n ids: up to 8 ids, each is compared
/// with those before it as it is read; past that, duplicates are found by sorting a copy (no hash
/// table, whose buckets chosen ids could crowd).
template <class Reps>
bool read_replica_table(byte_reader& r, Reps& reps) {
  reps.clear();
  const std::uint64_t n = r.varint("replica count");
  if (n > r.remaining()) return r.fail(decode_status::too_large, "replica count");
  reps.reserve(static_cast<std::size_t>(n));  // n <= remaining()
  if (n <= 8) {  // a typical batch: one or two replicas, each checked against those before it as it is read
    for (std::uint64_t i = 0; i < n; ++i) {
      const replica_id id = r.varint("replica id");
      if (!r.ok()) return false;
      for (std::size_t j = 0; j < reps.size(); ++j)
        if (reps[j] == id) return r.fail_at(r.offset(), decode_status::inconsistent, "replica listed twice");
      if (id == 0) return r.fail_at(r.offset(), decode_status::inconsistent, "replica id 0");
      reps.push_back(id);
    }
    return r.ok();  // false when the count itself failed
  }
  small_vector<std::size_t, 8> ends;  // the offset after each id read
  ends.reserve(static_cast<std::size_t>(n));
  byte_reader ahead = r;  // reads on; `r` takes its state unless a duplicate comes before its stop
  bool zero = false;
  while (reps.size() < n && ahead.ok() && !zero) {
    reps.push_back(ahead.varint("replica id"));
    if (!ahead.ok()) {
      reps.pop_back();
      break;
    }
    ends.push_back(ahead.offset());
    zero = reps.back() == 0;
  }
  std::size_t first_repeat = SIZE_MAX;  // the first id, in table order, that an earlier one equals
  {
    std::vector<std::pair<replica_id, std::size_t>> sorted;  // (id, index), to find repeats
    sorted.reserve(reps.size());
    for (std::size_t i = 0; i < reps.size(); ++i) sorted.emplace_back(reps[i], i);
    std::sort(sorted.begin(), sorted.end());
    for (std::size_t i = 1; i < sorted.size(); ++i)
      if (sorted[i].first == sorted[i - 1].first) first_repeat = std::min(first_repeat, sorted[i].second);
  }
  if (first_repeat != SIZE_MAX)  // before any 0 or the end of the bytes: a reader going in order stops there first
    return r.fail_at(ends[first_repeat], decode_status::inconsistent, "replica listed twice");
  r = ahead;
  if (zero) return r.fail_at(ends.back(), decode_status::inconsistent, "replica id 0");
  return r.ok();
}

/// Where a format's flags byte keeps the bits that say a delta-coded field follows.
struct header_bits {
  std::uint8_t replica, seq, lamport, len;
};

/// The delta-coded fields of a record as read, checked: seq + len and lamport + len are at most
/// max_counter + 1, lamport at least 1, len at least 1.
struct op_header {
  std::size_t rep;  ///< index of the op's replica in the table
  op_id id;
  std::uint32_t lamport, len;
};

/// The checks of an op's counters as read, version 1 records and version 2 columns alike: length at
/// least 1 (refused in `at_len`), Lamport values from 1 and seqs and Lamport values within
/// max_counter + 1 (refused in `at_header`; a record has one reader for both).
inline bool check_op_counters(byte_reader& at_len, byte_reader& at_header, std::uint64_t seq, std::int64_t lam, std::uint64_t len) {
  const std::uint64_t limit = std::uint64_t(max_counter) + 1;
  if (len == 0) return at_len.fail(decode_status::inconsistent, "op length 0");
  if (lam < 1 || std::uint64_t(lam) + len > limit) return at_header.fail(decode_status::out_of_range, "op lamport out of range");
  if (seq + len > limit) return at_header.fail(decode_status::out_of_range, "op seq + length out of range");
  return true;
}

/// Writes the records of an op table, op by op, with the delta coding of op_codec.hpp: replica indices
/// from `table` (an op's replicas are added if new, so the table may be built as the records are
/// written, or beforehand by the same ops in the same order: the indices are the same).
template <class Format>
struct op_record_writer {
  Format& format;
  replica_table_writer& table;
  std::vector<std::uint64_t> next{};  ///< per replica index: the seq that follows its last op
  std::uint64_t prev_rep = UINT64_MAX, lamport = 0;

  template <class Op>
  void put(std::string& out, const Op& o) {
    constexpr header_bits bits = Format::bits;
    const std::size_t ri = table.add(o.id.replica);
    format.add_references(table, o);
    if (next.size() < table.size()) next.resize(table.size(), UINT64_MAX);
    std::uint8_t flags = format.own_flags(o);
    if (ri != prev_rep) flags |= bits.replica;
    if (next[ri] != o.id.seq) flags |= bits.seq;
    if (o.lamport != lamport) flags |= bits.lamport;
    if (o.len != 1) flags |= bits.len;
    out.push_back(static_cast<char>(flags));
    if (flags & bits.replica) put_varint(out, ri);
    if (flags & bits.seq) put_varint(out, o.id.seq);
    if (flags & bits.lamport) put_varint(out, zigzag(std::int64_t(o.lamport) - std::int64_t(lamport)));
    if (flags & bits.len) put_varint(out, o.len);
    format.put_payload(out, o, flags, table);
    prev_rep = ri;
    next[ri] = std::uint64_t(o.id.seq) + o.len;
    lamport = std::uint64_t(o.lamport) + o.len;
  }
};

/// Writes an op table of the ops that `each(f)` passes to `f` (one at a time; `each` is called once).
/// The replica table comes first in the encoding but is known only at the end: the records are written
/// first and the table and count then put in front of them (one move of the bytes, where a second pass
/// would read every op twice; a packed log would unpack each twice).
template <class Format, class Each>
void put_op_table(std::string& out, Format& format, Each&& each) {
  replica_table_writer table;
  op_record_writer<Format> records{format, table};
  const std::size_t start = out.size();
  std::size_t count = 0;
  each([&](const auto& o) {
    ++count;
    records.put(out, o);
  });
  std::string head;
  table.put(head);
  put_varint(head, count);
  out.insert(start, head);
}

/// put_op_table's bytes, appended to `out` and handed on by `flush(out)` whenever `out` holds `piece`
/// bytes or more (flush sends and empties it), instead of built whole: the replica table and the count,
/// which come first, are found by a first call of `each`, and the records written by a second, which
/// must pass the same ops in the same order. Memory: the replica table and a piece, whatever the ops.
template <class Format, class Each, class Flush>
void put_op_table_in_pieces(std::string& out, Format& format, Each&& each, Flush&& flush, std::size_t piece) {
  replica_table_writer table;
  std::size_t count = 0;
  each([&](const auto& o) {
    ++count;
    table.add(o.id.replica);
    format.add_references(table, o);
  });
  table.put(out);
  put_varint(out, count);
  op_record_writer<Format> records{format, table};
  each([&](const auto& o) {
    records.put(out, o);
    if (out.size() >= piece) flush(out);
  });
}

/// Reads an op table from untrusted bytes, passing each record's flags and checked header to the
/// format (which reads the payload and keeps the op); stops at the first malformed byte.
template <class Format>
bool read_op_table(byte_reader& r, Format& format) {
  constexpr header_bits bits = Format::bits;
  small_vector<replica_id, 8> reps;
  if (!read_replica_table(r, reps)) return false;
  const std::size_t nrep = reps.size();
  const std::uint64_t nops = r.varint("op count");
  if (nops > r.remaining()) return r.fail(decode_status::too_large, "op count");
  format.reserve(nops);
  small_vector<std::uint64_t, 8> next;
  next.resize(nrep, UINT64_MAX);
  std::size_t cur = SIZE_MAX;  // index in reps of the op's replica (bounded below: a size_t)
  std::uint64_t lamport = 0;
  for (std::uint64_t i = 0; i < nops && r.ok(); ++i) {
    const std::uint8_t flags = r.byte("op flags");
    if (!format.check_flags(r, flags)) return false;
    if (flags & bits.replica) cur = static_cast<std::size_t>(r.varint("op replica", nrep == 0 ? 0 : nrep - 1));
    if (!r.ok()) break;
    if (cur >= nrep) return r.fail(decode_status::bad_reference, "op replica");
    const std::uint64_t seq = (flags & bits.seq) ? r.varint("op seq", max_counter) : next[cur];
    if (r.ok() && seq > max_counter) return r.fail(decode_status::bad_reference, "op seq (first op of a replica must give it)");
    std::int64_t lam = std::int64_t(lamport);
    if (flags & bits.lamport) lam += r.svarint("op lamport");
    const std::uint64_t len = (flags & bits.len) ? r.varint("op length", max_counter) : 1;
    if (!r.ok()) break;
    if (!check_op_counters(r, r, seq, lam, len)) return false;
    const op_header h{cur, {reps[cur], static_cast<std::uint32_t>(seq)}, static_cast<std::uint32_t>(lam), static_cast<std::uint32_t>(len)};
    if (!format.read_payload(r, flags, h, std::span<const replica_id>(reps.data(), reps.size()))) return false;
    next[cur] = seq + len;
    lamport = std::uint64_t(lam) + len;
  }
  return r.ok();
}

}  // namespace folio::detail
