// folio/detail/tree/tree_encoding.hpp — the op records of map and xml records (value types 3 and 4).
//
// Same header as text and array (encoding.hpp, docs/FORMAT.md), and the same op table (op_codec.hpp:
// replica table, flags byte, delta-coded replica index, seq, Lamport value and len); each record:
//   flags byte: bits 0-1 kind (0 insert, 1 remove, 2 set, 3 unset)
//               0x04 replica index follows (else the previous record's replica)
//               0x08 seq follows (else where this replica's previous record ended)
//               0x10 zigzag Lamport delta follows (else the previous record's lamport + len)
//               0x20 len follows (else 1)       0x40 object follows (else the previous record's; root first)
//               0x80 backward remove
//   object:     creator replica (0 = the root; else index + 1), then creator seq and role (1 attributes,
//               2 children, 3 text)
//   then the op's payload (tree_op.hpp, the serialisation tree_doc's packed log uses too):
//   insert:     origin replica (0 = the object's start; else index + 1) and seq; then the values: into a
//               text, byte length + UTF-8 (len code points); into children, len × (length + tag), "" for
//               a text node
//   remove:     first target replica index + 1 and seq
//   set:        key, value (length + bytes each), then preds: count, count × (replica index, seq)
//   unset:      key, then preds
// Decoding checks every count against the bytes left before allocating and every index against the
// replica table; whether the ops make sense against a document is tree_doc::apply's to judge.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../../error.hpp"
#include "../encoding/op_codec.hpp"
#include "tree_doc.hpp"
#include "tree_op.hpp"
#include "../encoding/varint.hpp"

namespace folio::detail {

/// What an object holds, from its role (the root's depends on the record type).
inline tree_doc::object_kind kind_of_role(tree_shape shape, object_role role) {
  switch (role) {
    case object_role::root:
      return shape == tree_shape::map ? tree_doc::object_kind::map : tree_doc::object_kind::children;
    case object_role::attributes:
      return tree_doc::object_kind::map;
    case object_role::children:
      return tree_doc::object_kind::children;
    case object_role::text:
      break;
  }
  return tree_doc::object_kind::text;
}

/// The op records of map and xml records (the payload hooks of op_codec.hpp's op table): flag bits
/// 0x03 kind, 0x40 object follows, 0x80 backward (and the header's 0x04 replica, 0x08 seq, 0x10
/// Lamport, 0x20 len); then the object, then the op's payload (tree_op.hpp). The object is
/// delta-coded too: it is the previous record's unless the flag says.
struct tree_op_format {
  static constexpr header_bits bits{.replica = 0x04, .seq = 0x08, .lamport = 0x10, .len = 0x20};
  static constexpr std::uint8_t tf_kind = 0x03, tf_object = 0x40, tf_backward = 0x80;
  tree_shape shape;
  object_name object = root_object;  ///< the previous record's object

  static void add_references(replica_table_writer& table, const tree_op& o) {
    table.add_reference(o.object.creator.replica), table.add_reference(o.ref.replica);
    for (const op_id& p : o.preds) table.add_reference(p.replica);
  }
  std::uint8_t own_flags(const tree_op& o) const {
    std::uint8_t flags = static_cast<std::uint8_t>(o.kind);
    if (o.object != object) flags |= tf_object;
    if (o.backward) flags |= tf_backward;
    return flags;
  }
  void put_payload(std::string& out, const tree_op& o, std::uint8_t flags, const replica_table_writer& table) {
    if (flags & tf_object) {
      put_varint(out, table.ref_index(o.object.creator.replica));
      if (o.object.creator.replica != 0) put_varint(out, o.object.creator.seq), out.push_back(static_cast<char>(o.object.role));
    }
    object = o.object;
    put_tree_payload(out, o, kind_of_role(shape, o.object.role) == tree_doc::object_kind::text, table);
  }

  static void reserve(std::uint64_t) {}
  static bool check_flags(byte_reader& r, std::uint8_t flags) {
    if ((flags & tf_backward) && static_cast<tree_op_kind>(flags & tf_kind) != tree_op_kind::remove)
      return r.fail(decode_status::inconsistent, "backward flag on an op that is not a remove");
    return true;
  }
};

/// Writes the ops that `each(f)` passes to `f` (a const tree_op&, one at a time; `each` is called
/// once), as op_codec.hpp's op table.
template <class Each>
void put_tree_ops_each(std::string& out, tree_shape shape, Each&& each) {
  tree_op_format format{shape};
  put_op_table(out, format, each);
}

inline void put_tree_ops(std::string& out, tree_shape shape, const std::vector<tree_op>& ops) {
  put_tree_ops_each(out, shape, [&](auto&& f) {
    for (const tree_op& o : ops) f(o);
  });
}

/// Reads the ops of a batch or document, passing each to `sink` (a const tree_op&, valid during the
/// call; one op is reused) as soon as it is read; stops at the first malformed byte.
template <class Sink>
bool read_tree_ops_each(byte_reader& r, tree_shape shape, Sink&& sink) {
  struct reader : tree_op_format {
    Sink& sink;
    tree_op o{};
    bool read_payload(byte_reader& r, std::uint8_t flags, const op_header& h, std::span<const replica_id> reps) {
      o.text.clear(), o.nodes.clear(), o.key.clear(), o.value.clear(), o.preds.clear();
      o.ref = {};
      o.kind = static_cast<tree_op_kind>(flags & tf_kind);
      o.backward = (flags & tf_backward) != 0;
      if ((o.kind == tree_op_kind::set || o.kind == tree_op_kind::unset) && h.len != 1) return r.fail(decode_status::inconsistent, "map op of length other than 1");
      if (flags & tf_object) {
        const std::uint64_t creator = r.varint("object creator replica", reps.size());
        if (!r.ok()) return false;
        if (creator == 0) {
          object = root_object;
        } else {
          object.creator.replica = reps[static_cast<std::size_t>(creator - 1)];  // creator <= reps.size()
          object.creator.seq = static_cast<std::uint32_t>(r.varint("object creator seq", max_counter));
          const std::uint8_t role = r.byte("object role");
          if (r.ok() && (role < 1 || role > 3)) return r.fail(decode_status::inconsistent, "object role");
          object.role = static_cast<object_role>(role);
          if (shape == tree_shape::map && r.ok()) return r.fail(decode_status::inconsistent, "map records have only the root object");
        }
      }
      o.id = h.id, o.lamport = h.lamport, o.len = h.len;
      o.object = object;
      const tree_doc::object_kind target = kind_of_role(shape, object.role);
      if ((o.kind == tree_op_kind::insert || o.kind == tree_op_kind::remove) == (target == tree_doc::object_kind::map))
        return r.fail(decode_status::inconsistent, "op kind does not fit its object");
      if (!read_tree_payload(r, o, target == tree_doc::object_kind::text, reps.size(), [&](std::size_t i) { return reps[i]; })) return false;
      sink(std::as_const(o));
      return true;
    }
  } format{{shape}, sink};
  return read_op_table(r, format);
}

inline bool read_tree_ops(byte_reader& r, tree_shape shape, std::vector<tree_op>& ops) {
  ops.clear();
  return read_tree_ops_each(r, shape, [&](const tree_op& o) { ops.push_back(o); });
}

}  // namespace folio::detail
