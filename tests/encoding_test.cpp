// The binary format: the worked example of docs/FORMAT.md byte for byte, round trips, and untrusted
// input (truncations at every byte, random mutations of real encodings) rejected cleanly.
#include <gtest/gtest.h>

#include <folio/detail/tree/tree_encoding.hpp>
#include <folio/folio.hpp>
#include <optional>
#include <random>

#include "support/trace.hpp"

namespace {

std::string hex(const std::string& s) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) out += std::string{d[c >> 4], d[c & 15], ' '};
  if (!out.empty()) out.pop_back();
  return out;
}

folio::text worked_example() {
  folio::text t(5);
  t.insert_utf8(0, "hi");
  t.erase(0, 1);
  return t;
}

TEST(Encoding, BatchIsTheWorkedExampleOfFormatMd) {
  EXPECT_EQ(hex(folio::encode_batch(worked_example().ops_since({}))), "46 6f 01 42 01 01 05 02 3e 00 00 02 02 00 01 01 02 68 69");
}

TEST(Encoding, DocumentIsTheWorkedExampleOfFormatMd) {
  EXPECT_EQ(hex(worked_example().encode()),
            "46 6f 02 44 01 07 63 6f 6e 74 65 6e 74 01 05 02 00 01 1c 00 05 0f 00 00 02 00 00 01 02 00 01 01 00 02 01 69");
}

TEST(Encoding, Version1DocumentOfFormatMdStillDecodes) {
  const std::string v1("Fo\x01" "D\x01\x07" "content\x01\x05\x02\x3e\x00\x00\x02\x02\x00\x01\x01\x01i", 26);
  folio::text t(5);
  ASSERT_TRUE(folio::text::decode(v1, 5, t));
  EXPECT_EQ(t.to_string(), "i");
  EXPECT_EQ(t.encode(), worked_example().encode());
}

/// A text document large and repetitive enough that its content is compressed.
folio::text repetitive(folio::replica_id self = 1) {
  folio::text t(self);
  for (int i = 0; i < 50; ++i) t.insert_utf8(t.size(), "again and again, übermorgen ");
  t.erase(3, 10);
  return t;
}

/// The tail of a version 2 document whose content `raw` (the version 1 content) is compressed.
std::string compressed_tail(const std::string& raw) {
  std::string block, tail = "\x01";
  folio::detail::lz4_compress(raw, block);
  folio::detail::put_varint(tail, raw.size());
  folio::detail::put_string(tail, block);
  return tail;
}

TEST(Encoding, Version2CompressesTheContentWhenThatIsSmaller) {
  const folio::text t = repetitive();
  const std::string doc = t.encode();
  const std::string utf8 = t.to_string();
  std::string raw;
  folio::detail::put_string(raw, utf8);
  EXPECT_TRUE(doc.ends_with(compressed_tail(raw)));
  EXPECT_LT(doc.size() * 4, utf8.size());
  folio::text back(2);
  ASSERT_TRUE(folio::text::decode(doc, 2, back));
  EXPECT_EQ(back.to_string(), utf8);
  EXPECT_EQ(back.encode(), doc);
  back.check_invariants();

  folio::array a(3);
  const std::vector<std::string> values(300, "{\"same\":\"value\"}");
  a.insert(0, values);
  std::string araw;
  folio::detail::put_content(araw, values);
  EXPECT_TRUE(a.encode().ends_with(compressed_tail(araw)));
  folio::array a2(4);
  ASSERT_TRUE(folio::array::decode(a.encode(), 4, a2));
  EXPECT_EQ(a2.values(), values);
}

TEST(Encoding, Version2RefusalsNameTheirByte) {
  folio::op_batch<char32_t> b;
  // Version 2 is a text or array document's only; other versions are unknown.
  std::string batch = folio::encode_batch(worked_example().ops_since({}));
  batch[2] = 2;
  EXPECT_EQ(folio::decode_batch(batch, b).description(), "not a Folio encoding at byte 3 (format version)");
  batch[2] = 3;
  EXPECT_EQ(folio::decode_batch(batch, b).description(), "not a Folio encoding at byte 3 (format version)");
  folio::document m(folio::record_type::map, 3);
  m.set("k", "1");
  std::string map_doc = m.encode();
  ASSERT_EQ(map_doc[2], 1);
  map_doc[2] = 2;
  std::optional<folio::document> d;
  EXPECT_EQ(folio::document::decode(map_doc, 1, d).description(), "not a Folio encoding at byte 3 (format version)");

  // An unknown section mode, at its byte.
  const std::string doc = worked_example().encode();
  const std::size_t content_at = doc.size() - 4;  // the content section: 00 02 01 69
  std::string bad = doc;
  bad[content_at] = 2;
  folio::text t(1);
  EXPECT_EQ(folio::text::decode(bad, 1, t).description(), "inconsistent at byte 32 (unknown section mode)");

  // Compressed content whose inside is wrong is reported at the block's first byte.
  const std::string head = doc.substr(0, content_at);
  std::string raw = "\x05" "ab\xff" "cd";  // invalid UTF-8
  EXPECT_EQ(folio::text::decode(head + compressed_tail(raw), 1, t).description(),
            "inconsistent at byte 35 (text content is not valid UTF-8)");
  raw = "\x01" "i" "tail";  // bytes after the content
  EXPECT_EQ(folio::text::decode(head + compressed_tail(raw), 1, t).description(), "trailing bytes at byte 35 (after the content)");
  raw = "\x01" "i";
  ASSERT_TRUE(folio::text::decode(head + compressed_tail(raw), 1, t));
  EXPECT_EQ(t.to_string(), "i");
  // Sizes past what the log's two inserted items can hold (4 bytes each), past 255 bytes per block
  // byte, and a bad offset inside the block.
  EXPECT_EQ(folio::text::decode(head + std::string("\x01\x80\x02\x01\x00", 5), 1, t).description(), "too large at byte 35 (content)");
  EXPECT_EQ(folio::text::decode(head + std::string("\x01\x05\x00", 3), 1, t).description(),
            "too large at byte 35 (compressed block's size (more than 255 bytes per byte))");
  EXPECT_EQ(folio::text::decode(head + std::string("\x01\x0e\x0a\x14" "a\x05\x00\x50" "bcdef", 13), 1, t).description(),
            "bad reference at byte 37 (match offset)");
}

TEST(Encoding, Version2OpColumnRefusalsNameTheirByte) {
  // The worked example's document: op count at 15, then the sections (mode, length, bytes) of the
  // shapes (16: 00 01 1c), headers (19: 00 05 0f 00 00 02 00), lengths (26: 00 01 02) and references
  // (29: 00 01 01), then the content (32).
  const std::string doc = worked_example().encode();
  ASSERT_EQ(doc.substr(15, 17), std::string("\x02\x00\x01\x1c\x00\x05\x0f\x00\x00\x02\x00\x00\x01\x02\x00\x01\x01", 17));
  folio::text t(1);
  auto with = [&](std::size_t at, std::size_t n, std::string_view bytes) { return std::string(doc).replace(at, n, bytes); };
  EXPECT_EQ(folio::text::decode(with(18, 1, "\x12"), 1, t).description(), "inconsistent at byte 19 (backward insert)");
  EXPECT_EQ(folio::text::decode(with(21, 1, "\x1f"), 1, t).description(), "inconsistent at byte 22 (reserved op header flag set)");
  EXPECT_EQ(folio::text::decode(with(27, 2, "\x02\x02\x05"), 1, t).description(), "trailing bytes at byte 29 (op lengths)");
  EXPECT_EQ(folio::text::decode(with(28, 1, std::string_view("\x00", 1)), 1, t).description(), "inconsistent at byte 29 (op length 0)");
  EXPECT_EQ(folio::text::decode(with(15, 1, "\x03"), 1, t).description(), "inconsistent at byte 18 (op shapes do not match the op count)");
  EXPECT_EQ(folio::text::decode(with(22, 1, "\x01"), 1, t).description(), "bad varint at byte 22 (op replica)");
  EXPECT_EQ(folio::text::decode(with(31, 1, "\x03"), 1, t).description(), "bad reference at byte 32 (reference seq out of range)");
  EXPECT_EQ(folio::text::decode(with(30, 2, "\x00"), 1, t).description(), "truncated input at byte 31 (reference seq)");
}

TEST(Encoding, ForeignReferencesAndBackwardRemovesRoundTrip) {
  folio::text a(1), b(1ull << 50);
  b.apply(a.ops(a.insert_utf8(0, "hello")));
  b.insert_utf8(5, "!");
  for (int i = 0; i < 3; ++i) b.erase(b.size() - 2, 1);
  const auto batch = b.ops_since({});
  folio::op_batch<char32_t> back;
  ASSERT_TRUE(folio::decode_batch(folio::encode_batch(batch), back));
  EXPECT_EQ(back, batch);
  folio::text c(3);
  ASSERT_TRUE(folio::text::decode(b.encode(), 3, c));
  EXPECT_EQ(c.to_string(), "he!");
  c.check_invariants();
}

TEST(Encoding, HeaderErrorsNameTheirField) {
  folio::op_batch<char32_t> b;
  auto r = folio::decode_batch(std::string("Fx\x01", 3), b);
  EXPECT_EQ(r.status, folio::decode_status::bad_magic);
  r = folio::decode_batch(worked_example().encode(), b);
  EXPECT_EQ(r.status, folio::decode_status::wrong_kind);
  EXPECT_EQ(r.offset, 4u);
  EXPECT_EQ(r.description(), "wrong kind at byte 4 (expected an op batch)");
  folio::array arr(1);
  EXPECT_EQ(folio::array::decode(worked_example().encode(), 1, arr).status, folio::decode_status::wrong_kind);
}

TEST(Encoding, InvalidUtf8ContentReportsItsOffset) {
  std::string bytes = folio::encode_batch(worked_example().ops_since({}));
  bytes[bytes.size() - 1] = '\xff';
  folio::op_batch<char32_t> b;
  const auto r = folio::decode_batch(bytes, b);
  EXPECT_EQ(r.status, folio::decode_status::inconsistent);
  EXPECT_EQ(r.offset, bytes.size() - 1);
}

TEST(Encoding, DocumentWhoseLogDoesNotIntegrateIsRefused) {
  // A remove of an item nobody inserted: structurally fine, semantically not a document.
  folio::text a(1);
  folio::op_batch<char32_t> bogus{{folio::op{folio::op_kind::remove, {1, 0}, 1, 1, {2, 0}, false}}, {}};
  std::string bytes = folio::encode_batch(bogus);
  bytes[3] = 'D';
  bytes.insert(5, 1, '\0');  // a document carries its root name (empty here)
  const auto r = folio::text::decode(bytes, 1, a);
  EXPECT_EQ(r.status, folio::decode_status::inconsistent);
  EXPECT_STREQ(r.detail, "op log does not integrate");
}

TEST(Encoding, EveryTruncationIsRejectedWithAnOffsetInside) {
  folio::text t(9);
  t.insert_utf8(0, "héllo, wörld");
  t.erase(3, 4);
  t.insert_utf8(2, "😀");
  for (const std::string& full : {t.encode(), folio::encode_batch(t.ops_since({}))}) {
    for (std::size_t n = 0; n < full.size(); ++n) {
      folio::text out(1);
      folio::op_batch<char32_t> b;
      const auto r = full[3] == 'D' ? folio::text::decode(full.substr(0, n), 1, out) : folio::decode_batch(full.substr(0, n), b);
      EXPECT_FALSE(r) << "prefix " << n;
      EXPECT_LE(r.offset, n);
    }
  }
}

// Random byte mutations of real encodings: decoding must fail cleanly or yield a document whose
// invariants hold; never crash (the sanitizer build turns any out-of-bounds read into a failure).
TEST(Encoding, RandomMutationsAreRejectedOrYieldValidDocuments) {
  const auto trace = folio::testing::load_trace("clownschool_flat.json.gz");
  folio::text doc(1);
  std::size_t n = 0;
  for (const auto& tx : trace.txns) {
    for (const auto& p : tx.patches) {
      if (p.del) doc.erase(p.pos, p.del);
      if (!p.ins.empty()) doc.insert(p.pos, p.ins);
    }
    if (++n == 1500) break;
  }
  const std::string encodings[] = {doc.encode(), folio::encode_batch(doc.ops_since({}))};
  std::mt19937_64 rng(20261122);
  std::size_t accepted = 0, refused = 0;
  for (int round = 0; round < 1500; ++round) {
    std::string bytes = encodings[round % 2];
    const int edits = 1 + int(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = rng() % bytes.size();
      switch (rng() % 4) {
        case 0:
          bytes[at] = char(rng());
          break;
        case 1:
          bytes[at] = char(bytes[at] ^ (1 << (rng() % 8)));
          break;
        case 2:
          bytes.erase(at, 1 + rng() % 3);
          break;
        default:
          bytes.insert(at, 1, char(rng()));
          break;
      }
      if (bytes.empty()) bytes.push_back('F');
    }
    if (round % 2 == 0) {
      folio::text out(77);
      const auto r = folio::text::decode(bytes, 77, out);
      if (r) {
        ++accepted;
        out.check_invariants();
      } else {
        ++refused;
        EXPECT_LE(r.offset, bytes.size());
      }
    } else {
      folio::op_batch<char32_t> b;
      const auto r = folio::decode_batch(bytes, b);
      if (!r) {
        ++refused;
        continue;
      }
      ++accepted;
      folio::text target(77);
      target.apply(b);  // valid or invalid, it must not break the replica
      target.check_invariants();
    }
  }
  EXPECT_GT(refused, 0u);
  RecordProperty("accepted", int(accepted));
}

TEST(Encoding, DocumentsClaimingHugeDeletedRunsAreRefusedByTheLimit) {
  // Found by the fuzzer: 26 bytes (27 with the root name) claiming a 1.3 billion item array (insert, then remove, with no
  // values stored): decoding it would have allocated gigabytes.
  folio::array a(1);
  const auto r = folio::array::decode(
      std::string("\x46\x6f\x01\x44\x02\x00\x02\x07\x28\x02\x3e\x00\x00\x02\xa3\xff\xd9\x4b\x00\x01\x01\x02\x01\x31\x02\x5b\x5d", 27), 1, a);
  EXPECT_EQ(r.status, folio::decode_status::too_large);
  // The same shape within the limit decodes.
  folio::text big(1);
  big.insert(0, std::u32string(100000, U'x'));
  big.erase(0, 100000);
  const std::string bytes = big.encode();
  EXPECT_LT(bytes.size(), 48u);
  folio::text t(2);
  EXPECT_TRUE(folio::text::decode(bytes, 2, t));
  EXPECT_EQ(folio::text::decode(bytes, 2, t, 1000).status, folio::decode_status::too_large);
}

namespace reference {
/// LEB128 as the format defines it, read the slowest way: (value, bytes) or nullopt when the bytes
/// are not a varint of at most `max` (truncated, a zero last group past the first byte, past 64 bits).
std::optional<std::pair<std::uint64_t, std::size_t>> varint(std::string_view s, std::uint64_t max) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < s.size() && i < 10; ++i) {
    const auto b = static_cast<std::uint8_t>(s[i]);
    if (i == 9 && b > 1) return std::nullopt;
    v |= std::uint64_t(b & 0x7f) << (7 * i);
    if (!(b & 0x80)) {
      if (b == 0 && i != 0) return std::nullopt;
      if (v > max) return std::nullopt;
      return std::pair(v, i + 1);
    }
  }
  return std::nullopt;
}
}  // namespace reference

// byte_reader::varint reads two and three bytes without a bound check per byte when three are left:
// every spelling of up to three bytes (and each followed by a byte, so that both paths read it), with
// bounds that cut through every length, reads as the reference reads it, and a refusal names the
// varint's first byte (or, for bytes that end inside it, their end).
TEST(Encoding, VarintReaderAgreesWithTheReferenceOnEveryShortSpelling) {
  const std::uint64_t bounds[] = {0, 1, 0x7f, 0x80, 0x3fff, 0x4000, 0x1fffff, 0x200000, UINT64_MAX};
  std::size_t checked = 0;
  for (std::uint32_t n = 1; n <= 3; ++n)
    for (std::uint32_t x = 0; x < (1u << (8 * n)); ++x) {
      if (n == 3 && (~x & 0x8080)) continue;  // a shorter varint and a byte after it: the cases of n - 1 with a tail
      std::string bytes;
      for (std::uint32_t k = 0; k < n; ++k) bytes.push_back(static_cast<char>(x >> (8 * k)));
      for (const std::string& tail : {std::string(), std::string("\x05", 1)}) {
        const std::string in = bytes + tail;
        for (std::uint64_t max : bounds) {
          folio::detail::byte_reader r(in);
          const std::uint64_t got = r.varint("v", max);
          const auto want = reference::varint(in, max);
          ++checked;
          {  // take_varint (read_single_op_text's reader) takes exactly what the reference reads
            const auto* p = reinterpret_cast<const unsigned char*>(in.data());
            std::uint64_t v = 0;
            const bool took = folio::detail::take_varint(p, p + in.size(), max, v);
            ASSERT_EQ(took, bool(want)) << hex(in) << " max " << max;
            if (took) {
              ASSERT_EQ(std::pair(v, std::size_t(p - reinterpret_cast<const unsigned char*>(in.data()))), *want) << hex(in);
            }
          }
          if (want) {
            ASSERT_TRUE(r.ok()) << hex(in) << " max " << max;
            ASSERT_EQ(got, want->first) << hex(in);
            ASSERT_EQ(r.offset(), want->second) << hex(in);
          } else {
            ASSERT_FALSE(r.ok()) << hex(in) << " max " << max << " read " << got;
            // a refusal names the varint's first byte; running out, the end of the bytes
            const bool truncated = r.result().status == folio::decode_status::truncated;
            ASSERT_EQ(r.result().offset, truncated ? in.size() : 0u) << hex(in);
            if (truncated) {
              ASSERT_TRUE(static_cast<std::uint8_t>(in.back()) & 0x80) << hex(in);
            }
          }
        }
      }
    }
  EXPECT_GT(checked, 4u << 20);
}

// Longer spellings, random, against the reference, with and without room after them; and the
// ten-byte edge (a last byte of 1, 2, 0 or with its high bit set, and eleven bytes).
TEST(Encoding, VarintReaderAgreesWithTheReferenceOnRandomSpellings) {
  std::mt19937_64 rng(23);
  const std::string nine_high(9, '\x80'), nine_ff(9, '\xff');
  const std::string edges[] = {nine_high + '\x01', nine_ff + '\x01', nine_high + '\x02', nine_high + '\x00', nine_high + '\x81',
                               nine_high + '\x80' + '\x01', nine_ff + '\x01' + '\x05'};
  for (int i = 0; i < 200000 + int(std::size(edges)) * 2; ++i) {
    std::string in;
    const int n = 1 + int(rng() % 12);
    for (int k = 0; k < n; ++k) {
      const auto b = static_cast<std::uint8_t>(rng());
      in.push_back(static_cast<char>(k + 1 < n && rng() % 4 ? (b | 0x80) : b));
    }
    if (i >= 200000) in = edges[(i - 200000) / 2];
    const std::uint64_t max = i >= 200000 ? ((i % 2) ? UINT64_MAX : (std::uint64_t(1) << 63)) : rng() % 2 ? UINT64_MAX : rng() >> (rng() % 64);
    folio::detail::byte_reader r(in);
    const std::uint64_t got = r.varint("v", max);
    const auto want = reference::varint(in, max);
    ASSERT_EQ(r.ok(), bool(want)) << hex(in);
    if (want) {
      ASSERT_EQ(std::pair(got, r.offset()), *want) << hex(in);
    }
    const auto* p = reinterpret_cast<const unsigned char*>(in.data());
    std::uint64_t v = 0;
    ASSERT_EQ(folio::detail::take_varint(p, p + in.size(), max, v), bool(want)) << hex(in);
    if (want) {
      ASSERT_EQ(std::pair(v, std::size_t(p - reinterpret_cast<const unsigned char*>(in.data()))), *want) << hex(in);
    }
  }
}

// A text batch of one op by one replica (a remote keystroke) is read by read_single_op_text, every
// other batch and every fault by the op table (read_batch_table). The first must take a batch exactly
// when the table reads one op of one replica (count 1) from it, and read the same op and values:
// for batches of every shape of op (insert and remove, forward and backward, by the op's own replica,
// from the document start and naming another replica; lengths 1 and more; replica ids of 1 to 9
// bytes; ASCII, two- and four-byte UTF-8), each with every byte replaced (by several values), every
// byte dropped, a byte added, and cut at every length. decode_batch must answer as the table does.
TEST(Encoding, OneOpTextBatchesReadAsTheOpTableReadsThem) {
  using folio::op;
  using folio::op_kind;
  std::vector<std::string> seeds;
  const folio::replica_id ids[] = {1, 127, 128, 300000, 0x7fff'ffff'ffff'fff0ull};
  for (folio::replica_id id : ids)
    for (std::uint32_t seq : {0u, 5u, 200u, 70000u}) {
      const std::uint32_t lam = seq + 3;
      auto add = [&](op_kind kind, std::uint32_t len, folio::op_id ref, bool backward, std::u32string values) {
        const op o{kind, {id, seq}, lam, len, ref, backward};
        seeds.push_back(folio::encode_batch(folio::op_batch<char32_t>{{o}, {values.begin(), values.end()}}));
      };
      add(op_kind::insert, 1, seq ? folio::op_id{id, seq - 1} : folio::document_start, false, U"x");
      add(op_kind::insert, 3, folio::document_start, false, U"aé😀");
      add(op_kind::insert, 1, {id, seq / 2}, false, U"€");
      add(op_kind::insert, 1, {id == 1 ? 2u : 1u, 9}, false, U"y");  // another replica: two in the table
      if (seq > 3) {
        add(op_kind::remove, 1, {id, seq - 1}, false, U"");
        add(op_kind::remove, 3, {id, seq - 1}, true, U"");
        add(op_kind::remove, 2, {id, seq - 4}, false, U"");
      }
      add(op_kind::remove, 2, {id == 1 ? 2u : 1u, 4}, false, U"");
    }
  auto put = [&](folio::replica_id id, std::uint32_t seq, std::uint32_t lam, op_kind kind, std::uint32_t len, folio::op_id ref, bool backward,
                 std::u32string values) {
    seeds.push_back(folio::encode_batch(folio::op_batch<char32_t>{{op{kind, {id, seq}, lam, len, ref, backward}}, {values.begin(), values.end()}}));
  };
  // At the bounds: seq + len and Lamport + len of exactly 2^31, a reference to seq 0, a backward remove
  // down to seq 0, a forward remove up to 2^31 - 1, a 10-byte replica id, a length of two bytes.
  put(3, folio::max_counter, folio::max_counter, op_kind::insert, 1, {3, folio::max_counter - 1}, false, U"m");
  put(3, 5, 9, op_kind::insert, 1, {3, 0}, false, U"0");
  put(3, 5, 9, op_kind::remove, 3, {3, 2}, true, U"");
  put(3, 10, 12, op_kind::remove, 2, {3, folio::max_counter - 1}, false, U"");
  put(0x8000'0000'0000'0001ull, 1, 2, op_kind::insert, 1, {0x8000'0000'0000'0001ull, 0}, false, U"t");
  put(3, 1, 2, op_kind::insert, 130, folio::document_start, false, std::u32string(130, U'a'));
  {  // one op, whose replica is the second of a table of two: never read_single_op_text's
    const std::string one = folio::encode_batch(folio::op_batch<char32_t>{{op{op_kind::insert, {3, 4}, 6, 1, {3, 3}, false}}, {U'q'}});
    ASSERT_EQ(one.substr(5, 4), std::string("\x01\x03\x01\x0e", 4));  // replicas (3), one op, flags
    seeds.push_back(one.substr(0, 5) + std::string("\x02\x09\x03\x01\x0e\x01", 6) + one.substr(10));
  }
  {  // and two ops: never read_single_op_text's
    folio::text t(4);
    t.insert_utf8(0, "ab");
    t.erase(0, 1);
    seeds.push_back(folio::encode_batch(t.ops_since({})));
  }
  std::size_t taken = 0, tried = 0;
  auto check = [&](const std::string& bytes) {
    folio::detail::byte_reader r(bytes);
    if (!folio::detail::read_header(r, folio::detail::kind_batch, folio::record_type::text)) return;
    ++tried;
    folio::op_batch<char32_t> fast{{}, {U'z'}}, table;  // a failed read must leave the content empty
    op o;
    const bool took = folio::detail::read_single_op_text(r.rest(), o, fast.content);
    if (took) fast.ops.push_back(o);
    folio::detail::byte_reader t = r;
    const bool read = folio::detail::read_batch_table(t, table);
    const bool one = read && table.ops.size() == 1 && static_cast<unsigned char>(r.rest()[0]) == 1;
    ASSERT_EQ(took, one) << hex(bytes);
    if (took) {
      ++taken;
      ASSERT_EQ(fast, table) << hex(bytes);
    } else {
      ASSERT_TRUE(fast.ops.empty() && fast.content.empty()) << hex(bytes);
    }
    folio::op_batch<char32_t> decoded;
    const folio::decode_result d = folio::decode_batch(bytes, decoded);
    ASSERT_EQ(std::tie(d.status, d.offset), std::tie(t.result().status, t.result().offset)) << hex(bytes);
    ASSERT_EQ(std::string_view(d.detail), std::string_view(t.result().detail)) << hex(bytes);
    if (d) {
      ASSERT_EQ(decoded, table);
    }
  };
  std::mt19937_64 rng(1129);
  for (const std::string& seed : seeds) {
    check(seed);
    for (std::size_t i = 5; i < seed.size(); ++i) {
      for (int v : {0x00, 0x01, 0x02, 0x7f, 0x80, 0xff, seed[i] ^ 0x01, seed[i] ^ 0x40, seed[i] ^ 0x80, int(rng() & 0xff)}) {
        std::string m = seed;
        m[i] = static_cast<char>(v);
        check(m);
      }
      check(seed.substr(0, i) + seed.substr(i + 1));
      check(seed.substr(0, i) + static_cast<char>(rng()) + seed.substr(i));
      check(seed.substr(0, i));
    }
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(taken, seeds.size());  // the seeds of one replica and many of their spellings
  RecordProperty("taken", int(taken));
  RecordProperty("tried", int(tried));
}

TEST(Encoding, VarintsHaveOneSpellingOnly) {
  folio::version_vector v;
  const auto r = folio::version_vector::decode(std::string("\x01\x10\xe3\xea\x00", 5), v);  // fuzzer-found
  EXPECT_EQ(r.status, folio::decode_status::overlong_varint);
  EXPECT_EQ(r.offset, 2u);
  EXPECT_EQ(folio::version_vector::decode(std::string("\x01\x80\x00\x01", 4), v).status, folio::decode_status::overlong_varint);
  EXPECT_TRUE(folio::version_vector::decode(std::string("\x01\x80\x01\x01", 4), v));
}

/// A text or map batch (value type 1 or 3) whose replica table lists `ids` and that holds no op; with
/// `cut`, only the header and the table, less its last `cut` bytes.
std::string replica_table(unsigned char value_type, const std::vector<std::uint64_t>& ids, std::size_t cut = 0) {
  std::string out;
  folio::detail::put_header(out, folio::detail::kind_batch, static_cast<folio::record_type>(value_type));
  folio::detail::put_varint(out, ids.size());
  for (std::uint64_t id : ids) folio::detail::put_varint(out, id);
  if (cut) return out.substr(0, out.size() - cut);
  folio::detail::put_varint(out, 0);
  if (value_type == 1) folio::detail::put_varint(out, 0);
  return out;
}

// The sequence and tree decoders read the replica table with one helper (read_replica_table): the
// same refusal, at the byte a reader going id by id stops at, whichever comes first of a repeated id,
// an id 0 and the end of the bytes.
TEST(Encoding, ReplicaTableRefusalsNameTheFirstProblemInTableOrder) {
  struct expect {
    std::vector<std::uint64_t> ids;
    std::size_t cut;
    folio::decode_status status;
    std::size_t offset;
    std::string detail;
  };
  using st = folio::decode_status;
  // Header 5 bytes, count 1 byte, then one byte per id below 128 (300 takes two).
  const std::vector<expect> cases = {
      {{7, 9, 9, 7}, 0, st::inconsistent, 9, "replica listed twice"},
      {{7, 9, 7, 9}, 0, st::inconsistent, 9, "replica listed twice"},
      {{7, 300, 5, 300, 0}, 0, st::inconsistent, 12, "replica listed twice"},
      {{7, 0, 7}, 0, st::inconsistent, 8, "replica id 0"},
      {{7, 7, 0}, 0, st::inconsistent, 8, "replica listed twice"},
      {{7, 8, 7, 300}, 1, st::inconsistent, 9, "replica listed twice"},  // the repeat comes before the cut
      {{7, 8, 300}, 1, st::truncated, 9, "replica id"},
      // Past 8 ids the repeats are found another way (by sorting), with the same answers.
      {{1, 2, 3, 4, 5, 6, 7, 8, 9, 5}, 0, st::inconsistent, 16, "replica listed twice"},
      {{1, 2, 3, 4, 5, 6, 7, 8, 0, 3}, 0, st::inconsistent, 15, "replica id 0"},
      {{1, 2, 3, 4, 5, 6, 7, 8, 3, 0}, 0, st::inconsistent, 15, "replica listed twice"},
      {{1, 2, 3, 4, 5, 6, 7, 8, 2, 300}, 1, st::inconsistent, 15, "replica listed twice"},
      {{1, 2, 3, 4, 5, 6, 7, 8, 9, 300}, 1, st::truncated, 16, "replica id"},
  };
  for (const unsigned char type : {static_cast<unsigned char>(1), static_cast<unsigned char>(3)}) {
    for (const expect& e : cases) {
      const std::string bytes = replica_table(type, e.ids, e.cut);
      folio::decode_result r;
      if (type == 1) {
        folio::op_batch<char32_t> b;
        r = folio::decode_batch(bytes, b);
      } else {
        folio::detail::byte_reader reader(bytes);
        std::vector<folio::detail::tree_op> ops;
        folio::record_type t{};
        ASSERT_TRUE(folio::detail::read_header_any(reader, folio::detail::kind_batch, t));
        folio::detail::read_tree_ops(reader, folio::detail::tree_shape::map, ops);
        r = reader.result();
      }
      SCOPED_TRACE("type " + std::to_string(type) + ": " + r.description());
      EXPECT_EQ(r.status, e.status);
      EXPECT_EQ(r.offset, e.offset);
      EXPECT_EQ(r.detail, e.detail);
    }
  }
  // Many distinct ids decode; the same ids with one repeated at the end are refused there.
  std::vector<std::uint64_t> ids;
  for (std::uint64_t i = 1; i <= 20000; ++i) ids.push_back(i * 0x9e3779b97f4a7c15ull >> 1);
  folio::op_batch<char32_t> b;
  EXPECT_TRUE(folio::decode_batch(replica_table(1, ids), b));
  ids.push_back(ids[12345]);
  const folio::decode_result r = folio::decode_batch(replica_table(1, ids), b);
  EXPECT_EQ(r.status, folio::decode_status::inconsistent);
  EXPECT_EQ(r.offset, replica_table(1, ids).size() - 2);
}

// Inputs the fuzzers found (fuzz/decode_fuzz.cpp), kept as regressions: huge zigzag deltas must
// be refused without overflowing a signed addition while decoding a reference seq.
TEST(Encoding, FuzzFoundHugeDeltasAreRefused) {
  {
    folio::op_batch<std::string> b;
    EXPECT_FALSE(folio::decode_batch(
        std::string(
            "\x46\x6f\x01\x42\x02\x04\xc1\x00\x01\x7b\x5d\x46\x6f\x01\x42\x02\x01\x00\x00\x02\x00\x46\x01\x6f\x01\x42\x02\x01\x42\x02\x01\x42\x02\x01"
            "\x4c\x6f\x01\x42\xfc\xc1\x00\x01\x7b\x5d\x46\x6f\x09\x42\x6f\x01\x42\x02\x04\xf9\xfc\xc1\xc1\x00\x01\x7b\x5d\x46\x6f\x01\x42\x02\x01\x00"
            "\x00\x00\x00\xca\xff\xff\xff\xff\xff\xff\xff\xff\x01\x42\x02\x01\x4c\x6f\x01\x42\xfc\xc1\x00\x01\x7b\x5d\x46\x6f\x09\x42\x02\x01\x46\x6f"
            "\x01\x42\x6f\x01\x42\x02\x01\x07\x18\x18\x18\x18\x18\x18\x18\x18\x18\x18\x18\x18\x18\x18\x18\x46\x6f\x01\x42\x02\x04\xf9\x00\x5d\x0a\x6f"
            "\x01\x42\x02\x01\x42\x02\x01\x42\x02\x01\x4c\x6f\x01\x42\xfc\xc1\x00\x01\x4c\x6f\x01\x42\xfc\xc1\x00\x01\x7b\x5d\x46\x6f\x09\x42\x6f\x01"
            "\x42\x02\x04\xf9\xfc\xc1\xc1\x00\x01\x7b\x5d\x46\x6f\x01\x42\x02\x01\x00\x00\x00\x00\xca\x01\x6f\x01\x42\x02\x01\x42\x02\x01\x42\x02\x01"
            "\x4c\x6f\x01\x42\xfc\xc1\x00\x01\x7b\x5d\x46\x6f\x09\x42\x02\x01\x46\x6f\x01\x42\x6f\x01\x42\x02\x01\x07\x01\x42\x6f\x02\x42\x01\x01\x02"
            "\x01\x46\x6f\x01\x42\x6f\x01\x42\x02\x01\x07\x6f\x01\x42\x02\x01\x46\x6f\x01\x42\x18\x18\x18\x18\x18",
            263),
        b));
  }
  {
    folio::op_batch<char32_t> b;
    EXPECT_FALSE(folio::decode_batch(
        std::string("\x46\x6f\x01\x42\x01\x02\x25\xb0\xfc\xd6\x02\x03\x3e\x00\x00\x46\x6f\x01\x42\x01\xfa\xff\xff\xff\xff\xff\xff\xff\xff\x01\x02\x02"
                    "\x03\x00\x51\x25\x00\x2e\x01\x00\x05\x01\x05\x04\x01\x02\xff\xff\xff\xac\xff\xff\xff\xff\x02\x02\x01\x02\x6f\x01",
                    60),
        b));
  }
  {
    folio::op_batch<char32_t> b;
    EXPECT_FALSE(folio::decode_batch(
        std::string("\x46\x6f\x01\x44\x01\x02\x41\x02\x05\x3e\x00\x00\x02\x0d\x00\x01\x00\x01\xfc\xff\xff\xff\xff\xff\xff\xff\xff\x01\x07", 29), b));
  }
  {
    folio::op_batch<std::string> b;
    EXPECT_FALSE(folio::decode_batch(std::string("\x01\xd4\x00\x01", 4), b));
  }
}

// An op whose fields each fit but whose Lamport values or seqs run past 2^31 is refused as
// out_of_range (not overlong_varint: no varint is long), by the text and the
// map decoder alike; the description keeps the words HTTP answers have shown ("bad varint").
TEST(Encoding, CountersPastTheirRangeAreOutOfRange) {
  const std::uint32_t top = folio::max_counter;
  struct expect {
    std::uint32_t seq, lamport, len;
    const char* detail;
  };
  for (const expect& e : {expect{0, top, 2, "op lamport out of range"}, expect{top, 1, 2, "op seq + length out of range"}}) {
    folio::op_batch<char32_t> text;
    folio::op o;
    o.id = {7, e.seq}, o.lamport = e.lamport, o.len = e.len, o.ref = folio::document_start;
    text.ops.push_back(o), text.content = {U'a', U'b'};
    folio::op_batch<char32_t> back;
    const folio::decode_result t = folio::decode_batch(folio::encode_batch(text), back);
    EXPECT_EQ(t.status, folio::decode_status::out_of_range);
    EXPECT_STREQ(t.detail, e.detail);

    folio::detail::tree_op m;
    m.kind = folio::detail::tree_op_kind::insert, m.id = {7, e.seq}, m.lamport = e.lamport, m.len = e.len;
    m.object = {{7, 0}, folio::detail::object_role::text}, m.text = U"ab";
    std::string bytes;
    folio::detail::put_header(bytes, folio::detail::kind_batch, folio::record_type::xml);
    folio::detail::put_tree_ops(bytes, folio::detail::tree_shape::xml, {m});
    folio::detail::byte_reader r(bytes);
    folio::record_type type{};
    std::vector<folio::detail::tree_op> ops;
    ASSERT_TRUE(folio::detail::read_header_any(r, folio::detail::kind_batch, type));
    EXPECT_FALSE(folio::detail::read_tree_ops(r, folio::detail::tree_shape::xml, ops));
    EXPECT_EQ(r.result().status, folio::decode_status::out_of_range);
    EXPECT_EQ(r.result().offset, t.offset);  // after the len field: the header fields come first in both formats
    EXPECT_STREQ(r.result().detail, e.detail);
    EXPECT_EQ(t.description().substr(0, 10), "bad varint");
  }
}

}  // namespace
