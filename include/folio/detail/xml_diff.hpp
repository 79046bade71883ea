// folio/detail/xml_diff.hpp — the edit script that turns one XML fragment into another, going down
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
// Script positions are *old* positions in the list being edited, ops ascending, an insert before an
// update or remove at the same position; applying them from the last to the first keeps every
// position valid (that is how the CRDT tree applies them, detail/tree_edit.hpp; so does the tests'
// apply_xml_edit). Nothing recurses on input depth: diff, hashing and equality use explicit stacks. Thread-safety: free
// functions over values.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../markup.hpp"
#include "myers.hpp"
#include "utf8.hpp"

namespace folio::detail {

struct xml_children_edit;

/// One edit of a children list.
struct xml_child_op {
  enum class kind : std::uint8_t { insert, remove, update_element, update_text };
  kind type = kind::insert;
  std::size_t pos = 0;                     ///< old position: insert before it; remove/update from/at it
  std::size_t count = 0;                   ///< remove: nodes removed
  std::vector<markup::node> nodes;         ///< insert: whole new subtrees
  std::vector<markup::attribute> set;      ///< update_element: attributes new or changed
  std::vector<std::string> unset;          ///< update_element: attributes removed
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

inline std::uint64_t mix(std::uint64_t h, std::uint64_t v) noexcept {  // order-dependent combine
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}
/// The standard library's string hash: eight bytes a step (FNV-1a, a byte a step, made hashing the
/// two trees a quarter of a one-word replace of a 1 MiB record). Unkeyed, like the combine: a collision
/// costs an equality check, never a wrong match.
inline std::uint64_t hash_bytes(std::string_view s) noexcept { return std::hash<std::string_view>{}(s); }

/// Hash of the subtree at `root` (attributes combined order-independently: they are a map).
/// Iterative post-order with an accumulator per open element; no allocation per node.
inline std::uint64_t subtree_hash(const markup::node& root) {
  struct frame {
    const markup::node* n;
    std::size_t next;
    std::uint64_t h;
  };
  auto open = [](const markup::node& n) -> std::uint64_t {
    if (n.type == markup::node::kind::text) return mix(1, hash_bytes(n.text));
    std::uint64_t attrs = 0;
    for (const auto& a : n.attributes) attrs += mix(hash_bytes(a.name), hash_bytes(a.value));
    return mix(mix(mix(2, hash_bytes(n.name)), attrs), n.children.size());
  };
  std::vector<frame> stack{{&root, 0, open(root)}};
  for (;;) {
    frame& f = stack.back();
    if (f.n->type == markup::node::kind::element && f.next < f.n->children.size()) {
      const markup::node& c = f.n->children[f.next++];
      stack.push_back({&c, 0, open(c)});
      continue;
    }
    const std::uint64_t h = f.h;
    stack.pop_back();
    if (stack.empty()) return h;
    stack.back().h = mix(stack.back().h, h);
  }
}

/// Deep equality (attributes compared as maps). Iterative.
inline bool equal_subtrees(const markup::node& a, const markup::node& b) {
  std::vector<std::pair<const markup::node*, const markup::node*>> stack{{&a, &b}};
  while (!stack.empty()) {
    auto [x, y] = stack.back();
    stack.pop_back();
    if (x->type != y->type) return false;
    if (x->type == markup::node::kind::text) {
      if (x->text != y->text) return false;
      continue;
    }
    if (x->name != y->name || x->attributes.size() != y->attributes.size() || x->children.size() != y->children.size()) return false;
    for (const auto& at : x->attributes) {
      auto it = std::find_if(y->attributes.begin(), y->attributes.end(), [&](const markup::attribute& o) { return o.name == at.name; });
      if (it == y->attributes.end() || it->value != at.value) return false;
    }
    for (std::size_t i = 0; i < x->children.size(); ++i) stack.push_back({&x->children[i], &y->children[i]});
  }
  return true;
}

/// A node as Myers sees it in the exact-match pass.
struct exact_key {
  std::uint64_t hash;
  const markup::node* n;
  bool operator==(const exact_key& o) const { return hash == o.hash && equal_subtrees(*n, *o.n); }
};
/// A node as Myers sees it in the pairing pass: text, or an element's tag.
struct pair_key {
  const markup::node* n;
  bool operator==(const pair_key& o) const {
    return n->type == o.n->type && (n->type == markup::node::kind::text || n->name == o.n->name);
  }
};

inline std::u32string code_points(const std::string& utf8) {
  std::u32string s;
  decode_utf8(utf8, s);
  return s;
}

}  // namespace xml

/// The script turning `from` into `to` (both fragments, or both children lists).
inline xml_children_edit diff_xml(const std::vector<markup::node>& from, const std::vector<markup::node>& to) {
  xml_children_edit root;
  struct work {
    const std::vector<markup::node>* a;
    const std::vector<markup::node>* b;
    xml_children_edit* out;
  };
  std::vector<work> stack{{&from, &to, &root}};
  // One work budget for the whole script: each list or text compared adds its share (see
  // diff_budget), so many small diffs cannot each spend the base allowance.
  std::uint64_t budget = diff_base_budget;
  auto diff = [&budget](const auto* a, std::size_t n, const auto* b, std::size_t m) {
    budget = std::min(diff_max_budget, budget + diff_budget_per_item * (n + m));
    return myers_diff(a, n, b, m, budget);
  };
  while (!stack.empty()) {
    const work w = stack.back();
    stack.pop_back();
    const auto& a = *w.a;
    const auto& b = *w.b;
    std::vector<hunk> unmatched;
    if (a.size() == 1 && b.size() == 1 && a[0].type == markup::node::kind::element && xml::pair_key{&a[0]} == xml::pair_key{&b[0]}) {
      // One element against one of the same tag (a document's root, a paragraph's only child): they
      // pair whatever their subtrees, and the pairing finds on its way down whether they differ, so
      // the exact-match pass would only hash both subtrees whole (for a document under one root,
      // both trees once more). Its budget share is added all the same.
      budget = std::min(diff_max_budget, budget + diff_budget_per_item * 2);
      unmatched.push_back({0, 1, 0, 1});
    } else {
      std::vector<xml::exact_key> ka, kb;
      // Hashes of the lists being compared only: a change deep down re-hashes the subtrees along its
      // path, which costs far less than keeping a hash for every node of both trees.
      for (const auto& n : a) ka.push_back({xml::subtree_hash(n), &n});
      for (const auto& n : b) kb.push_back({xml::subtree_hash(n), &n});
      unmatched = diff(ka.data(), ka.size(), kb.data(), kb.size());
    }
    for (const hunk& h : unmatched) {
      std::vector<xml::pair_key> pa, pb;
      for (std::size_t i = 0; i < h.a_len; ++i) pa.push_back({&a[h.a_pos + i]});
      for (std::size_t i = 0; i < h.b_len; ++i) pb.push_back({&b[h.b_pos + i]});
      // Walk the region: pairs (same kind/tag) become updates, the rest removes and inserts.
      std::size_t ai = 0, bi = 0;
      auto flush = [&](std::size_t a_end, std::size_t b_end) {
        if (b_end > bi) {
          xml_child_op op;
          op.type = xml_child_op::kind::insert, op.pos = h.a_pos + ai;
          op.nodes.assign(b.begin() + std::ptrdiff_t(h.b_pos + bi), b.begin() + std::ptrdiff_t(h.b_pos + b_end));
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
          const markup::node& x = a[h.a_pos + ai];
          const markup::node& y = b[h.b_pos + bi];
          xml_child_op op;
          op.pos = h.a_pos + ai;
          if (x.type == markup::node::kind::text) {
            op.type = xml_child_op::kind::update_text;
            const std::u32string from_cp = xml::code_points(x.text);
            op.text_source = xml::code_points(y.text);
            op.text = diff(from_cp.data(), from_cp.size(), op.text_source.data(), op.text_source.size());
            if (op.text.empty()) continue;
          } else {
            op.type = xml_child_op::kind::update_element;
            for (const auto& at : y.attributes) {
              auto it = std::find_if(x.attributes.begin(), x.attributes.end(), [&](const markup::attribute& o) { return o.name == at.name; });
              if (it == x.attributes.end() || it->value != at.value) op.set.push_back(at);
            }
            for (const auto& at : x.attributes)
              if (std::none_of(y.attributes.begin(), y.attributes.end(), [&](const markup::attribute& o) { return o.name == at.name; }))
                op.unset.push_back(at.name);
            op.children = std::make_unique<xml_children_edit>();
            stack.push_back({&x.children, &y.children, op.children.get()});  // filled later; the pointee does not move
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
      n += op.nodes.size() + op.count + op.set.size() + op.unset.size();
      for (const hunk& h : op.text) n += h.a_len + h.b_len;
      if (op.children) stack.push_back(op.children.get());
    }
  }
  return n;
}

}  // namespace folio::detail
