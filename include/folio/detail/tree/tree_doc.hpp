// folio/detail/tree/tree_doc.hpp — the document core of records made of several CRDT objects: a map
// (one OR-map object) and an XML tree (children sequences, attribute maps and texts).
//
// Objects. Every object is named by the id of the operation that created it plus a role: the root
// (created by the document itself, id document_start), an element's attributes and children, and a
// text node's text. Inserting an element into a children sequence creates its attribute map and its
// children sequence; inserting a text node creates its text. Objects are never destroyed: an edit
// under an element that another replica deleted is integrated (its id may be depended on) but is
// invisible, since the element is a tombstone — the same on every replica.
//
// Ids. Operations carry document-wide ids (replica, seq): one seq per unit operation of the replica,
// whatever the object, so one version vector covers the document. A sequence object is a detail::rga
// whose ids are the object's own: per (object, replica) the unit ops get local seqs 0, 1, 2, ... in
// integration order, which is the same on every replica because a replica's ops are integrated in seq
// order. `seg` tables translate between the two; both columns rise, so either way is a binary search.
// Lamport values are per object (an RGA or OR-map only compares the keys of its own items).
//
// Lazy objects. Most sequences are written once and read many times: a record loaded from markup is
// one insert per text node and per children list. A sequence object whose only op so far is its first
// insert keeps no engine, just that op's place in the log (`whole`): its items are the op's values, its
// ids the op's. Its second op (or a local edit that needs positions) builds the engine from the logged
// op, then goes on as usual, so the engine holds what it would have held had it been built at once. An
// attribute map gets its or_map with its first op. This keeps a loaded 1 MiB XML record to a few
// bytes per object besides its log.
//
// Integration is the sequence engine's: an op is integrated when the previous op of its author is,
// and its object's creator, its origin, its targets and its preds are; until then it is pending. An
// op that names something that is not what it claims (a target in another object, a map op on a
// sequence, a tag that is not an XML name) is invalid. The log keeps every integrated op, with its
// values, in integration order, packed into bytes (packed_log.hpp); `ops_since` and the document
// encoding read it.
//
// Files: the replica table, version, clock, the integrate preamble and the parked ops are the
// sequence engine's too (detail/replica/replica_core.hpp); this file is the object model, the id translation,
// integration and the log; the local edits (map sets, replace_map, replace_xml) are
// detail/tree/tree_edit.hpp, which this file includes at its end.
//
// Thread-safety: none; one thread at a time per document.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../../error.hpp"
#include "../../id.hpp"
#include "../../markup.hpp"
#include "../../ops.hpp"
#include "../../version.hpp"
#include "../util/hash.hpp"
#include "../replica/id_table.hpp"
#include "or_map.hpp"
#include "packed_log.hpp"
#include "../replica/replica_core.hpp"
#include "../sequence/rga.hpp"
#include "tree_op.hpp"
#include "../../utf8.hpp"
#include "../encoding/varint.hpp"

namespace folio::detail {

/// tree_doc's per-replica state.
struct tree_replica : replica_base {
  std::vector<std::uint32_t> log_pos{};  ///< log_ indices of this replica's ops, by seq (finding an op by id)
  /// (seq, index of its first object) of every item of this replica inserted into children: an
  /// element's attributes and children are objects `index` and `index + 1`, a text node's text is
  /// `index`. Rising in seq (a replica's ops integrate in seq order); finding an object is a binary
  /// search here rather than a hash map of every object (a node each).
  std::vector<std::pair<std::uint32_t, std::uint32_t>> created{};
  mutable std::size_t created_hint = 0;  ///< the entry of `created` found last (lookups walk near it)
};
/// An op tree_doc holds for a missing dependency.
struct tree_parked {
  tree_op o;
  op_id awaits;  ///< the missing op it waits for
};

class tree_editor;

/// The document (see the top of this file). clock() is the largest Lamport value integrated in any
/// object (0 for an empty document); objects keep their own for new ops.
class tree_doc : public replica_core<tree_replica, tree_parked> {
  friend class tree_editor;  // the local edits (detail/tree/tree_edit.hpp)
  using core = replica_core<tree_replica, tree_parked>;
  using replica_state = tree_replica;
  using parked = tree_parked;

 public:
  enum class object_kind : std::uint8_t { map, children, text };

  tree_doc(tree_shape shape, replica_id me) : core(me), shape_(shape) {
    add_object(root_object, shape == tree_shape::map ? object_kind::map : object_kind::children);
    if (shape == tree_shape::map) objects_[0].map = std::make_unique<or_map>();  // read and diffed whole
  }

  tree_shape shape() const noexcept { return shape_; }

  // ---- remote operations ----------------------------------------------------------------------

  /// Integrates a batch: duplicates skipped, ops with missing dependencies held as pending and released
  /// when they arrive. A batch lists each replica's ops in seq order, each id once (batch_order). Stops
  /// at the first invalid op (earlier ones stay integrated), like rga::apply.
  apply_result apply(const tree_batch& b) {
    return apply_each([&](auto&& integrate) {
      for (const tree_op& o : b.ops) integrate(o);
    });
  }
  /// What the record holds, in units: one per unit of every insert, map set and unset, and one per
  /// remove, however many items it targets (each remove is an entry of the log). Memory and the work of
  /// reading the record back are linear in it. O(1).
  std::uint64_t units() const noexcept { return held_; }
  /// The units the record's edits changed: items inserted plus items deleted, in every sequence
  /// object, plus map sets and unsets. No Lamport value of a history delivered causally passes it
  /// (rga::changed, per object). O(1).
  std::uint64_t changed() const noexcept { return changed_; }
  /// What op `o` adds to units() once integrated (detail::held_units, ops.hpp).
  static std::uint64_t held_units(const tree_op& o) noexcept { return detail::held_units(o.kind == tree_op_kind::remove, o.len); }

  /// The unit operations of `ops` (a batch's) that would change this record, counted until `need` of
  /// them are found: every unit not integrated yet, except that a remove counts only the distinct
  /// items it targets that are not deleted here (rga::changing_units, per sequence object: a remove of
  /// items removed already counts nothing, however long its range). What the Lamport headroom rule
  /// allows a batch (document::apply). O(ops log ops) plus the targets' runs (rga::not_deleted).
  std::uint64_t changing_units(const std::vector<tree_op>& ops, std::uint64_t need) {
    struct targets {
      std::uint32_t object;
      replica_id replica;
      std::uint64_t first, end;  ///< local seqs of the object's engine
    };
    std::vector<targets> removes;
    std::uint64_t n = 0;
    for (const tree_op& o : ops) {
      const std::uint32_t rep = find_replica(o.id.replica);
      const std::uint64_t have = rep == no_replica ? 0 : reps_[rep].next_seq, end = std::uint64_t(o.id.seq) + o.len;
      if (end <= have) continue;  // integrated already
      const std::uint64_t fresh = end - std::max<std::uint64_t>(have, o.id.seq);
      const std::uint32_t oi = o.kind == tree_op_kind::remove ? find_object(o.object) : no_entry;
      const object* obj = oi == no_entry ? nullptr : &objects_[oi];
      const seg* s = obj ? seg_of(*obj, o.ref) : nullptr;  // null for a lazy object: no remove yet, all its items live
      if (!s || !(obj->kind == object_kind::text ? bool(obj->seq->chars) : bool(obj->seq->kids))) {
        n += fresh;
        continue;
      }
      const std::uint64_t at = s->local + (o.ref.seq - s->doc), first = o.backward ? at + 1 - std::min<std::uint64_t>(o.len, at + 1) : at;
      removes.push_back({oi, o.ref.replica, first, first + o.len});
    }
    std::sort(removes.begin(), removes.end(), [](const targets& a, const targets& b) {
      return std::tie(a.object, a.replica, a.first) < std::tie(b.object, b.replica, b.first);
    });
    for (std::size_t i = 0; i < removes.size() && n < need;) {
      targets t = removes[i];
      for (++i; i < removes.size() && removes[i].object == t.object && removes[i].replica == t.replica && removes[i].first <= t.end; ++i)
        t.end = std::max(t.end, removes[i].end);
      seq_state& st = *objects_[t.object].seq;
      n += objects_[t.object].kind == object_kind::text ? st.chars->not_deleted(t.replica, t.first, t.end, need - n)
                                                        : st.kids->not_deleted(t.replica, t.first, t.end, need - n);
    }
    return n;
  }
  /// apply() for ops that come one at a time (a decoder's): `each(integrate)` calls integrate(op) for
  /// each, in order; after an invalid op the rest are ignored.
  template <class Each>
  apply_result apply_each(Each&& each) {
    apply_result res;
    std::size_t i = 0;
    bool stopped = false;
    batch_order order;
    each([&](const tree_op& o) {
      if (stopped) return;
      std::string why;
      if (!order.next(o.id, o.len, why) || integrate(o, res, why) == outcome::invalid) {
        res.status = apply_status::invalid, res.op_index = i, res.message = std::move(why);
        stopped = true;
      }
      ++i;
    });
    finish_batch(res, [&](parked& p) {
      std::string why;
      return integrate(p.o, res, why);
    });
    compared_.clear();
    return res;
  }

  /// What a replica at `since` lacks, in integration order (which integrates without pending).
  /// With `upto`, only what that version holds. O(L) for L log entries.
  tree_batch ops_since(const version_vector& since, const version_vector* upto = nullptr) const {
    tree_batch b;
    for_each_op_since(since, upto, [&](const tree_op& o) { b.ops.push_back(o); });
    return b;
  }
  /// ops_since(), passed to `f` one at a time (a const tree_op&, valid during the call; one op is
  /// reused), so that encoding a long history needs no copy of it.
  template <class F>
  void for_each_op_since(const version_vector& since, const version_vector* upto, F&& f) const {
    std::vector<std::uint32_t> from(reps_.size()), to(reps_.size());
    for (std::size_t r = 0; r < reps_.size(); ++r) {
      from[r] = since.get(reps_[r].id);
      to[r] = upto ? std::min(upto->get(reps_[r].id), reps_[r].next_seq) : reps_[r].next_seq;
    }
    tree_op t;
    for (const logged& e : log_) {
      const std::uint32_t lo = from[e.rep], hi = to[e.rep];
      if (e.seq + e.len <= lo || e.seq >= hi) continue;
      unpack(e, t);
      if (t.id.seq < lo || t.id.seq + t.len > hi) {
        const std::uint32_t skip = lo > t.id.seq ? lo - t.id.seq : 0;
        const std::uint32_t end = std::min(t.id.seq + t.len, hi);
        trim_front(t, skip);
        t.len = end - t.id.seq;
        if (t.kind == tree_op_kind::insert) {
          if (!t.text.empty()) t.text.resize(t.len);
          if (!t.nodes.empty()) t.nodes.resize(t.len);
        }
      }
      f(std::as_const(t));
    }
  }

  /// The ops of one local change.
  tree_batch ops(const local_change& c) const {
    version_vector since, upto;
    since.observe(c.replica, c.first);
    upto.observe(c.replica, c.first + c.count);
    for (const replica_state& r : reps_)
      if (r.id != c.replica) since.observe(r.id, r.next_seq);
    return ops_since(since, &upto);
  }

  // ---- reading --------------------------------------------------------------------------------

  /// The root map's keys and values (map records).
  template <class F>
  void for_each_entry(F&& f) const {
    objects_[0].map->for_each(std::forward<F>(f));
  }

  /// The tree as a flat fragment (what replace_xml diffs against and xml() writes): every live item,
  /// so positions match the children sequences (a text node whose code points were all removed is an
  /// empty text node; concurrent text nodes may be adjacent). Attributes come in key order, as the
  /// flat layout wants them. O(live size). Throws "[folio.range]" for a tree of 4 GiB of characters or
  /// more (the flat layout's indices are 32-bit).
  markup::flat_fragment flat() const { return flat_range(0, 0, live_children(objects_[0])); }
  /// As flat(), for the live children [from, from + count) of children object `oi` only: the top of
  /// the fragment is those nodes, with their whole subtrees. O(log n + what it holds); a list not
  /// edited since it was loaded (lazy) reads its one op whole, once: for a part of it, the op stays
  /// unpacked (lazy_read_) for the next range of that list. Throws "[folio.range]" past the end.
  markup::flat_fragment flat_range(std::uint32_t oi, std::size_t from, std::size_t count) const {
    using index = markup::flat_fragment::index;
    if (from > live_children(objects_[oi]) || count > live_children(objects_[oi]) - from)
      fail(error_code::range, "children " + std::to_string(from) + "+" + std::to_string(count) + " past the end of a list of " +
                                  std::to_string(live_children(objects_[oi])));
    markup::flat_fragment out;
    struct frame {
      std::uint32_t object;  // a children object
      std::size_t from, count;  // its live children read
      index slot, end;       // their nodes
    };
    out.set_top(out.add_nodes(count));
    std::vector<frame> stack{{oi, from, count, out.top().first, out.top().end()}};
    tree_op scratch;  // a lazy object's logged op (buffers reused)
    while (!stack.empty()) {
      frame f = stack.back();
      stack.pop_back();
      // A part of a lazy list is read from the op kept for it (a list holds no item of its own, so only
      // the first frame is that list); the whole of one (flat()) is read once and not kept.
      const bool top_lazy = f.object == oi && !objects_[oi].seq && objects_[oi].whole != no_entry && count < live_children(objects_[oi]);
      for_each_child(objects_[f.object], top_lazy ? lazy_op(objects_[oi]) : scratch, [&](const op_id&, const std::string& tag, std::uint32_t first) {
        if (f.slot == f.end) fail(error_code::invariant, "a children list has more items than it counts");
        markup::flat_fragment::item x;
        if (tag.empty()) {
          const index m = out.mark();
          append_text(objects_[first], out.chars());
          x.str = out.span_since(m);
        } else {
          x.type = markup::node::kind::element;
          x.str = out.add_chars(tag);
          x.attrs.first = out.attrs_end();
          if (const or_map* m = objects_[first].map.get())
            m->for_each([&](const std::string& k, const std::string& v) { out.add_attr(out.add_chars(k), out.add_chars(v)); });
          x.attrs.count = out.attrs_end() - x.attrs.first;
          const std::size_t kids = live_children(objects_[first + 1]);
          x.children = out.add_nodes(kids);
          if (x.children.count) stack.push_back({first + 1, 0, kids, x.children.first, x.children.end()});
        }
        out.node_at(f.slot++) = x;
      }, f.from, f.count, top_lazy);
      if (f.slot != f.end) fail(error_code::invariant, "a children list has fewer items than it counts");
    }
    return out;
  }
  /// Calls f(op_id id, std::string_view tag, const std::map<std::string, std::string>& attributes) for
  /// every live element (xml records), in document order (depth first, an element before its
  /// children); `id` is the op that inserted it, the same on every replica and in every checkout that
  /// holds it. O(live size); holds the elements not visited yet of the open lists.
  template <class F>
  void for_each_element(F&& f) const {
    struct pending {
      op_id id;
      std::string tag;
      std::uint32_t first;  // its attributes' object; its children's is the next
    };
    std::vector<pending> stack, kids;
    tree_op scratch;
    const auto push_children = [&](const object& o) {
      kids.clear();
      for_each_child(o, scratch, [&](const op_id& id, const std::string& tag, std::uint32_t first) {
        if (!tag.empty()) kids.push_back({id, tag, first});
      });
      stack.insert(stack.end(), std::make_move_iterator(kids.rbegin()), std::make_move_iterator(kids.rend()));
    };
    push_children(objects_[0]);
    std::map<std::string, std::string> attributes;
    while (!stack.empty()) {
      const pending p = std::move(stack.back());
      stack.pop_back();
      attributes.clear();
      if (const or_map* m = objects_[p.first].map.get()) m->for_each([&](const std::string& k, const std::string& v) { attributes.emplace(k, v); });
      f(p.id, std::string_view(p.tag), std::as_const(attributes));
      push_children(objects_[p.first + 1]);
    }
  }
  /// The tree as a fragment (flat() converted).
  markup::fragment fragment() const { return flat().to_fragment(); }

  // ---- positions in the tree (xml records) ----------------------------------------------------
  //
  // A node is named by the id of the insert that made it (document_start: the top-level fragment); a
  // path is the live child indices from the fragment down to it. Items (children, code points) keep
  // their ids wherever concurrent edits move them, so an item id is an anchor; every lookup below
  // goes by the id index of one sequence and the objects' parent links: O(depth · log n).

  /// A node and the object its offsets count: an element's children object (0 for the fragment), a
  /// text node's text object.
  struct xml_node {
    op_id id = document_start;
    std::uint32_t object = 0;
    bool text = false;
  };
  /// Where an anchor is now: the path of the node holding it and the offset in that node.
  struct xml_place {
    std::vector<std::size_t> path;
    std::size_t offset = 0;
  };

  /// The node at `path`. Throws "[folio.range]" for an index past the end of its list or a path that
  /// goes on below a text node. O(depth · log n).
  xml_node node_at(std::span<const std::size_t> path) const {
    xml_node n;
    for (std::size_t depth = 0; depth < path.size(); ++depth) {
      if (n.text) fail(error_code::range, "path index " + std::to_string(depth) + " goes below a text node");
      const object& o = objects_[n.object];
      if (path[depth] >= live_items(o))
        fail(error_code::range, "path index " + std::to_string(depth) + " (" + std::to_string(path[depth]) + ") past the end of a list of " +
                                    std::to_string(live_items(o)));
      n = node_of_item(item_id_at(o, path[depth]));
    }
    return n;
  }
  /// Live children of an element (or the fragment), code points of a text node. O(1).
  std::size_t length(const xml_node& n) const { return live_items(objects_[n.object]); }
  /// The id of the live child or code point at `offset` of `n` (< length(n)). O(log n).
  op_id item_at(const xml_node& n, std::size_t offset) const {
    const object& o = objects_[n.object];
    if (offset >= live_items(o)) fail(error_code::range, "offset " + std::to_string(offset) + " past the end of a node of " + std::to_string(live_items(o)));
    return item_id_at(o, offset);
  }
  /// The ids of the live children of element (or fragment) `n`. O(log n + children).
  std::vector<op_id> child_ids(const xml_node& n) const {
    std::vector<op_id> out;
    const object& o = objects_[n.object];
    if (n.text) fail(error_code::range, "a text node has no children");
    if (o.seq) {
      if (o.seq->kids) o.seq->kids->for_each_item([&](op_id local, const std::string&) { out.push_back(to_doc(o, local)); });
    } else if (o.whole != no_entry) {
      const logged& e = log_[o.whole];
      for (std::uint32_t k = 0; k < e.len; ++k) out.push_back({reps_[e.rep].id, e.seq + k});
    }
    return out;
  }
  /// The path of the live node made by `node` (empty for document_start), or nullopt when it is not a
  /// node here or is not visible (removed, or under a removed element). O(depth · log n).
  std::optional<std::vector<std::size_t>> path_of(op_id node) const {
    std::vector<std::size_t> path;
    for (op_id cur = node; cur != document_start;) {
      const auto* made = created_entry(cur);
      if (!made) return std::nullopt;
      const std::uint32_t p = objects_[made->second].parent;
      bool live = false;
      const std::optional<std::size_t> at = index_in(objects_[p], cur, &live);
      if (!at || !live) return std::nullopt;
      path.push_back(*at);
      cur = objects_[p].name.creator;  // the root's is document_start
    }
    std::reverse(path.begin(), path.end());
    return path;
  }
  /// Where item `id` (a child of an element or the fragment, or a code point of a text node) is now:
  /// its node's path and its index there, or for a removed item the live items before it (where it
  /// was). Nullopt for an id that is no inserted item here, or whose node is not visible.
  /// O(depth · log n).
  std::optional<xml_place> resolve(op_id id) const {
    const std::uint32_t rep = find_replica(id.replica);
    if (id.replica == 0 || rep == no_replica || id.seq >= reps_[rep].next_seq) return std::nullopt;
    const logged& e = log_[*entry_holding(reps_[rep].log_pos, id.seq, log_)];
    const auto [kind, oi] = packed_kind_and_object(std::string_view(log_bytes_).substr(static_cast<std::size_t>(e.at)));
    if (kind != tree_op_kind::insert) return std::nullopt;
    const object& o = objects_[oi];
    const std::optional<std::size_t> at = index_in(o, id, nullptr);
    if (!at) fail(error_code::invariant, "an inserted item is not in its object");
    std::optional<std::vector<std::size_t>> path = path_of(o.name.creator);  // the root's creator is document_start
    if (!path) return std::nullopt;
    return xml_place{std::move(*path), *at};
  }
  /// Where the end of node `node` (document_start: the fragment) is now: its path and its length.
  /// Nullopt as path_of.
  std::optional<xml_place> resolve_end(op_id node) const {
    std::optional<std::vector<std::size_t>> path = path_of(node);
    if (!path) return std::nullopt;
    return xml_place{std::move(*path), length(node == document_start ? xml_node{} : node_of_item(node))};
  }

  /// Starts (or stops and forgets) recording which objects integrated ops change: the change report
  /// of changed_elements(). O(1) per op while on.
  void record_changes(bool on) {
    recording_ = on;
    touched_.clear();
  }
  /// The elements whose attributes or children list, or one of whose child text nodes, ops integrated
  /// since record_changes(true) changed, each once, by the id of the insert that made it
  /// (document_start: the fragment), visible ones only; then starts afresh. O(k · depth · log n) for
  /// k objects touched.
  std::vector<op_id> changed_elements() {
    std::sort(touched_.begin(), touched_.end());
    touched_.erase(std::unique(touched_.begin(), touched_.end()), touched_.end());
    std::vector<op_id> out;
    for (const std::uint32_t oi : touched_) {
      const object& o = objects_[oi];
      if (shape_ != tree_shape::xml) break;
      const std::uint32_t owner = o.kind == object_kind::text ? o.parent : oi;  // a text: the list holding its node
      out.push_back(owner == 0 ? document_start : objects_[owner].name.creator);
    }
    touched_.clear();
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    std::erase_if(out, [&](const op_id& el) { return !path_of(el); });
    return out;
  }

  // ---- local edits (detail/tree/tree_edit.hpp) ----------------------------------------------------

  /// Sets `key` of the root map (map records) to `value`. No op if it already is its only value.
  local_change set(const std::string& key, std::string value);
  /// Removes `key` from the root map. No op if absent.
  local_change remove(const std::string& key);
  /// Makes the root map hold exactly `entries`: sets for new or changed keys, removes for vanished ones.
  local_change replace_map(const std::map<std::string, std::string>& entries);
  /// Makes the XML tree equal to `to` through the edit script of diff_xml: children inserted and
  /// removed, attributes set and removed, code points inserted and removed in text nodes.
  local_change replace_xml(const markup::flat_fragment& to);
  /// Makes the live children [from, to) of element (or fragment) `parent` equal to the top-level
  /// nodes of `nodes` through the edit script of diff_xml between the two (unchanged nodes kept, texts
  /// edited by code-point hunks). O(depth · log n + the range's and `nodes`' size + script · log n).
  /// Throws "[folio.range]" for a text node or a range past the end.
  local_change replace_xml_range(const xml_node& parent, std::size_t from, std::size_t to, const markup::flat_fragment& nodes);

  /// What inserting whole subtrees adds to the tables (tree_editor::measure counts it).
  struct tree_growth {
    std::uint64_t units = 0;    ///< unit ops: nodes, attributes, code points
    std::size_t objects = 0;    ///< objects made
    std::size_t entries = 0;    ///< log entries: an insert per non-empty list and per text, a set per attribute
    std::size_t bytes = 0;      ///< packed bytes, about
    std::size_t items = 0;      ///< nodes (creations)
  };
  /// Makes room for `g` more at once (a load into an empty tree), so that the tables grow once rather
  /// than by doubling with every copy. O(1) besides the allocations.
  void reserve_for(const tree_growth& g) {
    objects_.reserve(objects_.size() + g.objects);
    log_.reserve(log_.size() + g.entries);
    reps_[0].log_pos.reserve(reps_[0].log_pos.size() + g.entries);
    reps_[0].created.reserve(reps_[0].created.size() + g.items);
    log_bytes_.reserve(log_bytes_.size() + g.bytes + 8 * g.entries);
  }

  // ---- checking and size ----------------------------------------------------------------------

  /// Verifies every object's invariants and the translation tables against the log.
  void check_invariants() const {
    for (std::uint32_t i = 0; i < objects_.size(); ++i) {
      const object& o = objects_[i];
      if (i != 0 && find_object(o.name) != i) fail(error_code::invariant, "an object is not found by its name");
      if (i != 0 && (o.parent >= objects_.size() || objects_[o.parent].kind != object_kind::children || !index_in(objects_[o.parent], o.name.creator, nullptr)))
        fail(error_code::invariant, "an object's parent list does not hold the item that made it");
      if (o.map) o.map->check_invariants();
      if (o.whole != no_entry) {
        if (o.seq || o.kind == object_kind::map || o.whole >= log_.size()) fail(error_code::invariant, "a lazy object's op is not a logged insert");
        tree_op t;
        unpack(log_[o.whole], t);
        if (t.kind != tree_op_kind::insert || t.object != o.name || t.ref != document_start) fail(error_code::invariant, "a lazy object's op is not its first insert");
      }
      if (!o.seq) continue;
      if (o.seq->kids) o.seq->kids->check_invariants();
      if (o.seq->chars) o.seq->chars->check_invariants();
      for (const auto& [rep, segs] : o.seq->xlate)
        for (std::size_t k = 1; k < segs.size(); ++k)
          if (segs[k].doc < segs[k - 1].doc + segs[k - 1].len || segs[k].local != segs[k - 1].local + segs[k - 1].len)
            fail(error_code::invariant, "object id translation out of order");
    }
    for (const replica_state& r : reps_)
      for (std::size_t i = 1; i < r.created.size(); ++i)
        if (r.created[i].first <= r.created[i - 1].first) fail(error_code::invariant, "a replica's created objects out of seq order");
    std::vector<std::uint32_t> seen(reps_.size(), 0), entries(reps_.size(), 0);
    std::uint64_t held = 0;
    tree_op t;
    for (std::uint32_t i = 0; i < log_.size(); ++i) {
      const logged& e = log_[i];
      unpack(e, t);
      held += held_units(t);
      if (e.seq != seen[e.rep]) fail(error_code::invariant, "log out of seq order for a replica");
      const auto& lp = reps_[e.rep].log_pos;
      if (entries[e.rep] >= lp.size() || lp[entries[e.rep]++] != i) fail(error_code::invariant, "a replica's log positions miss an entry");
      if (e.at > log_bytes_.size()) fail(error_code::invariant, "log entry past the end of the log's bytes");
      seen[e.rep] += e.len;
    }
    for (std::size_t r = 0; r < reps_.size(); ++r) {
      if (seen[r] != reps_[r].next_seq) fail(error_code::invariant, "log does not cover a replica's ops");
      if (entries[r] != reps_[r].log_pos.size()) fail(error_code::invariant, "a replica's log positions name entries it does not have");
    }
    if (held != held_) fail(error_code::invariant, "held unit count");
  }

  /// Heap bytes, approximately (objects, their engines, the log).
  std::size_t memory_usage() const {
    std::size_t bytes = objects_.capacity() * sizeof(object) + log_.capacity() * sizeof(logged) + log_bytes_.capacity();
    bytes += touched_.capacity() * sizeof(std::uint32_t) + lazy_read_.op.nodes.capacity() * sizeof(std::string);  // the change report, a kept lazy list
    for (const replica_state& r : reps_)
      bytes += sizeof(replica_state) + r.log_pos.capacity() * sizeof(std::uint32_t) + r.created.capacity() * sizeof(r.created[0]);
    for (const object& o : objects_) {
      if (o.map) bytes += o.map->size() * 96;
      if (!o.seq) continue;
      bytes += sizeof(seq_state);
      if (o.seq->kids) bytes += o.seq->kids->memory_usage();
      if (o.seq->chars) bytes += o.seq->chars->memory_usage();
      for (const auto& [rep, segs] : o.seq->xlate) bytes += 48 + segs.capacity() * sizeof(seg);
      if (o.seq->xlate_index) bytes += sizeof(id_table<std::uint32_t>) + o.seq->xlate_index->memory_usage();
    }
    return bytes;
  }

 private:
  struct seg {
    std::uint32_t doc, local, len;  ///< doc seqs [doc, doc+len) are local seqs [local, local+len)
  };
  /// A sequence object's engine and the translation of its ids, made with its second op or the first
  /// local edit that reads positions in it (lazy objects, at the top of this file).
  struct seq_state {
    std::unique_ptr<rga<std::string>> kids;  ///< children
    std::unique_ptr<rga<char32_t>> chars;    ///< text
    std::vector<std::pair<replica_id, std::vector<seg>>> xlate;  ///< per replica that edited it, in order of its first op
    /// Position in `xlate` by replica, once more than `xlate_scan` replicas edited the object (a scan
    /// per op of one that many peers edit would be quadratic in its authors).
    std::unique_ptr<id_table<std::uint32_t>> xlate_index;
  };
  static constexpr std::uint32_t no_entry = UINT32_MAX;
  struct object {
    object_name name;
    object_kind kind = object_kind::map;
    std::uint16_t depth = 0;  ///< children: elements above it (the root's is 0; at most markup::max_depth)
    /// The children object holding the item that made this object (the root's: no_entry): the link a
    /// node's path is read up by (path_of).
    std::uint32_t parent = no_entry;
    /// A sequence with no engine yet: no_entry while it has no op, else the log_ index of its only op,
    /// an insert at its start whose values are its items and whose ids are theirs (local seqs from 0).
    std::uint32_t whole = no_entry;
    std::uint32_t map_clock = 0;     ///< map: the largest Lamport value of its ops
    std::unique_ptr<or_map> map;     ///< map: made with its first op (null: empty); a map record's root, at once
    std::unique_ptr<seq_state> seq;  ///< sequence: see seq_state (null: see `whole`)
  };
  static constexpr std::size_t xlate_scan = 8;
  /// An integrated op in the log: what ops_since filters on, inline; the rest packed at `at` in
  /// log_bytes_ (pack / unpack). A map set costs these 24 bytes, 4 in its replica's log_pos, its key
  /// and value, and 5-9 bytes packed around them (more with concurrent preds); as a tree_op it cost
  /// 224 bytes and heap blocks.
  struct logged {
    std::uint32_t rep;  ///< index in reps_ of the author
    std::uint32_t seq, len, lamport;
    std::uint64_t at;
  };
  /// The item key (Lamport value, replica, seq) of integrated op `id`: what names a map entry. O(log n).
  item_key key_of(const op_id& id) const {
    const replica_state& r = reps_[*rep_index_.find(id.replica)];
    const logged& e = log_[*entry_holding(r.log_pos, id.seq, log_)];
    return {e.lamport + (id.seq - e.seq), id.replica, id.seq};
  }

  /// Appends an object; objects made by one item are consecutive (an element's attributes, then its
  /// children). Its creator's `created` entry is the caller's (integrate_seq).
  std::uint32_t add_object(const object_name& name, object_kind kind, std::uint32_t parent = no_entry, std::uint32_t depth = 0) {
    const auto idx = static_cast<std::uint32_t>(objects_.size());
    object& o = objects_.emplace_back();
    o.name = name, o.kind = kind, o.depth = static_cast<std::uint16_t>(depth), o.parent = parent;
    return idx;
  }
  /// The `created` entry of item `item` (an item of a children object), or null. O(log n), O(1) near
  /// the last one found.
  const std::pair<std::uint32_t, std::uint32_t>* created_entry(const op_id& item) const {
    const std::uint32_t rep = find_replica(item.replica);
    if (rep == no_replica) return nullptr;
    const replica_state& r = reps_[rep];
    const auto& made = r.created;
    if (made.empty()) return nullptr;
    // Ops name objects made shortly before (a list, then its items' attributes, texts and children):
    // the last entry found and its neighbours, and the newest entry, answer most lookups in O(1).
    std::size_t at = made.size();
    for (std::size_t guess : {r.created_hint, r.created_hint + 1, r.created_hint - 1, made.size() - 1})
      if (guess < made.size() && made[guess].first == item.seq) {
        at = guess;
        break;
      }
    if (at == made.size()) {
      auto it = std::lower_bound(made.begin(), made.end(), item.seq, [](const auto& e, std::uint32_t q) { return e.first < q; });
      if (it == made.end() || it->first != item.seq) return nullptr;
      at = static_cast<std::size_t>(it - made.begin());
    }
    r.created_hint = at;
    return &made[at];
  }
  /// Index of object `name`, or no_entry.
  std::uint32_t find_object(const object_name& name) const {
    if (name == root_object) return 0;
    if (name.creator.replica == 0) return no_entry;
    const auto* made = created_entry(name.creator);
    if (!made) return no_entry;
    for (std::uint32_t i = made->second; i < objects_.size() && i <= made->second + 1; ++i)
      if (objects_[i].name == name) return i;
    return no_entry;
  }
  /// Index of an object known to exist.
  std::uint32_t find(const object_name& name) const {
    const std::uint32_t i = find_object(name);
    if (i == no_entry) fail(error_code::invariant, "object missing");
    return i;
  }

  // ---- lazy sequences -------------------------------------------------------------------------

  /// Calls f(doc id, tag, index of its first object) for every live item of children object `o`, in
  /// order (a text node's text is that object; an element's attributes are, its children the next);
  /// `scratch` holds a lazy object's logged op meanwhile.
  /// With `from` and `count`: only the live items [from, from + count) (within the list: the caller's
  /// check), O(log n + count) besides a lazy object's op.
  /// With `ready`, `scratch` holds the lazy object's op already (lazy_op).
  template <class F>
  void for_each_child(const object& o, tree_op& scratch, F&& f, std::size_t from = 0, std::size_t count = std::size_t(-1), bool ready = false) const {
    if (o.seq) {
      if (!o.seq->kids) return;
      const auto each = [&](op_id local, const std::string& tag) {
        const op_id id = to_doc(o, local);
        f(id, tag, created_entry(id)->second);
      };
      if (from == 0 && count >= o.seq->kids->size())
        o.seq->kids->for_each_item(each);
      else
        o.seq->kids->for_each_item_in(from, count, each);
      return;
    }
    if (o.whole == no_entry) return;
    const logged& e = log_[o.whole];
    if (!ready) unpack(e, scratch);
    const std::pair<std::uint32_t, std::uint32_t>* made = created_entry({scratch.id.replica, e.seq});  // its items' entries are consecutive
    const std::uint32_t end = static_cast<std::uint32_t>(std::min<std::size_t>(e.len, from + std::min<std::size_t>(count, e.len)));
    for (std::uint32_t k = static_cast<std::uint32_t>(from); k < end; ++k)
      f(op_id{scratch.id.replica, e.seq + k}, std::as_const(scratch.nodes[k]), made[k].second);
  }
  /// How many items for_each_child passes for children object `o` (its live children), without giving
  /// a lazy object its engine. O(1).
  std::size_t live_children(const object& o) const noexcept {
    if (o.seq) return o.seq->kids ? o.seq->kids->size() : 0;
    return o.whole == no_entry ? 0 : log_[o.whole].len;  // a lazy object's items are its only op's, all live
  }
  /// The op of lazy object `o`, unpacked: kept in lazy_read_ by its log entry (a logged op never
  /// changes), so reading ranges of one lazy list unpacks it once. O(that op) the first time, O(1) after.
  tree_op& lazy_op(const object& o) const {
    if (lazy_read_.entry != o.whole) {
      lazy_read_.entry = UINT32_MAX;
      unpack(log_[o.whole], lazy_read_.op);
      lazy_read_.entry = o.whole;
    }
    return lazy_read_.op;
  }
  /// Live items of sequence object `o` (children or code points). O(1).
  std::size_t live_items(const object& o) const noexcept {
    if (o.seq) return o.seq->kids ? o.seq->kids->size() : o.seq->chars ? o.seq->chars->size() : 0;
    return o.whole == no_entry ? 0 : log_[o.whole].len;
  }
  /// Doc id of the live item at `pos` (< live_items(o)) of sequence object `o`. O(log n).
  op_id item_id_at(const object& o, std::size_t pos) const {
    if (!o.seq) return {reps_[log_[o.whole].rep].id, log_[o.whole].seq + static_cast<std::uint32_t>(pos)};
    return to_doc(o, o.seq->kids ? o.seq->kids->id_at(pos) : o.seq->chars->id_at(pos));
  }
  /// The live items before item `id` (doc id) of sequence object `o`: its index while live (`live`
  /// says so); nullopt when it is not an item of `o`. O(log n).
  std::optional<std::size_t> index_in(const object& o, op_id id, bool* live) const {
    if (!o.seq) {
      if (o.whole == no_entry) return std::nullopt;
      const logged& e = log_[o.whole];
      if (reps_[e.rep].id != id.replica || id.seq < e.seq || id.seq - e.seq >= e.len) return std::nullopt;
      if (live) *live = true;  // a lazy object's items are all live
      return id.seq - e.seq;
    }
    const seg* s = seg_of(o, id);
    if (!s) return std::nullopt;
    const op_id local{id.replica, s->local + (id.seq - s->doc)};
    return o.seq->kids ? o.seq->kids->index_of(local, live) : o.seq->chars ? o.seq->chars->index_of(local, live) : std::nullopt;
  }
  /// The node made by item `id` of a children object (integrated). O(log n).
  xml_node node_of_item(op_id id) const {
    const auto* made = created_entry(id);
    if (!made) fail(error_code::invariant, "a child item made no object");
    const bool text = objects_[made->second].kind == object_kind::text;
    return {id, text ? made->second : made->second + 1, text};
  }
  /// Appends the live code points of text object `o` to `out` as UTF-8.
  void append_text(const object& o, std::string& out) const {
    if (o.seq) {
      if (o.seq->chars) o.seq->chars->for_each([&](char32_t c) { append_utf8(out, c); });
    } else if (o.whole != no_entry) {
      out += packed_insert_text(std::string_view(log_bytes_).substr(static_cast<std::size_t>(log_[o.whole].at)));
    }
  }
  /// Gives lazy sequence object `oi` its engine, built from its only op (no-op when it has an engine
  /// or no op yet: its first op keeps it lazy).
  void materialize(std::uint32_t oi) {
    object& obj = objects_[oi];
    if (obj.seq || obj.whole == no_entry) return;
    const logged& e = log_[obj.whole];
    tree_op t;
    unpack(e, t);
    op first;
    first.kind = op_kind::insert, first.id = {t.id.replica, 0}, first.lamport = t.lamport, first.len = t.len, first.ref = document_start;
    auto st = std::make_unique<seq_state>();
    apply_result r;
    if (obj.kind == object_kind::text) {
      st->chars = std::make_unique<rga<char32_t>>(self());
      r = st->chars->apply(op_batch<char32_t>{{first}, {t.text.begin(), t.text.end()}});
    } else {
      st->kids = std::make_unique<rga<std::string>>(self());
      r = st->kids->apply(op_batch<std::string>{{first}, std::move(t.nodes)});
    }
    if (!r || r.applied != t.len) fail(error_code::invariant, "a lazy sequence's op does not integrate");
    obj.seq = std::move(st);  // built whole, or the object stays as it was
    obj.whole = no_entry;
    add_seg(obj, t.id.replica, t.id.seq, 0, t.len);
  }

  // ---- id translation (objects with an engine) ------------------------------------------------

  static std::uint32_t local_next(const object& o, replica_id r) {
    const std::vector<seg>* v = o.seq ? segs_of(o, r) : nullptr;
    if (!v || v->empty()) return 0;
    return v->back().local + v->back().len;
  }
  /// The translation segments of replica `r` in `o`, or null. O(1).
  static const std::vector<seg>* segs_of(const object& o, replica_id r) {
    const seq_state& st = *o.seq;
    if (st.xlate_index) {
      const std::uint32_t* i = st.xlate_index->find(r);
      return i ? &st.xlate[*i].second : nullptr;
    }
    for (const auto& [rep, v] : st.xlate)
      if (rep == r) return &v;
    return nullptr;
  }
  static void add_seg(object& o, replica_id r, std::uint32_t doc, std::uint32_t local, std::uint32_t len) {
    seq_state& st = *o.seq;
    auto* found = const_cast<std::vector<seg>*>(segs_of(o, r));
    if (!found) {
      found = &st.xlate.emplace_back(r, std::vector<seg>{}).second;
      if (st.xlate_index) {
        st.xlate_index->try_emplace(r, static_cast<std::uint32_t>(st.xlate.size() - 1));
      } else if (st.xlate.size() > xlate_scan) {
        st.xlate_index = std::make_unique<id_table<std::uint32_t>>();
        for (std::uint32_t i = 0; i < st.xlate.size(); ++i) st.xlate_index->try_emplace(st.xlate[i].first, i);
      }
    }
    std::vector<seg>& v = *found;
    if (!v.empty() && v.back().doc + v.back().len == doc && v.back().local + v.back().len == local)
      v.back().len += len;
    else
      v.push_back({doc, local, len});
  }
  /// The segment holding doc id `id` in `o`, or null (always, for an object with no engine and no op).
  static const seg* seg_of(const object& o, const op_id& id) {
    const std::vector<seg>* found = o.seq ? segs_of(o, id.replica) : nullptr;
    if (!found) return nullptr;
    const auto& v = *found;
    auto s = std::upper_bound(v.begin(), v.end(), id.seq, [](std::uint32_t q, const seg& x) { return q < x.doc; });
    if (s == v.begin()) return nullptr;
    --s;
    return id.seq - s->doc < s->len ? &*s : nullptr;
  }
  static op_id to_doc(const object& o, const op_id& local) {
    const auto& v = *segs_of(o, local.replica);
    auto s = std::upper_bound(v.begin(), v.end(), local.seq, [](std::uint32_t q, const seg& x) { return q < x.local; });
    --s;
    return {local.replica, s->doc + (local.seq - s->local)};
  }

  // ---- integration ----------------------------------------------------------------------------

  static void trim_front(tree_op& o, std::uint32_t skip) {
    if (skip == 0) return;
    if (o.kind == tree_op_kind::insert) {
      o.ref = {o.id.replica, o.id.seq + skip - 1};
      if (!o.text.empty()) o.text.erase(0, skip);
      if (!o.nodes.empty()) o.nodes.erase(o.nodes.begin(), o.nodes.begin() + skip);
    } else {
      o.ref = o.target(skip);
    }
    o.id.seq += skip, o.lamport += skip, o.len -= skip;
  }

  outcome integrate(const tree_op& in, apply_result& res, std::string& why) {
    if (!valid_counters(in, true, "operation counter out of range", why)) return outcome::invalid;
    const bool is_seq = in.kind == tree_op_kind::insert || in.kind == tree_op_kind::remove;
    if (!is_seq && in.len != 1) return why = "map operation of length other than 1", outcome::invalid;
    if (in.kind == tree_op_kind::insert && in.text.size() != in.len && in.nodes.size() != in.len)
      return why = "insert carries " + std::to_string(std::max(in.text.size(), in.nodes.size())) + " values for length " + std::to_string(in.len),
             outcome::invalid;
    if (in.kind != tree_op_kind::insert && (!in.text.empty() || !in.nodes.empty())) return why = "values on an operation that is not an insert", outcome::invalid;
    if (in.backward && in.kind != tree_op_kind::remove) return why = "backward flag on an operation that is not a remove", outcome::invalid;
    if (in.kind == tree_op_kind::remove &&
        (in.ref.replica == 0 || (in.backward ? in.ref.seq < in.len - 1 : std::uint64_t(in.ref.seq) + in.len > std::uint64_t(max_counter) + 1)))
      return why = "remove target range out of bounds", outcome::invalid;
    const std::uint32_t rep = replica_index(in.id.replica);
    return admit(
        rep, in, res, [&](op_id awaits) { park(in, awaits); }, [&] { return same_as_integrated(rep, in, why); },
        [&](std::uint32_t skip) {
          if (skip == 0) return integrate_next(rep, in, res, why);
          tree_op trimmed = in;  // copied only when part of it was integrated before
          trim_front(trimmed, skip);
          return integrate_next(rep, trimmed, res, why);
        });
  }

  /// Integrates `o`, the next op of replica `rep`, once its object and dependencies are (else parks it).
  outcome integrate_next(std::uint32_t rep, const tree_op& o, apply_result& res, std::string& why) {
    const bool is_seq = o.kind == tree_op_kind::insert || o.kind == tree_op_kind::remove;
    // The object.
    if (o.object.creator != document_start && !integrated(o.object.creator)) return park(o, o.object.creator), outcome::parked;
    const std::uint32_t oi = find_object(o.object);
    if (oi == no_entry) return why = "operation on an object that does not exist", outcome::invalid;
    const object_kind ok = objects_[oi].kind;
    if (is_seq == (ok == object_kind::map)) return why = is_seq ? "sequence operation on a map" : "map operation on a sequence", outcome::invalid;
    if (o.kind == tree_op_kind::insert && (ok == object_kind::text ? o.text.size() != o.len : o.nodes.size() != o.len))
      return why = ok == object_kind::text ? "insert into a text carries no code points" : "insert into children carries no nodes", outcome::invalid;

    // Dependencies.
    if (o.kind == tree_op_kind::insert && o.ref.replica == 0 && o.ref != document_start) return why = "insert origin of replica 0", outcome::invalid;
    if (o.kind == tree_op_kind::insert && o.ref != document_start && !integrated(o.ref)) return park(o, o.ref), outcome::parked;
    if (o.kind == tree_op_kind::remove)
      for (const op_id t : {o.target(0), o.target(o.len - 1)})
        if (!integrated(t)) return park(o, t), outcome::parked;
    for (const op_id& p : o.preds)
      if (!integrated(p)) return park(o, p), outcome::parked;
    for (const op_id& p : o.preds)
      if (p.replica == o.id.replica && p.seq >= o.id.seq) return why = "operation observes a later operation of its own replica", outcome::invalid;

    bool lazy = false;  // the object's first op: it stays without an engine
    std::uint64_t deleted = 0;
    switch (o.kind) {
      case tree_op_kind::insert:
      case tree_op_kind::remove:
        if (!integrate_seq(oi, o, why, lazy, deleted)) return outcome::invalid;
        break;
      case tree_op_kind::set:
      case tree_op_kind::unset:
        if (!integrate_map(oi, o, why)) return outcome::invalid;
        break;
    }
    if (recording_) touched_.push_back(oi);
    advance(rep, o.lamport, o.len, res);
    held_ += held_units(o);
    changed_ += o.kind == tree_op_kind::remove ? deleted : o.len;
    reps_[rep].log_pos.push_back(static_cast<std::uint32_t>(log_.size()));
    log_.push_back({rep, o.id.seq, o.len, o.lamport, log_bytes_.size()});
    pack(oi, o);
    if (lazy) objects_[oi].whole = static_cast<std::uint32_t>(log_.size() - 1);
    return outcome::done;
  }

  // ---- the packed log (packed_log.hpp) ---------------------------------------------------------

  void pack(std::uint32_t oi, const tree_op& o) { pack_tree_op(log_bytes_, oi, objects_[oi].kind == object_kind::text, o, packed_replicas{rep_index_}); }

  /// The op of log entry `e`, into `o` (whose buffers are reused).
  void unpack(const logged& e, tree_op& o) const {
    o.id = {reps_[e.rep].id, e.seq}, o.len = e.len, o.lamport = e.lamport;
    unpack_tree_op(
        std::string_view(log_bytes_).substr(static_cast<std::size_t>(e.at)), o,
        [&](std::size_t i) { return std::pair{objects_[i].name, objects_[i].kind == object_kind::text}; }, reps_.size(),
        [&](std::size_t r) { return reps_[r].id; });
  }

  bool valid_values(object_kind ok, const tree_op& o, std::string& why) const {
    if (ok == object_kind::text) {
      for (char32_t c : o.text)
        if (shape_ == tree_shape::xml ? !markup::detail::is_xml_char(c) : !valid_code_point(c)) return why = "text holds a character XML does not allow", false;
    } else {
      for (const std::string& tag : o.nodes)
        if (!tag.empty() && !markup::detail::is_name(tag)) return why = "element tag \"" + tag + "\" is not an XML name", false;
    }
    return true;
  }

  /// Integrates sequence op `o` into object `oi`; `lazy` says it is the object's first op, an insert
  /// at its start, which builds no engine (the caller names its log entry in `whole`).
  /// Integrates sequence op `o` into object `oi`; `deleted`: the items a remove deleted (not deleted
  /// before).
  bool integrate_seq(std::uint32_t oi, const tree_op& o, std::string& why, bool& lazy, std::uint64_t& deleted) {
    {
      const object& obj = objects_[oi];
      if (o.kind == tree_op_kind::insert && obj.kind == object_kind::children && obj.depth >= markup::max_depth &&
          std::any_of(o.nodes.begin(), o.nodes.end(), [](const std::string& t) { return !t.empty(); }))
        return why = "XML nesting deeper than " + std::to_string(markup::max_depth), false;
      if (o.kind == tree_op_kind::insert && !valid_values(obj.kind, o, why)) return false;
    }
    materialize(oi);  // a second op: the first one's engine first
    object& obj = objects_[oi];
    op local;
    local.kind = o.kind == tree_op_kind::insert ? op_kind::insert : op_kind::remove;
    local.id = {o.id.replica, local_next(obj, o.id.replica)};
    local.lamport = o.lamport, local.len = o.len, local.backward = o.backward;
    if (o.kind == tree_op_kind::insert) {
      if (o.ref == document_start) {
        local.ref = document_start;
      } else {
        const seg* s = seg_of(obj, o.ref);
        if (!s) return why = "insert origin is not an item of its object", false;
        local.ref = {o.ref.replica, s->local + (o.ref.seq - s->doc)};
      }
    } else {
      const seg* s = seg_of(obj, o.ref);
      const std::uint32_t reach = o.len - 1;
      if (!s || (o.backward ? o.ref.seq - s->doc < reach : s->doc + s->len - o.ref.seq <= reach))
        return why = "remove targets are not items of its object", false;
      local.ref = {o.ref.replica, s->local + (o.ref.seq - s->doc)};
    }
    lazy = !obj.seq;  // no engine and no op yet: only an insert at the start gets here
    if (!lazy) {
      apply_result r;
      if (obj.kind == object_kind::text) {
        if (!obj.seq->chars) obj.seq->chars = std::make_unique<rga<char32_t>>(self());
        const std::size_t live = obj.seq->chars->size();
        r = obj.seq->chars->apply(op_batch<char32_t>{{local}, {o.text.begin(), o.text.end()}});
        if (o.kind == tree_op_kind::remove) deleted = live - obj.seq->chars->size();
      } else {
        if (!obj.seq->kids) obj.seq->kids = std::make_unique<rga<std::string>>(self());
        const std::size_t live = obj.seq->kids->size();
        r = obj.seq->kids->apply(op_batch<std::string>{{local}, o.nodes});
        if (o.kind == tree_op_kind::remove) deleted = live - obj.seq->kids->size();
      }
      if (!r) return why = r.message, false;
      if (r.applied != o.len) fail(error_code::invariant, "object rejected a ready operation");
      add_seg(obj, o.id.replica, o.id.seq, local.id.seq, o.len);
    }
    if (o.kind == tree_op_kind::insert && objects_[oi].kind == object_kind::children) {  // add_object moves objects: no reference held
      const std::uint32_t depth = objects_[oi].depth + 1u;
      auto& made = reps_[replica_index(o.id.replica)].created;
      for (std::uint32_t k = 0; k < o.len; ++k) {
        const op_id item{o.id.replica, o.id.seq + k};
        made.push_back({item.seq, static_cast<std::uint32_t>(objects_.size())});
        if (o.nodes[k].empty()) {
          add_object({item, object_role::text}, object_kind::text, oi);
        } else {
          add_object({item, object_role::attributes}, object_kind::map, oi);
          add_object({item, object_role::children}, object_kind::children, oi, depth);
        }
      }
    }
    return true;
  }

  bool integrate_map(std::uint32_t oi, const tree_op& o, std::string& why) {
    object& obj = objects_[oi];
    if (shape_ == tree_shape::xml) {
      if (!markup::detail::is_name(o.key)) return why = "attribute name \"" + o.key + "\" is not an XML name", false;
      struct xml_chars {  // decode_utf8's sink: checks each code point, keeps none
        bool ok = true;
        void push_back(char32_t c) { ok = ok && markup::detail::is_xml_char(c); }
      } value;
      if (!decode_utf8(o.value, value)) return why = "attribute value is not valid UTF-8", false;
      if (!value.ok) return why = "attribute value holds a character XML does not allow", false;
    } else {
      struct any_chars {
        void push_back(char32_t) {}
      } key;
      if (!decode_utf8(o.key, key)) return why = "map key is not valid UTF-8", false;
    }
    std::vector<item_key> preds;  // the observed entries by their ids (the or_map's order)
    preds.reserve(o.preds.size());
    for (const op_id& p : o.preds) preds.push_back(key_of(p));
    if (!obj.map) obj.map = std::make_unique<or_map>();
    if (o.kind == tree_op_kind::set)
      obj.map->set(o.key, item_key{o.lamport, o.id.replica, o.id.seq}, o.value, preds);
    else
      obj.map->remove(o.key, preds);
    obj.map_clock = std::max(obj.map_clock, o.lamport);
    return true;
  }

  /// True if the units of `in` already integrated (seqs below its replica's next_seq) are the ops
  /// logged under those ids: same kind, object, Lamport values, origin or targets, values, key and
  /// preds. An op id names one operation forever (see rga::same_as_integrated); the log keeps every
  /// value, so the comparison is exact. A logged op is unpacked once per batch and replica
  /// (compared_): a batch names each id once, in seq order (batch_order), so many short ops inside one
  /// long logged insert do not unpack it each. O(the logged ops spanned, unpacked once + values
  /// compared): a batch costs at most the log once plus its own size.
  bool same_as_integrated(std::uint32_t rep, const tree_op& in, std::string& why) const {
    const replica_state& rs = reps_[rep];
    const std::uint32_t known = std::min(in.len, rs.next_seq - in.id.seq);
    auto differs = [&](std::uint32_t k, const char* what) { return reused_op_id(in.id.replica, in.id.seq + k, what, why); };
    auto it = entry_holding(rs.log_pos, in.id.seq, log_);
    unpacked& cached = compared_[rep];
    const tree_op& t = cached.op;
    for (std::uint32_t k = 0; k < known; ++it) {
      const logged& e = log_[*it];
      if (cached.entry != *it) unpack(e, cached.op), cached.entry = *it;
      const std::uint32_t j = in.id.seq + k - e.seq, n = std::min(known - k, e.len - j);  // units j.. of the logged op
      if (t.kind != in.kind) return differs(k, "kind");
      if (t.object != in.object) return differs(k, "object");
      if (t.lamport + j != in.lamport + k) return differs(k, "Lamport value");
      switch (in.kind) {
        case tree_op_kind::insert: {
          const op_id mine = k == 0 ? in.ref : op_id{in.id.replica, in.id.seq + k - 1};
          const op_id theirs = j == 0 ? t.ref : op_id{in.id.replica, in.id.seq + k - 1};
          if (mine != theirs) return differs(k, "origin");
          const bool text = !t.text.empty();  // the logged op's object holds text (else nodes)
          if ((text ? in.text.size() : in.nodes.size()) < k + n) return differs(k, "value");
          for (std::uint32_t u = 0; u < n; ++u)
            if (text ? in.text[k + u] != t.text[j + u] : in.nodes[k + u] != t.nodes[j + u]) return differs(k + u, "value");
          break;
        }
        case tree_op_kind::remove:  // runs of consecutive targets: the same first one and, past one unit, the same direction
          if (in.target(k) != t.target(j)) return differs(k, "target");
          if (n > 1 && in.backward != t.backward) return differs(k + 1, "target");
          break;
        case tree_op_kind::set:
        case tree_op_kind::unset:
          if (in.key != t.key) return differs(k, "key");
          if (in.value != t.value) return differs(k, "value");
          if (in.preds != t.preds) return differs(k, "set of observed entries");
          break;
      }
      k += n;
    }
    return true;
  }

  void park(const tree_op& o, op_id awaits) { parked_.push_back({o, awaits}); }

  // ---- local ops ------------------------------------------------------------------------------

  /// Integrates an op made here; it is ready by construction.
  void local(tree_op&& o) {
    reserve_counters(reps_[0].next_seq, o.lamport - 1, o.len);
    o.id = {self(), reps_[0].next_seq};
    apply_result res;
    std::string why;
    const outcome oc = integrate(o, res, why);
    if (oc == outcome::invalid) fail(error_code::value, why);
    if (oc != outcome::done || res.applied != o.len) fail(error_code::invariant, "local operation not integrated");
  }

  tree_shape shape_;
  bool recording_ = false;              ///< record_changes(): integrate_next notes each op's object in touched_
  std::vector<std::uint32_t> touched_;  ///< objects integrated ops changed since record_changes(true), repeats included
  std::uint64_t held_ = 0;     ///< units()
  std::uint64_t changed_ = 0;  ///< changed()
  std::vector<object> objects_;  ///< index 0 is the root
  std::vector<logged> log_;  ///< every integrated op, in integration order
  std::string log_bytes_;    ///< their packed parts
  /// The logged op same_as_integrated last unpacked, per replica index: kept for one batch (apply_each
  /// clears it), so the ops of a batch that fall in one logged op unpack it once.
  struct unpacked {
    std::uint32_t entry = UINT32_MAX;  ///< index in log_ (UINT32_MAX: none)
    tree_op op;
  };
  mutable std::unordered_map<std::uint32_t, unpacked> compared_;
  /// The lazy list flat_range read last (lazy_op): the last lazy list read by position, one op held.
  mutable unpacked lazy_read_;
};

}  // namespace folio::detail

#include "tree_edit.hpp"  // defines the local edits declared above
