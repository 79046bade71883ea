// folio/markup.hpp — XML markup in and out: a fragment parsed strictly into plain nodes, and nodes
// written back as canonical markup. The XML CRDT tree loads from and saves through this layer.
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
// lenient about are checked here. Nothing recurses on input depth. Cost: linear in the input, plus
// sorting each element's attributes (k log k for k of them). Thread-safety: free functions.
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

#include "detail/utf8.hpp"

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
  if (s.empty() || !folio::detail::next_code_point(s, i, c) || !is_name_start(c)) return false;
  while (i < s.size())
    if (!folio::detail::next_code_point(s, i, c) || !is_name_char(c)) return false;
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
      folio::detail::append_utf8(out, v);
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

/// Parses `markup` (UTF-8) into `out` (replaced). On failure `out` is left empty.
inline parse_result parse(std::string_view markup, fragment& out, std::size_t depth_limit = max_depth) {
  out.clear();
  auto fail = [&](parse_status s, std::size_t at, std::string msg) {
    out.clear();
    return parse_result{s, at, std::move(msg)};
  };
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
    if (!folio::detail::next_code_point(markup, i, c)) return fail(parse_status::invalid_utf8, at, "invalid UTF-8");
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

  struct frame {
    pugi::xml_node next;        // next pugixml child to convert
    std::vector<node>* target;  // where converted children go
    std::size_t depth;          // depth of the elements in `target`
  };
  std::vector<frame> stack{{doc.first_child(), &out, 1}};
  // Lists are reserved to the nodes they will hold: elements and other nodes one each, a run of
  // adjacent text and CDATA one (they merge; counting each would let "<![CDATA[]]>" repeated reserve a
  // node per 12 bytes of input).
  auto list_size = [](pugi::xml_node first) {
    std::size_t n = 0;
    bool text = false;
    for (pugi::xml_node c = first; c; c = c.next_sibling()) {
      const bool t = c.type() == pugi::node_pcdata || c.type() == pugi::node_cdata;
      n += !(t && text);
      text = t;
    }
    return n;
  };
  out.reserve(list_size(doc.first_child()));
  auto add_text = [](std::vector<node>& list, std::string&& s) {
    if (s.empty()) return;
    if (!list.empty() && list.back().type == node::kind::text) list.back().text += s;
    else list.push_back(node::make_text(std::move(s)));
  };
  std::size_t bad = 0;
  std::string why;
  std::vector<pugi::xml_attribute> attrs;                         // one element's, in document order
  std::vector<std::pair<std::string_view, std::size_t>> by_name;  // (name, position in attrs)
  std::vector<bool> repeats;                                      // per position: an earlier one has its name
  while (!stack.empty()) {
    frame& f = stack.back();
    if (!f.next) {
      stack.pop_back();
      continue;
    }
    const pugi::xml_node x = f.next;
    f.next = x.next_sibling();
    std::vector<node>& list = *f.target;
    const std::size_t depth = f.depth;
    switch (x.type()) {
      case pugi::node_pcdata: {
        const std::string_view raw = x.value();
        if (const std::size_t p = raw.find("]]>"); p != std::string_view::npos)
          return fail(parse_status::cdata_end_in_text, at(x.value()) + p, "\"]]>\" is not allowed in text");
        std::string s;
        s.reserve(raw.size());  // unescaping only shortens
        if (!detail::unescape(raw, s, bad, why)) return fail(parse_status::bad_reference, at(x.value()) + bad, why);
        add_text(list, std::move(s));
        break;
      }
      case pugi::node_cdata: add_text(list, std::string(x.value())); break;
      case pugi::node_element: {
        const std::size_t name_at = at(x.name());
        if (depth > depth_limit)
          return fail(parse_status::too_deep, name_at, "elements nested deeper than " + std::to_string(depth_limit) + " levels");
        if (!detail::is_name(x.name())) return fail(parse_status::invalid_name, name_at, std::string("\"") + x.name() + "\" is not a valid element name");
        node e = node::make_element(x.name());
        attrs.clear();
        for (const pugi::xml_attribute a : x.attributes()) attrs.push_back(a);
        e.children.reserve(list_size(x.first_child()));
        // Which attributes repeat an earlier name: sorted by (name, position), every one but the first
        // of a name does. O(k log k) for k attributes (a scan of the earlier ones per attribute was
        // O(k^2): 200,000 attributes took 117 s). The checks below still run in document order, so the
        // refusal names the same attribute as ever: the first that breaks any rule.
        by_name.clear();
        for (std::size_t i = 0; i < attrs.size(); ++i) by_name.emplace_back(attrs[i].name(), i);
        std::sort(by_name.begin(), by_name.end());
        repeats.assign(attrs.size(), false);
        for (std::size_t i = 1; i < by_name.size(); ++i)
          if (by_name[i].first == by_name[i - 1].first) repeats[by_name[i].second] = true;
        e.attributes.reserve(attrs.size());
        for (std::size_t i = 0; i < attrs.size(); ++i) {
          const pugi::xml_attribute a = attrs[i];
          if (!detail::is_name(a.name()))
            return fail(parse_status::invalid_name, at(a.name()), std::string("\"") + a.name() + "\" is not a valid attribute name");
          if (repeats[i]) return fail(parse_status::duplicate_attribute, at(a.name()), std::string("attribute \"") + a.name() + "\" appears twice");
          const std::string_view raw = a.value();
          if (const std::size_t p = raw.find('<'); p != std::string_view::npos)
            return fail(parse_status::lt_in_attribute, at(a.value()) + p, std::string("'<' in the value of attribute \"") + a.name() + "\"");
          std::string v;
          if (!detail::unescape(raw, v, bad, why)) return fail(parse_status::bad_reference, at(a.value()) + bad, why);
          e.attributes.push_back({a.name(), std::move(v)});
        }
        std::sort(e.attributes.begin(), e.attributes.end(), [](const attribute& p, const attribute& q) { return p.name < q.name; });
        list.push_back(std::move(e));
        stack.push_back({x.first_child(), &list.back().children, depth + 1});  // `list` is not touched again before this frame ends
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

/// Canonical markup for `f` (see the top of this file). Iterative; O(size of the output).
inline std::string serialize(const fragment& f) {
  std::string out;
  struct frame {
    const std::vector<node>* list;
    std::size_t i;
    const node* owner;  // element to close when the list is done (null at top level)
  };
  std::vector<frame> stack{{&f, 0, nullptr}};
  std::vector<const attribute*> attrs;
  while (!stack.empty()) {
    frame& fr = stack.back();
    if (fr.i == fr.list->size()) {
      if (fr.owner) out += "</", out += fr.owner->name, out += '>';
      stack.pop_back();
      continue;
    }
    const node& n = (*fr.list)[fr.i++];
    if (n.type == node::kind::text) {
      detail::escape(out, n.text, false);
      continue;
    }
    out += '<', out += n.name;
    attrs.clear();
    for (const attribute& a : n.attributes) attrs.push_back(&a);
    std::sort(attrs.begin(), attrs.end(), [](const attribute* a, const attribute* b) { return a->name < b->name; });
    for (const attribute* a : attrs) {
      out += ' ', out += a->name, out += "=\"";
      detail::escape(out, a->value, true);
      out += '"';
    }
    if (n.children.empty()) {
      out += "/>";
      continue;
    }
    out += '>';
    stack.push_back({&n.children, 0, &n});
  }
  // A U+FEFF first in the markup would be read back as a byte order mark and dropped: write it as a
  // character reference (only text can come first, so this is always character data).
  if (out.compare(0, 3, "\xEF\xBB\xBF") == 0) out.replace(0, 3, "&#65279;");
  return out;
}

}  // namespace folio::markup
