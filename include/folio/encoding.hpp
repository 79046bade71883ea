// folio/encoding.hpp — compact binary encoding of op batches and whole documents.
//
// One format serves both (docs/FORMAT.md has the field tables and a worked example):
//
//   offset  size  field
//   0       2     magic "Fo" (0x46 0x6F)
//   2       1     format version, 1
//   3       1     kind: 'B' (0x42) op batch, 'D' (0x44) document
//   4       1     value type: 1 text (code points), 2 array (JSON values as bytes), 3 map, 4 xml
//   5       var   document only: root name (contentKey), length + UTF-8
//   ...     var   replica count n, then n replica ids (varints; non-zero, distinct)
//   ...     var   op count m, then m op records (below; map and xml: detail/tree_encoding.hpp)
//   ...     var   content: text = byte length + UTF-8; array = count + (length + bytes) each
//
// Op record: a flags byte, then only the fields the flags say are not implied:
//   0x01 remove (else insert)          0x02 replica index follows (else: the previous op's replica)
//   0x04 seq follows (else: where this replica's previous op in the input ended)
//   0x08 zigzag Lamport delta follows (else: previous op's lamport + len)
//   0x10 len follows (else 1)          0x20 reference replica follows: 0 = document start, k = index k-1
//                                           (else: the op's own replica)
//   0x40 backward remove               0x80 reserved, must be 0
//   then the reference seq: zigzag(ref - (seq - 1)) for the op's own replica, a plain varint otherwise.
//
// A batch carries the values of all its inserts, in op order. A document is the whole op log (so the
// full causal history: every id, every origin, every remove) plus only the *live* values in document
// order; deleted values are dropped. Decoding rebuilds the document by integrating the log.
//
// Decoders take untrusted bytes: every count is checked against the bytes left before anything is
// allocated, every index and counter against its range; failures return a decode_result with the byte
// offset. Thread-safety: free functions over values.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "detail/hash.hpp"
#include "detail/utf8.hpp"
#include "detail/varint.hpp"
#include "error.hpp"
#include "ops.hpp"

namespace folio {

namespace detail {

inline constexpr unsigned char format_version = 1;
inline constexpr unsigned char kind_batch = 'B', kind_document = 'D';

template <class T>
constexpr unsigned char value_type_of() {
  if constexpr (std::is_same_v<T, char32_t>)
    return 1;
  else
    return 2;
}

enum : std::uint8_t {
  f_remove = 0x01,
  f_replica = 0x02,
  f_seq = 0x04,
  f_lamport = 0x08,
  f_len = 0x10,
  f_ref_replica = 0x20,
  f_backward = 0x40,
  f_reserved = 0x80,
};

template <class T>
void put_content(std::string& out, const std::vector<T>& values) {
  if constexpr (std::is_same_v<T, char32_t>) {
    std::string utf8;
    utf8.reserve(values.size());
    for (char32_t c : values) append_utf8(utf8, c);
    put_string(out, utf8);
  } else {
    put_varint(out, values.size());
    for (const std::string& v : values) put_string(out, v);
  }
}

template <class T>
bool read_content(byte_reader& r, std::vector<T>& values) {
  values.clear();
  if constexpr (std::is_same_v<T, char32_t>) {
    const std::uint64_t n = r.varint("text content length");
    if (n > r.remaining()) return r.fail(decode_status::truncated, "text content");
    const std::size_t at = r.offset();
    const std::string_view bytes = r.bytes(n, "text content");
    values.reserve(bytes.size());
    std::size_t bad = 0;
    if (!decode_utf8(bytes, values, &bad)) return r.fail_at(at + bad, decode_status::inconsistent, "text content is not valid UTF-8");
  } else {
    const std::uint64_t n = r.varint("array value count");
    if (n > r.remaining()) return r.fail(decode_status::too_large, "array value count");
    values.reserve(static_cast<std::size_t>(n));
    for (std::uint64_t i = 0; i < n && r.ok(); ++i) {
      const std::uint64_t len = r.varint("array value length");
      const std::string_view v = r.bytes(len, "array value");
      if (r.ok()) values.emplace_back(v);
    }
  }
  return r.ok();
}

/// Reads a replica table (count, then that many replica ids as varints; non-zero and distinct) into
/// `reps`, for the op tables of every value type (read_ops, read_tree_ops_each). A failure is reported
/// where a reader going id by id would first see it: the id that repeats an earlier one, the id 0,
/// or the byte that ends the table early, whichever comes first. O(n log n) for n ids: duplicates are
/// found by sorting a copy (no hash table, whose buckets chosen ids could crowd).
inline bool read_replica_table(byte_reader& r, std::vector<replica_id>& reps) {
  reps.clear();
  const std::uint64_t n = r.varint("replica count");
  if (n > r.remaining()) return r.fail(decode_status::too_large, "replica count");
  reps.reserve(static_cast<std::size_t>(n));  // n <= remaining()
  std::vector<std::size_t> ends;  // the offset after each id read
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
  std::vector<std::pair<replica_id, std::size_t>> sorted;  // (id, index), to find repeats
  sorted.reserve(reps.size());
  for (std::size_t i = 0; i < reps.size(); ++i) sorted.emplace_back(reps[i], i);
  std::sort(sorted.begin(), sorted.end());
  std::size_t first_repeat = SIZE_MAX;  // the first id, in table order, that an earlier one equals
  for (std::size_t i = 1; i < sorted.size(); ++i)
    if (sorted[i].first == sorted[i - 1].first) first_repeat = std::min(first_repeat, sorted[i].second);
  if (first_repeat != SIZE_MAX)  // before any 0 or the end of the bytes: a reader going in order stops there first
    return r.fail_at(ends[first_repeat], decode_status::inconsistent, "replica listed twice");
  r = ahead;
  if (zero) return r.fail_at(ends.back(), decode_status::inconsistent, "replica id 0");
  return r.ok();
}

/// The op table shared by batches and documents.
inline void put_ops(std::string& out, const std::vector<op>& ops) {
  // Replica table in first-appearance order. A document gains a replica per editing session, so the
  // lookup is hashed rather than a scan of the table per op.
  std::vector<replica_id> reps;
  std::unordered_map<replica_id, std::size_t, id_hash> index;
  auto add = [&](replica_id id) {
    if (index.try_emplace(id, reps.size()).second) reps.push_back(id);
  };
  for (const op& o : ops) {
    add(o.id.replica);
    if (o.ref.replica != 0) add(o.ref.replica);
  }
  auto index_of = [&](replica_id id) { return index.at(id); };
  put_varint(out, reps.size());
  for (replica_id id : reps) put_varint(out, id);
  put_varint(out, ops.size());
  std::vector<std::uint64_t> next(reps.size(), UINT64_MAX);  // expected seq per replica
  std::uint64_t prev_rep = UINT64_MAX, lamport = 0;
  for (const op& o : ops) {
    const std::size_t ri = index_of(o.id.replica);
    std::uint8_t flags = 0;
    if (o.kind == op_kind::remove) flags |= f_remove;
    if (ri != prev_rep) flags |= f_replica;
    if (next[ri] != o.id.seq) flags |= f_seq;
    if (o.lamport != lamport) flags |= f_lamport;
    if (o.len != 1) flags |= f_len;
    const bool own_ref = o.ref.replica == o.id.replica;
    if (!own_ref) flags |= f_ref_replica;
    if (o.backward) flags |= f_backward;
    out.push_back(static_cast<char>(flags));
    if (flags & f_replica) put_varint(out, ri);
    if (flags & f_seq) put_varint(out, o.id.seq);
    if (flags & f_lamport) put_varint(out, zigzag(std::int64_t(o.lamport) - std::int64_t(lamport)));
    if (flags & f_len) put_varint(out, o.len);
    if (flags & f_ref_replica) put_varint(out, o.ref.replica == 0 ? 0 : index_of(o.ref.replica) + 1);
    if (own_ref)
      put_varint(out, zigzag(std::int64_t(o.ref.seq) - (std::int64_t(o.id.seq) - 1)));
    else if (o.ref.replica != 0)
      put_varint(out, o.ref.seq);
    prev_rep = ri;
    next[ri] = std::uint64_t(o.id.seq) + o.len;
    lamport = std::uint64_t(o.lamport) + o.len;
  }
}

inline bool read_ops(byte_reader& r, std::vector<op>& ops) {
  ops.clear();
  std::vector<replica_id> reps;
  if (!read_replica_table(r, reps)) return false;
  const std::size_t nrep = reps.size();
  const std::uint64_t nops = r.varint("op count");
  if (nops > r.remaining()) return r.fail(decode_status::too_large, "op count");
  ops.reserve(static_cast<std::size_t>(nops));
  std::vector<std::uint64_t> next(nrep, UINT64_MAX);
  std::size_t cur = SIZE_MAX;  // index in reps of the op's replica (bounded below: a size_t)
  std::uint64_t lamport = 0;
  const std::uint64_t limit = std::uint64_t(max_counter) + 1;
  for (std::uint64_t i = 0; i < nops && r.ok(); ++i) {
    const std::uint8_t flags = r.byte("op flags");
    if (flags & f_reserved) return r.fail(decode_status::inconsistent, "reserved op flag set");
    op o;
    o.kind = (flags & f_remove) ? op_kind::remove : op_kind::insert;
    o.backward = (flags & f_backward) != 0;
    if (o.backward && o.kind == op_kind::insert) return r.fail(decode_status::inconsistent, "backward insert");
    if (flags & f_replica) cur = static_cast<std::size_t>(r.varint("op replica", nrep == 0 ? 0 : nrep - 1));
    if (cur >= nrep) return r.fail(decode_status::bad_reference, "op replica");
    const std::uint64_t seq = (flags & f_seq) ? r.varint("op seq", max_counter) : next[cur];
    if (seq > max_counter) return r.fail(decode_status::bad_reference, "op seq (first op of a replica must give it)");
    std::int64_t lam = std::int64_t(lamport);
    if (flags & f_lamport) lam += r.svarint("op lamport");
    const std::uint64_t len = (flags & f_len) ? r.varint("op length", max_counter) : 1;
    if (!r.ok()) break;
    if (len == 0) return r.fail(decode_status::inconsistent, "op length 0");
    if (lam < 1 || std::uint64_t(lam) + len > limit) return r.fail(decode_status::overlong_varint, "op lamport out of range");
    if (seq + len > limit) return r.fail(decode_status::overlong_varint, "op seq + length out of range");
    std::uint64_t ref_rep = cur + 1;
    if (flags & f_ref_replica) ref_rep = r.varint("reference replica", nrep);
    if (ref_rep == 0) {
      if (o.kind == op_kind::remove) return r.fail(decode_status::bad_reference, "remove of the document start");
      o.ref = document_start;
    } else {
      std::int64_t ref_seq;
      if (ref_rep == cur + 1)
        ref_seq = std::int64_t(seq) - 1 + r.svarint("reference seq");
      else
        ref_seq = std::int64_t(r.varint("reference seq", max_counter));
      if (!r.ok()) break;
      if (ref_seq < 0 || ref_seq > std::int64_t(max_counter)) return r.fail(decode_status::bad_reference, "reference seq out of range");
      if (o.kind == op_kind::remove && (o.backward ? ref_seq + 1 < std::int64_t(len) : std::uint64_t(ref_seq) + len > limit))
        return r.fail(decode_status::bad_reference, "remove targets out of range");
      o.ref = {reps[static_cast<std::size_t>(ref_rep - 1)], static_cast<std::uint32_t>(ref_seq)};  // ref_rep <= nrep
    }
    o.id = {reps[cur], static_cast<std::uint32_t>(seq)};
    o.lamport = static_cast<std::uint32_t>(lam);
    o.len = static_cast<std::uint32_t>(len);
    next[cur] = seq + len;
    lamport = std::uint64_t(lam) + len;
    ops.push_back(o);
  }
  return r.ok();
}

/// Value types: 1 text, 2 array, 3 map, 4 xml.
inline constexpr unsigned char value_type_text = 1, value_type_array = 2, value_type_map = 3, value_type_xml = 4;

/// Reads the header of a batch or document (`kind`) of any value type into `value_type`.
inline bool read_header_any(byte_reader& r, unsigned char kind, unsigned char& value_type) {
  const std::string_view magic = r.bytes(2, "magic");
  if (!r.ok()) return false;
  if (magic != "Fo") return r.fail(decode_status::bad_magic, "magic");
  if (r.byte("format version") != format_version) return r.fail(decode_status::bad_magic, "format version");
  const unsigned char k = r.byte("kind");
  if (r.ok() && k != kind) return r.fail(decode_status::wrong_kind, kind == kind_batch ? "expected an op batch" : "expected a document");
  value_type = r.byte("value type");
  if (r.ok() && (value_type < value_type_text || value_type > value_type_xml)) return r.fail(decode_status::wrong_kind, "unknown value type");
  return r.ok();
}

inline bool read_header(byte_reader& r, unsigned char kind, unsigned char value_type) {
  static constexpr const char* expected[] = {"", "expected text values", "expected array values", "expected map operations", "expected xml operations"};
  unsigned char t = 0;
  if (!read_header_any(r, kind, t)) return false;
  if (t != value_type) return r.fail_at(4, decode_status::wrong_kind, expected[value_type <= value_type_xml ? value_type : 0]);
  return true;
}

inline void put_header(std::string& out, unsigned char kind, unsigned char value_type) {
  out += "Fo";
  out.push_back(static_cast<char>(format_version));
  out.push_back(static_cast<char>(kind));
  out.push_back(static_cast<char>(value_type));
}

/// Longest root name (`contentKey`) a document may carry.
inline constexpr std::size_t max_content_key = 256;

/// A document's root name follows its header: length + UTF-8 bytes.
inline void put_content_key(std::string& out, std::string_view key) {
  put_varint(out, key.size());
  out += key;
}
inline bool read_content_key(byte_reader& r, std::string& key) {
  const std::uint64_t n = r.varint("content key length", max_content_key);
  const std::size_t at = r.offset();
  const std::string_view bytes = r.bytes(n, "content key");
  if (!r.ok()) return false;
  std::u32string cps;
  if (!decode_utf8(bytes, cps)) return r.fail_at(at, decode_status::inconsistent, "content key is not valid UTF-8");
  key.assign(bytes);
  return true;
}

}  // namespace detail

/// Encodes a batch (ops and the values of its inserts).
template <class T>
std::string encode_batch(const op_batch<T>& b) {
  std::string out;
  detail::put_header(out, detail::kind_batch, detail::value_type_of<T>());
  detail::put_ops(out, b.ops);
  detail::put_content(out, b.content);
  return out;
}

/// Decodes a batch from untrusted bytes. On success the content matches the inserts' lengths;
/// whether the ops make sense against a document is `apply`'s to judge.
template <class T>
decode_result decode_batch(std::string_view bytes, op_batch<T>& out) {
  detail::byte_reader r(bytes);
  if (detail::read_header(r, detail::kind_batch, detail::value_type_of<T>()) && detail::read_ops(r, out.ops) &&
      detail::read_content(r, out.content)) {
    std::uint64_t need = 0;
    for (const op& o : out.ops)
      if (o.kind == op_kind::insert) need += o.len;
    if (need != out.content.size())
      r.fail(decode_status::inconsistent, "content count differs from the inserts' lengths");
    else if (!r.at_end())
      r.fail(decode_status::trailing_bytes, "after batch");
  }
  return r.result();
}

}  // namespace folio
