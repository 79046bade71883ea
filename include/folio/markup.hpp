// folio/markup.hpp — XML markup in and out: a fragment parsed strictly into nodes, and nodes written
// back as canonical markup. The XML CRDT tree loads from and saves through this layer. Two forms of
// the same nodes: `flat_fragment` (three flat arrays: what parse() builds, serialize() writes and the
// CRDT tree diffs against) and `fragment` (plain nested values, to build or inspect by hand); each
// converts to the other.
//
// Accepted: exactly well-formed XML 1.0 *content* — several top-level elements and text, elements with
// attributes, character and the five predefined entity references, CDATA sections (read as text).
// Refused, each with a status, the byte offset and a message: anything not UTF-8 or not an XML Char,
// a DOCTYPE (so entity declarations, external entities and "billion laughs" never get a chance),
// undefined entity references and stray '&', comments, processing instructions and XML declarations
// (the tree has no place for them, and dropping them silently would lose content), duplicate
// attributes, '<' in attribute values, "]]>" in text, invalid names, unbalanced tags and nesting deeper
// than `max_depth` (256). Namespaced names are kept as written ("w:p"); no namespace processing.
//
// Canonical output (same nodes -> same bytes on every replica): attributes ordered by name; empty
// elements as <name/>; in text &, <, > and CR escaped; in attribute values also ", TAB and LF; a
// leading U+FEFF as &#65279;. A byte order mark at the start of the input is a signature, not text.
// parse(serialize(f)) == f for every fragment parse() produced.
//
// pugixml does the tokenising (iteratively: deep input cannot overflow the stack); the rules it is
// lenient about are checked here, in document order, while its tree is copied into a flat_fragment.
// Nothing recurses on input depth. Cost: linear in the input, plus sorting each element's attributes
// (k log k for k of them); memory: the characters once (and, while it parses, pugixml's buffer and
// tree), 28 bytes a node and 16 an attribute. Thread-safety: free functions.
#pragma once

#include <pugixml.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "utf8.hpp"
#include "error.hpp"

namespace folio::markup {

struct attribute {
  std::string name;   ///< as written, prefix included
  std::string value;  ///< unescaped UTF-8
  friend bool operator==(const attribute&, const attribute&) = default;
};

struct node {
  enum class kind : std::uint8_t { element, text };
  kind type = kind::text;
  std::string name;                   ///< element: the tag as written ("p", "w:p")
  std::vector<attribute> attributes;  ///< element: unique names; parse() orders them by name (a map)
  std::vector<node> children;         ///< element: elements and text; never two text nodes in a row
  std::string text;                   ///< text: the characters, unescaped UTF-8, never empty

  static node make_text(std::string s) {
    node n;
    n.text = std::move(s);
    return n;
  }
  static node make_element(std::string tag, std::vector<attribute> attrs = {}, std::vector<node> kids = {}) {
    node n;
    n.type = kind::element, n.name = std::move(tag), n.attributes = std::move(attrs), n.children = std::move(kids);
    return n;
  }
  friend bool operator==(const node&, const node&) = default;
};

/// Top-level nodes of a fragment, in order.
using fragment = std::vector<node>;

/// A fragment in flat arrays: its nodes, its attributes and one buffer of their characters, three
/// allocations whatever its size (a `fragment` makes a block per list, attribute list and long string:
/// O(nodes) allocations). It is what parse() builds and serialize() writes, and
/// what the CRDT tree diffs a new value against (detail/tree/xml_diff.hpp); `fragment` converts both ways.
///
/// Layout and invariants: every list of nodes — the top level, an element's children — is a run of
/// consecutive nodes (`range`), so a list is an index range; a list is placed after the node that owns
/// it, so a child's index is greater than its parent's (a pass from the last node to the first sees
/// every child before its parent). An element's attributes are a run of `attrs`, ordered by name
/// (byte order), names unique. Strings are (offset, length) in `chars`. Text nodes may be empty or
/// adjacent here (the CRDT tree's can be); parse() never makes either. Indices are 32-bit: a fragment
/// holds less than 4 GiB of characters and 2^32 nodes (parse refuses larger input).
class flat_fragment {
 public:
  using index = std::uint32_t;
  struct range {
    index first = 0, count = 0;
    index end() const noexcept { return first + count; }
  };
  struct chars_span {
    index at = 0, len = 0;
  };
  struct item {
    node::kind type = node::kind::text;
    chars_span str;  ///< element: the tag; text: the characters
    range children;  ///< element: its child nodes
    range attrs;     ///< element: its attributes
  };
  struct attr {
    chars_span name, value;
  };
  static constexpr std::size_t max_size = 0xFFFFFFFFu;

  // ---- reading ----
  range top() const noexcept { return top_; }
  const item& at(index i) const noexcept { return nodes_[i]; }
  std::string_view str(chars_span s) const noexcept { return std::string_view(chars_).substr(s.at, s.len); }
  std::string_view str(const item& n) const noexcept { return str(n.str); }
  const attr& attr_at(index i) const noexcept { return attrs_[i]; }
  std::size_t node_count() const noexcept { return nodes_.size(); }
  std::size_t attr_count() const noexcept { return attrs_.size(); }
  bool empty() const noexcept { return top_.count == 0; }
  /// Heap bytes held.
  std::size_t memory_usage() const noexcept { return nodes_.capacity() * sizeof(item) + attrs_.capacity() * sizeof(attr) + chars_.capacity(); }

  // ---- building (parse(), from(), the CRDT tree) ----
  void clear() noexcept { nodes_.clear(), attrs_.clear(), chars_.clear(), top_ = {}; }
  void reserve(std::size_t nodes, std::size_t attrs, std::size_t chars) { nodes_.reserve(nodes), attrs_.reserve(attrs), chars_.reserve(chars); }
  /// Appends `n` text nodes to be filled in (a list: set_top or an element's children). Throws
  /// "[folio.range]" past 2^32 nodes.
  range add_nodes(std::size_t n) {
    if (n > max_size - nodes_.size()) folio::detail::fail(error_code::range, "an XML fragment of more than 2^32 nodes");
    const range r{static_cast<index>(nodes_.size()), static_cast<index>(n)};
    nodes_.resize(nodes_.size() + n);
    return r;
  }
  item& node_at(index i) noexcept { return nodes_[i]; }
  void set_top(range r) noexcept { top_ = r; }
  /// The characters buffer, to append to; mark() before and span_since() after make the span.
  std::string& chars() noexcept { return chars_; }
  index mark() const noexcept { return static_cast<index>(chars_.size()); }
  chars_span span_since(index mark) const {
    if (chars_.size() > max_size) folio::detail::fail(error_code::range, "an XML fragment of more than 4 GiB");
    return {mark, static_cast<index>(chars_.size() - mark)};
  }
  chars_span add_chars(std::string_view s) {
    const index m = mark();
    chars_.append(s);
    return span_since(m);
  }
  /// Appends an attribute; an element's must be consecutive, then sort_attrs() them.
  void add_attr(chars_span name, chars_span value) { attrs_.push_back({name, value}); }
  index attrs_end() const noexcept { return static_cast<index>(attrs_.size()); }
  /// Orders the attributes [r.first, r.end()) by name.
  void sort_attrs(range r) {
    std::sort(attrs_.begin() + r.first, attrs_.begin() + r.end(), [&](const attr& a, const attr& b) { return str(a.name) < str(b.name); });
  }

  // ---- conversion ----
  /// The same nodes as a `fragment`. Iterative; O(size).
  fragment to_fragment() const { return to_fragment(top_); }
  /// The nodes of `list` (a list or a run of one) and their subtrees as a `fragment`.
  fragment to_fragment(range list) const {
    fragment out;
    struct frame {
      range list;
      std::vector<node>* target;
    };
    std::vector<frame> stack{{list, &out}};
    while (!stack.empty()) {
      const frame f = stack.back();
      stack.pop_back();
      f.target->reserve(f.list.count);
      for (index i = f.list.first; i < f.list.end(); ++i) {
        const item& n = nodes_[i];
        if (n.type == node::kind::text) {
          f.target->push_back(node::make_text(std::string(str(n))));
          continue;
        }
        node e = node::make_element(std::string(str(n)));
        e.attributes.reserve(n.attrs.count);
        for (index a = n.attrs.first; a < n.attrs.end(); ++a) e.attributes.push_back({std::string(str(attrs_[a].name)), std::string(str(attrs_[a].value))});
        f.target->push_back(std::move(e));
      }
      // Children once this list is complete (pointers into it are then stable).
      for (index i = f.list.first; i < f.list.end(); ++i)
        if (nodes_[i].type == node::kind::element) stack.push_back({nodes_[i].children, &(*f.target)[i - f.list.first].children});
    }
    return out;
  }
  /// `f` in flat arrays. An element's attributes are ordered by name; of attributes with the same name
  /// the last is kept (as setting them in turn would leave it). Iterative; O(size + k log k per
  /// element of k attributes).
  static flat_fragment from(const fragment& f) {
    flat_fragment out;
    struct frame {
      const std::vector<node>* list;
      range slots;
    };
    out.set_top(out.add_nodes(f.size()));
    std::vector<frame> stack{{&f, out.top()}};
    while (!stack.empty()) {
      const frame fr = stack.back();
      stack.pop_back();
      for (index k = 0; k < fr.slots.count; ++k) {
        const node& n = (*fr.list)[k];
        item x;
        x.type = n.type;
        if (n.type == node::kind::text) {
          x.str = out.add_chars(n.text);
        } else {
          x.str = out.add_chars(n.name);
          const index first = out.attrs_end();
          for (const attribute& a : n.attributes) out.add_attr(out.add_chars(a.name), out.add_chars(a.value));
          x.attrs = {first, static_cast<index>(out.attrs_end() - first)};
          std::stable_sort(out.attrs_.begin() + first, out.attrs_.end(), [&](const attr& a, const attr& b) { return out.str(a.name) < out.str(b.name); });
          // Of equal names keep the last: shift the kept ones down over the dropped.
          index w = first;
          for (index r = first; r < out.attrs_end(); ++r) {
            if (r + 1 < out.attrs_end() && out.str(out.attrs_[r].name) == out.str(out.attrs_[r + 1].name)) continue;
            out.attrs_[w++] = out.attrs_[r];
          }
          out.attrs_.resize(w);
          x.attrs.count = w - first;
          x.children = out.add_nodes(n.children.size());
          stack.push_back({&n.children, x.children});
        }
        out.nodes_[fr.slots.first + k] = x;
      }
    }
    return out;
  }

 private:
  std::vector<item> nodes_;
  std::vector<attr> attrs_;
  std::string chars_;
  range top_;
};

inline constexpr std::size_t max_depth = 256;

enum class parse_status {
  ok = 0,
  invalid_utf8,            ///< bytes that are not UTF-8
  invalid_character,       ///< a code point XML 1.0 does not allow (NUL, most C0 controls, U+FFFE, ...)
  malformed,               ///< not well-formed (unbalanced tags, bad syntax): pugixml's own diagnosis
  doctype,                 ///< <!DOCTYPE ...>: refused, with everything it could declare
  comment,                 ///< <!-- ... -->
  processing_instruction,  ///< <?target ...?>
  declaration,             ///< <?xml ...?>
  bad_reference,           ///< an undefined entity, a stray '&', or a character reference to a non-Char
  duplicate_attribute,     ///< the same attribute name twice on one element
  invalid_name,            ///< a tag or attribute name that is not an XML Name
  lt_in_attribute,         ///< '<' inside an attribute value
  cdata_end_in_text,       ///< "]]>" in character data
  too_deep,                ///< elements nested deeper than the limit
  too_large,               ///< 4 GiB of input or more (a flat_fragment's indices are 32-bit)
};

struct parse_result {
  parse_status status = parse_status::ok;
  std::size_t offset = 0;  ///< byte offset in the input where the problem is
  std::string message;     ///< what is wrong, naming the rule

  explicit operator bool() const noexcept { return status == parse_status::ok; }
  /// e.g. "undefined entity reference &nbsp; at byte 12"
  std::string description() const { return status == parse_status::ok ? "ok" : message + " at byte " + std::to_string(offset); }
};

namespace detail {

inline bool is_xml_char(char32_t c) noexcept {
  return c == 0x9 || c == 0xA || c == 0xD || (c >= 0x20 && c <= 0xD7FF) || (c >= 0xE000 && c <= 0xFFFD) || (c >= 0x10000 && c <= 0x10FFFF);
}

inline bool is_name_start(char32_t c) noexcept {
  return c == ':' || c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= 0xC0 && c <= 0xD6) || (c >= 0xD8 && c <= 0xF6) ||
         (c >= 0xF8 && c <= 0x2FF) || (c >= 0x370 && c <= 0x37D) || (c >= 0x37F && c <= 0x1FFF) || (c >= 0x200C && c <= 0x200D) ||
         (c >= 0x2070 && c <= 0x218F) || (c >= 0x2C00 && c <= 0x2FEF) || (c >= 0x3001 && c <= 0xD7FF) || (c >= 0xF900 && c <= 0xFDCF) ||
         (c >= 0xFDF0 && c <= 0xFFFD) || (c >= 0x10000 && c <= 0xEFFFF);
}

inline bool is_name_char(char32_t c) noexcept {
  return is_name_start(c) || c == '-' || c == '.' || (c >= '0' && c <= '9') || c == 0xB7 || (c >= 0x300 && c <= 0x36F) || (c >= 0x203F && c <= 0x2040);
}

/// True if `s` (valid UTF-8) is an XML 1.0 Name.
inline bool is_name(std::string_view s) noexcept {
  auto ascii_name_char = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == ':' || c == '-' || c == '.'; };
  if (!s.empty() && !(s[0] >= '0' && s[0] <= '9') && s[0] != '-' && s[0] != '.' && std::all_of(s.begin(), s.end(), ascii_name_char))
    return true;  // the common case, all ASCII: one comparison chain per byte
  std::size_t i = 0;
  char32_t c;
  if (s.empty() || !folio::next_code_point(s, i, c) || !is_name_start(c)) return false;
  while (i < s.size())
    if (!folio::next_code_point(s, i, c) || !is_name_char(c)) return false;
  return true;
}

/// Appends `raw` to `out` with references replaced. On an invalid reference returns false with `bad`
/// = its position in `raw` and `why` naming it.
inline bool unescape(std::string_view raw, std::string& out, std::size_t& bad, std::string& why) {
  for (std::size_t i = 0; i < raw.size();) {
    const std::size_t amp = raw.find('&', i);
    if (amp == std::string_view::npos) {
      out.append(raw.substr(i));
      break;
    }
    out.append(raw.substr(i, amp - i));
    i = amp;
    const std::size_t semi = raw.find(';', i);
    const std::string_view ref = semi == std::string_view::npos || semi - i > 40 ? std::string_view{} : raw.substr(i + 1, semi - i - 1);
    bad = i;
    if (ref.empty()) return why = "'&' that does not start an entity or character reference", false;
    if (ref == "lt") out.push_back('<');
    else if (ref == "gt") out.push_back('>');
    else if (ref == "amp") out.push_back('&');
    else if (ref == "apos") out.push_back('\'');
    else if (ref == "quot") out.push_back('"');
    else if (ref[0] == '#') {
      const bool hex = ref.size() > 1 && ref[1] == 'x';
      const std::string_view digits = ref.substr(hex ? 2 : 1);
      std::uint32_t v = 0;
      bool ok = !digits.empty() && digits.size() <= 8;
      for (char d : digits) {
        if (!ok) break;
        int dv = d >= '0' && d <= '9' ? d - '0' : hex && d >= 'a' && d <= 'f' ? d - 'a' + 10 : hex && d >= 'A' && d <= 'F' ? d - 'A' + 10 : -1;
        if (dv < 0) ok = false;
        else v = v * (hex ? 16 : 10) + static_cast<std::uint32_t>(dv);
      }
      if (!ok || !is_xml_char(v)) return why = "character reference &" + std::string(ref) + "; to a character XML does not allow", false;
      folio::append_utf8(out, v);
    } else {
      return why = "undefined entity reference &" + std::string(ref) + ";", false;
    }
    i = semi + 1;
  }
  return true;
}

inline void escape(std::string& out, std::string_view s, bool attribute) {
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '\r': out += "&#13;"; break;
      case '"': attribute ? out += "&quot;" : out += c; break;
      case '\t': attribute ? out += "&#9;" : out += c; break;
      case '\n': attribute ? out += "&#10;" : out += c; break;
      default: out += c;
    }
  }
}

}  // namespace detail

/// Parses `markup` (UTF-8) into `out` (replaced). On failure `out` is left empty. The first problem
/// in document order is the one reported.
inline parse_result parse(std::string_view markup, flat_fragment& out, std::size_t depth_limit = max_depth) {
  out.clear();
  auto fail = [&](parse_status s, std::size_t at, std::string msg) {
    out.clear();
    return parse_result{s, at, std::move(msg)};
  };
  if (markup.size() >= flat_fragment::max_size) return fail(parse_status::too_large, 0, "markup of 4 GiB or more");
  // Characters first: exact offsets, and pugixml then only ever sees valid UTF-8 without NULs.
  for (std::size_t i = 0; i < markup.size();) {
    if (i + 8 <= markup.size()) {  // eight bytes at once while they are ASCII and none is below 0x20
      std::uint64_t w;
      std::memcpy(&w, markup.data() + i, 8);
      constexpr std::uint64_t high = 0x8080808080808080ull, spaces = 0x2020202020202020ull;
      if ((w & high) == 0 && ((w - spaces) & ~w & high) == 0) {
        i += 8;
        continue;
      }
    }
    const std::size_t at = i;
    if (const auto b = static_cast<unsigned char>(markup[i]); b < 0x80) {  // ASCII: one comparison
      if (b < 0x20 && b != '\t' && b != '\n' && b != '\r')
        return fail(parse_status::invalid_character, at, "character U+" + std::to_string(unsigned(b)) + " (decimal) is not allowed in XML");
      ++i;
      continue;
    }
    char32_t c;
    if (!folio::next_code_point(markup, i, c)) return fail(parse_status::invalid_utf8, at, "invalid UTF-8");
    if (!detail::is_xml_char(c)) return fail(parse_status::invalid_character, at, "character U+" + std::to_string(std::uint32_t(c)) + " (decimal) is not allowed in XML");
  }
  // In-place fragment parsing writes a terminator after trailing text: give it a byte of its own.
  std::vector<char> buf;
  buf.reserve(markup.size() + 1);
  buf.assign(markup.begin(), markup.end());
  buf.push_back('\0');
  pugi::xml_document doc;
  const unsigned options = pugi::parse_fragment | pugi::parse_doctype | pugi::parse_comments | pugi::parse_pi | pugi::parse_declaration |
                           pugi::parse_cdata | pugi::parse_ws_pcdata | pugi::parse_eol | pugi::parse_wconv_attribute;
  const pugi::xml_parse_result pr = doc.load_buffer_inplace(buf.data(), buf.size(), options, pugi::encoding_utf8);
  if (!pr) {
    std::string why = pr.description();  // pugixml's reasons start with a capital: "Start-end tags mismatch"
    if (!why.empty() && why[0] >= 'A' && why[0] <= 'Z') why[0] = static_cast<char>(why[0] - 'A' + 'a');
    return fail(parse_status::malformed, static_cast<std::size_t>(pr.offset), "not well-formed: " + why);
  }
  // Offsets of pugixml's strings: parsing in place leaves each string where it started in the input.
  auto at = [&](const char* p) { return p >= buf.data() && p <= buf.data() + buf.size() ? static_cast<std::size_t>(p - buf.data()) : 0; };
  auto opening = [&](const char* p, std::string_view lead) {  // the "<!" or "<?" before a node's content
    const std::size_t pos = markup.rfind(lead, at(p));
    return pos == std::string_view::npos ? at(p) : pos;
  };
  using index = flat_fragment::index;
  auto is_text = [](pugi::xml_node c) { return c.type() == pugi::node_pcdata || c.type() == pugi::node_cdata; };
  // The nodes a list holds: elements and other nodes one each, a run of adjacent text and CDATA one
  // if any of it has characters (the pieces merge; an empty CDATA section is no node). Exact: a list's
  // nodes are consecutive, laid out when its owner is reached.
  auto list_size = [&](pugi::xml_node first) {
    std::size_t n = 0;
    bool in_run = false;  // in a run of text that already counted
    for (pugi::xml_node c = first; c; c = c.next_sibling()) {
      if (!is_text(c)) {
        ++n, in_run = false;
      } else if (!in_run && *c.value()) {
        ++n, in_run = true;
      }
    }
    return n;
  };
  // Strings are copied into `out.chars()` (unescaped), which never holds more than the input.
  out.reserve(0, 0, markup.size());
  struct frame {
    pugi::xml_node next;  // next pugixml child to convert
    index slot;           // the node it becomes (a text piece may extend the one before)
    index end;            // the end of this list's nodes
    bool text_open;       // the node before `slot` is text that adjacent text extends
    std::size_t depth;    // depth of the elements in this list
  };
  out.set_top(out.add_nodes(list_size(doc.first_child())));
  std::vector<frame> stack{{doc.first_child(), out.top().first, out.top().end(), false, 1}};
  auto next_slot = [&](frame& f) {
    if (f.slot == f.end) folio::detail::fail(error_code::invariant, "markup::parse counted a list short");
    return f.slot++;
  };
  // Adds a text piece: extends the open text node (nothing was appended to the characters since), or
  // starts one; an empty piece makes no node.
  auto add_text = [&](frame& f, flat_fragment::index mark) {
    if (f.text_open) {
      out.node_at(f.slot - 1).str.len += static_cast<index>(out.chars().size() - mark);
    } else if (out.chars().size() > mark) {
      out.node_at(next_slot(f)).str = out.span_since(mark);
      f.text_open = true;
    }
  };
  std::size_t bad = 0;
  std::string why;
  std::vector<std::pair<std::string_view, std::string_view>> attrs;  // one element's (name, raw value), in document order
  std::vector<std::pair<std::string_view, std::size_t>> by_name;  // (name, position in attrs)
  std::vector<bool> repeats;                                      // per position: an earlier one has its name
  while (!stack.empty()) {
    frame& f = stack.back();
    if (!f.next) {
      if (f.slot != f.end) folio::detail::fail(error_code::invariant, "markup::parse counted a list long");
      stack.pop_back();
      continue;
    }
    const pugi::xml_node x = f.next;
    f.next = x.next_sibling();
    const std::size_t depth = f.depth;
    switch (x.type()) {
      case pugi::node_pcdata: {
        const std::string_view raw = x.value();
        if (const std::size_t p = raw.find("]]>"); p != std::string_view::npos)
          return fail(parse_status::cdata_end_in_text, at(x.value()) + p, "\"]]>\" is not allowed in text");
        const index mark = out.mark();
        if (!detail::unescape(raw, out.chars(), bad, why)) return fail(parse_status::bad_reference, at(x.value()) + bad, why);
        add_text(f, mark);
        break;
      }
      case pugi::node_cdata: {
        const index mark = out.mark();
        out.chars().append(x.value());
        add_text(f, mark);
        break;
      }
      case pugi::node_element: {
        const std::string_view tag = x.name();
        const std::size_t name_at = at(tag.data());
        if (depth > depth_limit)
          return fail(parse_status::too_deep, name_at, "elements nested deeper than " + std::to_string(depth_limit) + " levels");
        if (!detail::is_name(tag)) return fail(parse_status::invalid_name, name_at, "\"" + std::string(tag) + "\" is not a valid element name");
        flat_fragment::item e;
        e.type = node::kind::element;
        e.str = out.add_chars(tag);
        attrs.clear();
        for (pugi::xml_attribute a = x.first_attribute(); a; a = a.next_attribute()) attrs.push_back({a.name(), a.value()});
        // Which attributes repeat an earlier name: sorted by (name, position), every one but the first
        // of a name does. O(k log k) for k attributes (not a scan of the earlier ones per attribute:
        // O(k^2)). The checks below still run in document order, so the
        // refusal names the same attribute as ever: the first that breaks any rule.
        if (attrs.size() > 1) {
          repeats.assign(attrs.size(), false);
          by_name.clear();
          for (std::size_t i = 0; i < attrs.size(); ++i) by_name.emplace_back(attrs[i].first, i);
          std::sort(by_name.begin(), by_name.end());
          for (std::size_t i = 1; i < by_name.size(); ++i)
            if (by_name[i].first == by_name[i - 1].first) repeats[by_name[i].second] = true;
        }
        e.attrs.first = out.attrs_end();
        for (std::size_t i = 0; i < attrs.size(); ++i) {
          const auto [name, raw] = attrs[i];
          if (!detail::is_name(name)) return fail(parse_status::invalid_name, at(name.data()), "\"" + std::string(name) + "\" is not a valid attribute name");
          if (attrs.size() > 1 && repeats[i]) return fail(parse_status::duplicate_attribute, at(name.data()), "attribute \"" + std::string(name) + "\" appears twice");
          if (const std::size_t p = raw.find('<'); p != std::string_view::npos)
            return fail(parse_status::lt_in_attribute, at(raw.data()) + p, "'<' in the value of attribute \"" + std::string(name) + "\"");
          const flat_fragment::chars_span name_span = out.add_chars(name);
          const index mark = out.mark();
          if (!detail::unescape(raw, out.chars(), bad, why)) return fail(parse_status::bad_reference, at(raw.data()) + bad, why);
          out.add_attr(name_span, out.span_since(mark));
        }
        e.attrs.count = static_cast<index>(attrs.size());
        if (attrs.size() > 1) out.sort_attrs(e.attrs);
        e.children = out.add_nodes(list_size(x.first_child()));
        out.node_at(next_slot(f)) = e;
        f.text_open = false;
        stack.push_back({x.first_child(), e.children.first, e.children.end(), false, depth + 1});  // `f` is not used after this
        break;
      }
      case pugi::node_doctype: return fail(parse_status::doctype, opening(x.value(), "<!"), "a DOCTYPE is not allowed (no DTDs, no entity declarations)");
      case pugi::node_comment: return fail(parse_status::comment, opening(x.value(), "<!--"), "comments are not supported in collaborative XML");
      case pugi::node_declaration: return fail(parse_status::declaration, opening(x.name(), "<?"), "an XML declaration is not allowed in a fragment");
      case pugi::node_pi:
        return fail(parse_status::processing_instruction, opening(x.name(), "<?"), "processing instructions are not supported in collaborative XML");
      default: return fail(parse_status::malformed, 0, "unexpected node");
    }
  }
  return {};
}

/// parse() into a `fragment`.
inline parse_result parse(std::string_view markup, fragment& out, std::size_t depth_limit = max_depth) {
  flat_fragment f;
  parse_result r = parse(markup, f, depth_limit);
  out = f.to_fragment();
  return r;
}

/// Canonical markup for `f` (see the top of this file). Iterative; O(size of the output).
inline std::string serialize(const flat_fragment& f) {
  std::string out;
  using index = flat_fragment::index;
  struct frame {
    flat_fragment::range list;
    index i;
    index owner;  // element to close when the list is done (none at top level)
  };
  constexpr index none = ~index(0);
  std::vector<frame> stack{{f.top(), f.top().first, none}};
  while (!stack.empty()) {
    frame& fr = stack.back();
    if (fr.i == fr.list.end()) {
      if (fr.owner != none) out += "</", out += f.str(f.at(fr.owner)), out += '>';
      stack.pop_back();
      continue;
    }
    const index ni = fr.i++;
    const flat_fragment::item& n = f.at(ni);
    if (n.type == node::kind::text) {
      detail::escape(out, f.str(n), false);
      continue;
    }
    out += '<', out += f.str(n);
    for (index a = n.attrs.first; a < n.attrs.end(); ++a) {  // ordered by name already
      out += ' ', out += f.str(f.attr_at(a).name), out += "=\"";
      detail::escape(out, f.str(f.attr_at(a).value), true);
      out += '"';
    }
    if (n.children.count == 0) {
      out += "/>";
      continue;
    }
    out += '>';
    stack.push_back({n.children, n.children.first, ni});  // `fr` is not used after this
  }
  // A U+FEFF first in the markup would be read back as a byte order mark and dropped: write it as a
  // character reference (only text can come first, so this is always character data).
  if (out.compare(0, 3, "\xEF\xBB\xBF") == 0) out.replace(0, 3, "&#65279;");
  return out;
}

/// Canonical markup for `f` (attributes of an element ordered by name; of two with one name the last).
inline std::string serialize(const fragment& f) { return serialize(flat_fragment::from(f)); }

}  // namespace folio::markup
