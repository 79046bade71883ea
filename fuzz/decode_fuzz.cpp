// libFuzzer target for Folio's decoders. FOLIO_FUZZ_TARGET selects which one this binary drives:
//   1 batch (text)   2 batch (array)   3 document (text)   4 document (array)   5 version vector
//   6 XML markup (parse; what parses must serialise to markup that parses to the same nodes)
//   7 batch (map or xml record, by its header)   8 document (any record type, folio::document)
//   9 LZ4 block (detail/encoding/lz4_block.hpp): a varint size, then a block read to that size, which liblz4
//     must read to the same bytes; and the input itself compressed, which must read back to the input
// Target 1 also holds the reader of one-op text batches to the op table's reading (single_op_reading).
// Anything accepted must make sense afterwards: batches are applied to a small document and
// check_invariants() must hold; documents must pass check_invariants() and re-encode to bytes that decode again,
// in both encodings (kept_values::live and ::all, format versions 2 and 3 for text and array; the
// seeds hold both).
#include <cstddef>
#include <cstdint>
#include <folio/folio.hpp>
#include <optional>
#if FOLIO_FUZZ_TARGET == 9
#include <lz4.h>
#endif
#include <string>
#include <string_view>

namespace {

/// A text batch of one op by one replica is read by read_single_op_text, the rest by the op table
/// (read_batch_table): the first takes exactly what the table reads as one op of a one-replica table,
/// and reads the same.
void single_op_reading(std::string_view bytes) {
  folio::detail::byte_reader r(bytes);
  if (!folio::detail::read_header(r, folio::detail::kind_batch, folio::record_type::text)) return;
  folio::op_batch<char32_t> fast, table;
  folio::op o;
  const bool took = folio::detail::read_single_op_text(r.rest(), o, fast.content);
  if (took) fast.ops.push_back(o);
  const bool one_replica = r.remaining() > 0 && r.rest()[0] == 1;
  const bool read = folio::detail::read_batch_table(r, table);
  if (took != (read && table.ops.size() == 1 && one_replica)) __builtin_trap();
  if (took ? fast != table : !fast.ops.empty() || !fast.content.empty()) __builtin_trap();
}

template <class Doc, class T>
void batch(std::string_view bytes) {
  if constexpr (std::is_same_v<T, char32_t>) single_op_reading(bytes);
  folio::op_batch<T> b;
  if (!folio::decode_batch(bytes, b)) return;
  Doc doc(1);
  if constexpr (std::is_same_v<T, char32_t>)
    doc.insert(0, std::u32string(U"seed"));
  else
    doc.insert(0, std::vector<std::string>{"1", "2"});
  doc.apply(b);  // may be invalid; it must leave the replica consistent either way
  doc.check_invariants();
  (void)doc.ops_since({});
}

template <class Doc>
void document(std::string_view bytes) {
  Doc doc(1);
  if (!Doc::decode(bytes, 1, doc, 1 << 16)) return;  // a small limit keeps executions fast
  doc.check_invariants();
  Doc again(2);
  if (!Doc::decode(doc.encode(), 2, again)) __builtin_trap();
  if (again.values() != doc.values()) __builtin_trap();
  // Every value, the removed ones' included, reads back and writes the same bytes again.
  const std::string all = doc.encode("content", folio::kept_values::all);
  Doc every(3);
  if (!Doc::decode(all, 3, every) || every.values() != doc.values() || every.encode("content", folio::kept_values::all) != all) __builtin_trap();
}

std::string value_of(const folio::document& d) {
  switch (d.type()) {
    case folio::record_type::text:
      return d.text();
    case folio::record_type::array: {
      std::string s;
      for (const std::string& v : d.array()) s += v + '\n';
      return s;
    }
    case folio::record_type::map: {
      std::string s;
      for (const auto& [k, v] : d.map()) s += k + '=' + v + '\n';
      return s;
    }
    case folio::record_type::xml:
      break;
  }
  return d.xml();
}

void record_batch(std::string_view bytes) {
  const bool map = bytes.size() > 4 && bytes[4] == static_cast<char>(folio::record_type::map);  // the value type byte
  folio::document doc(map ? folio::record_type::map : folio::record_type::xml, 1);
  if (map)
    doc.replace_map({{"a", "1"}, {"b", "2"}});
  else
    doc.replace_xml("<p a=\"1\">seed<b/></p>");
  doc.apply(bytes);  // may be invalid; it must leave the replica consistent either way
  doc.check_invariants();
  std::optional<folio::document> again;
  if (!folio::document::decode(doc.encode(), 2, again) || value_of(*again) != value_of(doc)) __builtin_trap();
}

void record_document(std::string_view bytes) {
  std::optional<folio::document> doc;
  if (!folio::document::decode(bytes, 1, doc)) return;
  doc->check_invariants();
  std::optional<folio::document> again;
  if (!folio::document::decode(doc->encode(), 2, again)) __builtin_trap();
  if (value_of(*again) != value_of(*doc) || again->content_key() != doc->content_key()) __builtin_trap();
  const std::string all = doc->encode(folio::kept_values::all);
  std::optional<folio::document> every;
  if (!folio::document::decode(all, 3, every) || value_of(*every) != value_of(*doc) || every->encode(folio::kept_values::all) != all) __builtin_trap();
}

#if FOLIO_FUZZ_TARGET == 9
void lz4_block(std::string_view bytes) {
  folio::detail::byte_reader r(bytes);
  const std::uint64_t size = r.varint("size", 1 << 20);
  const std::size_t at = r.offset();
  std::string out;
  if (r.ok() && folio::detail::lz4_decompress(r, bytes.size() - at, size, out)) {
    // What the engine reads, liblz4 (the reference) reads to the same bytes.
    std::string lib(out.size(), '\0');
    if (LZ4_decompress_safe(bytes.data() + at, lib.data(), static_cast<int>(bytes.size() - at), static_cast<int>(lib.size())) != static_cast<int>(out.size()) ||
        lib != out)
      __builtin_trap();
  }
  std::string block, back;
  folio::detail::lz4_compress(bytes, block);
  folio::detail::byte_reader b(block);
  if (!folio::detail::lz4_decompress(b, block.size(), bytes.size(), back) || back != bytes) __builtin_trap();
}
#endif

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    switch (FOLIO_FUZZ_TARGET) {
      case 1:
        batch<folio::text, char32_t>(bytes);
        break;
      case 2:
        batch<folio::array, std::string>(bytes);
        break;
      case 3:
        document<folio::text>(bytes);
        break;
      case 4:
        document<folio::array>(bytes);
        break;
      case 6: {
        folio::markup::fragment f, again;
        if (!folio::markup::parse(bytes, f)) break;
        const std::string canonical = folio::markup::serialize(f);
        if (!folio::markup::parse(canonical, again) || again != f || folio::markup::serialize(again) != canonical) __builtin_trap();
        // The flat layout (what the CRDT tree diffs against): the same canonical form, lists after their
        // owners and within bounds, the same nodes both ways.
        folio::markup::flat_fragment flat;
        if (!folio::markup::parse(bytes, flat) || folio::markup::serialize(flat) != canonical) __builtin_trap();
        for (folio::markup::flat_fragment::index i = 0; i < flat.node_count(); ++i) {
          const auto& n = flat.at(i);
          if (n.type == folio::markup::node::kind::element &&
              ((n.children.count && n.children.first <= i) || n.children.end() > flat.node_count() || n.attrs.end() > flat.attr_count()))
            __builtin_trap();
        }
        if (folio::markup::flat_fragment::from(f).to_fragment() != f) __builtin_trap();
        break;
      }
      case 7:
        record_batch(bytes);
        break;
      case 8:
        record_document(bytes);
        break;
#if FOLIO_FUZZ_TARGET == 9
      case 9:
        lz4_block(bytes);
        break;
#endif
      default: {
        folio::version_vector v;
        if (folio::version_vector::decode(bytes, v) && v.encode() != bytes) __builtin_trap();
      }
    }
  } catch (const folio::error&) {
    // Untrusted input must never reach local-misuse errors.
    __builtin_trap();
  }
  return 0;
}
