// folio/detail/tree_encoding.hpp — the op records of map and xml records (value types 3 and 4).
//
// Same header and replica table as text and array (encoding.hpp, docs/FORMAT.md); each record:
//   flags byte: bits 0-1 kind (0 insert, 1 remove, 2 set, 3 unset)
//               0x04 replica index follows (else the previous record's replica)
//               0x08 seq follows (else where this replica's previous record ended)
//               0x10 zigzag Lamport delta follows (else the previous record's lamport + len)
//               0x20 len follows (else 1)       0x40 object follows (else the previous record's; root first)
//               0x80 backward remove
//   object:     creator replica (0 = the root; else index + 1), then creator seq and role (1 attributes,
//               2 children, 3 text)
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
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../encoding.hpp"
#include "tree_doc.hpp"
#include "utf8.hpp"
#include "varint.hpp"

namespace folio::detail {

enum : std::uint8_t {
  tf_kind = 0x03,
  tf_replica = 0x04,
  tf_seq = 0x08,
  tf_lamport = 0x10,
  tf_len = 0x20,
  tf_object = 0x40,
  tf_backward = 0x80,
};

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

/// Writes the ops that `each(f)` passes to `f` (a const tree_op&, one at a time; `each` is called
/// once). The replica table comes first in the encoding but is known only at the end: the records are
/// written first and the table and count are then put in front of them (one move of the bytes, where a
/// second pass would unpack every op of a packed log again).
template <class Each>
void put_tree_ops_each(std::string& out, tree_shape shape, Each&& each) {
  std::vector<replica_id> reps;
  std::unordered_map<replica_id, std::size_t, id_hash> index;
  std::vector<std::uint64_t> next;  // per replica index: the seq that follows its last op
  auto add = [&](replica_id id) {
    if (id != 0 && index.try_emplace(id, reps.size()).second) reps.push_back(id), next.push_back(UINT64_MAX);
  };
  auto ref_index = [&](replica_id id) { return id == 0 ? 0 : index.at(id) + 1; };
  const std::size_t start = out.size();
  std::size_t count = 0;
  std::uint64_t prev_rep = UINT64_MAX, lamport = 0;
  object_name object = root_object;
  std::string utf8;
  each([&](const tree_op& o) {
    // Indices in order of first appearance: the op's id, its object's creator, its reference, its preds.
    add(o.id.replica), add(o.object.creator.replica), add(o.ref.replica);
    for (const op_id& p : o.preds) add(p.replica);
    ++count;
    const std::size_t ri = index.at(o.id.replica);
    std::uint8_t flags = static_cast<std::uint8_t>(o.kind);
    if (ri != prev_rep) flags |= tf_replica;
    if (next[ri] != o.id.seq) flags |= tf_seq;
    if (o.lamport != lamport) flags |= tf_lamport;
    if (o.len != 1) flags |= tf_len;
    if (o.object != object) flags |= tf_object;
    if (o.backward) flags |= tf_backward;
    out.push_back(static_cast<char>(flags));
    if (flags & tf_replica) put_varint(out, ri);
    if (flags & tf_seq) put_varint(out, o.id.seq);
    if (flags & tf_lamport) put_varint(out, zigzag(std::int64_t(o.lamport) - std::int64_t(lamport)));
    if (flags & tf_len) put_varint(out, o.len);
    if (flags & tf_object) {
      put_varint(out, ref_index(o.object.creator.replica));
      if (o.object.creator.replica != 0) put_varint(out, o.object.creator.seq), out.push_back(static_cast<char>(o.object.role));
    }
    switch (o.kind) {
      case tree_op_kind::insert:
        put_varint(out, ref_index(o.ref.replica));
        if (o.ref.replica != 0) put_varint(out, o.ref.seq);
        if (kind_of_role(shape, o.object.role) == tree_doc::object_kind::text) {
          utf8.clear();
          for (char32_t c : o.text) append_utf8(utf8, c);
          put_string(out, utf8);
        } else {
          for (const std::string& tag : o.nodes) put_string(out, tag);
        }
        break;
      case tree_op_kind::remove:
        put_varint(out, ref_index(o.ref.replica));
        put_varint(out, o.ref.seq);
        break;
      case tree_op_kind::set:
      case tree_op_kind::unset:
        put_string(out, o.key);
        if (o.kind == tree_op_kind::set) put_string(out, o.value);
        put_varint(out, o.preds.size());
        for (const op_id& p : o.preds) put_varint(out, index.at(p.replica)), put_varint(out, p.seq);
        break;
    }
    prev_rep = ri;
    next[ri] = std::uint64_t(o.id.seq) + o.len;
    lamport = std::uint64_t(o.lamport) + o.len;
    object = o.object;
  });
  std::string head;
  put_varint(head, reps.size());
  for (replica_id id : reps) put_varint(head, id);
  put_varint(head, count);
  out.insert(start, head);
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
  std::vector<replica_id> reps;
  if (!read_replica_table(r, reps)) return false;
  const std::size_t nrep = reps.size();
  const std::uint64_t nops = r.varint("op count");
  if (nops > r.remaining()) return r.fail(decode_status::too_large, "op count");
  const std::uint64_t limit = std::uint64_t(max_counter) + 1;
  std::vector<std::uint64_t> next(nrep, UINT64_MAX);
  std::size_t cur = SIZE_MAX;  // index in reps of the op's replica (bounded below: a size_t)
  std::uint64_t lamport = 0;
  object_name object = root_object;
  auto replica_ref = [&](const char* what, bool allow_zero) -> replica_id {  // index + 1, 0 = none
    const std::uint64_t i = r.varint(what, nrep);
    if (!r.ok()) return 0;
    if (i == 0 && !allow_zero) return r.fail(decode_status::bad_reference, what), 0;
    return i == 0 ? 0 : reps[static_cast<std::size_t>(i - 1)];  // i <= nrep
  };
  auto string_field = [&](const char* what) -> std::string_view {
    const std::uint64_t n = r.varint(what);
    return r.bytes(n > r.remaining() ? r.remaining() + 1 : n, what);
  };
  tree_op o;
  for (std::uint64_t i = 0; i < nops && r.ok(); ++i) {
    const std::uint8_t flags = r.byte("op flags");
    o.text.clear(), o.nodes.clear(), o.key.clear(), o.value.clear(), o.preds.clear();
    o.ref = {};
    o.kind = static_cast<tree_op_kind>(flags & tf_kind);
    o.backward = (flags & tf_backward) != 0;
    if (o.backward && o.kind != tree_op_kind::remove) return r.fail(decode_status::inconsistent, "backward flag on an op that is not a remove");
    if (flags & tf_replica) cur = static_cast<std::size_t>(r.varint("op replica", nrep == 0 ? 0 : nrep - 1));
    if (!r.ok()) break;
    if (cur >= nrep) return r.fail(decode_status::bad_reference, "op replica");
    const std::uint64_t seq = (flags & tf_seq) ? r.varint("op seq", max_counter) : next[cur];
    if (r.ok() && seq > max_counter) return r.fail(decode_status::bad_reference, "op seq (first op of a replica must give it)");
    std::int64_t lam = std::int64_t(lamport);
    if (flags & tf_lamport) lam += r.svarint("op lamport");
    const std::uint64_t len = (flags & tf_len) ? r.varint("op length", max_counter) : 1;
    if (!r.ok()) break;
    if (len == 0) return r.fail(decode_status::inconsistent, "op length 0");
    if (lam < 1 || std::uint64_t(lam) + len > limit) return r.fail(decode_status::overlong_varint, "op lamport out of range");
    if (seq + len > limit) return r.fail(decode_status::overlong_varint, "op seq + length out of range");
    if ((o.kind == tree_op_kind::set || o.kind == tree_op_kind::unset) && len != 1) return r.fail(decode_status::inconsistent, "map op of length other than 1");
    if (flags & tf_object) {
      object.creator.replica = replica_ref("object creator replica", true);
      if (object.creator.replica == 0) {
        object = root_object;
      } else {
        object.creator.seq = static_cast<std::uint32_t>(r.varint("object creator seq", max_counter));
        const std::uint8_t role = r.byte("object role");
        if (r.ok() && (role < 1 || role > 3)) return r.fail(decode_status::inconsistent, "object role");
        object.role = static_cast<object_role>(role);
        if (shape == tree_shape::map && r.ok()) return r.fail(decode_status::inconsistent, "map records have only the root object");
      }
    }
    o.id = {reps[cur], static_cast<std::uint32_t>(seq)};
    o.lamport = static_cast<std::uint32_t>(lam);
    o.len = static_cast<std::uint32_t>(len);
    o.object = object;
    const tree_doc::object_kind target = kind_of_role(shape, object.role);
    if ((o.kind == tree_op_kind::insert || o.kind == tree_op_kind::remove) == (target == tree_doc::object_kind::map))
      return r.fail(decode_status::inconsistent, "op kind does not fit its object");
    switch (o.kind) {
      case tree_op_kind::insert: {
        o.ref.replica = replica_ref("origin replica", true);
        if (o.ref.replica != 0) o.ref.seq = static_cast<std::uint32_t>(r.varint("origin seq", max_counter));
        if (target == tree_doc::object_kind::text) {
          const std::size_t at = r.offset();
          const std::string_view utf8 = string_field("text");
          if (!r.ok()) break;
          if (!decode_utf8(utf8, o.text)) return r.fail_at(at, decode_status::inconsistent, "text is not valid UTF-8");
          if (o.text.size() != len) return r.fail_at(at, decode_status::inconsistent, "text length differs from the op's");
        } else {
          if (len > r.remaining()) return r.fail(decode_status::too_large, "node count");
          o.nodes.reserve(static_cast<std::size_t>(len));
          for (std::uint64_t k = 0; k < len && r.ok(); ++k) o.nodes.emplace_back(string_field("node tag"));
        }
        break;
      }
      case tree_op_kind::remove:
        o.ref.replica = replica_ref("target replica", false);
        o.ref.seq = static_cast<std::uint32_t>(r.varint("target seq", max_counter));
        if (r.ok() && (o.backward ? o.ref.seq + 1 < len : o.ref.seq + len > limit)) return r.fail(decode_status::bad_reference, "remove targets out of range");
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
          if (r.ok()) o.preds.push_back({reps[static_cast<std::size_t>(pi)], static_cast<std::uint32_t>(ps)});
        }
        break;
      }
    }
    next[cur] = seq + len;
    lamport = std::uint64_t(lam) + len;
    if (r.ok()) sink(std::as_const(o));
  }
  return r.ok();
}

inline bool read_tree_ops(byte_reader& r, tree_shape shape, std::vector<tree_op>& ops) {
  ops.clear();
  return read_tree_ops_each(r, shape, [&](const tree_op& o) { ops.push_back(o); });
}

}  // namespace folio::detail
