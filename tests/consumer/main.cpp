// Two replicas edit concurrently, exchange batches over the wire format, and must agree.
#include <folio/folio.hpp>
#include <iostream>

int main() {
  folio::text a(1), b(2);
  b.apply(a.ops(a.insert_utf8(0, "Hello world")));
  const std::string from_b = folio::encode_batch(b.ops(b.insert_utf8(5, ",")));
  const std::string from_a = folio::encode_batch(a.ops(a.erase(6, 5)));
  folio::op_batch<char32_t> in;
  if (!folio::decode_batch(from_a, in) || !b.apply(in)) return 1;
  if (!folio::decode_batch(from_b, in) || !a.apply(in)) return 1;
  folio::markup::fragment f;  // the pugixml dependency reaches consumers through folio::crdt
  if (!folio::markup::parse("<p>x</p>", f) || folio::markup::serialize(f) != "<p>x</p>") return 1;
  std::cout << a.to_string() << "|" << b.to_string() << "\n";
  return a.to_string() == "Hello, " && b.to_string() == "Hello, " ? 0 : 1;
}
