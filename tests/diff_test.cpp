#include <gtest/gtest.h>

#include <folio/diff.hpp>
#include <random>

namespace {

std::size_t units(const folio::op_batch<char32_t>& b) { return b.unit_count(); }

TEST(Diff, UnchangedValueMakesNoOperation) {
  folio::text t(1);
  t.insert_utf8(0, "same");
  const auto c = folio::replace_text_utf8(t, "same");
  EXPECT_TRUE(c.empty());
  EXPECT_TRUE(t.ops(c).empty());
}

TEST(Diff, TextChangesBecomeMinimalOps) {
  folio::text t(1);
  t.insert_utf8(0, "the quick brown fox");
  const auto c = folio::replace_text_utf8(t, "the quick red fox!");
  EXPECT_EQ(t.to_string(), "the quick red fox!");
  // "brown" -> "red": Myers keeps the common "r"; remove b,o,w,n (4), insert e,d (2), insert ! (1).
  EXPECT_EQ(units(t.ops(c)), 7u);
  t.check_invariants();
}

TEST(Diff, ReplicasReceivingTheDiffConverge) {
  folio::text a(1), b(2);
  b.apply(a.ops(a.insert_utf8(0, "abcdefgh")));
  b.apply(a.ops(folio::replace_text_utf8(a, "aXcdeYYh")));
  EXPECT_EQ(b.to_string(), "aXcdeYYh");
}

// replace_text_utf8 trims on bytes, then diffs the decoded middle: the ops must be those of the code
// point diff of the whole values, also where values share a lead byte and differ in a continuation
// byte (é C3 A9 / ã C3 A3, 😀 F0 9F 98 80 / 😃 F0 9F 98 83) at either end of the change.
TEST(Diff, Utf8ReplaceMakesTheOpsOfTheCodePointDiff) {
  const std::u32string alphabet = U"aé\u00e3\U0001F600\U0001F603\u0800\u00a9";
  std::mt19937 rng(23);
  auto random_text = [&](std::size_t n) {
    std::u32string s;
    for (std::size_t i = 0; i < n; ++i) s.push_back(alphabet[rng() % alphabet.size()]);
    return s;
  };
  auto utf8 = [](const std::u32string& s) {
    std::string out;
    for (char32_t c : s) folio::append_utf8(out, c);
    return out;
  };
  for (int round = 0; round < 2000; ++round) {
    // Short texts, and texts of up to 400 bytes, whose common prefix and suffix span the 64-byte
    // blocks common_prefix and common_suffix compare with memcmp (a cut inside a code point included).
    const std::u32string from = random_text(round % 2 ? rng() % 10 : rng() % 100);
    std::u32string to = from;
    for (int edits = int(rng() % 3); edits >= 0; --edits) {
      const std::size_t at = to.empty() ? 0 : rng() % (to.size() + 1);
      if (rng() % 2 && at < to.size()) to.erase(at, 1 + rng() % 2);
      else to.insert(at, random_text(1 + rng() % 2));
    }
    folio::text bytes(1), points(1);
    bytes.insert(0, from);
    points.insert(0, from);
    const auto by_bytes = folio::replace_text_utf8(bytes, utf8(to));
    const auto by_points = folio::replace_text(points, to);
    ASSERT_EQ(bytes.to_u32string(), to) << "round " << round;
    ASSERT_EQ(bytes.to_string(), utf8(to)) << "round " << round;
    ASSERT_TRUE(bytes.ops(by_bytes) == points.ops(by_points)) << "round " << round;
  }
}

// One code point changed at every position of a 300-byte text (a two-byte one every 6 bytes, so that
// the 64-byte blocks start at every kind of byte), alone and with the first one changed too: the
// common prefix and suffix, compared 64 bytes at a time, stop exactly at it (each skipped byte of a
// block fails this), so the text is right and each change is one remove and one insert.
TEST(Diff, AChangeAtEveryPositionIsFoundExactly) {
  std::string base;
  for (int i = 0; base.size() < 300; ++i) base += i % 5 == 3 ? "\u00e9" : std::string(1, char('a' + i % 26));
  for (std::size_t at = 0; at < base.size(); ++at) {
    if ((static_cast<unsigned char>(base[at]) & 0xC0) == 0x80) continue;  // inside a code point
    const std::size_t len = (static_cast<unsigned char>(base[at]) & 0x80) ? 2 : 1;
    const std::string changed = base.substr(0, at) + "Z" + base.substr(at + len);
    folio::text t(1);
    folio::replace_text_utf8(t, base);
    const folio::local_change c = folio::replace_text_utf8(t, changed);  // the prefix finds it
    ASSERT_EQ(t.to_string(), changed) << "at " << at;
    ASSERT_EQ(c.count, 2u) << "at " << at;
    if (at == 0) continue;
    const std::string both = "Y" + changed.substr(1);  // the first byte too: the suffix finds `at`
    folio::text u(1);
    folio::replace_text_utf8(u, base);
    const folio::local_change c2 = folio::replace_text_utf8(u, both);
    ASSERT_EQ(u.to_string(), both) << "at " << at;
    ASSERT_EQ(c2.count, 4u) << "at " << at;
  }
}

// Long runs of ASCII, which ascii_run takes 32 and 8 bytes at a time, with one wider code point at
// every place of a 100-byte text: its UTF-8 copy (to_string) and a one-letter change at every place
// after it (the prefix's code points counted by code_point_count) come out exactly. Counting the
// bytes of a word that holds the wide code point as ASCII, or skipping them, fails this.
TEST(Diff, LongAsciiRunsAroundAWideCodePointAreCopiedAndCountedExactly) {
  for (const std::string wide : {"\u00e9", "\u20ac", "\U0001F600"}) {
    for (std::size_t at = 0; at <= 100; ++at) {
      std::string base;
      for (std::size_t i = 0; i < 100; ++i) base += i == at ? wide : std::string(1, char('a' + i % 26));
      folio::text t(1);
      folio::replace_text_utf8(t, base);
      ASSERT_EQ(t.to_string(), base) << "at " << at;
      ASSERT_EQ(folio::code_point_count(base), 100u) << "at " << at;
      for (std::size_t change = 0; change < base.size(); ++change) {
        if ((static_cast<unsigned char>(base[change]) & 0x80) != 0) continue;  // a byte of the wide one
        std::string changed = base;
        changed[change] = 'Z';
        folio::text u(1);
        folio::replace_text_utf8(u, base);
        const folio::local_change c = folio::replace_text_utf8(u, changed);
        ASSERT_EQ(u.to_string(), changed) << "at " << at << ", change " << change;
        ASSERT_EQ(u.to_u32string().size(), 100u) << "at " << at << ", change " << change;
        ASSERT_EQ(c.count, 2u) << "at " << at << ", change " << change;
      }
    }
  }
  // ascii_run against a byte loop, on bytes whose high bits are set here and there: from one byte in
  // two to one in 60, so that the first one falls at every place of a word and of a 32-byte block.
  std::mt19937 rng(7);
  for (int round = 0; round < 4000; ++round) {
    std::string bytes(rng() % 90, 'a');
    const unsigned one_in = 2 + static_cast<unsigned>(round) % 59;
    for (char& b : bytes)
      if (rng() % one_in == 0) b = char(0x80 | rng() % 0x40);
    std::size_t expected = 0;
    while (expected < bytes.size() && static_cast<unsigned char>(bytes[expected]) < 0x80) ++expected;
    ASSERT_EQ(folio::ascii_run(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()), expected) << "round " << round;
  }
}

TEST(Diff, Utf8ReplaceRefusesInvalidUtf8AndChangesNothing) {
  folio::text t(1);
  t.insert_utf8(0, "abc");
  // Only the changed middle is decoded; the message still names the byte in the whole value.
  auto refusal = [&](std::string_view value) {
    try {
      folio::replace_text_utf8(t, value);
    } catch (const folio::error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(refusal("ab\xC3"), "[folio.utf8] invalid UTF-8 at byte 2");
  EXPECT_EQ(refusal("a\xED\xA0\x80" "c"), "[folio.utf8] invalid UTF-8 at byte 1");  // a surrogate
  EXPECT_EQ(refusal("\xFF" "abc"), "[folio.utf8] invalid UTF-8 at byte 0");
  EXPECT_EQ(t.to_string(), "abc");
  t.insert_utf8(0, "\xC3\xA9");  // "éabc": a prefix of two bytes, then the bad byte
  EXPECT_EQ(refusal("\xC3\xA9" "ab\xFF"), "[folio.utf8] invalid UTF-8 at byte 4");
  EXPECT_EQ(refusal("\xC3\xA9" "abc\xC3"), "[folio.utf8] invalid UTF-8 at byte 5");
  EXPECT_EQ(t.to_string(), "\xC3\xA9" "abc");
}

TEST(Diff, MatchesAMinimalEditDistanceOnRandomInputs) {
  std::mt19937 rng(7);
  for (int round = 0; round < 300; ++round) {
    std::u32string from, to;
    const int n = int(rng() % 12), m = int(rng() % 12);
    for (int i = 0; i < n; ++i) from.push_back(char32_t(U'a' + rng() % 3));
    for (int i = 0; i < m; ++i) to.push_back(char32_t(U'a' + rng() % 3));
    // Insert/delete edit distance = n + m - 2 * LCS.
    std::vector<std::vector<int>> lcs(n + 1, std::vector<int>(m + 1));
    for (int i = n - 1; i >= 0; --i)
      for (int j = m - 1; j >= 0; --j) lcs[i][j] = from[i] == to[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
    folio::text t(1);
    t.insert(0, from);
    const auto c = folio::replace_text(t, to);
    ASSERT_EQ(t.to_u32string(), to);
    EXPECT_EQ(units(t.ops(c)), std::size_t(n + m - 2 * lcs[0][0])) << "round " << round;
  }
}

TEST(Diff, OneWordChangeInAMebibyteTextIsAFewOps) {
  std::u32string big;
  std::mt19937 rng(1);
  while (big.size() < (1u << 20)) big.push_back(char32_t(U'a' + rng() % 26));
  folio::text t(1);
  t.insert(0, big);
  std::u32string changed = big;
  changed.replace(1000, 5, U"Folio");
  changed.replace(900000, 3, U"xyz");
  const auto c = folio::replace_text(t, changed);
  EXPECT_EQ(t.to_u32string(), changed);
  EXPECT_LE(units(t.ops(c)), 16u);
  t.check_invariants();
}

TEST(Diff, UnrelatedLargeValuesStillReplaceCorrectly) {
  std::u32string x(20000, U'x'), y(20000, U'y');
  folio::text t(1);
  t.insert(0, x);
  folio::replace_text(t, y);
  EXPECT_EQ(t.to_u32string(), y);
}

TEST(Diff, BudgetExhaustionFallsBackToReplace) {
  const std::u32string a = U"abcabcabcabc", b = U"cbacbacbacba";
  std::uint64_t none = 0;
  const auto hunks = folio::detail::myers_diff(a.data(), a.size(), b.data(), b.size(), none);
  ASSERT_EQ(hunks.size(), 1u);
  EXPECT_EQ(hunks[0].a_len, a.size());
  EXPECT_EQ(hunks[0].b_len, b.size());
}

std::u32string random_binary(std::mt19937& rng, std::size_t n) {
  std::u32string s;
  for (std::size_t i = 0; i < n; ++i) s.push_back(rng() % 2 ? U'a' : U'b');
  return s;
}

TEST(Diff, TheBudgetGrowsWithTheValuesUpToACap) {
  using folio::detail::diff_budget;
  EXPECT_EQ(diff_budget(0), 1'000'000u);
  EXPECT_EQ(diff_budget(10'000), 1'640'000u);
  EXPECT_EQ(diff_budget(std::uint64_t(1) << 40), 200'000'000u);  // no overflow past the cap
}

// Two unrelated 10,000-character texts differ in ~3,800 places: a minimal script costs ~15 M steps,
// more than their budget (2.3 M), so the default diff stops and replaces the middle whole, while
// the same texts with an ample budget get the many-hunk minimal script. (With a fixed budget of 2·10^8
// steps, this takes the minimal path and fails.)
TEST(Diff, SmallUnrelatedValuesGetABudgetProportionalToTheirSize) {
  std::mt19937 rng(11);
  const std::u32string a = random_binary(rng, 10'000), b = random_binary(rng, 10'000);
  const auto bounded = folio::detail::myers_diff(a.data(), a.size(), b.data(), b.size());
  std::uint64_t ample = folio::detail::diff_max_budget;
  const auto minimal = folio::detail::myers_diff(a.data(), a.size(), b.data(), b.size(), ample);
  EXPECT_LE(bounded.size(), 2u);  // at most the prefix/suffix-trimmed middle, replaced
  EXPECT_GT(minimal.size(), 500u);
  folio::text t(1);
  t.insert(0, a);
  folio::replace_text(t, b);
  EXPECT_EQ(t.to_u32string(), b);  // correct either way
}

// A few hundred scattered edits stay well inside the budget: the script is still minimal.
TEST(Diff, ScatteredEditsInALargeTextStayMinimal) {
  std::mt19937 rng(5);
  const std::u32string from = random_binary(rng, 50'000);
  std::u32string to = from;
  for (int i = 0; i < 300; ++i) to.erase(rng() % to.size(), 1);
  folio::text t(1);
  t.insert(0, from);
  const auto c = folio::replace_text(t, to);
  EXPECT_EQ(t.to_u32string(), to);
  EXPECT_EQ(units(t.ops(c)), 300u);
}

TEST(Diff, ArraysDiffByElement) {
  folio::array a(1);
  a.insert(0, std::vector<std::string>{R"({"a":1})", R"({"b":2})", R"({"c":3})"});
  const auto c = folio::replace_array(a, {R"({"a":1})", R"({"c":3})", R"({"d":4})"});
  EXPECT_EQ(a.values(), (std::vector<std::string>{R"({"a":1})", R"({"c":3})", R"({"d":4})"}));
  EXPECT_EQ(a.ops(c).unit_count(), 2u);  // remove {"b":2}, insert {"d":4}
  EXPECT_TRUE(folio::replace_array(a, a.values()).empty());
}

}  // namespace
