// folio/encoding.hpp — compact binary encoding of op batches and whole documents.
//
// One format serves both (docs/FORMAT.md has the field tables and a worked example):
//
//   offset  size  field
//   0       2     magic "Fo" (0x46 0x6F)
//   2       1     format version: 2 for text and array documents (3 when they keep removed values),
//                 1 for everything else
//   3       1     kind: 'B' (0x42) op batch, 'D' (0x44) document
//   4       1     value type: 1 text (code points), 2 array (JSON values as bytes), 3 map, 4 xml
//   5       var   document only: root name (contentKey), length + UTF-8
//   ...     var   the op table (detail/encoding/op_codec.hpp): replica count n, then n replica ids (varints;
//                 non-zero, distinct), op count m, then m op records (below; map and xml:
//                 detail/tree/tree_encoding.hpp)
//   ...     var   content: text = byte length + UTF-8; array = count + (length + bytes) each
// A version 2 document (text and array) has its op table in columns (detail/encoding/sequence_columns.hpp)
// and each column and the content as a section, stored or LZ4-compressed (detail/encoding/compressed_section.hpp).
// A version 3 document is version 2 plus one more section after the content: the values of the removed
// items, in document order, in the content's format (kept_values::all).
//
// Op record (sequence_op_format; the replica, seq, Lamport and len fields are op_codec.hpp's, shared
// with map and xml records): a flags byte, then only the fields the flags say are not implied:
//   0x01 remove (else insert)          0x02 replica index follows (else: the previous op's replica)
//   0x04 seq follows (else: where this replica's previous op in the input ended)
//   0x08 zigzag Lamport delta follows (else: previous op's lamport + len)
//   0x10 len follows (else 1)          0x20 reference replica follows: 0 = document start, k = index k-1
//                                           (else: the op's own replica)
//   0x40 backward remove               0x80 reserved, must be 0
//   then the reference seq: zigzag(ref - (seq - 1)) for the op's own replica, a plain varint otherwise.
//
// A batch carries the values of all its inserts, in op order. A document is the whole op log (so the
// full causal history: every id, every origin, every remove) plus the *live* values in document
// order; deleted values are dropped (version 3 keeps them). Decoding rebuilds the document by
// integrating the log. Decoders read documents of every version.
//
// Decoders take untrusted bytes: every count is checked against the bytes left before anything is
// allocated, every index and counter against its range; failures return a decode_result with the byte
// offset. Thread-safety: free functions over values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "detail/encoding/compressed_section.hpp"
#include "detail/encoding/op_codec.hpp"
#include "detail/encoding/sequence_columns.hpp"
#include "utf8.hpp"
#include "detail/encoding/varint.hpp"
#include "error.hpp"
#include "ops.hpp"
#include "record_type.hpp"

namespace folio {

/// Which values a text or array document's encoding keeps (document::encode): the live ones (format
/// version 2: removed items decode with placeholders, U+0000 or "") or all of them (version 3: a
/// decoded document holds every value, as the one encoded did, so a checkout of an earlier version
/// shows what was live then). Map and xml documents keep every value either way.
enum class kept_values { live, all };

namespace detail {

inline constexpr unsigned char kind_batch = 'B', kind_document = 'D';

/// The format version an encoding of `kind` and `type` is written in. Version 2 differs from 1 only in
/// the content of text and array documents (a mode byte, then the content as is or compressed); a
/// batch, or a map or xml document, is version 1 (they have no content section: values travel in
/// their records).
constexpr unsigned char format_version_of(unsigned char kind, record_type type) {
  return kind == kind_document && (type == record_type::text || type == record_type::array) ? 2 : 1;
}
/// The version written for `kept`: 3 for a text or array document keeping all values (version 2 and
/// the removed values' section), else format_version_of(kind, type).
constexpr unsigned char format_version_of(unsigned char kind, record_type type, kept_values kept) {
  const unsigned char v = format_version_of(kind, type);
  return v == 2 && kept == kept_values::all ? 3 : v;
}
/// The versions a decoder reads for `kind` and `type`: 1, and 2 and 3 where a writer writes them.
constexpr bool readable_format_version(unsigned char kind, record_type type, unsigned char v) {
  return v == 1 || v == format_version_of(kind, type) || v == format_version_of(kind, type, kept_values::all);
}

/// The record type of a sequence of T: text (code points) or array (opaque values).
template <class T>
constexpr record_type value_type_of() {
  if constexpr (std::is_same_v<T, char32_t>)
    return record_type::text;
  else
    return record_type::array;
}

template <class T>
void put_content(std::string& out, const std::vector<T>& values) {
  if constexpr (std::is_same_v<T, char32_t>) {
    put_string(out, std::u32string_view(values.data(), values.size()));
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

/// A version 2 document's content: the version 1 content as a section (compressed when that is
/// smaller). O(n × lz4_compress's chain) for n bytes.
template <class T>
void put_document_content(std::string& out, const std::vector<T>& values) {
  std::string raw;
  put_content(raw, values);
  put_section(out, raw);
}

/// Reads a document's content written in format `version` (put_content's, or put_document_content's).
/// A fault inside the content is reported at its byte, or at the block's first byte when compressed.
/// `units`: the items the document's op log inserts; a text's content holds at most 4 bytes for each
/// (and its length), so a longer one is refused before it is decompressed.
/// `what` names the section in failures, `after` its trailing bytes (the removed values' section of a
/// version 3 document is read the same way: "removed values").
template <class T>
bool read_document_content(byte_reader& r, std::vector<T>& values, unsigned char version, std::uint64_t units, const char* what = "content",
                           const char* after = "after the content") {
  if (version == 1) return read_content(r, values);
  std::string buffer;
  section s;
  const std::uint64_t most = std::is_same_v<T, char32_t> ? 10 + 4 * units : UINT64_MAX;
  if (!read_section(r, buffer, s, what, most)) return false;
  byte_reader inner(s.bytes);
  if (read_content(inner, values) && !inner.at_end()) inner.fail(decode_status::trailing_bytes, after);
  return inner.ok() || s.fail(r, inner);
}

/// The op records of text and array records (the payload hooks of op_codec.hpp's op table): flag
/// bits 0x01 remove, 0x20 reference replica follows, 0x40 backward remove, 0x80 reserved (and the
/// header's 0x02 replica, 0x04 seq, 0x08 Lamport, 0x10 len); then the reference.
struct sequence_op_format {
  static constexpr header_bits bits{.replica = 0x02, .seq = 0x04, .lamport = 0x08, .len = 0x10};
  static constexpr std::uint8_t f_remove = 0x01, f_ref_replica = 0x20, f_backward = 0x40, f_reserved = 0x80;
  std::vector<op>* ops = nullptr;  ///< where read_payload appends

  static void add_references(replica_table_writer& table, const op& o) { table.add_reference(o.ref.replica); }
  static std::uint8_t own_flags(const op& o) {
    std::uint8_t flags = 0;
    if (o.kind == op_kind::remove) flags |= f_remove;
    if (o.ref.replica != o.id.replica) flags |= f_ref_replica;
    if (o.backward) flags |= f_backward;
    return flags;
  }
  /// The reference: its replica (0 = document start, k = index k-1) when not the op's own, then its
  /// seq: zigzag(ref - (seq - 1)) for the op's own replica, a plain varint for another.
  static void put_payload(std::string& out, const op& o, std::uint8_t flags, const replica_table_writer& table) {
    if (flags & f_ref_replica) put_varint(out, table.ref_index(o.ref.replica));
    if (!(flags & f_ref_replica))
      put_varint(out, zigzag(std::int64_t(o.ref.seq) - (std::int64_t(o.id.seq) - 1)));
    else if (o.ref.replica != 0)
      put_varint(out, o.ref.seq);
  }

  void reserve(std::uint64_t n) {
    if (n > ops->capacity()) ops->reserve(static_cast<std::size_t>(n));
  }
  static bool check_flags(byte_reader& r, std::uint8_t flags) {
    if (flags & f_reserved) return r.fail(decode_status::inconsistent, "reserved op flag set");
    if ((flags & f_backward) && !(flags & f_remove)) return r.fail(decode_status::inconsistent, "backward insert");
    return true;
  }
  [[gnu::always_inline]] bool read_payload(byte_reader& r, std::uint8_t flags, const op_header& h, std::span<const replica_id> reps) {
    op& o = ops->emplace_back();  // room reserved for the table's count; dropped below on a fault
    o.kind = (flags & f_remove) ? op_kind::remove : op_kind::insert;
    o.backward = (flags & f_backward) != 0;
    o.id = h.id, o.lamport = h.lamport, o.len = h.len;
    std::uint64_t ref_rep = h.rep + 1;
    if (flags & f_ref_replica) ref_rep = r.varint("reference replica", reps.size());
    std::int64_t ref_seq = 0;
    if (ref_rep == h.rep + 1)
      ref_seq = std::int64_t(h.id.seq) - 1 + r.svarint("reference seq");
    else if (ref_rep != 0)
      ref_seq = std::int64_t(r.varint("reference seq", max_counter));
    if (!r.ok() || !set_sequence_reference(r, o, ref_rep, ref_seq, reps)) return ops->pop_back(), false;
    return true;
  }
};

/// The op table shared by batches and documents.
inline void put_ops(std::string& out, const std::vector<op>& ops) {
  sequence_op_format format;
  put_op_table(out, format, [&](auto&& f) {
    for (const op& o : ops) f(o);
  });
}

inline bool read_ops(byte_reader& r, std::vector<op>& ops) {
  ops.clear();
  sequence_op_format format{&ops};
  return read_op_table(r, format);
}

/// The op table of a document: columns (version 2, which encoders write) or records (version 1).
inline void put_document_ops(std::string& out, const std::vector<op>& ops) { put_op_columns(out, ops); }
inline bool read_document_ops(byte_reader& r, std::vector<op>& ops, unsigned char version) {
  return version == 1 ? read_ops(r, ops) : read_op_columns(r, ops);
}

/// Reads the header of a batch or document (`kind`) of any record type into `type`, and its format
/// version into `version` when given: 1, or 2 and 3 where readable_format_version allows them.
inline bool read_header_any(byte_reader& r, unsigned char kind, record_type& type, unsigned char* version = nullptr) {
  // A well-formed header, the usual case, is taken in one look at its five bytes (as the field by
  // field reading below would take it); anything else is read field by field, which names the fault.
  if (const std::string_view h = r.rest(); h.size() >= 5 && h[0] == 'F' && h[1] == 'o' && static_cast<unsigned char>(h[3]) == kind) {
    const auto v = static_cast<unsigned char>(h[2]);
    if (const std::optional<record_type> t = record_type_of(static_cast<unsigned char>(h[4])); t && readable_format_version(kind, *t, v)) {
      r.bytes(5, "header");
      type = *t;
      if (version) *version = v;
      return true;
    }
  }
  const std::string_view magic = r.bytes(2, "magic");
  if (!r.ok()) return false;
  if (magic != "Fo") return r.fail(decode_status::bad_magic, "magic");
  const unsigned char v = r.byte("format version");
  if (r.ok() && (v == 0 || v > 3)) return r.fail(decode_status::bad_magic, "format version");
  const unsigned char k = r.byte("kind");
  if (r.ok() && k != kind) return r.fail(decode_status::wrong_kind, kind == kind_batch ? "expected an op batch" : "expected a document");
  const std::optional<record_type> t = record_type_of(r.byte("value type"));
  if (r.ok() && !t) return r.fail(decode_status::wrong_kind, "unknown value type");
  if (!r.ok()) return false;
  if (!readable_format_version(k, *t, v)) return r.fail_at(3, decode_status::bad_magic, "format version");  // where an unknown version is reported
  type = *t;
  if (version) *version = v;
  return true;
}

inline bool read_header(byte_reader& r, unsigned char kind, record_type type, unsigned char* version = nullptr) {
  static constexpr const char* expected[] = {"", "expected text values", "expected array values", "expected map operations", "expected xml operations"};
  record_type t{};
  if (!read_header_any(r, kind, t, version)) return false;
  if (t != type) return r.fail_at(4, decode_status::wrong_kind, expected[static_cast<std::size_t>(type)]);
  return true;
}

inline void put_header(std::string& out, unsigned char kind, record_type type, kept_values kept = kept_values::live) {
  out += "Fo";
  out.push_back(static_cast<char>(format_version_of(kind, type, kept)));
  out.push_back(static_cast<char>(kind));
  out.push_back(static_cast<char>(type));
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

namespace detail {
/// A batch's ops and content read through the op table (read_ops, read_content): the general
/// reading, of every batch read_single_op_text does not take, which names every fault.
template <class T>
bool read_batch_table(byte_reader& r, op_batch<T>& out) {
  if (read_ops(r, out.ops) && read_content(r, out.content)) {
    std::uint64_t need = 0;
    for (const op& o : out.ops)
      if (o.kind == op_kind::insert) need += o.len;
    if (need != out.content.size())
      r.fail(decode_status::inconsistent, "content count differs from the inserts' lengths");
    else if (!r.at_end())
      r.fail(decode_status::trailing_bytes, "after batch");
  }
  return r.ok();
}

/// A text batch of one op by one replica, `bytes` after its header: the batch a remote keystroke
/// makes, and so the commonest a service receives. Reads into `o` and `content` the one op and the
/// values read_ops and read_content would read from the same bytes (no op_batch: document::apply
/// integrates them as they are); for every other shape and every fault answers false, with `content`
/// emptied and `o` unspecified, and the general reading then reads the bytes (and names the fault). It applies the
/// general reading's rules (those of read_replica_table, read_op_table, check_flags,
/// check_op_counters, set_sequence_reference, read_content and read_batch_table's count of values and
/// trailing bytes), restated over a pointer: what it leaves out is the table's machinery for
/// many replicas and ops and the byte_reader's failure latch per field, which outweigh the reading
/// itself for one op (docs/INTERNALS.md, "Measurements"). The restated rules are
/// held to the table's by Encoding.OneOpTextBatchesReadAsTheOpTableReadsThem and the text_batch fuzz
/// target. O(its bytes).
inline bool read_single_op_text(std::string_view bytes, op& o, std::vector<char32_t>& content) {
  using f = sequence_op_format;
  constexpr std::uint8_t first_record = f::bits.replica | f::bits.seq | f::bits.lamport;  // what a table's first record must give
  constexpr std::uint64_t limit = std::uint64_t(max_counter) + 1, svarint_max = 2 * svarint_max_abs;  // as byte_reader::svarint reads
  content.clear();
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const auto* const end = p + bytes.size();
  std::uint64_t id = 0, seq = 0, lam = 0, len = 1, ref_rep = 1, ref = 0, n = 0;
  // Replica count 1, the replica, op count 1, the flags, replica index 0.
  if (end - p < 5 || *p++ != 1 || !take_varint(p, end, UINT64_MAX, id) || id == 0 || end - p < 3 || *p++ != 1) return false;
  const std::uint8_t flags = *p++;
  if ((flags & first_record) != first_record || (flags & f::f_reserved) || ((flags & f::f_backward) && !(flags & f::f_remove)) || *p++ != 0) return false;
  if (!take_varint(p, end, max_counter, seq) || !take_varint(p, end, svarint_max, lam)) return false;
  if ((flags & f::bits.len) && !take_varint(p, end, max_counter, len)) return false;
  const std::int64_t lamport = unzigzag(lam);
  if (len == 0 || lamport < 1 || std::uint64_t(lamport) + len > limit || seq + len > limit) return false;
  if ((flags & f::f_ref_replica) && !take_varint(p, end, 1, ref_rep)) return false;
  o.kind = (flags & f::f_remove) ? op_kind::remove : op_kind::insert;
  o.backward = (flags & f::f_backward) != 0;
  o.id = {id, static_cast<std::uint32_t>(seq)}, o.lamport = static_cast<std::uint32_t>(lamport), o.len = static_cast<std::uint32_t>(len);
  if (ref_rep == 0) {  // the document start
    if (o.kind == op_kind::remove) return false;
    o.ref = document_start;
  } else {
    if (!take_varint(p, end, svarint_max, ref)) return false;
    const std::int64_t ref_seq = std::int64_t(seq) - 1 + unzigzag(ref);
    if (ref_seq < 0 || ref_seq > std::int64_t(max_counter)) return false;
    if (o.kind == op_kind::remove && (o.backward ? ref_seq + 1 < std::int64_t(len) : std::uint64_t(ref_seq) + len > limit)) return false;
    o.ref = {id, static_cast<std::uint32_t>(ref_seq)};
  }
  // The content: its byte length, then UTF-8 for the insert's `len` code points (none for a remove).
  if (!take_varint(p, end, UINT64_MAX, n) || n != std::uint64_t(end - p)) return false;
  if ((n != 0 && !decode_utf8(std::string_view(reinterpret_cast<const char*>(p), static_cast<std::size_t>(n)), content)) ||
      content.size() != (o.kind == op_kind::insert ? len : 0))
    return content.clear(), false;
  return true;
}

/// A batch's ops and content, `r` past its header, into `out` (whose vectors keep their capacity: a
/// caller decoding batch after batch into one op_batch allocates nothing once they are large enough):
/// a text batch of one op by read_single_op_text, the rest (and any fault) by read_batch_table.
template <class T>
bool read_batch_body(byte_reader& r, op_batch<T>& out) {
  if constexpr (std::is_same_v<T, char32_t>)
    if (op o; r.ok() && read_single_op_text(r.rest(), o, out.content)) return out.ops.clear(), out.ops.push_back(o), r.bytes(r.remaining(), "batch"), true;
  return read_batch_table(r, out);
}
}  // namespace detail

/// Decodes a batch from untrusted bytes. On success the content matches the inserts' lengths;
/// whether the ops make sense against a document is `apply`'s to judge.
template <class T>
decode_result decode_batch(std::string_view bytes, op_batch<T>& out) {
  detail::byte_reader r(bytes);
  if (detail::read_header(r, detail::kind_batch, detail::value_type_of<T>())) detail::read_batch_body(r, out);
  return r.result();
}

}  // namespace folio
