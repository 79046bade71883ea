// folio/detail/tree/tree_op.hpp — the operations of map and xml records (detail/tree/tree_doc.hpp applies them)
// and the one serialisation of their own fields, which both the wire format (tree_encoding.hpp) and
// tree_doc's packed log (packed_log.hpp) write and read: the per-type payload of op_codec.hpp's records.
//
// Payload, after the op's object (which each user writes its own way):
//   insert:  origin replica (0 = the object's start; else index + 1) and, unless 0, seq; then the
//            values: into a text, byte length + UTF-8 (len code points); into children, len × (length
//            + tag), "" for a text node
//   remove:  first target replica index + 1 and seq
//   set:     key, value (length + bytes each), then preds: count, count × (replica index, seq)
//   unset:   key, then preds
// Replica indices are the user's (an encoding's replica table, the packed log's document replicas).
// read_tree_payload takes untrusted bytes: every count is checked against the bytes left before
// allocating, every index against the replicas there are.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "../../error.hpp"
#include "../../id.hpp"
#include "../../ops.hpp"
#include "../util/hash.hpp"
#include "../../utf8.hpp"
#include "../encoding/varint.hpp"

namespace folio::detail {

enum class object_role : std::uint8_t { root = 0, attributes = 1, children = 2, text = 3 };

/// Names an object: the op that created it (document_start for the root) and its role.
struct object_name {
  op_id creator;
  object_role role = object_role::root;
  friend constexpr bool operator==(const object_name&, const object_name&) = default;
  friend constexpr auto operator<=>(const object_name&, const object_name&) = default;
};
inline constexpr object_name root_object{document_start, object_role::root};

enum class tree_op_kind : std::uint8_t { insert = 0, remove = 1, set = 2, unset = 3 };

/// One operation on one object. Sequence ops (insert/remove) may be runs (len > 1); map ops are units.
struct tree_op {
  tree_op_kind kind = tree_op_kind::insert;
  op_id id;
  std::uint32_t lamport = 0;
  std::uint32_t len = 1;
  object_name object = root_object;
  op_id ref;              ///< insert: origin of the first item (document_start: the object's start); remove: first target
  bool backward = false;  ///< remove: targets ref.seq, ref.seq-1, ...
  std::u32string text;    ///< insert into a text: the code points (len of them)
  std::vector<std::string> nodes;  ///< insert into children: per item, an element's tag or "" for a text node
  std::string key, value;          ///< set: key and value; unset: key
  std::vector<op_id> preds;        ///< set/unset: the entries of `key` the author observed

  op_id target(std::uint32_t k) const noexcept { return {ref.replica, backward ? ref.seq - k : ref.seq + k}; }
  friend bool operator==(const tree_op&, const tree_op&) = default;
};

struct tree_batch {
  std::vector<tree_op> ops;
  bool empty() const noexcept { return ops.empty(); }
  std::size_t unit_count() const noexcept { return detail::unit_count(ops); }
  friend bool operator==(const tree_batch&, const tree_batch&) = default;
};

/// Map records: the root is an OR-map. XML records: the root is a children sequence.
enum class tree_shape : std::uint8_t { map, xml };

/// Writes the payload of `o` (an insert into a text when `text`). `table` gives replica indices:
/// index(id) and ref_index(id) (0 for replica 0, else index + 1); Text goes out as UTF-8 without a copy.
template <class Table>
void put_tree_payload(std::string& out, const tree_op& o, bool text, const Table& table) {
  switch (o.kind) {
    case tree_op_kind::insert:
      put_varint(out, table.ref_index(o.ref.replica));
      if (o.ref.replica != 0) put_varint(out, o.ref.seq);
      if (text) {
        put_string(out, std::u32string_view(o.text));
      } else {
        for (const std::string& tag : o.nodes) put_string(out, tag);
      }
      break;
    case tree_op_kind::remove:
      put_varint(out, table.ref_index(o.ref.replica));
      put_varint(out, o.ref.seq);
      break;
    case tree_op_kind::set:
    case tree_op_kind::unset:
      put_string(out, o.key);
      if (o.kind == tree_op_kind::set) put_string(out, o.value);
      put_varint(out, o.preds.size());
      for (const op_id& p : o.preds) put_varint(out, table.index(p.replica)), put_varint(out, p.seq);
      break;
  }
}

/// A length-prefixed string as put_string writes it (failure latched in `r` when it runs past the end).
inline std::string_view read_string_field(byte_reader& r, const char* what) {
  const std::uint64_t n = r.varint(what);
  return r.bytes(n > r.remaining() ? r.remaining() + 1 : n, what);
}

/// Reads the payload of `o`, whose kind, backward flag and len are set and whose ref, values, key and
/// preds are empty, from untrusted bytes (an insert into a text when `text`). Replica index i names
/// replica_at(i), i < nrep. False (failure latched in `r`) on a malformed byte.
template <class ReplicaAt>
bool read_tree_payload(byte_reader& r, tree_op& o, bool text, std::size_t nrep, ReplicaAt&& replica_at) {
  const std::uint64_t limit = std::uint64_t(max_counter) + 1;
  auto replica_ref = [&](const char* what, bool allow_zero) -> replica_id {  // index + 1, 0 = none
    const std::uint64_t i = r.varint(what, nrep);
    if (!r.ok()) return 0;
    if (i == 0 && !allow_zero) return r.fail(decode_status::bad_reference, what), 0;
    return i == 0 ? 0 : replica_at(static_cast<std::size_t>(i - 1));  // i <= nrep
  };
  auto string_field = [&](const char* what) { return read_string_field(r, what); };
  switch (o.kind) {
    case tree_op_kind::insert: {
      o.ref.replica = replica_ref("origin replica", true);
      if (o.ref.replica != 0) o.ref.seq = static_cast<std::uint32_t>(r.varint("origin seq", max_counter));
      if (text) {
        const std::size_t at = r.offset();
        const std::string_view utf8 = string_field("text");
        if (!r.ok()) break;
        if (!decode_utf8(utf8, o.text)) return r.fail_at(at, decode_status::inconsistent, "text is not valid UTF-8");
        if (o.text.size() != o.len) return r.fail_at(at, decode_status::inconsistent, "text length differs from the op's");
      } else {
        if (o.len > r.remaining()) return r.fail(decode_status::too_large, "node count");
        o.nodes.reserve(o.len);
        for (std::uint32_t k = 0; k < o.len && r.ok(); ++k) o.nodes.emplace_back(string_field("node tag"));
      }
      break;
    }
    case tree_op_kind::remove:
      o.ref.replica = replica_ref("target replica", false);
      o.ref.seq = static_cast<std::uint32_t>(r.varint("target seq", max_counter));
      if (r.ok() && (o.backward ? o.ref.seq + 1 < o.len : o.ref.seq + o.len > limit)) return r.fail(decode_status::bad_reference, "remove targets out of range");
      break;
    case tree_op_kind::set:
    case tree_op_kind::unset: {
      o.key.assign(string_field("key"));
      if (o.kind == tree_op_kind::set) o.value.assign(string_field("value"));
      const std::uint64_t np = r.varint("pred count");
      if (np > r.remaining()) return r.fail(decode_status::too_large, "pred count");
      for (std::uint64_t k = 0; k < np && r.ok(); ++k) {
        const std::uint64_t pi = r.varint("pred replica", nrep == 0 ? 0 : nrep - 1);
        const std::uint64_t ps = r.varint("pred seq", max_counter);
        if (r.ok() && pi >= nrep) return r.fail(decode_status::bad_reference, "pred replica");
        if (r.ok()) o.preds.push_back({replica_at(static_cast<std::size_t>(pi)), static_cast<std::uint32_t>(ps)});
      }
      break;
    }
  }
  return r.ok();
}

/// The UTF-8 of an insert into a text from its payload as put_tree_payload wrote it (origin, then the
/// text), read in place without decoding: for bytes this program wrote (tree_doc's packed log). False
/// (failure latched in `r`) on a malformed byte.
inline bool read_text_insert_utf8(byte_reader& r, std::string_view& utf8) {
  if (r.varint("origin replica") != 0) r.varint("origin seq");
  utf8 = read_string_field(r, "text");
  return r.ok();
}

}  // namespace folio::detail
