#include "wire/json.hpp"

#include <folio/utf8.hpp>
#include <rapidjson/error/en.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <vector>

namespace folio::service {
namespace {

/// What the body reader reads from: a byte range (RapidJSON's MemoryStream), as a type of its own so
/// that the string scan below applies to it and to nothing else. The range holds no NUL (parse refuses
/// one first), so the '\0' Peek gives at its end is the end of the text.
struct json_source : rapidjson::MemoryStream {
  using MemoryStream::MemoryStream;
};

using json_reader = rapidjson::GenericReader<rapidjson::UTF8<>, rapidjson::UTF8<>, rapidjson::CrtAllocator>;

/// What each byte after a backslash stands for in JSON's two-byte escapes (\" \\ \/ \b \f \n \r
/// \t); 0 for every other byte (\u, or not an escape: RapidJSON's own loop reads those).
constexpr std::array<char, 256> short_escapes = [] {
  std::array<char, 256> t{};
  t['"'] = '"', t['\\'] = '\\', t['/'] = '/', t['b'] = '\b', t['f'] = '\f', t['n'] = '\n', t['r'] = '\r', t['t'] = '\t';
  return t;
}();

}  // namespace
}  // namespace folio::service

/// Copied into the locals of the reader's functions that read it (strings, numbers, whitespace), as
/// RapidJSON copies its own string streams: three pointers and a size.
template <>
struct rapidjson::StreamTraits<folio::service::json_source> {
  enum { copyOptimization = 1 };
};

/// The body reader's scan of a string (RapidJSON 1.1.0 calls it before each character it would read
/// one at a time): copies plain bytes and two-byte escapes (\n, \\, \" ...) onto the reader's stack,
/// and stops at the closing quote, a \u escape, a byte after a backslash that makes no escape, a
/// control character (0x00-0x1F) or the body's end, which RapidJSON's own loop then reads: the string's
/// end, the escape (surrogate pairs included), or a refusal naming the byte, as without this scan.
/// Each run of plain bytes is found by plain_json_run (json.hpp: sixteen bytes a test where SSE2 is)
/// and pushed with one copy. RapidJSON's own SSE2 scan (for a NUL-terminated StringStream) is not
/// used: it returns at every escape, loops byte by byte up to the next 16-byte boundary before its
/// aligned loads and pushes its blocks one at a time, and it takes 0x1A-0x1F for plain bytes.
/// O(bytes scanned).
template <>
template <>
inline void folio::service::json_reader::ScanCopyUnescapedString<folio::service::json_source, folio::service::json_reader::StackStream<char>>(
    folio::service::json_source& is, StackStream<char>& os) {
  const char* p = is.src_;
  const char* const end = is.end_;
  for (;;) {
    const std::size_t n = folio::service::plain_json_run(p, end);  // < 4 GiB: parse refuses larger bodies
    if (n != 0) folio::service::copy_json_run(static_cast<char*>(os.Push(static_cast<rapidjson::SizeType>(n))), p, n);
    p += n;
    if (end - p < 2 || *p != '\\') break;
    const char e = folio::service::short_escapes[static_cast<unsigned char>(p[1])];
    if (e == 0) break;
    os.Put(e);
    p += 2;
  }
  is.src_ = p;
}

namespace folio::service {

namespace {

// Numbers reach the builder as their text (kParseNumbersAsStringsFlag) and are converted here:
// RapidJSON 1.1.0's own double parsing is either approximate (its default) or, with
// kParseFullPrecisionFlag, asserts on some inputs near the subnormal range. Strings are checked here
// too (unicode_problem), once each, rather than by kParseValidateEncodingFlag: RapidJSON's check runs
// per character and lets lone surrogate escapes through anyway.
constexpr unsigned parse_flags = rapidjson::kParseIterativeFlag | rapidjson::kParseNumbersAsStringsFlag;

/// SAX handler in front of the DOM builder. In one pass it checks what RapidJSON's DOM parser does
/// not: nesting depth, duplicate keys, strings that are not Unicode (bytes that are not UTF-8, or a
/// lone low surrogate escape such as \udc00, which RapidJSON 1.1.0 writes as the bytes ED B0 80), and
/// it converts numbers exactly. It keeps the path to the value being read, so a refusal names the field.
struct checked_builder {
  struct frame {
    bool object = false;
    bool expect_key = true;            ///< objects: the next string is a key
    const std::string* key = nullptr;  ///< objects: the member being read (owned by `keys`)
    std::size_t items = 0;             ///< arrays: values begun
    /// objects: the keys seen, for duplicates. Ordered, not hashed: a client chooses the keys, and
    /// strings made to collide in std::hash would make every insert walk one bucket (quadratic).
    std::set<std::string, std::less<>> keys{};
  };

  rapidjson::Document& doc;
  bool surrogates_allowed = false;  ///< stored JSON from before the Unicode rule (parse_stored_json)
  std::vector<frame> frames{};
  std::string failure{};  ///< why a handler stopped the parse (the message without its offset)
  std::string_view what;  ///< names the whole text: "Body", "map value", ...

  /// Where the value being read is: "commentAnnotations[0].from.userId" (relative to the body's
  /// "data"), or `what` for the whole text. `begun`: the value's handler has run (arrays count it).
  std::string where(bool begun = true) const {
    std::string p;
    for (std::size_t i = 0; i < frames.size(); ++i) {
      const frame& f = frames[i];
      const bool last = i + 1 == frames.size();
      if (f.object) {
        if (!f.key || (last && f.expect_key)) break;
        if (!p.empty()) p += '.';
        p += shortened(*f.key);
      } else {
        const std::size_t index = last && !begun ? f.items : f.items - 1;
        p += '[' + std::to_string(index) + ']';
      }
    }
    if (what == "Body") {  // fields are named as in every other message: relative to "data"
      if (p.starts_with("data.")) return p.substr(5);
      if (p.starts_with("data[")) return p.substr(4);
      return p.empty() ? "Body" : p;
    }
    return p.empty() ? std::string(what) : std::string(what) + " at " + p;
  }
  /// For a key: "A key in commentAnnotations[0]", "A key of the body", "A key in map value at a.b".
  std::string key_where() const {
    const std::string w = where();
    if (what == "Body") return w == "Body" ? "A key of the body" : "A key in " + w;
    return "A key in " + w;
  }
  static std::string shortened(const std::string& key) {
    if (key.size() <= 64) return key;
    std::size_t cut = 64;
    while (cut > 0 && (static_cast<unsigned char>(key[cut]) & 0xC0) == 0x80) --cut;  // on a character boundary
    return key.substr(0, cut) + "...";
  }

  static std::string escape_of(unsigned cp) {
    static constexpr char hex[] = "0123456789abcdef";
    std::string e = "\\u";
    for (int shift = 12; shift >= 0; shift -= 4) e += hex[(cp >> shift) & 0xF];
    return e;
  }

  void begin_value() {
    if (!frames.empty() && !frames.back().object) ++frames.back().items;
  }
  bool end_value(bool ok) {
    if (!frames.empty() && frames.back().object) frames.back().expect_key = true;
    return ok;
  }
  bool open(bool object) {
    begin_value();
    if (frames.size() >= static_cast<std::size_t>(max_json_depth)) return refuse_depth();
    frames.push_back({});
    frames.back().object = object;
    return true;
  }
  bool close(bool ok) {
    frames.pop_back();
    return end_value(ok);
  }

  bool Null() { return begin_value(), end_value(doc.Null()); }
  bool Bool(bool b) { return begin_value(), end_value(doc.Bool(b)); }
  bool Int(int i) { return begin_value(), end_value(doc.Int(i)); }
  bool Uint(unsigned u) { return begin_value(), end_value(doc.Uint(u)); }
  bool Int64(int64_t i) { return begin_value(), end_value(doc.Int64(i)); }
  bool Uint64(uint64_t u) { return begin_value(), end_value(doc.Uint64(u)); }
  bool Double(double d) { return begin_value(), end_value(doc.Double(d)); }
  /// A number's text (RapidJSON has checked its syntax). Integers that fit 64 bits are kept exactly;
  /// everything else becomes the nearest double, as JavaScript's JSON.parse reads it (a value that
  /// rounds to zero is zero; one beyond the largest double is refused, as JavaScript would make it
  /// Infinity, which JSON cannot hold). "-0" is the double -0.
  bool RawNumber(const char* s, rapidjson::SizeType n, bool) {
    begin_value();
    const std::string_view text(s, n);
    if (text.find_first_of(".eE") == std::string_view::npos && text != "-0") {
      std::int64_t i = 0;
      if (const auto r = std::from_chars(s, s + n, i); r.ec == std::errc() && r.ptr == s + n) return end_value(doc.Int64(i));
      std::uint64_t u = 0;
      if (const auto r = std::from_chars(s, s + n, u); r.ec == std::errc() && r.ptr == s + n) return end_value(doc.Uint64(u));
    }
    double d = 0;
    const auto r = std::from_chars(s, s + n, d);
    if (r.ec == std::errc::result_out_of_range) {
      // Overflow or underflow: strtod tells which (the service never changes the "C" locale).
      const double huge_or_tiny = std::strtod(std::string(text).c_str(), nullptr);
      if (std::isinf(huge_or_tiny)) return refuse_number("number too big to be stored in double");
      d = text.starts_with('-') ? -0.0 : 0.0;
    } else if (r.ec != std::errc() || r.ptr != s + n) {
      return refuse_number("invalid number");
    }
    return end_value(doc.Double(d));
  }
  bool String(const char* s, rapidjson::SizeType n, bool copy) {
    begin_value();
    if (const unsigned problem = unicode_problem({s, n}); problem == 1 || (problem && !surrogates_allowed)) return refuse_unicode(problem, false);
    return end_value(doc.String(s, n, copy));
  }
  bool StartObject() { return open(true) && doc.StartObject(); }
  bool EndObject(rapidjson::SizeType n) { return close(doc.EndObject(n)); }
  bool StartArray() { return open(false) && doc.StartArray(); }
  bool EndArray(rapidjson::SizeType n) { return close(doc.EndArray(n)); }
  bool Key(const char* s, rapidjson::SizeType n, bool copy) {
    frame& f = frames.back();
    if (const unsigned problem = unicode_problem({s, n}); problem == 1 || (problem && !surrogates_allowed)) return refuse_unicode(problem, true);
    const auto [it, fresh] = f.keys.emplace(s, n);
    if (!fresh) return refuse_duplicate(*it);
    f.key = &*it, f.expect_key = false;
    return doc.Key(s, n, copy);
  }

  // The refusals are out of line: RapidJSON's string parsing, which calls the handler, stays small.
  [[gnu::cold, gnu::noinline]] bool refuse_unicode(unsigned problem, bool key) {
    failure = (key ? key_where() : where()) + " is not valid Unicode: " +
              (problem == 1 ? std::string("it holds bytes that are not UTF-8") : "it holds a lone surrogate " + escape_of(problem)) +
              (key ? " (the key ends" : " (the string ends");
    return false;
  }
  [[gnu::cold, gnu::noinline]] bool refuse_duplicate(const std::string& key) {
    failure = "Duplicate key \"" + key + "\" in a JSON object.";
    return false;
  }
  [[gnu::cold, gnu::noinline]] bool refuse_depth() {
    failure = "JSON nesting is deeper than 64 levels";
    return false;
  }
  [[gnu::cold, gnu::noinline]] bool refuse_number(const char* why) {
    failure = std::string("Body is not valid JSON: ") + why;
    return false;
  }

  /// RapidJSON's own refusal of a high surrogate escape without its low half, named by its place.
  std::string surrogate_pair_error() const {
    const bool key = !frames.empty() && frames.back().object && frames.back().expect_key;
    return (key ? key_where() : where(false)) + " is not valid Unicode: it holds a high surrogate escape (\\ud800-\\udbff) not followed by a low one";
  }
};

}  // namespace

unsigned unicode_problem(std::string_view text) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const auto* const end = p + text.size();
  while (p < end) {
    const unsigned c = *p;
    if (c < 0x80) {  // past this run of ASCII, many bytes a test
      p += folio::ascii_run(p, static_cast<std::size_t>(end - p));
      continue;
    }
    int len;
    unsigned cp;
    if (c >= 0xC2 && c <= 0xDF)
      len = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF)
      len = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4)
      len = 4, cp = c & 0x07;
    else
      return 1;
    if (end - p < len) return 1;
    for (int i = 1; i < len; ++i) {
      if ((p[i] & 0xC0) != 0x80) return 1;
      cp = (cp << 6) | (p[i] & 0x3Fu);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))) return 1;  // overlong, or beyond Unicode
    if (cp >= 0xD800 && cp <= 0xDFFF) return cp;
    p += len;
  }
  return 0;
}

namespace {

rapidjson::Document parse(std::string_view body, std::string_view what, bool surrogates_allowed) {
  // RapidJSON's streams read a NUL as the end of the text, so "1\0anything" would parse as 1. JSON
  // never holds a raw NUL (in a string it is escaped, elsewhere it is not whitespace).
  if (const std::size_t nul = body.find('\0'); nul != std::string_view::npos)
    throw api_error(status::invalid_argument, std::string(what) + " is not valid JSON: NUL byte (at byte " + std::to_string(nul) + ").");
  // RapidJSON counts a string's length in 32 bits (SizeType), and so does the string scan above; the
  // service's bodies are far below (--max-body), the command-line tools' input is not bounded.
  if (body.size() >= std::numeric_limits<rapidjson::SizeType>::max())
    throw api_error(status::invalid_argument, std::string(what) + " is larger than the JSON reader's limit of 4 GiB.");
  rapidjson::Document doc;
  // The reader's stack holds a string while it is parsed (and, iterative, 8 bytes a nesting level):
  // room for the longest string a body can hold from the start (allocated at the first push, the
  // opening brace) instead of growing by half from 256 bytes, a copy of all so far each time (a 100 KB
  // text: 15 reallocations). Pages of it never touched cost nothing.
  rapidjson::Reader reader(nullptr, std::max<std::size_t>(body.size() + 1, 256));
  rapidjson::ParseResult pr;
  std::string failure, unicode;
  auto generate = [&](rapidjson::Document& d) {
    checked_builder b{d, surrogates_allowed, {}, {}, what};
    json_source in(body.data(), body.size());
    pr = reader.Parse<parse_flags>(in, b);
    failure = std::move(b.failure);
    if (pr.Code() == rapidjson::kParseErrorStringUnicodeSurrogateInvalid) unicode = b.surrogate_pair_error();
    return !pr.IsError();
  };
  doc.Populate(generate);
  const std::string at = " (at byte " + std::to_string(pr.Offset()) + ").";
  if (!failure.empty()) {
    if (failure.ends_with('.')) throw api_error(status::invalid_argument, failure);
    if (failure.ends_with("ends"))  // RapidJSON stops just past the closing quote
      throw api_error(status::invalid_argument, failure + " at byte " + std::to_string(pr.Offset() - 1) + ").");
    if (failure.starts_with("Body is not valid JSON: ")) failure.replace(0, 4, what);
    throw api_error(status::invalid_argument, failure + at);
  }
  if (!unicode.empty()) throw api_error(status::invalid_argument, unicode + at);
  if (pr.IsError()) {
    // RapidJSON's reasons are sentences ("Invalid value."); inside this one they become a phrase.
    std::string why = rapidjson::GetParseError_En(pr.Code());
    if (why.ends_with('.')) why.pop_back();
    if (why.size() > 1 && why[0] >= 'A' && why[0] <= 'Z' && why[1] >= 'a' && why[1] <= 'z') why[0] = static_cast<char>(why[0] - 'A' + 'a');
    throw api_error(status::invalid_argument, std::string(what) + " is not valid JSON: " + why + at);
  }
  return doc;
}

}  // namespace

rapidjson::Document parse_json(std::string_view body, std::string_view what) { return parse(body, what, false); }

rapidjson::Document parse_stored_json(std::string_view body) { return parse(body, "Stored JSON", true); }

std::string canonical_json(const rapidjson::Value& root) {
  rapidjson::StringBuffer sb;
  json_writer w(sb);
  struct frame {
    const rapidjson::Value* v;
    std::vector<const rapidjson::Value::Member*> members;  // objects: sorted by key
    std::size_t next = 0;
  };
  auto scalar = [&](const rapidjson::Value& v) {
    switch (v.GetType()) {
      case rapidjson::kNullType: w.Null(); break;
      case rapidjson::kFalseType: w.Bool(false); break;
      case rapidjson::kTrueType: w.Bool(true); break;
      case rapidjson::kStringType: w.String(v.GetString(), v.GetStringLength()); break;
      default:
        if (v.IsInt64()) w.Int64(v.GetInt64());
        else if (v.IsUint64()) w.Uint64(v.GetUint64());
        else write_double(w, v.GetDouble());
    }
  };
  std::vector<frame> stack;
  auto open = [&](const rapidjson::Value& v) {
    if (v.IsObject()) {
      frame f{&v, {}, 0};
      for (auto it = v.MemberBegin(); it != v.MemberEnd(); ++it) f.members.push_back(&*it);
      std::sort(f.members.begin(), f.members.end(), [](const auto* a, const auto* b) {
        return std::string_view(a->name.GetString(), a->name.GetStringLength()) < std::string_view(b->name.GetString(), b->name.GetStringLength());
      });
      w.StartObject();
      stack.push_back(std::move(f));
    } else if (v.IsArray()) {
      w.StartArray();
      stack.push_back({&v, {}, 0});
    } else {
      scalar(v);
    }
  };
  open(root);
  while (!stack.empty()) {
    frame& f = stack.back();
    if (f.v->IsObject()) {
      if (f.next == f.members.size()) {
        w.EndObject();
        stack.pop_back();
        continue;
      }
      const auto* m = f.members[f.next++];
      w.Key(m->name.GetString(), m->name.GetStringLength());
      open(m->value);  // may invalidate `f`
    } else {
      if (f.next == f.v->Size()) {
        w.EndArray();
        stack.pop_back();
        continue;
      }
      open((*f.v)[static_cast<rapidjson::SizeType>(f.next++)]);
    }
  }
  return std::string(sb.GetString(), sb.GetSize());
}

void write_double(json_writer& w, double d) {
  char text[32];  // the longest shortest form is 24 characters ("-2.2250738585072014e-308")
  const std::to_chars_result r = std::to_chars(text, text + sizeof text, d);
  w.RawValue(text, static_cast<std::size_t>(r.ptr - text), rapidjson::kNumberType);
}

std::string error_body(std::string_view message, std::string_view status) {
  rapidjson::StringBuffer sb;
  json_writer w(sb);
  w.StartObject();
  w.Key("error");
  w.StartObject();
  w.Key("message");
  write_string(w, message);
  w.Key("status");
  write_string(w, status);
  w.EndObject();
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

std::string json_string_array(const std::vector<std::string>& items) {
  rapidjson::StringBuffer out;
  json_writer w(out);
  w.StartArray();
  for (const std::string& s : items) write_string(w, s);
  w.EndArray();
  return {out.GetString(), out.GetSize()};
}

}  // namespace folio::service
