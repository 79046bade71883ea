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
  // Documents whose content is compressed (format version 2), and a block of the LZ4 target.
  folio::text c(8);
  for (int k = 0; k < 40; ++k) c.insert_utf8(c.size(), "again and again, übermorgen ");
  c.erase(10, 30);
  put(root / "text_document", "compressed", c.encode());
  put(root / "record_document", "compressed", c.encode());
  folio::array v(9);
  v.insert(0, std::vector<std::string>(40, R"({"same":"value"})"));
  put(root / "array_document", "compressed", v.encode());
  // Documents keeping their removed items' values (format version 3).
  put(root / "text_document", "all_values", c.encode("content", folio::kept_values::all));
  put(root / "text_document", "merged_all_values", a.encode("content", folio::kept_values::all));
  put(root / "array_document", "all_values", y.encode("content", folio::kept_values::all));
  put(root / "record_document", "text_all_values", c.encode("default", folio::kept_values::all));
  std::string block;
  folio::detail::put_varint(block, c.to_string().size());
  folio::detail::lz4_compress(c.to_string(), block);
  put(root / "lz4_block", "text", block);

  // Whole requests (service_fuzz.cpp, target request): byte 0 picks the path, the rest is the body.
  const std::string ids = R"("organizationId":"o","documentId":"d")";
  const std::pair<int, std::string> requests[] = {
      {0, "{\"data\":{" + ids + R"(,"annotationIds":["n"],"userIds":["u"],"locationIds":["l"]}})"},
      {1, "{\"data\":{" + ids + R"(,"pageSize":2,"statusIds":["OPEN"],"updatedAfter":"2025-01-01T00:00:00.000Z"}})"},
      {2, "{\"data\":{" + ids + R"(,"commentAnnotations":[{"annotationId":"z","location":{"id":"l"},"from":{"userId":"u","name":"U","email":"u@example.com"},"commentData":[{"commentId":3,"commentText":"c","commentHtml":"<p>c</p>"}]}]}})"},
      {3, "{\"data\":{" + ids + R"(,"annotationIds":["n"],"updatedData":{"status":{"id":"RESOLVED"},"color":"red"}}})"},
      {4, "{\"data\":{" + ids + R"(,"userIds":["u"]}})"},
      {5, "{\"data\":{" + ids + R"(,"annotationId":"n","commentData":[{"commentText":"d","from":{"userId":"v","name":"V","email":"v@example.com"}}]}})"},
      {6, "{\"data\":{" + ids + R"(,"annotationId":"n","commentIds":[1],"updatedData":{"commentText":"e"}}})"},
      {7, "{\"data\":{" + ids + R"(,"annotationId":"n","commentIds":[1,2]}})"},
      {8, "{\"data\":{" + ids + R"(,"editorId":"new","type":"xml","data":"<a><b c=\"1\"/>t</a>"}})"},
      {9, "{\"data\":{" + ids + R"(,"editorId":"t","data":"hello, world","userId":"u","sessionId":"s"}})"},
      {9, "{\"data\":{" + ids + R"(,"editorId":"m","type":"map","data":{"a":2,"c":{"d":[]}}}})"},
      {9, "{\"data\":{" + ids + R"(,"editorId":"a","data":[{"k":2},{"k":3}]}})"},
      {10, "{\"data\":{" + ids + R"(,"editorId":"x"}})"},
      {11, "{\"data\":{" + ids + R"(,"editorId":"t"}})"},
      {12, "{\"data\":{" + ids + R"(,"editorId":"t","version":"AA=="}})"},
      {13, ""},
      {29, "{\"data\":{" + ids + R"(,"editorId":"t","clientId":"tab-1","state":{"name":"A","c":[1]},"selection":{"anchor":"1.2","head":"end"}}})"},
      {30, "{\"data\":{" + ids + R"(,"editorId":"t","clientId":"tab-1"}})"},
      {31, "{\"data\":{" + ids + R"(}})"},
  };
  int i = 0;
  for (const auto& [path, body] : requests) put(root / "request", "seed" + std::to_string(i++), std::string(1, static_cast<char>(path)) + body);

  // Sync pushes (target sync): byte 0 picks the record (0 text, 1 map, 2 xml, 3 array), byte 1 the
  // length of the version vector that follows, then the update: a client replica's first edits.
  auto sync_seed = [&](const std::string& name, int record, const folio::document& client) {
    const std::string version = client.version().encode();
    put(root / "sync", name, std::string(1, static_cast<char>(record)) + static_cast<char>(version.size()) + version + client.encode_since({}));
  };
  folio::document ct(folio::record_type::text, 77, "content");
  ct.replace_text("new text ");
  sync_seed("text", 0, ct);
  folio::document cm(folio::record_type::map, 77, "content");
  cm.replace_map({{"z", "[1,2]"}});
  sync_seed("map", 1, cm);
  folio::document cx(folio::record_type::xml, 77, "content");
  cx.replace_xml("<q>client</q>");
  sync_seed("xml", 2, cx);
  folio::document ca(folio::record_type::array, 77, "content");
  ca.replace_array({R"({"k":9})"});
  sync_seed("array", 3, ca);
  put(root / "sync", "pull", std::string("\0\1\0", 3));
  return 0;
}
