// folio/detail/tree/tree_edit.hpp — the local edits of a tree document (detail/tree/tree_doc.hpp): a map set or
// removed, a whole map replaced, an XML tree replaced through its edit script (detail/tree/xml_diff.hpp).
//
// Model: an edit becomes unit ops made here (each integrated by tree_doc::local at once, so the next
// op may depend on it): map sets and unsets with the entries they observed as preds; inserts of nodes
// (one op per list), then their attributes and texts, then their children; removes, one per run of
// consecutive doc ids. A whole edit reserves its counters first (all or nothing). Positions are
// applied last first within a list, so the edit script's old positions stay valid.
//
// Complexity: replace_xml O(script x log n) after the diff; replace_xml_range the same after a diff of
// the range alone (flattening it is O(log n + its size)); replace_map O(keys).
//
// Thread-safety: none.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "../../markup.hpp"
#include "../../ops.hpp"
#include "or_map.hpp"
#include "tree_doc.hpp"
#include "../../utf8.hpp"
#include "xml_diff.hpp"

namespace folio::detail {

/// The local edits of one tree_doc (see the top of this file); made per edit.
class tree_editor {
 public:
  explicit tree_editor(tree_doc& d) : d_(d) {}

  /// Sets `key` of the root map (map records) to `value`. No op if it already is its only value.
  local_change set(const std::string& key, std::string value) {
    const std::uint32_t first = d_.reps_[0].next_seq;
    local_set(0, key, std::move(value));
    return change_since(first);
  }
  /// Removes `key` from the root map. No op if absent.
  local_change remove(const std::string& key) {
    const std::uint32_t first = d_.reps_[0].next_seq;
    local_unset(0, key);
    return change_since(first);
  }
  /// Makes the root map hold exactly `entries`: sets for new or changed keys, removes for vanished ones.
  local_change replace_map(const std::map<std::string, std::string>& entries) {
    const std::uint32_t first = d_.reps_[0].next_seq;
    auto changes = diff_map(*d_.objects_[0].map, entries);
    reserve_counters(first, d_.clock_, changes.size());  // all or nothing
    for (auto& [k, v] : changes)
      if (v)
        local_set(0, k, std::move(*v));
      else
        local_unset(0, k);
    return change_since(first);
  }

  /// Makes the XML tree equal to `to` through the edit script of diff_xml: children inserted and
  /// removed, attributes set and removed, code points inserted and removed in text nodes.
  local_change replace_xml(const markup::flat_fragment& to) {
    const std::uint32_t first = d_.reps_[0].next_seq;
    const markup::flat_fragment from = d_.flat();
    if (from.empty()) {  // a load: nothing to compare (diffing would hash the whole new tree)
      tree_doc::tree_growth g = measure(to, {to.top()});
      g.units += to.top().count, g.items += to.top().count, g.entries += !to.empty();  // the top-level list itself
      reserve_counters(first, d_.clock_, g.units);  // all or nothing
      d_.reserve_for(g);
      insert_nodes(0, 0, to, to.top());
      return change_since(first);
    }
    const xml_children_edit script = diff_xml(from, to);
    reserve_counters(first, d_.clock_, script_units(script, to));  // all or nothing
    apply_script(0, 0, script, to);
    return change_since(first);
  }
  /// Makes the live children [from, to) of element (or fragment) `parent` equal to the top-level nodes
  /// of `nodes`: replace_xml's script, made between those children alone (tree_doc::flat_range) and
  /// `nodes`, applied at `from`.
  local_change replace_xml_range(const tree_doc::xml_node& parent, std::size_t from, std::size_t to, const markup::flat_fragment& nodes) {
    if (parent.text) fail(error_code::range, "the children of a text node");
    if (from > to) fail(error_code::range, "range " + std::to_string(from) + ".." + std::to_string(to) + " ends before it starts");
    if (d_.objects_[parent.object].depth + element_height(nodes) > markup::max_depth)
      fail(error_code::value, "XML nesting deeper than " + std::to_string(markup::max_depth) + " once the nodes are in place");
    const std::uint32_t first = d_.reps_[0].next_seq;
    seq(parent.object);  // a lazy list is read once, to build its engine, rather than at every edit
    const markup::flat_fragment old = d_.flat_range(parent.object, from, to - from);
    const xml_children_edit script = diff_xml(old, nodes);
    reserve_counters(first, d_.clock_, script_units(script, nodes));  // all or nothing
    apply_script(parent.object, from, script, nodes);
    return change_since(first);
  }

  /// The unit operations replace_xml makes for `script` (made against the new value `to`), at most:
  /// xml_edit_size's count, plus what the subtrees it inserts hold (their attributes, code points and
  /// nodes). Iterative.
  static std::uint64_t script_units(const xml_children_edit& script, const markup::flat_fragment& to) {
    std::uint64_t n = xml_edit_size(script);
    std::vector<const xml_children_edit*> edits{&script};
    std::vector<markup::flat_fragment::range> inserted;
    while (!edits.empty()) {
      const xml_children_edit* e = edits.back();
      edits.pop_back();
      for (const xml_child_op& op : e->ops) {
        if (op.type == xml_child_op::kind::insert) inserted.push_back({op.first, static_cast<markup::flat_fragment::index>(op.count)});
        if (op.children) edits.push_back(op.children.get());
      }
    }
    return n + measure(to, std::move(inserted)).units;
  }
  /// What the whole subtrees of `f` in the node ranges `lists` hold besides their own nodes (the
  /// caller's): their attributes, code points and child nodes as unit ops, and what integrating them
  /// adds to the document's tables. Iterative.
  static tree_doc::tree_growth measure(const markup::flat_fragment& f, std::vector<markup::flat_fragment::range> lists) {
    tree_doc::tree_growth g;
    while (!lists.empty()) {
      const markup::flat_fragment::range r = lists.back();
      lists.pop_back();
      for (markup::flat_fragment::index i = r.first; i < r.end(); ++i) {
        const markup::flat_fragment::item& x = f.at(i);
        const std::string_view s = f.str(x);
        if (x.type == markup::node::kind::text) {
          for (char c : s) g.units += (static_cast<unsigned char>(c) & 0xC0) != 0x80;  // code points
          g.objects += 1, g.entries += 1, g.bytes += s.size() + 8;
          continue;
        }
        g.units += x.attrs.count + x.children.count;
        g.objects += 2, g.entries += x.attrs.count + (x.children.count != 0), g.items += x.children.count;
        g.bytes += s.size() + 2;
        for (auto a = x.attrs.first; a < x.attrs.end(); ++a) g.bytes += f.attr_at(a).name.len + f.attr_at(a).value.len + 8;
        if (x.children.count) lists.push_back(x.children);
      }
    }
    return g;
  }

 private:
  using object = tree_doc::object;
  using seg = tree_doc::seg;

  local_change change_since(std::uint32_t first) const { return {d_.self(), first, d_.reps_[0].next_seq - first}; }

  // Local edits read positions: a lazy sequence they touch gets its engine first
  // (tree_doc::materialize); one with no op yet has none (null: empty).
  const tree_doc::seq_state* seq(std::uint32_t oi) const {
    d_.materialize(oi);
    return d_.objects_[oi].seq.get();
  }
  std::uint32_t seq_clock(std::uint32_t oi) const {
    const tree_doc::seq_state* s = seq(oi);
    return !s ? 0 : s->chars ? s->chars->clock() : s->kids ? s->kids->clock() : 0;
  }
  std::size_t seq_size(std::uint32_t oi) const {
    const tree_doc::seq_state* s = seq(oi);
    return !s ? 0 : s->chars ? s->chars->size() : s->kids ? s->kids->size() : 0;
  }
  std::vector<std::pair<op_id, std::uint32_t>> live_ids(std::uint32_t oi, std::size_t pos, std::size_t n) const {
    const tree_doc::seq_state* s = seq(oi);
    if (!s) return {};
    return s->chars ? s->chars->live_ids(pos, n) : s->kids ? s->kids->live_ids(pos, n) : std::vector<std::pair<op_id, std::uint32_t>>{};
  }
  /// A map object's live entries for `key`, winner first (none while it has no or_map).
  or_map::entry_range entries(std::uint32_t oi, std::string_view key) const {
    const or_map* m = d_.objects_[oi].map.get();
    return m ? m->entries(key) : or_map::entry_range{};
  }
  /// Doc id of the live item at `pos` of sequence object `oi`.
  op_id item_at(std::uint32_t oi, std::size_t pos) const {
    const auto ids = live_ids(oi, pos, 1);
    const object& obj = d_.objects_[oi];
    if (ids.empty()) fail(error_code::range, "position " + std::to_string(pos) + " past the end of a sequence");
    return tree_doc::to_doc(obj, ids[0].first);
  }
  op_id origin_for(std::uint32_t oi, std::size_t pos) const {
    if (pos > seq_size(oi)) fail(error_code::range, "insert position past the end of a sequence");
    return pos == 0 ? document_start : item_at(oi, pos - 1);
  }

  void local_insert_text(std::uint32_t oi, std::size_t pos, std::u32string cps) {
    if (cps.empty()) return;
    tree_op o;
    o.kind = tree_op_kind::insert, o.object = name_of(oi), o.ref = origin_for(oi, pos);
    o.lamport = seq_clock(oi) + 1, o.len = static_cast<std::uint32_t>(cps.size()), o.text = std::move(cps);
    d_.local(std::move(o));
  }

  /// Removes the live items [pos, pos+n): one remove per run of consecutive doc ids.
  void local_erase(std::uint32_t oi, std::size_t pos, std::size_t n) {
    const auto pieces = live_ids(oi, pos, n);
    const object& obj = d_.objects_[oi];
    std::vector<std::pair<op_id, std::uint32_t>> targets;  // doc ids, split where the translation breaks
    for (auto [id, count] : pieces)
      for (std::uint32_t k = 0; k < count;) {
        const op_id d = tree_doc::to_doc(obj, {id.replica, id.seq + k});
        const seg* s = tree_doc::seg_of(obj, d);
        const std::uint32_t take = std::min(count - k, s->len - (d.seq - s->doc));
        targets.push_back({d, take});
        k += take;
      }
    const object_name name = name_of(oi);
    for (auto [d, take] : targets) {
      tree_op o;
      o.kind = tree_op_kind::remove, o.object = name, o.ref = d, o.len = take, o.lamport = seq_clock(oi) + 1;
      d_.local(std::move(o));
    }
  }

  void local_set(std::uint32_t oi, std::string_view key, std::string value) {
    const or_map::entry_range live = entries(oi, key);
    if (!live.empty() && std::next(live.begin()) == live.end() && live.begin()->second == value) return;
    tree_op o;
    o.kind = tree_op_kind::set, o.object = name_of(oi), o.key = key, o.value = std::move(value), o.lamport = d_.objects_[oi].map_clock + 1;
    for (const auto& [name, v] : live) o.preds.push_back({name.id.replica, name.id.seq});
    d_.local(std::move(o));
  }
  void local_unset(std::uint32_t oi, std::string_view key) {
    const or_map::entry_range live = entries(oi, key);
    if (live.empty()) return;
    tree_op o;
    o.kind = tree_op_kind::unset, o.object = name_of(oi), o.key = key, o.lamport = d_.objects_[oi].map_clock + 1;
    for (const auto& [name, v] : live) o.preds.push_back({name.id.replica, name.id.seq});
    d_.local(std::move(o));
  }

  /// Inserts the whole subtrees of `f` in node range `nodes` before `pos` of children object `oi`:
  /// one insert for the nodes of each list, then their attributes and texts, then their children
  /// (explicit stack).
  void insert_nodes(std::uint32_t oi, std::size_t pos, const markup::flat_fragment& f, markup::flat_fragment::range nodes) {
    struct work {
      std::uint32_t object;
      std::size_t pos;
      markup::flat_fragment::range nodes;
    };
    std::vector<work> stack{{oi, pos, nodes}};
    std::u32string cps;
    while (!stack.empty()) {
      const work w = stack.back();
      stack.pop_back();
      if (w.nodes.count == 0) continue;
      tree_op o;
      o.kind = tree_op_kind::insert, o.object = name_of(w.object), o.ref = origin_for(w.object, w.pos);
      o.lamport = seq_clock(w.object) + 1, o.len = w.nodes.count;
      o.nodes.reserve(w.nodes.count);
      for (auto i = w.nodes.first; i < w.nodes.end(); ++i)
        o.nodes.push_back(f.at(i).type == markup::node::kind::text ? std::string() : std::string(f.str(f.at(i))));
      const std::uint32_t first = d_.reps_[0].next_seq;
      d_.local(std::move(o));
      for (std::uint32_t k = 0; k < w.nodes.count; ++k) {
        const markup::flat_fragment::item& n = f.at(w.nodes.first + k);
        const op_id item{d_.self(), first + k};
        if (n.type == markup::node::kind::text) {
          cps.clear();
          decode_utf8(f.str(n), cps);
          local_insert_text(d_.find({item, object_role::text}), 0, std::move(cps));
        } else {
          const std::uint32_t attrs = d_.find({item, object_role::attributes});
          for (auto a = n.attrs.first; a < n.attrs.end(); ++a) local_set(attrs, f.str(f.attr_at(a).name), std::string(f.str(f.attr_at(a).value)));
          stack.push_back({d_.find({item, object_role::children}), 0, n.children});
        }
      }
    }
  }

  /// The most elements nested in one another among the top-level nodes of `f` (0: text only). O(nodes).
  static std::size_t element_height(const markup::flat_fragment& f) {
    std::size_t most = 0;
    std::vector<std::pair<markup::flat_fragment::range, std::size_t>> lists{{f.top(), 1}};
    while (!lists.empty()) {
      const auto [r, level] = lists.back();
      lists.pop_back();
      for (auto i = r.first; i < r.end(); ++i)
        if (f.at(i).type == markup::node::kind::element) {
          most = std::max(most, level);
          if (f.at(i).children.count) lists.push_back({f.at(i).children, level + 1});
        }
    }
    return most;
  }
  /// Applies `script` (made against the new value `to`) to children object `oi`, whose list the
  /// script's top level edits from position `offset` on (its positions are relative to it).
  void apply_script(std::uint32_t oi, std::size_t offset, const xml_children_edit& script, const markup::flat_fragment& to) {
    struct work {
      std::uint32_t object;
      std::size_t offset;
      const xml_children_edit* edit;
    };
    std::vector<work> stack{{oi, offset, &script}};
    while (!stack.empty()) {
      const auto [obj, base, edit] = stack.back();
      stack.pop_back();
      for (auto it = edit->ops.rbegin(); it != edit->ops.rend(); ++it) {  // last first: old positions stay valid
        const xml_child_op& op = *it;
        const std::size_t pos = base + op.pos;
        switch (op.type) {
          case xml_child_op::kind::insert:
            insert_nodes(obj, pos, to, {op.first, static_cast<markup::flat_fragment::index>(op.count)});
            break;
          case xml_child_op::kind::remove:
            local_erase(obj, pos, op.count);
            break;
          case xml_child_op::kind::update_element: {
            const op_id el = item_at(obj, pos);
            const std::uint32_t attrs = d_.find({el, object_role::attributes});
            for (const std::string_view name : op.unset) local_unset(attrs, name);
            for (const auto& [name, value] : op.set) local_set(attrs, name, std::string(value));
            if (op.children) stack.push_back({d_.find({el, object_role::children}), 0, op.children.get()});
            break;
          }
          case xml_child_op::kind::update_text: {
            const std::uint32_t t = d_.find({item_at(obj, pos), object_role::text});
            for (auto h = op.text.rbegin(); h != op.text.rend(); ++h) {
              if (h->a_len) local_erase(t, h->a_pos, h->a_len);
              if (h->b_len) local_insert_text(t, h->a_pos, std::u32string(op.text_source, h->b_pos, h->b_len));
            }
            break;
          }
        }
      }
    }
  }

  object_name name_of(std::uint32_t oi) const { return d_.objects_[oi].name; }

  tree_doc& d_;
};

inline local_change tree_doc::set(const std::string& key, std::string value) { return tree_editor(*this).set(key, std::move(value)); }
inline local_change tree_doc::remove(const std::string& key) { return tree_editor(*this).remove(key); }
inline local_change tree_doc::replace_map(const std::map<std::string, std::string>& entries) { return tree_editor(*this).replace_map(entries); }
inline local_change tree_doc::replace_xml(const markup::flat_fragment& to) { return tree_editor(*this).replace_xml(to); }
inline local_change tree_doc::replace_xml_range(const xml_node& parent, std::size_t from, std::size_t to, const markup::flat_fragment& nodes) {
  return tree_editor(*this).replace_xml_range(parent, from, to, nodes);
}

}  // namespace folio::detail
