// folio/detail/tree/xml_diff.hpp — the edit script that turns one XML fragment into another, going down
// to attribute sets/removes and code-point edits inside text nodes. The XML CRDT's replace-by-value
// applies such a script to its tree, so a one-word change in a 1 MiB document becomes a handful of
// operations rather than a subtree rewrite.
//
// Matching a children list: (1) subtrees that are exactly equal are matched by a Myers diff over
// subtree hashes (equality verified node by node, since hashes can collide), except for one element
// against one of the same tag, which step 2 pairs anyway; (2) inside each
// unmatched region, elements with the same tag and text nodes are paired by a second Myers diff over
// their kind/tag; a pair becomes an update (attributes, then the children recursively, or a text
// diff); (3) everything else is removed or inserted whole.
//
// Both sides are markup::flat_fragments (the new value as parsed, the tree's current one as
// tree_doc::flat() lays it out); a whole inserted subtree is a range of the new fragment's nodes, not a
// copy. A list's common prefix and suffix are found by deep comparison first; subtree hashes are made
// for what is left only, and kept, so no subtree is hashed twice.
//
// Script positions are *old* positions in the list being edited, ops ascending, an insert before an
// update or remove at the same position; applying them from the last to the first keeps every
// position valid (that is how the CRDT tree applies them, detail/tree/tree_edit.hpp; so does the tests'
// apply_xml_edit). Nothing recurses on input depth: diff, hashing and equality use explicit stacks.
// Cost: O(size of both) for the hashes and the equality checks of matched subtrees, plus the Myers
// diffs (budgeted). Thread-safety: free functions over values.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../../markup.hpp"
#include "../util/myers.hpp"
#include "../../utf8.hpp"

namespace folio::detail {

struct xml_children_edit;

/// One edit of a children list. A script refers to both fragments it was made from (positions in the
/// old, nodes and strings of the new, strings of the old): it is valid while they are.
struct xml_child_op {
  enum class kind : std::uint8_t { insert, remove, update_element, update_text };
  kind type = kind::insert;
  std::size_t pos = 0;                     ///< old position: insert before it; remove/update from/at it
  std::size_t count = 0;                   ///< insert: nodes inserted; remove: nodes removed
  markup::flat_fragment::index first = 0;  ///< insert: the whole new subtrees are the new fragment's nodes [first, first + count)
  std::vector<std::pair<std::string_view, std::string_view>> set;  ///< update_element: attributes new or changed (name, value)
  std::vector<std::string_view> unset;     ///< update_element: attributes removed
  std::unique_ptr<xml_children_edit> children;  ///< update_element: edits inside (null: none)
  std::vector<hunk> text;                  ///< update_text: code-point hunks on the old text ...
  std::u32string text_source;              ///< ... whose inserted code points come from here
};

/// Edits of one children list (or of the top level of a fragment).
struct xml_children_edit {
  std::vector<xml_child_op> ops;
  bool empty() const noexcept { return ops.empty(); }
};

namespace xml {

using flat = markup::flat_fragment;
using index = flat::index;

inline std::uint64_t mix(std::uint64_t h, std::uint64_t v) noexcept {  // order-dependent combine
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}
/// The standard library's string hash: eight bytes a step (FNV-1a, a byte a step, made hashing the
/// two trees a quarter of a one-word replace of a 1 MiB record). Unkeyed, like the combine: a collision
/// costs an equality check, never a wrong match.
inline std::uint64_t hash_bytes(std::string_view s) noexcept { return std::hash<std::string_view>{}(s); }

/// The hash of node `root`'s subtree (attributes combined order-independently: they are a map),
/// kept in `memo` (by node index, 0: not made yet) with those of every subtree under it, so that a
/// list compared again further down costs nothing more. Iterative post-order; O(subtree) the first
/// time, O(1) after.
inline std::uint64_t subtree_hash(const flat& f, index root, std::vector<std::uint64_t>& memo) {
  if (memo[root]) return memo[root];
  std::vector<index> stack{root};
  while (!stack.empty()) {
    const index i = stack.back();
    const flat::item& n = f.at(i);
    if (n.type == markup::node::kind::text) {
      stack.pop_back();
      memo[i] = mix(1, hash_bytes(f.str(n))) | 1;  // never 0 (0: not made yet)
      continue;
    }
    bool ready = true;  // every child's hash made (children go on the stack above their parent)
    for (index c = n.children.first; c < n.children.end(); ++c)
      if (!memo[c]) stack.push_back(c), ready = false;
    if (!ready) continue;
    stack.pop_back();
    std::uint64_t attrs = 0;
    for (index a = n.attrs.first; a < n.attrs.end(); ++a) attrs += mix(hash_bytes(f.str(f.attr_at(a).name)), hash_bytes(f.str(f.attr_at(a).value)));
    std::uint64_t x = mix(mix(mix(2, hash_bytes(f.str(n))), attrs), n.children.count);
    for (index c = n.children.first; c < n.children.end(); ++c) x = mix(x, memo[c]);
    memo[i] = x | 1;
  }
  return memo[root];
}

/// Deep equality of node `i` of `fa` and node `j` of `fb` (attributes are ordered by name in both, so
/// equal maps are equal runs). Iterative.
inline bool equal_subtrees(const flat& fa, index i, const flat& fb, index j) {
  std::vector<std::pair<index, index>> stack{{i, j}};
  while (!stack.empty()) {
    const auto [x, y] = stack.back();
    stack.pop_back();
    const flat::item& a = fa.at(x);
    const flat::item& b = fb.at(y);
    if (a.type != b.type || fa.str(a) != fb.str(b)) return false;
    if (a.type == markup::node::kind::text) continue;
    if (a.attrs.count != b.attrs.count || a.children.count != b.children.count) return false;
    for (index k = 0; k < a.attrs.count; ++k) {
      const flat::attr& p = fa.attr_at(a.attrs.first + k);
      const flat::attr& q = fb.attr_at(b.attrs.first + k);
      if (fa.str(p.name) != fb.str(q.name) || fa.str(p.value) != fb.str(q.value)) return false;
    }
    for (index k = 0; k < a.children.count; ++k) stack.push_back({a.children.first + k, b.children.first + k});
  }
  return true;
}

/// A node as Myers sees it in the exact-match pass.
struct exact_key {
  std::uint64_t hash;
  const flat* f;
  index i;
  bool operator==(const exact_key& o) const { return hash == o.hash && equal_subtrees(*f, i, *o.f, o.i); }
};
/// A node as Myers sees it in the pairing pass: text, or an element's tag.
struct pair_key {
  const flat* f;
  index i;
  bool operator==(const pair_key& o) const {
    const flat::item& a = f->at(i);
    const flat::item& b = o.f->at(o.i);
    return a.type == b.type && (a.type == markup::node::kind::text || f->str(a) == o.f->str(b));
  }
};

inline std::u32string code_points(std::string_view utf8) {
  std::u32string s;
  decode_utf8(utf8, s);
  return s;
}

}  // namespace xml

/// The script turning `from` into `to`.
inline xml_children_edit diff_xml(const markup::flat_fragment& from, const markup::flat_fragment& to) {
  using xml::index;
  using flat = markup::flat_fragment;
  xml_children_edit root;
  struct work {
    flat::range a, b;
    xml_children_edit* out;
  };
  std::vector<work> stack{{from.top(), to.top(), &root}};
  // One work budget for the whole script: each list or text compared adds its share (see
  // diff_budget), so many small diffs cannot each spend the base allowance.
  std::uint64_t budget = diff_base_budget;
  auto diff = [&budget](const auto* a, std::size_t n, const auto* b, std::size_t m) {
    budget = std::min(diff_max_budget, budget + diff_budget_per_item * (n + m));
    return myers_diff(a, n, b, m, budget);
  };
  // Subtree hashes of both trees by node index, made when a list first needs them (each subtree
  // hashed once).
  std::vector<std::uint64_t> ha, hb;
  while (!stack.empty()) {
    const work w = stack.back();
    stack.pop_back();
    const flat::range a = w.a, b = w.b;
    std::vector<hunk> unmatched;
    if (a.count == 1 && b.count == 1 && from.at(a.first).type == markup::node::kind::element &&
        xml::pair_key{&from, a.first} == xml::pair_key{&to, b.first}) {
      // One element against one of the same tag (a document's root, a paragraph's only child): they
      // pair whatever their subtrees, and the pairing finds on its way down whether they differ.
      // Its budget share is added all the same.
      budget = std::min(diff_max_budget, budget + diff_budget_per_item * 2);
      unmatched.push_back({0, 1, 0, 1});
    } else {
      // The common prefix and suffix by deep comparison, which stops at the first difference and is
      // the check an equal hash needs anyway; subtree hashes (made once, kept) for the middle only.
      // A one-word change in a long list hashes nothing. The budget share is the whole list's.
      std::size_t pre = 0, suf = 0;
      while (pre < a.count && pre < b.count && xml::equal_subtrees(from, static_cast<index>(a.first + pre), to, static_cast<index>(b.first + pre))) ++pre;
      while (suf < a.count - pre && suf < b.count - pre &&
             xml::equal_subtrees(from, static_cast<index>(a.end() - 1 - suf), to, static_cast<index>(b.end() - 1 - suf)))
        ++suf;
      budget = std::min(diff_max_budget, budget + diff_budget_per_item * 2 * (pre + suf));
      if (pre + suf < a.count || pre + suf < b.count) {
        if (ha.empty()) ha.assign(from.node_count(), 0);
        if (hb.empty()) hb.assign(to.node_count(), 0);
        std::vector<xml::exact_key> ka, kb;
        ka.reserve(a.count - pre - suf), kb.reserve(b.count - pre - suf);
        for (index i = static_cast<index>(a.first + pre); i < a.end() - suf; ++i) ka.push_back({xml::subtree_hash(from, i, ha), &from, i});
        for (index i = static_cast<index>(b.first + pre); i < b.end() - suf; ++i) kb.push_back({xml::subtree_hash(to, i, hb), &to, i});
        unmatched = diff(ka.data(), ka.size(), kb.data(), kb.size());
        for (hunk& h : unmatched) h.a_pos += pre, h.b_pos += pre;
      }
    }
    for (const hunk& h : unmatched) {
      std::vector<xml::pair_key> pa, pb;
      for (std::size_t i = 0; i < h.a_len; ++i) pa.push_back({&from, static_cast<index>(a.first + h.a_pos + i)});
      for (std::size_t i = 0; i < h.b_len; ++i) pb.push_back({&to, static_cast<index>(b.first + h.b_pos + i)});
      // Walk the region: pairs (same kind/tag) become updates, the rest removes and inserts.
      std::size_t ai = 0, bi = 0;
      auto flush = [&](std::size_t a_end, std::size_t b_end) {
        if (b_end > bi) {
          xml_child_op op;
          op.type = xml_child_op::kind::insert, op.pos = h.a_pos + ai;
          op.first = static_cast<index>(b.first + h.b_pos + bi), op.count = b_end - bi;
          w.out->ops.push_back(std::move(op));
        }
        if (a_end > ai) {
          xml_child_op op;
          op.type = xml_child_op::kind::remove, op.pos = h.a_pos + ai, op.count = a_end - ai;
          w.out->ops.push_back(std::move(op));
        }
        ai = a_end, bi = b_end;
      };
      std::vector<hunk> unpaired = diff(pa.data(), pa.size(), pb.data(), pb.size());
      unpaired.push_back({pa.size(), 0, pb.size(), 0});  // sentinel: pairs run to the end
      for (const hunk& u : unpaired) {
        // [ai, u.a_pos) pairs one to one with [bi, u.b_pos).
        for (; ai < u.a_pos; ++ai, ++bi) {
          const flat::item& x = from.at(pa[ai].i);
          const flat::item& y = to.at(pb[bi].i);
          xml_child_op op;
          op.pos = h.a_pos + ai;
          if (x.type == markup::node::kind::text) {
            op.type = xml_child_op::kind::update_text;
            const std::u32string from_cp = xml::code_points(from.str(x));
            op.text_source = xml::code_points(to.str(y));
            op.text = diff(from_cp.data(), from_cp.size(), op.text_source.data(), op.text_source.size());
            if (op.text.empty()) continue;
          } else {
            op.type = xml_child_op::kind::update_element;
            // Both attribute runs are ordered by name: one merge finds sets and removes.
            index p = x.attrs.first, q = y.attrs.first;
            while (p < x.attrs.end() || q < y.attrs.end()) {
              const int c = p == x.attrs.end() ? 1 : q == y.attrs.end() ? -1 : from.str(from.attr_at(p).name).compare(to.str(to.attr_at(q).name));
              if (c < 0) {
                op.unset.push_back(from.str(from.attr_at(p++).name));
              } else if (c > 0) {
                op.set.emplace_back(to.str(to.attr_at(q).name), to.str(to.attr_at(q).value)), ++q;
              } else {
                if (from.str(from.attr_at(p).value) != to.str(to.attr_at(q).value)) op.set.emplace_back(to.str(to.attr_at(q).name), to.str(to.attr_at(q).value));
                ++p, ++q;
              }
            }
            op.children = std::make_unique<xml_children_edit>();
            stack.push_back({x.children, y.children, op.children.get()});  // filled later; the pointee does not move
          }
          w.out->ops.push_back(std::move(op));
        }
        flush(u.a_pos + u.a_len, u.b_pos + u.b_len);
      }
    }
  }
  // Updates whose recursion found nothing to do are dropped afterwards (children are filled only
  // once the stack has drained): walk the script and prune, bottom-up, iteratively.
  std::vector<std::pair<xml_children_edit*, bool>> order{{&root, false}};
  while (!order.empty()) {
    auto& [e, expanded] = order.back();
    if (!expanded) {
      expanded = true;
      xml_children_edit* cur = e;
      for (auto& op : cur->ops)
        if (op.children) order.push_back({op.children.get(), false});
      continue;
    }
    xml_children_edit* cur = e;
    order.pop_back();
    for (auto& op : cur->ops)
      if (op.children && op.children->empty()) op.children.reset();
    std::erase_if(cur->ops, [](const xml_child_op& op) {
      return op.type == xml_child_op::kind::update_element && op.set.empty() && op.unset.empty() && !op.children;
    });
  }
  return root;
}

/// Number of primitive edits in a script: nodes inserted or removed, attributes set or removed,
/// code points inserted or removed. (A measure of how small a replace-by-value is.)
inline std::size_t xml_edit_size(const xml_children_edit& e) {
  std::size_t n = 0;
  std::vector<const xml_children_edit*> stack{&e};
  while (!stack.empty()) {
    const xml_children_edit* cur = stack.back();
    stack.pop_back();
    for (const auto& op : cur->ops) {
      n += op.count + op.set.size() + op.unset.size();
      for (const hunk& h : op.text) n += h.a_len + h.b_len;
      if (op.children) stack.push_back(op.children.get());
    }
  }
  return n;
}

}  // namespace folio::detail
