// folio/document.hpp — one replica of a record of any of the four types (docs/API.md, the /v2/crdt endpoints), behind one
// interface: the record's type and root name (`contentKey`), its version vector, replace-by-value,
// `apply` of encoded batches (idempotent, pending until dependencies arrive), `encode_since` for what a
// peer lacks, and the whole-document encoding.
//
//   folio::document d(folio::record_type::xml, 1);
//   auto change = d.replace_xml("<p>Hello <b>world</b></p>").second;  // parse + diff into ops
//   std::string wire = d.encode_change(change);                         // the ops, for peers
//   folio::document peer(folio::record_type::xml, 2);
//   peer.apply(wire);                                                    // apply_result
//   assert(peer.xml() == d.xml());
//
// Text and array records are one RGA sequence (sequence.hpp); map and xml records are trees of CRDT
// objects (detail/tree/tree_doc.hpp) sharing one id space. A batch or document of one type is refused by a
// record of another. Errors: wrong-type calls throw "[folio.type]"; bad values "[folio.value]" or
// "[folio.utf8]"; untrusted bytes never throw (apply_result / decode_result).
// Thread-safety: none; one thread at a time per document.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "array.hpp"
#include "detail/replica/rebase.hpp"
#include "detail/tree/tree_doc.hpp"
#include "detail/tree/tree_encoding.hpp"
#include "diff.hpp"
#include "encoding.hpp"
#include "markup.hpp"
#include "record_type.hpp"
#include "text.hpp"

namespace folio {

/// How document::apply treats a batch.
struct apply_options {
  /// The Lamport headroom rule (docs/INTERNALS.md, "Lamport headroom"): a batch is refused, `invalid`
  /// and with nothing integrated, if the last unit of any op has a Lamport value above
  ///   max(the record's clock, its changed units + lamport_slack) + the batch's changing units,
  /// where a record's changed units (document::changed) are the items it ever inserted plus those it
  /// deleted (in map and xml records, per sequence object, plus map sets and unsets), and a batch's
  /// changing units are what it adds to them: its units not integrated yet, except that a remove
  /// counts only the distinct items it targets that are not deleted yet (a remove of items removed
  /// already counts nothing, however long its range). A replica's op takes one more than the largest
  /// Lamport value it has seen, and everything it has seen changed at least that many units, so in a
  /// history delivered causally (as a server's sync receives it) no Lamport value passes the changed
  /// units: such a batch always keeps the rule. And a record that kept it from its first op holds a
  /// clock of at most its changed units + lamport_slack, at most twice max_units + lamport_slack: far
  /// below 2^31, which a batch that broke the rule could use up, leaving every later local edit failing
  /// with "[folio.overflow]". Off by default: a peer that can receive batches out of order (held as
  /// pending) must not turn it on.
  bool bounded_lamport = false;
  /// Refuses a batch (`too_large`, nothing integrated) after which the record could hold more than
  /// this many units (document::units; the batch counted as held_units_at_most): document::max_units(type)
  /// keeps a record within what document::decode reads back. Unbounded by default.
  std::size_t max_units = std::size_t(-1);
};

/// A place in an xml record that survives concurrent edits (document::xml_anchor_at): the item at it
/// (a child of an element or of the fragment, or a code point of a text node), or with `end` the end
/// of the children or text of the node made by `item` (document_start: the fragment's end).
struct xml_anchor {
  op_id item;
  bool end = false;
  friend bool operator==(const xml_anchor&, const xml_anchor&) = default;
};
/// Where a node or anchor is in an xml record now: `path`, the live child indices from the top-level
/// fragment down to a node (empty: the fragment), and an offset in that node (live children of an
/// element, code points of a text node).
struct xml_position {
  std::vector<std::size_t> path;
  std::size_t offset = 0;
  friend bool operator==(const xml_position&, const xml_position&) = default;
};

class document {
 public:
  /// An empty record of `type` edited as replica `self` (non-zero). Throws "[folio.replica]" for 0 and
  /// "[folio.value]" for a content key longer than 256 bytes.
  document(record_type type, replica_id self, std::string content_key = "content")
      : type_(type), key_(std::move(content_key)), impl_(make(type, self)) {
    if (key_.size() > detail::max_content_key) detail::fail(error_code::value, "content key longer than 256 bytes");
  }

  record_type type() const noexcept { return type_; }
  const std::string& content_key() const noexcept { return key_; }
  replica_id replica() const {
    return std::visit([](const auto& d) -> replica_id {
      if constexpr (std::is_same_v<std::decay_t<decltype(d)>, detail::tree_doc>)
        return d.self();
      else
        return d.replica();
    }, impl_);
  }
  const version_vector& version() const {
    return std::visit([](const auto& d) -> const version_vector& { return d.version(); }, impl_);
  }
  /// What the record holds, in units: one per inserted item (deleted or not), map set and unset, and
  /// one per remove in its log, however many items it targets — what document::decode counts against
  /// max_units; memory and the work of reading the record back are linear in it. Kept as ops
  /// integrate: O(1).
  std::uint64_t units() const {
    return std::visit([](const auto& d) { return d.units(); }, impl_);
  }
  /// The units the record's edits changed: items inserted plus items deleted (map and xml: in every
  /// sequence object, plus map sets and unsets). What the Lamport headroom rule measures the clock
  /// against (apply_options::bounded_lamport). O(1).
  std::uint64_t changed() const {
    return std::visit([](const auto& d) { return d.changed(); }, impl_);
  }
  /// Most units (units()) a record of type `t` may hold: what decode() reads back (the one limit
  /// both the decoder and a writer that must stay readable, such as the service, use).
  static constexpr std::size_t max_units(record_type t) noexcept {
    switch (t) {
      case record_type::text:
        return folio::text::default_max_ops;
      case record_type::array:
        return folio::array::default_max_ops;
      case record_type::map:
      case record_type::xml:
        break;
    }
    return default_max_tree_ops;
  }
  /// How far above a record's changed units a batch may take its clock beyond what the batch itself
  /// changes (apply_options::bounded_lamport).
  static constexpr std::uint32_t lamport_slack = 1024;

  /// Largest Lamport value integrated (0 for an empty record). O(1).
  std::uint32_t clock() const {
    return std::visit([](const auto& d) { return d.clock(); }, impl_);
  }
  /// pending(): unit operations held for missing dependencies; rejected(): operations (one each,
  /// whatever its length) dropped as invalid once those arrived.
  std::size_t pending() const {
    return std::visit([](const auto& d) { return d.pending(); }, impl_);
  }
  std::size_t rejected() const {
    return std::visit([](const auto& d) { return d.rejected(); }, impl_);
  }

  // ---- values -----------------------------------------------------------------------------------

  std::string text() const { return as<folio::text>("text").to_string(); }
  /// Array elements: opaque bytes (the service keeps canonical JSON).
  std::vector<std::string> array() const { return as<folio::array>("array").values(); }
  /// Map entries by key (values opaque bytes).
  std::map<std::string, std::string> map() const {
    std::map<std::string, std::string> out;
    tree("map").for_each_entry([&](const std::string& k, const std::string& v) { out.emplace(k, v); });
    return out;
  }
  /// Map records: calls f(op_id id, std::string_view key) for every set and removal of a key the
  /// record integrated, in integration order: which op changed which key, so that a diff between two
  /// versions can name who changed a key (the ops one version holds and the other does not). O(ops).
  template <class F>
  void for_each_map_change(F&& f) const {
    tree("map").for_each_op_since(version_vector{}, nullptr, [&](const detail::tree_op& o) {
      if (o.kind == detail::tree_op_kind::set || o.kind == detail::tree_op_kind::unset) f(o.id, std::string_view(o.key));
    });
  }
  /// XML records: calls f(op_id id, std::string_view tag, const std::map<std::string, std::string>&
  /// attributes) for every live element in document order, `id` the op that inserted it (the same in
  /// every checkout holding it, so two checkouts' elements pair by id). O(live size).
  template <class F>
  void for_each_xml_element(F&& f) const {
    tree("xml").for_each_element(std::forward<F>(f));
  }
  /// The XML fragment, serialised canonically (the same bytes on every replica with the same ops).
  std::string xml() const { return markup::serialize(tree("xml").flat()); }
  markup::fragment xml_fragment() const { return tree("xml").fragment(); }

  // ---- replace-by-value and local edits ---------------------------------------------------------

  /// Each returns the local change made (all its ops; empty when the value was already equal).
  local_change replace_text(std::string_view utf8) { return replace_text_utf8(as<folio::text>("text"), utf8); }
  local_change replace_array(const std::vector<std::string>& values) { return folio::replace_array(as<folio::array>("array"), values); }
  local_change replace_map(const std::map<std::string, std::string>& entries) { return tree("map").replace_map(entries); }
  local_change replace_xml(const markup::flat_fragment& f) { return tree("xml").replace_xml(f); }
  local_change replace_xml(const markup::fragment& f) { return replace_xml(markup::flat_fragment::from(f)); }
  /// Parses `markup` (markup::parse's rules) and replaces the tree with it; on a parse error nothing
  /// changes and the result says why and where.
  std::pair<markup::parse_result, local_change> replace_xml(std::string_view xml_markup) {
    tree("xml");
    markup::flat_fragment f;
    markup::parse_result pr = markup::parse(xml_markup, f);
    if (!pr) return {std::move(pr), local_change{replica(), version().get(replica()), 0}};
    return {std::move(pr), replace_xml(f)};
  }
  // ---- positions and range edits in xml records ------------------------------------------------
  //
  // A path names a node by live child indices from the top-level fragment ([] the fragment); a node is
  // also named by the id of the insert that made it, the same on every replica. Each call throws
  // "[folio.type]" on another record type and "[folio.range]" for a path or offset past the end (or
  // below a text node). Costs: depth · log n for each lookup along a path or up from a node, since each
  // sequence finds positions and ids in O(log n) (docs/INTERNALS.md, "Anchors and xml ranges").

  /// The anchor at `offset` of the node at `path` (an element or the fragment: a live child index; a
  /// text node: a code point index): the item there, or the node's end at offset == its length.
  /// O(depth · log n).
  xml_anchor xml_anchor_at(std::span<const std::size_t> path, std::size_t offset) const {
    const detail::tree_doc& t = tree("xml");
    const detail::tree_doc::xml_node n = t.node_at(path);
    const std::size_t length = t.length(n);
    if (offset > length) detail::fail(error_code::range, "offset " + std::to_string(offset) + " past the end of a node of " + std::to_string(length));
    return offset == length ? xml_anchor{n.id, true} : xml_anchor{t.item_at(n, offset), false};
  }
  /// Where anchor `a` is now: the path of its node and the offset in it (a removed item: the live
  /// items before it, where it was). Nullopt when the id is no item (or node, for an end) here, or its
  /// node is not visible (removed, or under a removed element). O(depth · log n).
  std::optional<xml_position> xml_resolve(const xml_anchor& a) const {
    const detail::tree_doc& t = tree("xml");
    auto p = a.end ? t.resolve_end(a.item) : a.item == document_start ? std::nullopt : t.resolve(a.item);
    if (!p) return std::nullopt;
    return xml_position{std::move(p->path), p->offset};
  }
  /// The path of the live node made by op `node` (document_start: the fragment, []), or nullopt when it
  /// is no node here or is not visible. O(depth · log n).
  std::optional<std::vector<std::size_t>> xml_path_of(op_id node) const { return tree("xml").path_of(node); }
  /// The ids of the live children of the element (or fragment) at `path`, the op that inserted each.
  /// O(depth · log n + children).
  std::vector<op_id> xml_child_ids(std::span<const std::size_t> path) const {
    const detail::tree_doc& t = tree("xml");
    return t.child_ids(t.node_at(path));
  }
  /// The canonical markup of the node at `path` (not empty) with its subtree, as xml() writes it there.
  /// O(depth · log n + subtree).
  std::string xml_markup(std::span<const std::size_t> path) const {
    const detail::tree_doc& t = tree("xml");
    if (path.empty()) detail::fail(error_code::range, "the markup of a node needs a path of at least one index");
    const detail::tree_doc::xml_node parent = t.node_at(path.first(path.size() - 1));
    if (parent.text) detail::fail(error_code::range, "path index " + std::to_string(path.size() - 1) + " goes below a text node");
    return markup::serialize(t.flat_range(parent.object, path.back(), 1));
  }
  /// Makes the live children [from, to) of the element (or fragment) at `path` equal to the top-level
  /// nodes of `nodes`, through the edit script of replace_xml made between them alone: the result is
  /// what replace_xml of the whole value with that range so replaced makes, at a cost of
  /// O(depth · log n + the range and `nodes` + the script · log n), not of the document. Throws
  /// "[folio.range]" for a bad path or range and "[folio.value]" when the nodes would nest deeper than
  /// markup::max_depth; nothing changes then.
  local_change replace_xml_range(std::span<const std::size_t> path, std::size_t from, std::size_t to, const markup::flat_fragment& nodes) {
    detail::tree_doc& t = tree("xml");
    const detail::tree_doc::xml_node n = t.node_at(path);
    if (n.text) detail::fail(error_code::range, "the path names a text node, which has no children");
    if (from > to || to > t.length(n))
      detail::fail(error_code::range, "children range " + std::to_string(from) + ".." + std::to_string(to) + " is not within a list of " +
                                          std::to_string(t.length(n)));
    return t.replace_xml_range(n, from, to, nodes);
  }
  /// Parses `xml_markup` (markup::parse's rules: a fragment) and replace_xml_range()s with its nodes; on
  /// a parse error nothing changes and the result says why and where.
  std::pair<markup::parse_result, local_change> replace_xml_range(std::span<const std::size_t> path, std::size_t from, std::size_t to,
                                                                  std::string_view xml_markup) {
    tree("xml");
    markup::flat_fragment f;
    markup::parse_result pr = markup::parse(xml_markup, f);
    if (!pr) return {std::move(pr), local_change{replica(), version().get(replica()), 0}};
    return {std::move(pr), replace_xml_range(path, from, to, f)};
  }
  /// Starts (true) or stops recording which elements integrated operations change, for xml_changed().
  void record_xml_changes(bool on) { tree("xml").record_changes(on); }
  /// The elements that operations integrated since record_xml_changes(true) or the last call changed —
  /// their attributes, their children list, or the text of one of their child text nodes — each once,
  /// by the id of the op that inserted it (document_start: the fragment), visible ones only (not
  /// removed nor under a removed element). Local edits count as well as apply(). O(k · depth · log n)
  /// for k objects changed: no walk over the tree.
  std::vector<op_id> xml_changed() { return tree("xml").changed_elements(); }

  /// Map records: set or remove one key.
  local_change set(const std::string& key, std::string value) { return tree("map").set(key, std::move(value)); }
  local_change remove(const std::string& key) { return tree("map").remove(key); }

  /// The typed replica underneath, for position-based editing of text and arrays.
  folio::text& as_text() { return as<folio::text>("text"); }
  folio::array& as_array() { return as<folio::array>("array"); }
  const folio::text& as_text() const { return as<folio::text>("text"); }
  const folio::array& as_array() const { return as<folio::array>("array"); }

  // ---- exchanging operations --------------------------------------------------------------------

  /// An encoded batch of what a replica at `since` lacks (empty batch if nothing).
  std::string encode_since(const version_vector& since) const {
    return std::visit(
        [&](const auto& d) {
          if constexpr (std::is_same_v<std::decay_t<decltype(d)>, detail::tree_doc>)
            return tree_bytes(d, detail::kind_batch, since);
          else
            return batch_bytes(d, d.ops_since(since));
        },
        impl_);
  }
  /// encode_since(since) — cut at `upto` when given (only the operations that version holds) — handed
  /// to `write(std::string_view)` in pieces of `piece` bytes or a little more (the last may be
  /// shorter) as it is written, rather than returned whole: the same bytes, while this holds the
  /// record's replica table and a piece, whatever the size of the answer (no batch, no copy of the
  /// ops). Reads the ops twice (map, xml) or three times (text, array: their values follow the op
  /// table). O(ops + values), or O(log entries) when the version lacks many (op_log::for_each_since).
  template <class Write>
  void encode_since(const version_vector& since, const version_vector* upto, Write&& write, std::size_t piece = std::size_t(64) << 10) const {
    std::string out;
    const auto flush = [&](std::string& b) {
      write(std::string_view(b));
      b.clear();
    };
    detail::put_header(out, detail::kind_batch, type_);
    std::visit(
        [&](const auto& d) {
          using D = std::decay_t<decltype(d)>;
          if constexpr (std::is_same_v<D, detail::tree_doc>) {
            detail::tree_op_format format{d.shape()};
            detail::put_op_table_in_pieces(out, format, [&](auto&& f) { d.for_each_op_since(since, upto, f); }, flush, piece);
          } else {
            using T = typename D::value_type;
            // Then the content: text, its UTF-8 byte length and bytes; array, the value count and each value.
            std::uint64_t content = 0;
            bool first = true;
            detail::sequence_op_format format;
            detail::put_op_table_in_pieces(out, format, [&](auto&& f) {
              d.impl_.for_each_op_since(since, upto, [&](const op& o, auto&& each_value) {
                if (first && o.kind == op_kind::insert) {
                  if constexpr (std::is_same_v<T, char32_t>)
                    each_value([&](char32_t c) { content += utf8_length(std::u32string_view(&c, 1)); });
                  else
                    content += o.len;
                }
                f(o);
              });
              first = false;
            }, flush, piece);
            detail::put_varint(out, content);
            d.impl_.for_each_op_since(since, upto, [&](const op& o, auto&& each_value) {
              if (o.kind != op_kind::insert) return;
              each_value([&](const T& v) {
                if constexpr (std::is_same_v<T, char32_t>)
                  append_utf8(out, v);
                else
                  detail::put_string(out, v);
                if (out.size() >= piece) flush(out);
              });
            });
          }
        },
        impl_);
    if (!out.empty()) flush(out);
  }
  /// An encoded batch of one local change.
  std::string encode_change(const local_change& c) const {
    return std::visit([&](const auto& d) { return batch_bytes(d, d.ops(c)); }, impl_);
  }

  /// Integrates an encoded batch from an untrusted peer: a malformed batch or one for another record
  /// type is `invalid` (message says why and where) and changes nothing; otherwise as the engines'
  /// apply: duplicates skipped, missing dependencies pending, stops at the first invalid op.
  apply_result apply(std::string_view batch, const apply_options& options = {}) {
    return apply(batch, [](std::string_view) { return std::string(); }, options);
  }
  /// As apply(batch), and every value the batch gives an array item or a map entry must pass
  /// `check(value)`, which answers why not (empty: accepted). The values are opaque to the engine;
  /// this is where their owner's rule goes (the service: JSON). The whole batch is checked before
  /// anything is integrated, so a refused value is `invalid` (message from `check`, op_index the op
  /// holding it) and changes nothing. Text and xml records do not call `check` (the engine checks
  /// their characters and names itself). Array items are judged when they can show: an item this
  /// record already has keeps its value, and one the batch itself removes never shows, so neither is
  /// judged — such a value may be a placeholder for one not known (a batch made from a decoded
  /// document: docs/INTERNALS.md). The rule thus holds for every value a batch that integrates whole
  /// makes visible; a caller that keeps part of a batch (refused midway, or with its removes pending)
  /// may show an unjudged value. `options` add rules a batch must keep (apply_options); they
  /// too are checked before anything is integrated. `check` must not call into this document.
  template <class Check>
    requires std::is_invocable_r_v<std::string, Check&, std::string_view>
  apply_result apply(std::string_view batch, Check&& check, const apply_options& options = {}) {
    apply_result res;
    detail::byte_reader r(batch);
    record_type t{};
    if (detail::read_header_any(r, detail::kind_batch, t) && t != type_) {
      res.status = apply_status::invalid;
      res.message = "batch holds " + std::string(to_string(t)) + " operations; this record is " +
                    std::string(to_string(type_));
      return res;
    }
    // Every way out fills `res` and returns it, so that it is built in the caller's place (no
    // apply_result is moved out of the visitor and std::visit on a keystroke's path).
    const auto refuse = [&](std::size_t op_index, std::string why) {
      res.status = apply_status::invalid, res.op_index = op_index, res.message = std::move(why);
    };
    std::visit(
        [&](auto& d) {
          using D = std::decay_t<decltype(d)>;
          decode_result dr;
          if constexpr (std::is_same_v<D, detail::tree_doc>) {
            detail::tree_batch b;  // `r` is past the header (or holds its failure)
            if (r.ok() && detail::read_tree_ops(r, d.shape(), b.ops) && !r.at_end()) r.fail(decode_status::trailing_bytes, "after batch");
            dr = r.result();
            if (dr) {
              if (d.shape() == detail::tree_shape::map)
                for (std::size_t i = 0; i < b.ops.size(); ++i)
                  if (b.ops[i].kind == detail::tree_op_kind::set)
                    if (std::string why = check(std::string_view(b.ops[i].value)); !why.empty()) return refuse(i, std::move(why));
              if (options.bounded_lamport)
                if (const std::optional<std::size_t> i = beyond_lamport_headroom(
                        std::span<const detail::tree_op>(b.ops), d.clock(), d.changed(),
                        [&](std::uint64_t need) { return d.changing_units(b.ops, need); }, &res.message))
                  return refuse(*i, std::move(res.message));
              if (beyond_max_units(std::span<const detail::tree_op>(b.ops), options.max_units, res)) return;
              res = d.apply(b);
              return;
            }
          } else {
            op_batch<typename D::value_type>& b = scratch<typename D::value_type>();
            const scratch_release<typename D::value_type> release{b};
            bool read = false;
            if constexpr (std::is_same_v<D, folio::text>) {
              // A remote keystroke: one op read straight from the bytes and, when it is the next op of
              // a known replica, integrated without a batch; what try_integrate_next declines (it
              // changes nothing then) goes the general way below, with the op it read.
              if (op o; r.ok() && detail::read_single_op_text(r.rest(), o, b.content)) {
                // The next op of its replica: an insert changes its len units, a remove at least none.
                const std::uint64_t own = o.kind == op_kind::insert ? o.len : 0;
                if (!(options.bounded_lamport &&
                      std::uint64_t(o.lamport) + o.len - 1 > std::max<std::uint64_t>(d.clock(), d.changed() + lamport_slack) + own) &&
                    !(options.max_units != std::size_t(-1) && units() + detail::held_units(o.kind == op_kind::remove, o.len) > options.max_units) &&
                    d.impl_.try_integrate_next(o, b.content, res))
                  return;
                b.ops.push_back(o), read = true;  // b.ops is empty: scratch_release leaves it so
              }
            }
            if (!read && r.ok()) detail::read_batch_table(r, b);  // (read_batch_body, but for the one-op reading tried above)
            dr = r.result();
            if (dr) {
              if constexpr (std::is_same_v<typename D::value_type, std::string>) {
                std::string why;
                std::size_t at = 0;
                d.for_each_showable_value(b, [&](std::size_t i, const std::string& v) { return at = i, (why = check(std::string_view(v))).empty(); });
                if (!why.empty()) return refuse(at, std::move(why));
              }
              if (options.bounded_lamport)
                if (const std::optional<std::size_t> i = beyond_lamport_headroom(
                        std::span<const op>(b.ops), d.clock(), d.changed(),
                        [&](std::uint64_t need) { return d.impl_.changing_units(b.ops, need); }, &res.message))
                  return refuse(*i, std::move(res.message));
              if (beyond_max_units(std::span<const op>(b.ops), options.max_units, res)) return;
              if constexpr (std::is_same_v<D, folio::text>)
                if (read) return d.impl_.integrate_batch(b, detail::rga<char32_t>::content_mode::from_batch, res);  // declined above: not tried again
              res = d.apply(b);
              return;
            }
          }
          res.status = apply_status::invalid, res.message = "batch: " + dr.description();
        },
        impl_);
    return res;
  }

  // ---- earlier versions -------------------------------------------------------------------------

  /// A new document holding exactly the operations of this one that `at` names: the record as it was
  /// at that version (text(), array(), map(), xml() answer its values then), of the same type and
  /// content key, edited as replica(). `at` must be a version this document had: contained in
  /// version() and causally closed (with every op it names, what that op names: its replica's earlier
  /// ops, its origin, targets, object and observed entries); else throws "[folio.value]" saying which.
  /// Values this document holds only as placeholders (removed items of a text or array record decoded
  /// from an encoding without them: encode(kept_values::live)) show as placeholders. O(ops and values
  /// up to `at`), whatever the number of versions between.
  document checkout(const version_vector& at) const {
    const version_order order = at.compare(version());
    if (order != version_order::equal && order != version_order::before)
      detail::fail(error_code::value, "checkout: the version names operations this document does not hold");
    document out(type_, replica(), key_);
    apply_result res;
    std::visit(
        [&](const auto& d) {
          using D = std::decay_t<decltype(d)>;
          if constexpr (std::is_same_v<D, detail::tree_doc>)
            res = std::get<D>(out.impl_).apply(d.ops_since(version_vector{}, &at));
          else
            res = std::get<D>(out.impl_).apply(d.ops_between(version_vector{}, at));
        },
        impl_);
    if (!res || out.pending() != 0 || out.version().compare(at) != version_order::equal)
      detail::fail(error_code::value, "checkout: the version is not causally closed (it names an operation without one it depends on), so this "
                                      "document never had it");
    return out;
  }

  /// Integrates here, as this replica's next operations, the local change `c` made on `base`, a
  /// checkout() of this document (an earlier version of it, edited as the same replica) on which `c`
  /// was the last edit: the change merges with everything this document integrated since that
  /// version as the offline edit of a replica that had only the checkout would. Its ids (replica(),
  /// s), s >= c.first, become (replica(), s - c.first + version()[replica()]), in the ops and in every
  /// reference to them; references to what `base` held before `c` stay; its Lamport values rise by
  /// one constant that puts them above clock() (docs/INTERNALS.md, "Checkout and rebase"). Returns
  /// the change as made here (encode_change gives its batch). Throws "[folio.type]" for a base of
  /// another type, "[folio.value]" for a base or change that is not that (another replica, a change
  /// not the base's last, a reference this document lacks) and "[folio.overflow]" when the ids or
  /// Lamport values would pass 2^31; it throws before integrating anything. O(the change's ops, their
  /// values and references) plus integrating them, plus for map and xml one pass over the base's log
  /// (reading a change's ops there: tree_doc::ops).
  local_change rebase(const document& base, const local_change& c) {
    const replica_id self = replica();
    if (base.type_ != type_)
      detail::fail(error_code::type, std::string("rebase: the base is a ") + std::string(to_string(base.type_)) + " record, this one " +
                                         std::string(to_string(type_)));
    if (base.replica() != self || (c.count != 0 && c.replica != self))
      detail::fail(error_code::value, "rebase: the base and its change must be edited as this document's replica");
    const std::uint32_t next = version().get(self);
    if (c.count == 0) return local_change{self, next, 0};
    if (std::uint64_t(c.first) + c.count != base.version().get(self))
      detail::fail(error_code::value, "rebase: the change is not the last edit of the base");
    if (c.first > next) detail::fail(error_code::value, "rebase: the base holds operations of this replica that this document does not");
    const local_change out{self, next, c.count};
    std::visit(
        [&](auto& d) {
          using D = std::decay_t<decltype(d)>;
          auto b = std::get<D>(base.impl_).ops(c);
          const auto [low, high] = detail::lamport_span(b.ops);
          const std::uint32_t lamport_shift = clock() >= low ? clock() + 1 - low : 0;
          detail::reserve_counters(next, 0, c.count);
          detail::reserve_counters(0, low - 1 + std::uint64_t(lamport_shift), high - low + 1);
          detail::rebase_ops(b.ops, detail::rebase_shift{self, c.first, next - c.first, lamport_shift}, version());
          const apply_result res = d.apply(b);
          if (!res || version().get(self) != next + c.count) detail::fail(error_code::invariant, "rebase: the change did not integrate whole");
        },
        impl_);
    return out;
  }

  // ---- the whole document -----------------------------------------------------------------------

  /// Type, root name, full causal history and values. Pending ops are not included. A text or array
  /// record keeps the values of its live items (format version 2; removed ones decode as
  /// placeholders) or, with kept_values::all, of every item (version 3: a decoded copy's checkout()
  /// shows removed values as they were). Map and xml records keep every value either way (version 1).
  std::string encode(kept_values kept = kept_values::live) const {
    return std::visit(
        [&](const auto& d) -> std::string {
          if constexpr (std::is_same_v<std::decay_t<decltype(d)>, detail::tree_doc>) {
            return tree_bytes(d, detail::kind_document, version_vector{});
          } else {
            return d.encode(key_, kept);
          }
        },
        impl_);
  }

  /// Most unit operations a decoded map or xml document may hold.
  static constexpr std::size_t default_max_tree_ops = std::size_t(1) << 24;

  /// Rebuilds a document of whatever type `bytes` holds, as replica `self`. A document holding more
  /// than max_units(type) unit operations is refused (too_large); `max_units_override`, when not 0,
  /// is the limit instead (a repair tool reading a record written past it). `out` is unchanged on failure.
  static decode_result decode(std::string_view bytes, replica_id self, std::optional<document>& out, std::size_t max_units_override = 0) {
    detail::byte_reader r(bytes);
    record_type type{};
    std::string key;
    if (!detail::read_header_any(r, detail::kind_document, type)) return r.result();
    if (type == record_type::text || type == record_type::array) {
      document d(type, self);
      const std::size_t limit = max_units_override ? max_units_override : max_units(type);
      const decode_result dr = type == record_type::text ? folio::text::decode(bytes, self, std::get<folio::text>(d.impl_), limit, &d.key_)
                                                         : folio::array::decode(bytes, self, std::get<folio::array>(d.impl_), limit, &d.key_);
      if (dr) out.emplace(std::move(d));
      return dr;
    }
    if (!detail::read_content_key(r, key)) return r.result();
    const detail::tree_shape shape = type == record_type::map ? detail::tree_shape::map : detail::tree_shape::xml;
    // Each op is integrated as it is read (no copy of the log is held); the answer is as if the whole
    // log had been read first: a malformed byte anywhere, then the limit, then integration.
    const std::size_t ops_at = r.offset();
    document d(type, self, std::move(key));
    std::uint64_t read_units = 0;
    const std::size_t limit = max_units_override ? max_units_override : max_units(type);
    const apply_result res = std::get<detail::tree_doc>(d.impl_).apply_each([&](auto&& integrate) {
      detail::read_tree_ops_each(r, shape, [&](const detail::tree_op& o) {
        read_units += detail::tree_doc::held_units(o);
        if (read_units <= limit) integrate(o);
      });
    });
    if (!r.ok()) return r.result();
    if (!r.at_end()) return r.fail(decode_status::trailing_bytes, "after document"), r.result();
    if (read_units > limit) return decode_result{decode_status::too_large, ops_at, "document holds more operations than the limit"};
    if (!res || res.pending != 0) return decode_result{decode_status::inconsistent, ops_at, "op log does not integrate"};
    out.emplace(std::move(d));
    return {};
  }

  /// Verifies every invariant; throws "[folio.invariant] ..." on a violation.
  void check_invariants() const {
    std::visit([](const auto& d) { d.check_invariants(); }, impl_);
  }
  /// Heap bytes held (approximate for map and xml).
  std::size_t memory_usage() const {
    return std::visit([](const auto& d) { return d.memory_usage(); }, impl_);
  }

 private:
  using impl = std::variant<folio::text, folio::array, detail::tree_doc>;

  static impl make(record_type t, replica_id self) {
    switch (t) {
      case record_type::text:
        return impl(std::in_place_type<folio::text>, self);
      case record_type::array:
        return impl(std::in_place_type<folio::array>, self);
      case record_type::map:
        return impl(std::in_place_type<detail::tree_doc>, detail::tree_shape::map, self);
      case record_type::xml:
        break;
    }
    return impl(std::in_place_type<detail::tree_doc>, detail::tree_shape::xml, self);
  }

  /// The first op of `ops` (op or tree_op) that breaks the Lamport headroom rule (apply_options) on a
  /// record whose clock is `clock` and changed units `changed`, with `*why` naming the rule; nullopt if
  /// none does. `changing(need)` answers the units of the batch that change the record, or at least
  /// `need` of them; it is asked only when an op reaches past max(clock, changed + lamport_slack).
  /// O(ops) plus what `changing` costs.
  template <class Op, class Changing>
  static std::optional<std::size_t> beyond_lamport_headroom(std::span<const Op> ops, std::uint32_t clock, std::uint64_t changed, Changing&& changing,
                                                            std::string* why) {
    std::uint64_t top = 0;
    for (const Op& o : ops) top = std::max(top, std::uint64_t(o.lamport) + o.len - 1);
    const std::uint64_t base = std::max<std::uint64_t>(clock, changed + lamport_slack);
    if (top <= base) return std::nullopt;
    const std::uint64_t changes = changing(top - base), bound = base + changes;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const std::uint64_t last = std::uint64_t(ops[i].lamport) + ops[i].len - 1;
      if (last <= bound) continue;
      *why = "Lamport value " + std::to_string(last) + " is above " + std::to_string(bound) + ": the larger of the record's clock (" +
             std::to_string(clock) + ") and its " + std::to_string(changed) + " changed units plus " + std::to_string(lamport_slack) + ", plus the " +
             std::to_string(changes) +
             " unit operations of the batch that change the record; a replica's operation takes one more than the largest Lamport value it has "
             "seen, and what it has seen changed at least as many units, so a batch that comes with what its author saw cannot go higher (the "
             "Lamport headroom rule)";
      return i;
    }
    return std::nullopt;
  }

  static bool is_remove(const op& o) noexcept { return o.kind == op_kind::remove; }
  static bool is_remove(const detail::tree_op& o) noexcept { return o.kind == detail::tree_op_kind::remove; }

  /// At most what `ops` would add to units() once integrated: per op with units not integrated yet
  /// (beyond its replica's entry in the version vector), what those units hold (detail::held_units:
  /// each unit, or 1 for a remove). O(ops log replicas).
  template <class Op>
  std::uint64_t held_units_at_most(std::span<const Op> ops) const {
    std::uint64_t more = 0;
    const version_vector& v = version();
    for (const Op& o : ops) {
      const std::uint64_t have = v.get(o.id.replica), end = std::uint64_t(o.id.seq) + o.len;
      if (end > have) more += detail::held_units(is_remove(o), end - std::max<std::uint64_t>(have, o.id.seq));
    }
    return more;
  }

  /// With `limit` set (not size_t(-1)): true, `res` saying why (too_large), when `ops` could take the
  /// record past `limit` units (held_units_at_most; apply_options::max_units). O(ops log replicas).
  template <class Op>
  bool beyond_max_units(std::span<const Op> ops, std::size_t limit, apply_result& res) const {
    if (limit == std::size_t(-1)) return false;
    const std::uint64_t held = units(), more = held_units_at_most(ops);
    if (held + more <= limit) return false;
    res.status = apply_status::too_large;
    res.message = "the record holds " + std::to_string(held) + " unit operations and the batch would add " + std::to_string(more) + ", past the " +
                  std::to_string(limit) + (type_ == record_type::array || type_ == record_type::xml ? " an " : " a ") + std::string(to_string(type_)) +
                  " record can hold";
    return true;
  }

  template <class T>
  T& as(const char* want) {
    if (T* p = std::get_if<T>(&impl_)) return *p;
    detail::fail(error_code::type, std::string("record is ") + std::string(to_string(type_)) + ", not " + want);
  }
  template <class T>
  const T& as(const char* want) const {
    return const_cast<document*>(this)->as<T>(want);
  }
  detail::tree_doc& tree(const char* want) {
    detail::tree_doc* p = std::get_if<detail::tree_doc>(&impl_);
    if (!p || (p->shape() == detail::tree_shape::map) != (std::string_view(want) == "map"))
      detail::fail(error_code::type, std::string("record is ") + std::string(to_string(type_)) + ", not " + want);
    return *p;
  }
  const detail::tree_doc& tree(const char* want) const { return const_cast<document*>(this)->tree(want); }

  /// A batch or document (`kind`) of what a replica at `since` lacks, written as the log is read.
  std::string tree_bytes(const detail::tree_doc& d, unsigned char kind, const version_vector& since) const {
    std::string out;
    detail::put_header(out, kind, type_);
    if (kind == detail::kind_document) detail::put_content_key(out, key_);
    detail::put_tree_ops_each(out, d.shape(), [&](auto&& f) { d.for_each_op_since(since, nullptr, f); });
    return out;
  }
  std::string batch_bytes(const detail::tree_doc& d, const detail::tree_batch& b) const {
    std::string out;
    detail::put_header(out, detail::kind_batch, type_);
    detail::put_tree_ops(out, d.shape(), b.ops);
    return out;
  }
  template <class D, class B>
  std::string batch_bytes(const D&, const B& b) const {
    return encode_batch(b);
  }

  /// Where apply decodes a text or array batch, kept between calls so that a keystroke's batch
  /// allocates nothing once the vectors have grown. Emptied
  /// after each batch (an array's values freed), and given back when past 4 KiB, so a large batch's
  /// memory is not held.
  template <class T>
  op_batch<T>& scratch() {
    if constexpr (std::is_same_v<T, char32_t>)
      return text_scratch_;
    else
      return array_scratch_;
  }
  template <class T>
  struct scratch_release {
    op_batch<T>& b;
    ~scratch_release() {
      b.ops.clear(), b.content.clear();  // an array batch's values go now; the vectors keep their room
      if (b.ops.capacity() * sizeof(op) + b.content.capacity() * sizeof(T) > 4096) give_back(b);
    }
    [[gnu::noinline]] static void give_back(op_batch<T>& b) { b = op_batch<T>{}; }  // rare: out of the keystroke's way
  };

  record_type type_;
  std::string key_;
  impl impl_;
  op_batch<char32_t> text_scratch_;
  op_batch<std::string> array_scratch_;
};

}  // namespace folio
