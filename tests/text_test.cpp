#include <gtest/gtest.h>

#include <folio/text.hpp>
#include <random>
#include <string>
#include <vector>

namespace {

using folio::op;
using folio::op_batch;
using folio::op_kind;

TEST(Text, InsertAndEraseByCodePoint) {
  folio::text t(1);
  t.insert_utf8(0, "héllo wörld");
  EXPECT_EQ(t.size(), 11u);
  t.erase(1, 1);
  t.insert(1, U"e");
  t.insert_utf8(11, "!");
  EXPECT_EQ(t.to_string(), "hello wörld!");
  EXPECT_EQ(t.at(7), U'ö');
  t.check_invariants();
}

TEST(Text, AstralCodePointsCountAsOne) {
  folio::text t(1);
  t.insert_utf8(0, "a😀b");
  EXPECT_EQ(t.size(), 3u);
  t.erase(1, 1);
  EXPECT_EQ(t.to_string(), "ab");
}

TEST(Text, StorageWidensForWiderCodePointsAndKeepsEarlierOnes) {
  folio::text t(1);
  t.insert_utf8(0, "abc");  // 1 byte a value
  t.insert_utf8(3, "€");    // U+20AC: 2 bytes a value
  t.insert_utf8(0, "𝄞");    // U+1D11E: 4 bytes a value
  t.insert_utf8(5, "é");
  EXPECT_EQ(t.to_string(), "𝄞abc€é");
  folio::text u(2);
  ASSERT_TRUE(u.apply(t.ops_since({})));
  EXPECT_EQ(u.to_string(), "𝄞abc€é");
  ASSERT_TRUE(folio::text::decode(t.encode(), 3, u));
  EXPECT_EQ(u.to_string(), "𝄞abc€é");
  u.check_invariants();
}

TEST(Text, MisuseThrowsWithStableIds) {
  folio::text t(1);
  t.insert_utf8(0, "abc");
  EXPECT_THROW(t.insert(4, U"x"), folio::error);
  EXPECT_THROW(t.erase(2, 2), folio::error);
  EXPECT_THROW(t.at(3), folio::error);
  try {
    t.insert_utf8(0, "\xC0\xAF");
    FAIL();
  } catch (const folio::error& e) {
    EXPECT_STREQ(e.what(), "[folio.utf8] invalid UTF-8 at byte 0");
  }
  EXPECT_THROW(t.insert(0, std::u32string(1, char32_t(0xD800))), folio::error);
  const char32_t surrogate = 0xDFFF;
  EXPECT_THROW(t.sequence::insert(0, &surrogate, 1), folio::error);  // the base API checks too
  EXPECT_THROW(folio::text(0), folio::error);
  EXPECT_EQ(t.to_string(), "abc");
  t.check_invariants();
}

// Each error carries its code, and what() starts with that code's id: a program branches on code().
TEST(Text, MisuseCarriesTheCodeItsIdNames) {
  folio::text t(1);
  t.insert_utf8(0, "abc");
  const auto code_of = [](auto&& f) {
    try {
      f();
    } catch (const folio::error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(std::string("[") + folio::error_id(e.code()) + "] ", 0), 0u) << e.what();
      return e.code();
    }
    ADD_FAILURE() << "no folio::error";
    return folio::error_code::internal;
  };
  EXPECT_EQ(code_of([&] { t.insert(4, U"x"); }), folio::error_code::range);
  EXPECT_EQ(code_of([&] { t.at(3); }), folio::error_code::range);
  EXPECT_EQ(code_of([&] { t.insert_utf8(0, "\xC0\xAF"); }), folio::error_code::utf8);
  EXPECT_EQ(code_of([&] { t.insert(0, std::u32string(1, char32_t(0xD800))); }), folio::error_code::value);
  EXPECT_EQ(code_of([] { folio::text(0); }), folio::error_code::replica);
  EXPECT_STREQ(folio::error(folio::error_code::overflow, "m").what(), "[folio.overflow] m");
}

TEST(Text, LocalEditsReturnTheirOps) {
  folio::text t(1);
  const auto c1 = t.insert_utf8(0, "abc");
  EXPECT_EQ(c1.first, 0u);
  EXPECT_EQ(c1.count, 3u);
  const auto c2 = t.erase(0, 2);
  EXPECT_EQ(c2.first, 3u);
  EXPECT_EQ(c2.count, 2u);
  const auto b1 = t.ops(c1);
  ASSERT_EQ(b1.ops.size(), 1u);
  EXPECT_EQ(b1.ops[0], (op{op_kind::insert, {1, 0}, 1, 3, folio::document_start, false}));
  EXPECT_EQ(b1.content, (std::vector<char32_t>{U'a', U'b', U'c'}));
  const auto b2 = t.ops(c2);
  ASSERT_EQ(b2.ops.size(), 1u);
  EXPECT_EQ(b2.ops[0], (op{op_kind::remove, {1, 3}, 4, 2, {1, 0}, false}));
  EXPECT_TRUE(t.ops(t.erase(0, 0)).empty());
}

TEST(Text, TypingAndBackspacingMergeIntoRuns) {
  folio::text t(1);
  for (char32_t c : std::u32string(U"hello")) t.insert(t.size(), &c, 1);
  for (int i = 0; i < 3; ++i) t.erase(t.size() - 1, 1);
  EXPECT_EQ(t.to_string(), "he");
  EXPECT_EQ(t.log_size(), 2u);   // one insert run, one backward remove run
  EXPECT_EQ(t.run_count(), 2u);  // "he" live, "llo" deleted
  const auto b = t.ops_since({});
  ASSERT_EQ(b.ops.size(), 2u);
  EXPECT_TRUE(b.ops[1].backward);
  EXPECT_EQ(b.ops[1].ref, (folio::op_id{1, 4}));
}

// A run that grows one keystroke at a time across the id index's pages (256 seqs) keeps the index
// pointing at its leaf, locally and on a replica that receives each keystroke as its own batch;
// check_invariants reads the index itself, not the last run found.
TEST(Text, TypingAcrossIndexPagesKeepsTheIndex) {
  folio::text local(1), remote(2);
  for (int i = 0; i < 600; ++i) {
    const char32_t c = U'a' + char32_t(i % 26);
    ASSERT_TRUE(remote.apply(local.ops(local.insert(local.size(), &c, 1))));
  }
  EXPECT_EQ(local.run_count(), 1u);
  EXPECT_EQ(remote.to_u32string(), local.to_u32string());
  local.check_invariants();
  remote.check_invariants();
}

// A replica whose removes span many index pages (here: the same 200,000 deleted items removed again
// and again, each remove taking 200,000 of its seqs) keeps per-page tables only for the pages that hold
// its items: the record's memory follows its items and removes, not the seqs its removes span. Between
// the removes the replica inserts, so its items lie on pages far apart; each is still found (its
// content slot and its leaf), on the author and on a replica that receives the ops one at a time.
TEST(Text, LongRemovesCostNoIndexPages) {
  constexpr std::uint32_t n = 200000, rounds = 200;
  folio::text a(1), b(2), c(3);
  const std::u32string body(n, U'q');
  const auto base = a.ops(a.insert(0, body.data(), body.size()));
  ASSERT_TRUE(b.apply(base));
  ASSERT_TRUE(c.apply(base));
  const std::size_t before = b.memory_usage();
  ASSERT_TRUE(c.apply(b.ops(b.erase(0, n))));
  for (std::uint32_t k = 0; k < rounds; ++k) {
    // b removes a's items again (they are deleted already; a peer that had not seen its first
    // remove would send the same op), then types a character at the front.
    op_batch<char32_t> again;
    op o;
    o.kind = op_kind::remove, o.id = {2, b.version().get(2)}, o.ref = {1, 0}, o.len = n, o.lamport = 1;
    again.ops.push_back(o);
    ASSERT_TRUE(b.apply(again));
    ASSERT_TRUE(c.apply(again));
    const char32_t ch = U'a' + char32_t(k % 26);
    ASSERT_TRUE(c.apply(b.ops(b.insert(0, &ch, 1))));
  }
  EXPECT_EQ(b.version().get(2), std::uint64_t(n) * (rounds + 1) + rounds);
  EXPECT_EQ(c.to_u32string(), b.to_u32string());
  EXPECT_EQ(b.size(), rounds);
  b.check_invariants(), c.check_invariants();
  // Dense tables would hold a slot for each of the 156,000 pages b's seqs span (about 5 MB).
  EXPECT_LT(b.memory_usage() - before, 256u * 1024);
  EXPECT_LT(c.memory_usage() - before, 256u * 1024);
}

TEST(Text, ApplyIsIdempotent) {
  folio::text a(1), b(2);
  const auto batch = a.ops(a.insert_utf8(0, "xyz"));
  auto r = b.apply(batch);
  EXPECT_EQ(r.applied, 3u);
  r = b.apply(batch);
  EXPECT_EQ(r.applied, 0u);
  EXPECT_EQ(r.duplicate, 3u);
  EXPECT_EQ(b.to_string(), "xyz");
  b.check_invariants();
}

TEST(Text, OpsWithMissingDependenciesWaitAsPending) {
  folio::text a(1), b(2);
  const auto first = a.ops(a.insert_utf8(0, "ab"));
  const auto second = a.ops(a.insert_utf8(1, "X"));
  const auto third = a.ops(a.erase(0, 1));
  auto r = b.apply(third);
  EXPECT_TRUE(r);
  EXPECT_EQ(r.pending, 1u);
  r = b.apply(second);
  EXPECT_EQ(r.pending, 2u);
  EXPECT_EQ(b.to_string(), "");
  r = b.apply(first);
  EXPECT_EQ(r.applied, 4u);
  EXPECT_EQ(r.pending, 0u);
  EXPECT_EQ(b.to_string(), "Xb");
  EXPECT_EQ(b.version(), a.version());
  b.check_invariants();
}

TEST(Text, ConcurrentInsertsAtTheSamePlaceConverge) {
  folio::text a(1), b(2), c(3);
  const auto base = a.ops(a.insert_utf8(0, "[]"));
  b.apply(base), c.apply(base);
  const auto ba = a.ops(a.insert_utf8(1, "aa"));
  const auto bb = b.ops(b.insert_utf8(1, "bb"));
  const auto bc = c.ops(c.insert_utf8(1, "cc"));
  a.apply(bb), a.apply(bc);
  b.apply(bc), b.apply(ba);
  c.apply(ba), c.apply(bb);
  // Equal Lamport values: the larger replica id goes first.
  EXPECT_EQ(a.to_string(), "[ccbbaa]");
  EXPECT_EQ(b.to_string(), a.to_string());
  EXPECT_EQ(c.to_string(), a.to_string());
  a.check_invariants(), b.check_invariants(), c.check_invariants();
}

TEST(Text, NewerInsertGoesBeforeOlderConcurrentSibling) {
  folio::text a(2), b(1);
  const auto base = a.ops(a.insert_utf8(0, "x"));
  b.apply(base);
  b.insert_utf8(1, "1");  // Lamport 2 by replica 1
  const auto late = b.ops(b.insert_utf8(2, "2"));
  (void)late;
  const auto own = a.ops(a.insert_utf8(1, "A"));  // Lamport 2 by replica 2
  b.apply(own);
  a.apply(b.ops_since(a.version()));
  EXPECT_EQ(a.to_string(), b.to_string());
  EXPECT_EQ(a.to_string(), "xA12");
}

TEST(Text, ConcurrentRemovesOfTheSameItemsConverge) {
  folio::text a(1), b(2);
  b.apply(a.ops(a.insert_utf8(0, "abcdef")));
  const auto ra = a.ops(a.erase(1, 3));
  const auto rb = b.ops(b.erase(2, 3));
  a.apply(rb), b.apply(ra);
  EXPECT_EQ(a.to_string(), "af");
  EXPECT_EQ(b.to_string(), "af");
  a.check_invariants(), b.check_invariants();
}

TEST(Text, InsertInsideARemovedRangeSurvives) {
  folio::text a(1), b(2);
  b.apply(a.ops(a.insert_utf8(0, "abcd")));
  const auto ra = a.ops(a.erase(0, 4));
  const auto ib = b.ops(b.insert_utf8(2, "X"));
  a.apply(ib), b.apply(ra);
  EXPECT_EQ(a.to_string(), "X");
  EXPECT_EQ(b.to_string(), "X");
}

TEST(Text, InvalidOpsAreRefused) {
  folio::text a(1), b(2);
  const auto base = a.ops(a.insert_utf8(0, "ab"));
  b.apply(base);
  // Lamport not above the origin's.
  op_batch<char32_t> bad{{op{op_kind::insert, {3, 0}, 1, 1, {1, 0}, false}}, {U'z'}};
  auto r = b.apply(bad);
  EXPECT_FALSE(r);
  EXPECT_EQ(r.op_index, 0u);
  EXPECT_EQ(r.message, "insert's Lamport value is not above its origin's");
  // A reference to a remove's id.
  a.erase(0, 1);
  b.apply(a.ops_since(b.version()));
  bad = {{op{op_kind::insert, {3, 0}, 9, 1, {1, 2}, false}}, {U'z'}};
  r = b.apply(bad);
  EXPECT_FALSE(r);
  EXPECT_NE(r.message.find("is not an inserted item"), std::string::npos);
  // Content that does not match the inserts.
  bad = {{op{op_kind::insert, {3, 0}, 9, 2, folio::document_start, false}}, {U'z'}};
  EXPECT_FALSE(b.apply(bad));
  bad = {{op{op_kind::insert, {3, 0}, 9, 1, folio::document_start, false}}, {char32_t(0x110000)}};
  EXPECT_FALSE(b.apply(bad));
  // Replica 0, empty op, counter overflow, self reference.
  EXPECT_FALSE(b.apply({{op{op_kind::remove, {0, 0}, 9, 1, {1, 0}, false}}, {}}));
  EXPECT_FALSE(b.apply({{op{op_kind::remove, {4, 0}, 9, 0, {1, 0}, false}}, {}}));
  EXPECT_FALSE(b.apply({{op{op_kind::remove, {4, folio::max_counter}, 9, 2, {1, 0}, false}}, {}}));
  EXPECT_FALSE(b.apply({{op{op_kind::remove, {4, 0}, 9, 1, {4, 0}, false}}, {}}));
  EXPECT_EQ(b.to_string(), "b");
  b.check_invariants();
}

TEST(Text, PartlyKnownOpsApplyOnlyTheirNewPart) {
  folio::text a(1), b(2);
  a.insert_utf8(0, "abc");
  b.apply(a.ops_since({}));
  for (char32_t c : std::u32string(U"def")) a.insert(a.size(), &c, 1);
  const auto all = a.ops_since({});  // one run "abcdef"
  ASSERT_EQ(all.ops.size(), 1u);
  const auto r = b.apply(all);
  EXPECT_EQ(r.applied, 3u);
  EXPECT_EQ(r.duplicate, 3u);
  EXPECT_EQ(b.to_string(), "abcdef");
  b.check_invariants();
}

TEST(Text, APendingPlaceholderKeepsItsBatchsRemoves) {
  // A batch from a decoded copy carries a placeholder for the removed "b", with its remove; both wait
  // for "x". Then "x" and "b" itself arrive (not yet its remove): once released, the pending insert is
  // a duplicate of a live item, and it is its own batch's remove that makes its placeholder a value
  // not known rather than another value under the same op id.
  folio::text a(1);
  a.insert_utf8(0, "x");
  a.insert_utf8(1, "b");
  a.erase(1, 1);
  folio::text decoded(7);
  ASSERT_TRUE(folio::text::decode(a.encode(), 7, decoded));
  folio::version_vector has_x, upto_b;
  has_x.observe(1, 1), upto_b.observe(1, 2);
  folio::text r(3);
  EXPECT_TRUE(r.apply(decoded.ops_since(has_x)));
  EXPECT_EQ(r.pending(), 2u);
  const folio::apply_result res = r.apply(a.ops_between({}, upto_b));
  EXPECT_TRUE(res) << res.message;
  EXPECT_EQ(r.pending(), 0u);
  EXPECT_EQ(r.rejected(), 0u);
  EXPECT_EQ(r.to_string(), "x");
  EXPECT_EQ(r.version(), a.version());
  r.check_invariants();
}

TEST(Text, OpsBetweenStopsAtTheUpperVersion) {
  folio::text a(1);
  a.insert_utf8(0, "abc");
  const auto mid = a.version();
  a.insert_utf8(3, "def");
  folio::text b(2);
  b.apply(a.ops_between({}, mid));
  EXPECT_EQ(b.to_string(), "abc");
  b.apply(a.ops_since(b.version()));
  EXPECT_EQ(b.to_string(), "abcdef");
}

// Bursts of typing, backspacing and cursor jumps, as an editor makes them, with every invariant
// (position and run caches included) checked after every single edit.
TEST(Text, EditorLikeBurstsKeepEveryInvariantAfterEachEdit) {
  for (std::uint64_t seed : {7, 8, 9, 10, 11, 12}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    folio::text t(1);
    std::u32string model;
    std::uint64_t x = seed;
    auto rnd = [&](std::uint64_t n) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      return (x >> 33) % n;
    };
    std::size_t cursor = 0;
    for (int burst = 0; burst < 400; ++burst) {
      if (rnd(4) == 0) cursor = rnd(model.size() + 1);  // jump
      const auto len = 1 + rnd(12);
      for (std::uint64_t k = 0; k < len; ++k) {
        switch (rnd(5)) {
          case 0:  // backspace
            if (cursor == 0) break;
            t.erase(cursor - 1, 1), model.erase(cursor - 1, 1), --cursor;
            break;
          case 1:  // delete key
            if (cursor == model.size()) break;
            t.erase(cursor, 1), model.erase(cursor, 1);
            break;
          default: {  // type
            const char32_t c = char32_t(U'a' + rnd(26));
            t.insert(cursor, &c, 1), model.insert(cursor, 1, c), ++cursor;
          }
        }
        t.check_invariants();
      }
      if (!model.empty()) {
        const std::size_t at = rnd(model.size());
        ASSERT_EQ(t.at(at), model[at]);  // a lookup through the caches
      }
    }
    EXPECT_EQ(t.to_u32string(), model);
  }
}

TEST(Text, LargeDocumentsSplitTheTreeAndStayConsistent) {
  folio::text t(1);
  std::u32string model;
  std::uint64_t x = 42;
  auto rnd = [&](std::uint64_t n) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return (x >> 33) % n;
  };
  for (int i = 0; i < 20000; ++i) {
    if (model.empty() || rnd(3) != 0) {
      const std::size_t pos = rnd(model.size() + 1);
      const char32_t c = U'a' + char32_t(rnd(26));
      t.insert(pos, &c, 1);
      model.insert(pos, 1, c);
    } else {
      const std::size_t pos = rnd(model.size());
      const std::size_t n = std::min<std::size_t>(1 + rnd(4), model.size() - pos);
      t.erase(pos, n);
      model.erase(pos, n);
    }
    if (i % 2500 == 0) t.check_invariants();
  }
  EXPECT_EQ(t.to_u32string(), model);
  t.check_invariants();
}

// A remove's targets are checked without visiting their runs (per replica, the seqs that are removes
// are kept as ranges); the fault reported is still the first in the op's order: the lowest seq of a
// forward remove, the highest of a backward one, a remove seq before a missing one.
TEST(Text, RemoveTargetsAreCheckedInTheirOwnOrder) {
  folio::text a(1), b(2);
  a.insert_utf8(0, "abc");  // seqs 0-2
  a.erase(1, 1);            // 3: a remove
  a.insert_utf8(2, "de");   // 4-5
  a.erase(2, 1);            // 6: a remove
  a.insert_utf8(3, "f");    // 7
  ASSERT_EQ(a.to_string(), "acef");
  b.apply(a.ops_since({}));
  auto remove = [](folio::replica_id r, std::uint32_t first, std::uint32_t len, bool backward) {
    return op_batch<char32_t>{{op{op_kind::remove, {r, 0}, 20, len, {1, first}, backward}}, {}};
  };
  auto refused = [&](const op_batch<char32_t>& batch) { return b.apply(batch).message; };
  EXPECT_EQ(refused(remove(3, 0, 8, false)), "reference (1, 3) is not an inserted item");
  EXPECT_EQ(refused(remove(3, 7, 8, true)), "reference (1, 6) is not an inserted item");
  EXPECT_EQ(refused(remove(3, 5, 3, true)), "reference (1, 3) is not an inserted item");
  EXPECT_EQ(refused(remove(3, 2, 2, false)), "reference (1, 3) is not an inserted item");  // a run, then a remove
  EXPECT_EQ(refused(remove(3, 7, 2, true)), "reference (1, 6) is not an inserted item");
  EXPECT_EQ(refused(remove(3, 4, 6, false)), "reference (1, 6) is not an inserted item");  // before the missing 8 and 9
  EXPECT_EQ(refused(remove(3, 2, 1, false)), "");
  EXPECT_EQ(b.to_string(), "aef");
  EXPECT_EQ(b.apply(remove(4, 7, 3, false)).pending, 3u);  // 8 and 9 are not there yet
  EXPECT_EQ(b.apply(remove(5, 9, 3, true)).pending, 6u);
  EXPECT_EQ(b.apply({{op{op_kind::insert, {6, 0}, 30, 1, folio::document_start, false}, op{op_kind::remove, {6, 1}, 31, 2, {6, 0}, false}}, {U'x'}})
                .message,
            "operation refers to itself or a later operation of its replica");  // its insert went in
  a.insert_utf8(4, "gh");  // 8-9
  const auto r = b.apply(a.ops_since(b.version()));
  EXPECT_EQ(r.applied, 2u + 3 + 3);
  EXPECT_EQ(r.pending, 0u);
  EXPECT_EQ(b.to_string(), "xae");
  b.check_invariants();
}

// A batch of one op that is the next of its replica (a remote keystroke) is integrated by
// rga::try_integrate_next, every other batch by integrate_batch. Two replicas receive the same
// stream, one as rga::apply dispatches and one through integrate_batch alone, and must answer alike
// (status, counts, message) and stay alike (clock, rejected ops, a value read by position after each
// batch; ops, text and version now and then). The stream is every op, one batch each, of two writers
// who type, delete and backspace concurrently and sync now and then, delivered with duplicates, swaps
// (ops parked and released), and one field of an op or its values spoilt: each fault
// try_integrate_next must leave to integrate_batch.
TEST(Text, OneOpBatchesIntegrateAsTheGeneralApplyDoes) {
  using rga = folio::detail::rga<char32_t>;
  std::mt19937_64 rng(20261129);
  folio::text w1(7), w2(900000000000ull);
  std::vector<op_batch<char32_t>> stream;
  auto emit = [&](const op_batch<char32_t>& b) {  // each op its own batch
    std::size_t at = 0;
    for (const op& o : b.ops) {
      op_batch<char32_t> one{{o}, {}};
      if (o.kind == op_kind::insert) one.content.assign(b.content.begin() + long(at), b.content.begin() + long(at + o.len)), at += o.len;
      stream.push_back(std::move(one));
    }
  };
  auto edit = [&](folio::text& w) {
    const std::u32string chars = U"abc é😀\n";
    if (w.size() > 3 && rng() % 8 == 0) {  // backspacing: the log merges it into one backward remove
      const folio::version_vector before = w.version();
      const std::size_t end = 3 + rng() % (w.size() - 3), n = 2 + rng() % 2;
      for (std::size_t k = 1; k <= n; ++k) w.erase(end - k, 1);
      return emit(w.ops_since(before));
    }
    if (w.size() > 0 && rng() % 3 == 0) {
      const std::size_t pos = rng() % w.size();
      return emit(w.ops(w.erase(pos, std::min<std::size_t>(1 + rng() % 3, w.size() - pos))));
    }
    std::u32string s(1 + (rng() % 5 == 0 ? rng() % 4 : 0), U'x');
    for (char32_t& c : s) c = chars[rng() % chars.size()];
    emit(w.ops(w.insert(rng() % (w.size() + 1), s)));
  };
  for (int i = 0; i < 3000; ++i) {
    edit(rng() % 2 ? w1 : w2);
    if (rng() % 40 == 0) w1.apply(w2.ops_since(w1.version())), w2.apply(w1.ops_since(w2.version()));
  }
  rga fast(1), general(1);
  std::size_t taken = 0, backward_taken = 0;
  auto deliver = [&](const op_batch<char32_t>& b) {
    folio::apply_result a;  // as rga::apply dispatches, counting the batches try_integrate_next takes
    if (b.ops.size() == 1 && fast.try_integrate_next(b.ops[0], b.content, a))
      ++taken, backward_taken += b.ops[0].backward;
    else
      fast.integrate_batch(b, rga::content_mode::from_batch, a);
    folio::apply_result g;
    general.integrate_batch(b, rga::content_mode::from_batch, g);
    ASSERT_EQ(a.status, g.status) << g.message;
    ASSERT_EQ(a.message, g.message);
    ASSERT_EQ(std::tie(a.applied, a.duplicate, a.pending, a.op_index), std::tie(g.applied, g.duplicate, g.pending, g.op_index));
    ASSERT_EQ(std::pair(fast.clock(), fast.rejected()), std::pair(general.clock(), general.rejected()));
    if (fast.size() > 0) {  // a read by position fills the position cache, which the next insert must forget
      const std::size_t at = rng() % fast.size();
      ASSERT_EQ(fast.at(at), general.at(at));
    }
  };
  for (std::size_t i = 0; i < stream.size(); ++i) {
    op_batch<char32_t> b = stream[i];
    switch (rng() % 16) {
      case 0:  // again, later
        deliver(stream[rng() % (i + 1)]);
        break;
      case 1:  // after the next one
        if (i + 1 < stream.size()) std::swap(stream[i], stream[i + 1]), b = stream[i];
        break;
      case 2: {  // one field spoilt, so that the op is refused (an op that integrated instead would take
                 // the id of the writer's op, which both then refuse: the rest of its ops would wait)
        op& o = b.ops[0];
        const bool insert = o.kind == op_kind::insert;
        switch (rng() % 8) {
          case 0: insert ? void(o.lamport = 0) : void(o.ref = o.id); break;  // not above its origin; a remove of itself
          case 1: o.ref = o.id; break;                                          // itself
          case 2: o.lamport = UINT32_MAX; break;                                // counters past 2^31
          case 3: insert ? void(o.len += 1) : b.content.push_back(U'x'); break;  // values and length differ
          case 4: insert ? void(o.backward = true) : void(o.ref = {0, 5}); break;
          case 5: o.ref = {0, 5}; break;                                        // replica 0
          case 6: insert ? void(b.content[0] = 0xD800) : b.content.push_back(0xD800); break;  // a surrogate
          default: if (insert) b.content[0] = 0x110000; else o.id = {12345, 0}; break;  // a new replica: integrates
        }
        deliver(b);
        b = stream[i];
        break;
      }
      default:
        break;
    }
    deliver(b);
    if (HasFatalFailure()) return;
    if (i % 97 == 0 || i + 1 == stream.size()) {
      ASSERT_EQ(fast.ops_since({}), general.ops_since({})) << "after batch " << i;
      ASSERT_EQ(fast.version(), general.version());
      std::u32string ft, gt;
      fast.for_each([&](char32_t c) { ft += c; });
      general.for_each([&](char32_t c) { gt += c; });
      ASSERT_EQ(ft, gt);
      fast.check_invariants();
    }
  }
  EXPECT_GT(taken, stream.size() / 2);  // most of the stream is next ops
  EXPECT_GT(backward_taken, 10u);
  // The stream as it was sent, through `apply` (which dispatches), ends where the writers do.
  rga clean(1);
  for (const op_batch<char32_t>& b : stream) ASSERT_TRUE(clean.apply(b));
  std::u32string got;
  clean.for_each([&](char32_t c) { got += c; });
  w1.apply(w2.ops_since(w1.version()));
  EXPECT_EQ(got, w1.to_u32string());
  EXPECT_EQ(clean.pending(), 0u);
}

}  // namespace
