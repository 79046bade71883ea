// tests/support/xml_edit.hpp — applies an XML edit script (detail/tree/xml_diff.hpp) to a plain fragment,
// so tests can check that diff_xml(a, b) applied to a gives b.
#pragma once

#include <folio/detail/tree/xml_diff.hpp>
#include <folio/markup.hpp>

#include <algorithm>
#include <string>
#include <vector>

namespace folio::testing {

using detail::xml_child_op;
using detail::xml_children_edit;

/// Applies `e`, a script made against the new value `to`, to `list` in place. Test support (moved out of the installed
/// detail/tree/xml_diff.hpp, which only the CRDT tree needs); the tree applies the same script to its own
/// structure (detail/tree/tree_edit.hpp). Per list: first the updates (an updated element's own children are
/// finished before anything in its list moves, so pointers into the list stay valid), then inserts
/// and removes from the last to the first, so old positions stay valid.
inline void apply_xml_edit(std::vector<markup::node>& list, const xml_children_edit& e, const markup::flat_fragment& to) {
  struct frame {
    std::vector<markup::node>* list;
    const xml_children_edit* edit;
    std::size_t next;  // next op to look at for updates
  };
  std::vector<frame> stack{{&list, &e, 0}};
  while (!stack.empty()) {
    frame& f = stack.back();
    if (f.next < f.edit->ops.size()) {
      const xml_child_op& op = f.edit->ops[f.next++];
      if (op.type == xml_child_op::kind::update_text) {
        markup::node& n = (*f.list)[op.pos];
        std::u32string cps = detail::xml::code_points(n.text);
        for (auto h = op.text.rbegin(); h != op.text.rend(); ++h) cps.replace(h->a_pos, h->a_len, op.text_source, h->b_pos, h->b_len);
        n.text.clear();
        for (char32_t c : cps) append_utf8(n.text, c);
      } else if (op.type == xml_child_op::kind::update_element) {
        markup::node& n = (*f.list)[op.pos];
        for (const std::string_view name : op.unset) std::erase_if(n.attributes, [&](const markup::attribute& a) { return a.name == name; });
        for (const auto& [name, value] : op.set) {
          auto at = std::find_if(n.attributes.begin(), n.attributes.end(), [&](const markup::attribute& o) { return o.name == name; });
          if (at == n.attributes.end()) n.attributes.push_back({std::string(name), std::string(value)});
          else at->value = value;
        }
        std::sort(n.attributes.begin(), n.attributes.end(), [](const auto& x, const auto& y) { return x.name < y.name; });
        if (op.children) stack.push_back({&n.children, op.children.get(), 0});  // `f` is not used after this
      }
      continue;
    }
    std::vector<markup::node>& l = *f.list;
    for (auto it = f.edit->ops.rbegin(); it != f.edit->ops.rend(); ++it) {
      if (it->type == xml_child_op::kind::insert) {
        const markup::fragment nodes = to.to_fragment({it->first, static_cast<markup::flat_fragment::index>(it->count)});
        l.insert(l.begin() + std::ptrdiff_t(it->pos), nodes.begin(), nodes.end());
      }
      else if (it->type == xml_child_op::kind::remove)
        l.erase(l.begin() + std::ptrdiff_t(it->pos), l.begin() + std::ptrdiff_t(it->pos + it->count));
    }
    stack.pop_back();
  }
}

}  // namespace folio::testing
