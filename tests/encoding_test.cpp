// The binary format: the worked example of docs/FORMAT.md byte for byte, round trips, and untrusted
// input (truncations at every byte, random mutations of real encodings) rejected cleanly.
#include <gtest/gtest.h>

#include <folio/folio.hpp>
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
  EXPECT_EQ(hex(worked_example().encode()), "46 6f 01 44 01 07 63 6f 6e 74 65 6e 74 01 05 02 3e 00 00 02 02 00 01 01 01 69");
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
  c.check();
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
      if (bytes.empty()) bytes = "F";
    }
    if (round % 2 == 0) {
      folio::text out(77);
      const auto r = folio::text::decode(bytes, 77, out);
      if (r) {
        ++accepted;
        out.check();
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
      target.check();
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
  EXPECT_LT(bytes.size(), 40u);
  folio::text t(2);
  EXPECT_TRUE(folio::text::decode(bytes, 2, t));
  EXPECT_EQ(folio::text::decode(bytes, 2, t, 1000).status, folio::decode_status::too_large);
}

TEST(Encoding, VarintsHaveOneSpellingOnly) {
  folio::version_vector v;
  const auto r = folio::version_vector::decode(std::string("\x01\x10\xe3\xea\x00", 5), v);  // fuzzer-found
  EXPECT_EQ(r.status, folio::decode_status::overlong_varint);
  EXPECT_EQ(r.offset, 2u);
  EXPECT_EQ(folio::version_vector::decode(std::string("\x01\x80\x00\x01", 4), v).status, folio::decode_status::overlong_varint);
  EXPECT_TRUE(folio::version_vector::decode(std::string("\x01\x80\x01\x01", 4), v));
}

// Inputs the fuzzers found (fuzz/decode_fuzz.cpp), kept as regressions: huge zigzag deltas used to
// overflow a signed addition while decoding a reference seq.
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

}  // namespace
