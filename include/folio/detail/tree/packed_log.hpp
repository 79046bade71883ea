// folio/detail/tree/packed_log.hpp — tree_doc's op log, packed into bytes.
//
// tree_doc keeps every integrated op, in integration order: a small inline entry (author, seq, len,
// Lamport value: what ops_since filters on) and the rest packed here, at the entry's offset in one
// byte string. A packed op is a byte (kind in bits 0-1, 0x04 backward), the index of its object in
// the document, then the op's payload as the wire writes it (tree_op.hpp: put_tree_payload and
// read_tree_payload are the one serialisation of a tree op's own fields). Replica indices are the
// document's. Indices name replicas and objects that exist for as long as the document does. Only
// tree_doc writes these bytes; unpacking reads them with byte_reader, which never reads past their end
// (a failure there is a broken invariant: "[folio.invariant]").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "../../error.hpp"
#include "../../id.hpp"
#include "../replica/id_table.hpp"
#include "tree_op.hpp"
#include "../encoding/varint.hpp"

namespace folio::detail {

/// A document's replica indices by id, as put_tree_payload asks for them.
struct packed_replicas {
  const id_table<std::uint32_t>& index_of;
  std::size_t index(replica_id id) const {
    const std::uint32_t* i = index_of.find(id);
    if (!i) fail(error_code::internal, "replica " + std::to_string(id) + " is not in the document's table");
    return *i;
  }
  std::size_t ref_index(replica_id id) const { return id == 0 ? 0 : index(id) + 1; }
};

inline constexpr std::uint8_t packed_backward = 0x04;

/// Appends op `o` of object `object` (an insert into a text when `text`) to `bytes`.
inline void pack_tree_op(std::string& bytes, std::uint32_t object, bool text, const tree_op& o, const packed_replicas& reps) {
  bytes.push_back(static_cast<char>(static_cast<std::uint8_t>(o.kind) | (o.backward ? packed_backward : 0)));
  put_varint(bytes, object);
  put_tree_payload(bytes, o, text, reps);
}

/// Reads the op packed at the start of `bytes` into `o`, whose id, len and Lamport value the caller has
/// set (from the inline entry) and whose buffers are reused. object_at(i) gives the name of object i
/// and whether it holds text; replica_at(i) the id of replica i, i < nrep.
template <class ObjectAt, class ReplicaAt>
void unpack_tree_op(std::string_view bytes, tree_op& o, ObjectAt&& object_at, std::size_t nrep, ReplicaAt&& replica_at) {
  byte_reader in(bytes);
  const std::uint8_t flags = in.byte("packed log");
  o.kind = static_cast<tree_op_kind>(flags & 0x03), o.backward = (flags & packed_backward) != 0;
  o.ref = {};
  o.text.clear(), o.nodes.clear(), o.key.clear(), o.value.clear(), o.preds.clear();
  const auto [name, text] = object_at(static_cast<std::size_t>(in.varint("packed log")));
  o.object = name;
  if (!read_tree_payload(in, o, text, nrep, replica_at)) fail(error_code::invariant, "packed log entry does not read back");
}

/// The kind and the object index of the op packed at the start of `bytes` (its first two fields). O(1).
inline std::pair<tree_op_kind, std::uint32_t> packed_kind_and_object(std::string_view bytes) {
  byte_reader in(bytes);
  const std::uint8_t flags = in.byte("packed log");
  const std::uint64_t object = in.varint("packed log");
  if (!in.ok()) fail(error_code::invariant, "packed log entry does not read back");
  return {static_cast<tree_op_kind>(flags & 0x03), static_cast<std::uint32_t>(object)};
}

/// The UTF-8 text of the insert into a text packed at the start of `bytes`, as it lies there (no
/// copy, no decoding: it was valid when packed).
inline std::string_view packed_insert_text(std::string_view bytes) {
  byte_reader in(bytes);
  in.byte("packed log");
  in.varint("packed log");  // object
  std::string_view text;
  if (!read_text_insert_utf8(in, text)) fail(error_code::invariant, "packed log entry does not read back");
  return text;
}

}  // namespace folio::detail
