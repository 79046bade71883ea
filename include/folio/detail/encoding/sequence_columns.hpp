// folio/detail/encoding/sequence_columns.hpp — the op table of a version 2 text or array document, in columns
// (docs/FORMAT.md, "Format versions"). Version 1 writes an op as one record (a flags byte, then its
// fields: encoding.hpp's sequence_op_format); version 2 writes each kind of field of every op into a
// column of its own, so that alike values sit together, and stores each column as a compressed section
// (detail/encoding/compressed_section.hpp) when that is smaller.
//
//   replica table and op count m, as in version 1 (op_codec.hpp)
//   shapes   a nibble per op (the low one of byte i/2 for even i, the high one for odd i; an odd m leaves
//            the last high nibble 0): 0x1 remove, 0x2 backward, 0x4 its length is in `lengths` (else 1),
//            0x8 it has a header in `headers` (else everything the header gives is implied)
//   headers  per op with 0x8: a byte of flags (0x1 replica, 0x2 seq, 0x4 Lamport, 0x8 reference
//            replica; the others 0), then those fields as varints, in that order: replica index; seq;
//            zigzag Lamport delta; reference replica (0 the document start, k replica index k - 1)
//            Implied: the previous op's replica; where this replica's previous op ended (a replica's
//            first op must give it); the previous op's Lamport value + length (0 before the first);
//            the op's own replica
//   lengths  per op with 0x4: varint length (>= 1)
//   refs     per op whose reference is not the document start: for the op's own replica
//            zigzag(seq - p), p where the previous op left the cursor (an insert: its last item; a
//            remove: one past its last target in its direction; 0 before the first op); for another
//            replica the seq itself
//
// Typing fills few columns: a run of keystrokes is one op with its length, a backspace is a remove
// whose reference is 0 or 1 from where the cursor was. Reading checks what version 1's reader does,
// in the same words, and that every column is read to its end. O(m + n) for m ops, n replicas.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "../../id.hpp"
#include "../../ops.hpp"
#include "compressed_section.hpp"
#include "op_codec.hpp"

namespace folio::detail {

/// Sets the reference of `o` (whose kind, len and backward are set) as read: `ref_rep` 0 for the
/// document start, else replica index + 1, and `ref_seq`. Version 1 records and version 2 columns
/// check references with it.
inline bool set_sequence_reference(byte_reader& r, op& o, std::uint64_t ref_rep, std::int64_t ref_seq, std::span<const replica_id> reps) {
  if (ref_rep == 0) {
    if (o.kind == op_kind::remove) return r.fail(decode_status::bad_reference, "remove of the document start");
    o.ref = document_start;
    return true;
  }
  const std::uint64_t limit = std::uint64_t(max_counter) + 1;
  if (ref_seq < 0 || ref_seq > std::int64_t(max_counter)) return r.fail(decode_status::bad_reference, "reference seq out of range");
  if (o.kind == op_kind::remove && (o.backward ? ref_seq + 1 < std::int64_t(o.len) : std::uint64_t(ref_seq) + o.len > limit))
    return r.fail(decode_status::bad_reference, "remove targets out of range");
  o.ref = {reps[static_cast<std::size_t>(ref_rep - 1)], static_cast<std::uint32_t>(ref_seq)};  // ref_rep <= reps.size()
  return true;
}

namespace columns {
inline constexpr std::uint8_t s_remove = 0x1, s_backward = 0x2, s_length = 0x4, s_header = 0x8;
inline constexpr std::uint8_t h_replica = 0x1, h_seq = 0x2, h_lamport = 0x4, h_ref_replica = 0x8;
/// Where an op leaves the cursor: the seq a following op's reference of the same replica is coded against.
inline std::int64_t cursor_after(const op& o) {
  if (o.kind == op_kind::insert) return std::int64_t(o.id.seq) + o.len - 1;
  return o.backward ? std::int64_t(o.ref.seq) - o.len : std::int64_t(o.ref.seq) + o.len;
}
}  // namespace columns

/// Writes `ops` as a version 2 op table.
inline void put_op_columns(std::string& out, const std::vector<op>& ops) {
  using namespace columns;
  replica_table_writer table;
  for (const op& o : ops) table.add(o.id.replica), table.add_reference(o.ref.replica);
  std::string shapes((ops.size() + 1) / 2, '\0'), headers, lengths, refs;
  std::vector<std::uint64_t> next(table.size(), UINT64_MAX);  // per replica index: the seq after its last op
  std::uint64_t prev_rep = UINT64_MAX, lamport = 0;
  std::int64_t cursor = 0;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const op& o = ops[i];
    const std::size_t ri = table.index(o.id.replica);
    std::uint8_t h = 0;
    if (ri != prev_rep) h |= h_replica;
    if (next[ri] != o.id.seq) h |= h_seq;
    if (o.lamport != lamport) h |= h_lamport;
    if (o.ref.replica != o.id.replica) h |= h_ref_replica;
    const std::uint8_t shape = (o.kind == op_kind::remove ? s_remove : 0) | (o.backward ? s_backward : 0) | (o.len != 1 ? s_length : 0) | (h ? s_header : 0);
    shapes[i / 2] = static_cast<char>(shapes[i / 2] | (i % 2 ? shape << 4 : shape));
    if (h) {
      headers.push_back(static_cast<char>(h));
      if (h & h_replica) put_varint(headers, ri);
      if (h & h_seq) put_varint(headers, o.id.seq);
      if (h & h_lamport) put_varint(headers, zigzag(std::int64_t(o.lamport) - std::int64_t(lamport)));
      if (h & h_ref_replica) put_varint(headers, table.ref_index(o.ref.replica));
    }
    if (o.len != 1) put_varint(lengths, o.len);
    if (!(h & h_ref_replica))
      put_varint(refs, zigzag(std::int64_t(o.ref.seq) - cursor));
    else if (o.ref.replica != 0)
      put_varint(refs, o.ref.seq);
    prev_rep = ri, next[ri] = std::uint64_t(o.id.seq) + o.len, lamport = std::uint64_t(o.lamport) + o.len;
    cursor = cursor_after(o);
  }
  table.put(out);
  put_varint(out, ops.size());
  for (const std::string* c : {&shapes, &headers, &lengths, &refs}) put_section(out, *c);
}

/// Reads a version 2 op table from untrusted bytes into `ops`.
inline bool read_op_columns(byte_reader& r, std::vector<op>& ops) {
  using namespace columns;
  ops.clear();
  small_vector<replica_id, 8> reps;
  if (!read_replica_table(r, reps)) return false;
  const std::size_t nrep = reps.size();
  const std::uint64_t m = r.varint("op count", max_counter);
  std::string buffers[4];
  section sec[4];
  static constexpr const char* names[] = {"op shapes", "op headers", "op lengths", "op references"};
  // What each column can hold for m ops: a nibble each; a flags byte and four varints (at most 5
  // bytes for a counter, 10 for a replica index); a 5-byte length; a 10-byte reference.
  const std::uint64_t most[] = {(m + 1) / 2, m * 41, m * 5, m * 10};
  for (int c = 0; c < 4; ++c)
    if (!read_section(r, buffers[c], sec[c], names[c], most[c])) return false;
  if (sec[0].bytes.size() != (m + 1) / 2) return r.fail_at(sec[0].at, decode_status::inconsistent, "op shapes do not match the op count");
  // m <= 2 × the shapes' bytes, which may be 255 × their block: reserve no more than the input's size
  // (as version 1, whose m is at most its bytes); a longer table grows as it is read.
  ops.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(m, r.offset())));
  byte_reader shapes(sec[0].bytes), headers(sec[1].bytes), lengths(sec[2].bytes), refs(sec[3].bytes);
  byte_reader* readers[] = {&shapes, &headers, &lengths, &refs};
  const auto failed = [&] {
    for (int c = 0; c < 4; ++c)
      if (!readers[c]->ok()) return sec[c].fail(r, *readers[c]);
    return false;
  };
  small_vector<std::uint64_t, 8> next;
  next.resize(nrep, UINT64_MAX);
  std::size_t cur = SIZE_MAX;
  std::uint64_t lamport = 0;
  std::int64_t cursor = 0;
  std::uint8_t pair = 0;
  for (std::uint64_t i = 0; i < m; ++i) {
    if (i % 2 == 0) pair = shapes.byte("op shapes");
    const std::uint8_t shape = i % 2 ? pair >> 4 : pair & 0x0f;
    if (i + 1 == m && i % 2 == 0 && (pair >> 4) != 0) shapes.fail(decode_status::inconsistent, "op shapes: the nibble after the last op is not 0");
    if ((shape & s_backward) && !(shape & s_remove)) shapes.fail(decode_status::inconsistent, "backward insert");
    const std::uint8_t h = (shape & s_header) ? headers.byte("op header") : 0;
    if (h & 0xf0) headers.fail(decode_status::inconsistent, "reserved op header flag set");
    if (h & h_replica) cur = static_cast<std::size_t>(headers.varint("op replica", nrep == 0 ? 0 : nrep - 1));
    if (!shapes.ok() || !headers.ok()) return failed();
    if (cur >= nrep) return headers.fail(decode_status::bad_reference, "op replica"), failed();
    const std::uint64_t seq = (h & h_seq) ? headers.varint("op seq", max_counter) : next[cur];
    if (headers.ok() && seq > max_counter) headers.fail(decode_status::bad_reference, "op seq (first op of a replica must give it)");
    const std::int64_t lam = std::int64_t(lamport) + ((h & h_lamport) ? headers.svarint("op lamport") : 0);
    const std::uint64_t len = (shape & s_length) ? lengths.varint("op length", max_counter) : 1;
    if (!headers.ok() || !lengths.ok()) return failed();
    if (!check_op_counters(lengths, headers, seq, lam, len)) return failed();
    op o;
    o.kind = (shape & s_remove) ? op_kind::remove : op_kind::insert;
    o.backward = (shape & s_backward) != 0;
    o.id = {reps[cur], static_cast<std::uint32_t>(seq)}, o.lamport = static_cast<std::uint32_t>(lam), o.len = static_cast<std::uint32_t>(len);
    const std::uint64_t ref_rep = (h & h_ref_replica) ? headers.varint("reference replica", nrep) : cur + 1;
    std::int64_t ref_seq = 0;
    if (ref_rep == cur + 1)
      ref_seq = cursor + refs.svarint("reference seq");
    else if (ref_rep != 0)
      ref_seq = std::int64_t(refs.varint("reference seq", max_counter));
    if (!headers.ok() || !refs.ok()) return failed();
    if (!set_sequence_reference(refs, o, ref_rep, ref_seq, std::span<const replica_id>(reps.data(), reps.size()))) return failed();
    ops.push_back(o);
    next[cur] = seq + len, lamport = std::uint64_t(lam) + len;
    cursor = columns::cursor_after(o);
  }
  for (int c = 1; c < 4; ++c)
    if (!readers[c]->at_end()) readers[c]->fail(decode_status::trailing_bytes, names[c]);
  return r.ok() && (shapes.ok() && headers.ok() && lengths.ok() && refs.ok() ? true : failed());
}

}  // namespace folio::detail
