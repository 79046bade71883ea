// Writes the seed corpora of fuzz/corpus/ (small real encodings of each kind). Rerun after a format
// change:  g++ -std=c++20 -Iinclude fuzz/make_corpus.cpp -o /tmp/mc && /tmp/mc fuzz/corpus
#include <filesystem>
#include <folio/folio.hpp>
#include <fstream>
#include <string>

namespace fs = std::filesystem;

static void put(const fs::path& dir, const std::string& name, const std::string& bytes) {
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << bytes;
}

int main(int argc, char** argv) {
  const fs::path root = argc > 1 ? argv[1] : "fuzz/corpus";
  folio::text a(1), b(2);
  b.apply(a.ops(a.insert_utf8(0, "hello wörld 😀")));
  b.insert_utf8(5, ",");
  for (int i = 0; i < 3; ++i) a.erase(a.size() - 1, 1);
  a.apply(b.ops_since(a.version()));
  folio::replace_text_utf8(b, "hello, world");
  put(root / "text_batch", "log", folio::encode_batch(a.ops_since({})));
  put(root / "text_batch", "delta", folio::encode_batch(b.ops_since(a.version())));
  put(root / "text_document", "merged", a.encode());
  put(root / "text_document", "edited", b.encode());
  folio::array x(7), y(8);
  y.apply(x.ops(x.insert(0, std::vector<std::string>{"1", R"({"k":"v"})", "[]"})));
  y.erase(1, 1);
  folio::replace_array(x, {"0", "1", "[]"});
  put(root / "array_batch", "log", folio::encode_batch(x.ops_since({})));
  put(root / "array_document", "doc", y.encode());
  put(root / "version", "vv", a.version().encode());
  put(root / "markup", "mixed", "lead <p a=\"1\" b=\"&lt;&#x263A;\">x<b>y</b>&amp;z</p> tail<br/>");
  put(root / "markup", "cdata", "<w:p xmlns:w=\"urn:w\"><![CDATA[<raw>]]>\r\n<w:r/></w:p>");
  put(root / "markup", "doctype", "<!DOCTYPE a [<!ENTITY x \"y\">]><a>&x;</a>");
  folio::document m(folio::record_type::map, 3), n(folio::record_type::map, 4);
  m.replace_map({{"title", "\"Notes\""}, {"n", "1"}, {"tags", "[\"a\"]"}});
  n.apply(m.encode_since({}));
  n.remove("n");
  m.set("title", "\"Draft\"");
  n.apply(m.encode_since(n.version()));
  put(root / "record_batch", "map", n.encode_since({}));
  put(root / "record_document", "map", n.encode());
  folio::document p(folio::record_type::xml, 5, "default"), q(folio::record_type::xml, 6);
  p.replace_xml("<p id=\"1\">Hello <b>wörld</b></p><ul><li>one</li></ul>tail");
  q.apply(p.encode_since({}));
  q.replace_xml("<p id=\"2\">Hello, <b>wörld</b></p><ul><li>one</li><li>two</li></ul>");
  p.replace_xml("<p id=\"1\">Hello <b>world</b>!</p>tail");
  q.apply(p.encode_since(q.version()));
  put(root / "record_batch", "xml", q.encode_since({}));
  put(root / "record_batch", "xml_delta", q.encode_since(p.version()));
  put(root / "record_document", "xml", q.encode());
  folio::document t(folio::record_type::text, 7, "default");
  t.replace_text("plain text");
  put(root / "record_document", "text", t.encode());
  return 0;
}
