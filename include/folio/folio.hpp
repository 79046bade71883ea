// folio/folio.hpp — Folio's CRDT engine in one include.
//
// Header-only, C++20; depends on the standard library and pugixml. A document is one replica's copy;
// replicas exchange op batches and converge whatever the delivery order.
//
//   #include <folio/folio.hpp>
//
//   folio::text a(1), b(2);                       // two replicas, ids 1 and 2
//   auto c1 = a.insert_utf8(0, "Hello world");    // local edit -> ids of the ops it made
//   b.apply(a.ops(c1));                           // ship them (encode_batch/decode_batch on the wire)
//   b.insert_utf8(5, ",");                        // concurrent edits ...
//   a.erase(6, 5);
//   b.apply(a.ops_since(b.version()));            // ... exchanged in either order
//   a.apply(b.ops_since(a.version()));
//   assert(a.to_string() == b.to_string());       // "Hello, " on both
//
//   folio::replace_text_utf8(a, "Hello, Folio");  // diff a new full value into minimal ops
//   std::string bytes = a.encode();               // whole document, full causal history
//   folio::text c(3);
//   folio::text::decode(bytes, 3, c);             // returns a decode_result (status, byte offset)
//
// Map and xml records have one entry point, folio::document (document.hpp), which serves all four
// record types:
//
//   folio::document m(folio::record_type::map, 1), x(folio::record_type::xml, 1);
//   m.set("title", "\"Draft\"");                  // map: set / remove / replace_map, map()
//   x.replace_xml("<p>Hello <b>world</b></p>");     // xml: replace_xml (a diff), xml(), xml_fragment()
//   peer.apply(m.encode_since(peer.version()));     // every type: encoded batches, encode(), decode()
//
// Why no folio/map.hpp and folio/xml.hpp beside text.hpp and array.hpp: text and array are single
// sequences whose ops (op_batch<T>, ops.hpp) are public, so their classes are replicas of their own
// with positional editing (document::as_text / as_array give them). A map or xml record is a tree of
// CRDT objects sharing one id space (detail/tree/tree_doc.hpp) whose ops are internal and travel only
// encoded; a class for each would be document less the other types' methods, every method a forward.
// document checks the type on every call ("[folio.type]") and on every batch it applies.
//
// Headers: id.hpp (ids, Lamport order), version.hpp (version vectors), ops.hpp (ops and batches),
// record_type.hpp (the four record types, numbered once: the encodings' value type), encoding.hpp
// (binary format), sequence.hpp / text.hpp / array.hpp (the RGA types), diff.hpp (replace-by-value),
// document.hpp (one record of any type: text, array, map, xml), markup.hpp (strict XML fragment
// parsing and canonical output), sync.hpp (a client replica kept in step with a server), error.hpp
// (results and exceptions). Internals live in detail/.
#pragma once

#include "array.hpp"
#include "diff.hpp"
#include "document.hpp"
#include "encoding.hpp"
#include "error.hpp"
#include "id.hpp"
#include "markup.hpp"
#include "ops.hpp"
#include "record_type.hpp"
#include "sequence.hpp"
#include "sync.hpp"
#include "text.hpp"
#include "version.hpp"
