// Applying batches to a document (detail/replica_core.hpp): one op id is one operation (duplicates
// skipped, reuse refused), seq order within a batch, value checks, ops waiting for what they need, and
// the one-op text path answering as the general one.
#include <gtest/gtest.h>

#include <folio/document.hpp>
#include <algorithm>
#include <functional>
#include <random>
#include <string>

#include "support/documents.hpp"

namespace {

using folio::document;
using folio::record_type;
using folio::testing::round_trip;

// ---- one op id, one operation -----------------------------------------------------------------

/// A replica that lost its state after sending `first` makes `second` from the state before it: the
/// same op ids with other content. The peer that has `first` refuses `second` and changes nothing;
/// `first` sent again is a duplicate.
void expect_reused_ids_refused(record_type t, const std::function<void(document&)>& first, const std::function<void(document&)>& second,
                               const char* what) {
  SCOPED_TRACE(std::string(folio::to_string(t)) + ": another " + what);
  document base(t, 1);
  if (t == record_type::xml) base.replace_xml("<p>hello</p><q a=\"1\"/>");
  if (t == record_type::map) base.set("k", "1");
  if (t == record_type::text) base.replace_text("hello");
  if (t == record_type::array) base.replace_array({"{\"a\":1}", "{\"b\":2}"});
  document peer(t, 9);
  ASSERT_TRUE(peer.apply(base.encode_since({})));
  document sender(t, 2), lost(t, 2);  // `lost` is `sender` before its edit: the state a crash left
  ASSERT_TRUE(sender.apply(base.encode_since({})));
  ASSERT_TRUE(lost.apply(base.encode_since({})));
  const folio::version_vector before = sender.version();
  first(sender);
  ASSERT_TRUE(peer.apply(sender.encode_since(before)));
  const std::string value = t == record_type::text ? peer.text() : t == record_type::xml ? peer.xml() : "";
  const folio::version_vector version = peer.version();
  second(lost);
  const folio::apply_result r = peer.apply(lost.encode_since(before));
  EXPECT_FALSE(r);
  EXPECT_NE(r.message.find("operation id (2, "), std::string::npos) << r.message;
  EXPECT_NE(r.message.find(") is taken by an operation with another " + std::string(what) + "; a replica must never reuse an operation id"),
            std::string::npos)
      << r.message;
  EXPECT_EQ(peer.version(), version);
  if (t == record_type::text) {
    EXPECT_EQ(peer.text(), value);
  } else if (t == record_type::xml) {
    EXPECT_EQ(peer.xml(), value);
  }
  const folio::apply_result again = peer.apply(sender.encode_since(before));
  EXPECT_TRUE(again) << again.message;
  EXPECT_EQ(again.applied, 0u);
  peer.check_invariants();
}

TEST(Document, AnOpIdKnownWithOtherContentIsRefusedNotSkipped) {
  using folio::record_type;
  expect_reused_ids_refused(record_type::text, [](document& d) { d.as_text().insert_utf8(5, " world"); },
                            [](document& d) { d.as_text().insert_utf8(5, " there"); }, "value");
  expect_reused_ids_refused(record_type::text, [](document& d) { d.as_text().insert_utf8(5, "!"); },
                            [](document& d) { d.as_text().insert_utf8(0, "!"); }, "origin");
  expect_reused_ids_refused(record_type::text, [](document& d) { d.as_text().insert_utf8(5, "!"); },
                            [](document& d) { d.as_text().erase(0, 1); }, "kind");
  expect_reused_ids_refused(record_type::text, [](document& d) { d.as_text().erase(0, 1); },
                            [](document& d) { d.as_text().erase(1, 1); }, "target");
  expect_reused_ids_refused(record_type::array, [](document& d) { d.as_array().insert(0, "{\"c\":3}"); },
                            [](document& d) { d.as_array().insert(0, "{\"d\":4}"); }, "value");
  expect_reused_ids_refused(record_type::map, [](document& d) { d.set("k", "2"); }, [](document& d) { d.set("k", "3"); }, "value");
  expect_reused_ids_refused(record_type::map, [](document& d) { d.set("k", "2"); }, [](document& d) { d.set("j", "2"); }, "key");
  expect_reused_ids_refused(record_type::map, [](document& d) { d.set("k", "2"); }, [](document& d) { d.remove("k"); }, "kind");
  expect_reused_ids_refused(record_type::xml, [](document& d) { d.replace_xml("<p>hello you</p><q a=\"1\"/>"); },
                            [](document& d) { d.replace_xml("<p>hello all</p><q a=\"1\"/>"); }, "value");
  expect_reused_ids_refused(record_type::xml, [](document& d) { d.replace_xml("<p>hello</p><q a=\"2\"/>"); },
                            [](document& d) { d.replace_xml("<p>hello</p><q a=\"1\" b=\"2\"/>"); }, "key");
}

TEST(Document, ABatchNamesEachOpIdOnceInSeqOrder) {
  // Every encoder lists a replica's ops in seq order, each once. A batch of many copies of one long run
  // would otherwise make each copy compare the whole run with the log again (and cost the batch's size
  // times the record's), so such a batch is invalid.
  folio::text a(1);
  a.insert_utf8(0, "hello");
  a.erase(1, 3);
  folio::op_batch<char32_t> twice = a.ops_since({});
  const folio::op_batch<char32_t> once = twice;
  twice.ops.insert(twice.ops.end(), once.ops.begin(), once.ops.end());
  twice.content.insert(twice.content.end(), once.content.begin(), once.content.end());
  folio::text b(2);
  const folio::apply_result r = b.apply(twice);
  EXPECT_FALSE(r);
  EXPECT_EQ(r.op_index, once.ops.size());
  EXPECT_EQ(r.message, "operations of replica 1 are not in seq order in the batch (0 after 7)");
  folio::text c(3);
  EXPECT_TRUE(c.apply(once));
  EXPECT_EQ(c.to_string(), "ho");
  // The same for map and xml records.
  folio::detail::tree_doc m(folio::detail::tree_shape::map, 1);
  m.set("k", "1");
  m.set("k", "2");
  folio::detail::tree_batch tb = m.ops_since({});
  const std::size_t n = tb.ops.size();
  for (std::size_t i = 0; i < n; ++i) tb.ops.push_back(tb.ops[i]);
  folio::detail::tree_doc other(folio::detail::tree_shape::map, 2);
  const folio::apply_result tr = other.apply(tb);
  EXPECT_FALSE(tr);
  EXPECT_EQ(tr.op_index, n);
  EXPECT_EQ(tr.message, "operations of replica 1 are not in seq order in the batch (0 after 1)");
}

// The seq-order check keeps a few replicas inline and the rest in a map (batch_order): a batch of many
// replicas is checked the same for each of them.
TEST(Batch, TheSeqOrderCheckHoldsForEveryReplicaOfAManyReplicaBatch) {
  for (const int late : {0, 3, 9}) {  // which replica repeats its ops: inline or in the map
    folio::op_batch<char32_t> all;
    std::vector<folio::op_batch<char32_t>> each;
    for (int r = 0; r < 10; ++r) {
      folio::text t(folio::replica_id(100 + r));
      t.insert_utf8(0, "ab");
      each.push_back(t.ops_since({}));
      all.ops.insert(all.ops.end(), each.back().ops.begin(), each.back().ops.end());
      all.content.insert(all.content.end(), each.back().content.begin(), each.back().content.end());
    }
    folio::text fine(1);
    EXPECT_TRUE(fine.apply(all));
    EXPECT_EQ(fine.size(), 20u);
    all.ops.insert(all.ops.end(), each[std::size_t(late)].ops.begin(), each[std::size_t(late)].ops.end());
    all.content.insert(all.content.end(), each[std::size_t(late)].content.begin(), each[std::size_t(late)].content.end());
    folio::text refused(1);
    const folio::apply_result r = refused.apply(all);
    EXPECT_FALSE(r);
    EXPECT_EQ(r.op_index, 10u);
    EXPECT_EQ(r.message, "operations of replica " + std::to_string(100 + late) + " are not in seq order in the batch (0 after 1)");
  }
}

TEST(Document, ALongInsertResentAsOneOpPerUnitIsADuplicateAndOneChangedUnitIsRefused) {
  // Each unit is compared with the one logged op that holds it (unpacked once for the batch, not once
  // per unit: a 4 MiB batch of such ops would otherwise take minutes).
  folio::detail::tree_doc a(folio::detail::tree_shape::xml, 1);
  folio::markup::flat_fragment f;
  ASSERT_TRUE(folio::markup::parse("<p>" + std::string(2000, 'x') + "</p><q>" + std::string(2000, 'y') + "</q>", f));
  a.replace_xml(f);
  folio::detail::tree_batch split;
  for (const folio::detail::tree_op& o : a.ops_since({}).ops) {
    if (o.kind != folio::detail::tree_op_kind::insert || o.text.size() < 2) {
      split.ops.push_back(o);
      continue;
    }
    for (std::uint32_t k = 0; k < o.len; ++k) {
      folio::detail::tree_op u = o;
      u.id.seq = o.id.seq + k, u.lamport = o.lamport + k, u.len = 1, u.text = std::u32string(1, o.text[k]);
      u.ref = k == 0 ? o.ref : folio::op_id{o.id.replica, o.id.seq + k - 1};
      split.ops.push_back(u);
    }
  }
  ASSERT_GT(split.ops.size(), 4000u);
  const folio::apply_result same = a.apply(split);
  EXPECT_TRUE(same) << same.message;
  EXPECT_EQ(same.duplicate, split.unit_count());
  split.ops[3000].text = std::u32string(1, U'z');
  const folio::apply_result changed = a.apply(split);
  EXPECT_FALSE(changed);
  EXPECT_EQ(changed.op_index, 3000u);
  EXPECT_NE(changed.message.find("is taken by an operation with another value"), std::string::npos) << changed.message;
  a.check_invariants();
}

TEST(Document, AResentInsertOfAnItemDeletedSinceIsStillADuplicate) {
  // A document decoded from its encoding keeps no values of deleted items: the comparison skips them
  // rather than refuse the genuine op sent again.
  document a(record_type::text, 1);
  const folio::local_change c = a.as_text().insert_utf8(0, "abc");
  const std::string insert = a.encode_change(c);
  a.as_text().erase(1, 1);
  std::optional<document> decoded;
  ASSERT_TRUE(document::decode(a.encode(), 3, decoded));
  const folio::apply_result r = decoded->apply(insert);
  EXPECT_TRUE(r) << r.message;
  EXPECT_EQ(r.duplicate, 3u);
  EXPECT_EQ(decoded->text(), "ac");
  // ... and so does a batch made from it, sent to a replica that still knows the value.
  document b(record_type::text, 4);
  ASSERT_TRUE(b.apply(insert));
  EXPECT_TRUE(b.apply(decoded->encode_since({})));
  EXPECT_EQ(b.text(), "ac");
}

TEST(Document, U0000IsAValueLikeAnyOtherUnderAReusedOpId) {
  // The empty value stands for "not known" only on a removed item (the previous test). A live U+0000
  // — or, in an array, a live empty item — is a value: another one under its id is refused, both ways.
  const std::string nul(1, '\0');
  expect_reused_ids_refused(record_type::text, [&](document& d) { d.as_text().insert_utf8(5, nul); },
                            [](document& d) { d.as_text().insert_utf8(5, "x"); }, "value");
  expect_reused_ids_refused(record_type::text, [](document& d) { d.as_text().insert_utf8(5, "x"); },
                            [&](document& d) { d.as_text().insert_utf8(5, nul); }, "value");
  expect_reused_ids_refused(record_type::array, [](document& d) { d.as_array().insert(0, ""); },
                            [](document& d) { d.as_array().insert(0, "{\"c\":3}"); }, "value");
  expect_reused_ids_refused(record_type::array, [](document& d) { d.as_array().insert(0, "{\"c\":3}"); },
                            [](document& d) { d.as_array().insert(0, ""); }, "value");
}

TEST(Document, AValueCheckJudgesTheValuesThatCanShowAndNoPlaceholder) {
  // A document decoded from its encoding keeps no values of removed items, and a batch made from it
  // carries a placeholder for each ("" in an array: never JSON) along with the remove. A value the
  // batch removes never shows, nor does a new one for an item the record already has (it keeps its
  // own): neither is judged. Every value that can show is.
  std::vector<std::string> seen;
  const auto objects_only = [&](std::string_view v) {
    seen.emplace_back(v);
    return v.empty() || v.front() != '{' ? std::string("not an object") : std::string();
  };
  document a(record_type::array, 1);
  a.replace_array({"{\"a\":1}", "{\"b\":2}"});
  document early(record_type::array, 3);  // has both items, not yet the remove
  ASSERT_TRUE(early.apply(a.encode_since({})));
  a.as_array().erase(1, 1);
  a.as_array().insert(1, "{\"c\":3}");
  a.as_array().insert(2, "not json");
  a.as_array().erase(2, 1);  // an invalid value, removed by the same batch: never shows either
  std::optional<document> decoded;
  ASSERT_TRUE(document::decode(a.encode(), 1, decoded));
  const std::string batch = decoded->encode_since({});
  document fresh(record_type::array, 2);
  const folio::apply_result r = fresh.apply(batch, objects_only);
  EXPECT_TRUE(r) << r.message;
  EXPECT_EQ(fresh.array(), a.array());
  EXPECT_EQ(seen, (std::vector<std::string>{"{\"a\":1}", "{\"c\":3}"}));
  seen.clear();
  const folio::apply_result dup = early.apply(batch, objects_only);
  EXPECT_TRUE(dup) << dup.message;
  EXPECT_EQ(early.array(), a.array());
  EXPECT_EQ(seen, (std::vector<std::string>{"{\"c\":3}"}));
  // The same placeholder where it can show is judged like any value.
  document b(record_type::array, 4);
  b.as_array().insert(0, "{\"d\":4}");
  b.as_array().insert(0, "");
  const folio::apply_result refused = fresh.apply(b.encode_since({}), objects_only);
  EXPECT_FALSE(refused);
  EXPECT_EQ(refused.message, "not an object");
  EXPECT_EQ(refused.op_index, 1u);
  EXPECT_EQ(fresh.array(), a.array());
  fresh.check_invariants(), early.check_invariants();
}

// Pending ops are tried again when what they wait for arrives (replica_core::release_parked), not in passes over
// all of them: a batch listing each op before the one it needs integrates whole, in text and in xml,
// and what still waits stays pending until its dependency comes.
TEST(Document, OpsListedBeforeWhatTheyNeedIntegrateWholeAndTheRestWaits) {
  // Text: author 100+i inserts after author 100+i+1's item; the last inserts at the start.
  constexpr std::uint32_t n = 300;
  folio::op_batch<char32_t> b;
  for (std::uint32_t i = 0; i < n; ++i) {
    folio::op o;
    o.id = {100 + i, 0}, o.lamport = n - i, o.len = 1;
    o.ref = i + 1 == n ? folio::document_start : folio::op_id{100 + i + 1, 0};
    b.ops.push_back(o);
    b.content.push_back(U'a' + char32_t(i % 26));
  }
  std::string want;
  for (std::uint32_t i = n; i-- > 0;) want += char('a' + i % 26);
  document d(record_type::text, 1);
  const folio::apply_result r = d.apply(folio::encode_batch(b));
  EXPECT_TRUE(r) << r.message;
  EXPECT_EQ(r.applied, n);
  EXPECT_EQ(d.pending(), 0u);
  EXPECT_EQ(d.text(), want);
  d.check_invariants();
  // Without the last op everything waits, and comes in when it arrives.
  document e(record_type::text, 1);
  folio::op_batch<char32_t> head{{b.ops.begin(), b.ops.end() - 1}, {b.content.begin(), b.content.end() - 1}};
  EXPECT_TRUE(e.apply(folio::encode_batch(head)));
  EXPECT_EQ(e.pending(), n - 1);
  folio::op_batch<char32_t> last{{b.ops.back()}, {b.content.back()}};
  const folio::apply_result r2 = e.apply(folio::encode_batch(last));
  EXPECT_EQ(r2.applied, n);
  EXPECT_EQ(e.pending(), 0u);
  EXPECT_EQ(e.text(), want);

  // Xml: many authors insert into one text node (past the id translation's scan limit), each after
  // the next author's character, listed in reverse.
  document x(record_type::xml, 1);
  ASSERT_TRUE(x.replace_xml("<p>x</p>").first);
  document peer = round_trip(x, 2);
  const std::string all = x.encode_since({});
  folio::detail::byte_reader br(all);
  std::vector<folio::detail::tree_op> base;
  record_type vt{};
  ASSERT_TRUE(folio::detail::read_header_any(br, folio::detail::kind_batch, vt) && folio::detail::read_tree_ops(br, folio::detail::tree_shape::xml, base));
  const folio::detail::tree_op& text_insert = base.back();  // the "x" of the text node
  ASSERT_EQ(text_insert.text, U"x");
  std::vector<folio::detail::tree_op> ops;
  constexpr std::uint32_t m = 40;
  for (std::uint32_t i = 0; i < m; ++i) {
    folio::detail::tree_op o;
    o.kind = folio::detail::tree_op_kind::insert, o.id = {500 + i, 0}, o.len = 1, o.object = text_insert.object;
    o.lamport = text_insert.lamport + m - i;
    o.ref = i + 1 == m ? text_insert.id : folio::op_id{500 + i + 1, 0};
    o.text = std::u32string(1, U'a' + char32_t(i % 26));
    ops.push_back(o);
  }
  std::string bytes;
  folio::detail::put_header(bytes, folio::detail::kind_batch, vt);
  folio::detail::put_tree_ops(bytes, folio::detail::tree_shape::xml, ops);
  const folio::apply_result rx = x.apply(bytes);
  EXPECT_TRUE(rx) << rx.message;
  EXPECT_EQ(rx.applied, m);
  std::string chars = "x";
  for (std::uint32_t i = m; i-- > 0;) chars += char('a' + i % 26);
  EXPECT_EQ(x.xml(), "<p>" + chars + "</p>");
  x.check_invariants();
  EXPECT_EQ(round_trip(x, 3).xml(), x.xml());
  EXPECT_TRUE(peer.apply(x.encode_since(peer.version())));
  EXPECT_EQ(peer.xml(), x.xml());
}


// document::apply reads a text batch of one op straight from its bytes and hands the op to
// rga::try_integrate_next; whatever that declines goes the general way with the op it read. A
// document must answer each encoded batch as decode_batch, the Lamport headroom rule and text::apply
// answer it together (status, counts, op index, message) and hold the same text, version, clock,
// pending and rejected ops. The stream: every op of two writers who type, delete and backspace
// concurrently and sync now and then, one batch each, delivered with duplicates, ops sent once early
// too (parked, after which every batch goes the general way until they are released), Lamport values
// raised one above the headroom bound, ops that read well but are refused (an insert not
// above its origin, a remove of itself), and cut bytes; with the rule on (as the service applies
// batches) and off, with and without a value check (which a text record never asks).
TEST(Document, ARemoteKeystrokeAnswersAsDecodingAndTheTextsApplyDo) {
  using folio::op;
  using folio::op_batch;
  for (const bool bounded : {true, false}) {
    SCOPED_TRACE(bounded ? "bounded" : "unbounded");
    std::mt19937_64 rng(20261130);
    folio::text w1(7), w2(900000000000ull);
    std::vector<op_batch<char32_t>> stream;
    auto emit = [&](const op_batch<char32_t>& b) {
      std::size_t at = 0;
      for (const op& o : b.ops) {
        op_batch<char32_t> one{{o}, {}};
        if (o.kind == folio::op_kind::insert) one.content.assign(b.content.begin() + long(at), b.content.begin() + long(at + o.len)), at += o.len;
        stream.push_back(std::move(one));
      }
    };
    for (int i = 0; i < 1500; ++i) {
      folio::text& w = rng() % 2 ? w1 : w2;
      if (w.size() > 3 && rng() % 8 == 0) {  // backspaces: one backward remove
        const folio::version_vector before = w.version();
        const std::size_t end = 3 + rng() % (w.size() - 3);
        for (std::size_t k = 1; k <= 2; ++k) w.erase(end - k, 1);
        emit(w.ops_since(before));
      } else if (w.size() > 0 && rng() % 3 == 0) {
        const std::size_t pos = rng() % w.size();
        emit(w.ops(w.erase(pos, std::min<std::size_t>(1 + rng() % 3, w.size() - pos))));
      } else {
        emit(w.ops(w.insert(rng() % (w.size() + 1), std::u32string(1 + (rng() % 5 == 0 ? 2 : 0), U"ab é😀"[rng() % 5]))));
      }
      if (rng() % 40 == 0) w1.apply(w2.ops_since(w1.version())), w2.apply(w1.ops_since(w2.version()));
    }
    document doc(record_type::text, 1);
    folio::text ref(1);
    const folio::apply_options options{.bounded_lamport = bounded};
    std::size_t refused_by_rule = 0, integrated = 0, spoilt = 0, spoilt_refused = 0;
    bool last_ok = false;  // the document's last answer
    // The headroom rule's bound for batch `b` on the reference: the larger of its clock and its changed
    // units plus the slack, plus the units of `b` that change it.
    const auto bound_of = [&](const op_batch<char32_t>& b) -> std::uint64_t {
      return std::max<std::uint64_t>(ref.clock(), ref.changed() + document::lamport_slack) + ref.changing_units(b);
    };
    auto deliver = [&](const std::string& bytes) {
      // A text record never asks the value check (its characters are the engine's to judge).
      const folio::apply_result a = rng() % 2 ? doc.apply(bytes, options)
                                              : doc.apply(bytes, [](std::string_view) { return std::string("refused: a value check ran"); }, options);
      last_ok = bool(a);
      folio::apply_result e;
      op_batch<char32_t> b;
      if (const folio::decode_result d = folio::decode_batch(bytes, b); !d) {
        e.status = folio::apply_status::invalid, e.message = "batch: " + d.description();
      } else if (const std::uint64_t last = std::uint64_t(b.ops[0].lamport) + b.ops[0].len - 1; bounded && last > bound_of(b)) {
        e.status = folio::apply_status::invalid, e.op_index = 0, e.message = "the Lamport headroom rule";
        ++refused_by_rule;
      } else {
        e = ref.apply(b);
        integrated += e.applied;
      }
      ASSERT_EQ(a.status, e.status) << a.message << " / " << e.message;
      if (e.message == "the Lamport headroom rule")
        ASSERT_NE(a.message.find(e.message), std::string::npos) << a.message;
      else
        ASSERT_EQ(a.message, e.message);
      ASSERT_EQ(std::tie(a.applied, a.duplicate, a.pending, a.op_index), std::tie(e.applied, e.duplicate, e.pending, e.op_index));
      ASSERT_EQ(doc.clock(), ref.clock());
      ASSERT_EQ(doc.version(), ref.version());
      ASSERT_EQ(std::pair(doc.pending(), doc.rejected()), std::pair(ref.pending(), ref.rejected()));
      if (rng() % 64 == 0) {
        ASSERT_EQ(doc.as_text().to_u32string(), ref.to_u32string());
      }
    };
    for (std::size_t i = 0; i < stream.size(); ++i) {
      op_batch<char32_t> b = stream[i];
      switch (rng() % 12) {
        case 0:  // again, later
          deliver(folio::encode_batch(stream[rng() % (i + 1)]));
          break;
        case 1:  // the next one first, once early (it waits, or the rule refuses it) and again in its turn
          if (i + 1 < stream.size()) deliver(folio::encode_batch(stream[i + 1]));
          break;
        case 2:  // its Lamport value one above the headroom bound, which the rule refuses (the new way
                 // declines any op the rule refuses, so a stricter slip is answered alike; an op that
                 // passes would take the writer's op id and derail the writer's later ops)
          if (bounded) {
            op_batch<char32_t> raised = b;
            const std::uint64_t last = bound_of(raised) + 1;
            raised.ops[0].lamport = static_cast<std::uint32_t>(std::max<std::uint64_t>(last + 1, raised.ops[0].len) - raised.ops[0].len);
            deliver(folio::encode_batch(raised));
          }
          break;
        case 3: {  // cut short
          const std::string bytes = folio::encode_batch(b);
          deliver(bytes.substr(0, bytes.size() - 1 - rng() % (bytes.size() - 1)));
          break;
        }
        case 4: {  // read, then refused: an insert's Lamport value not above its origin's, a remove of itself
          op_batch<char32_t> bad = b;
          if (bad.ops[0].kind == folio::op_kind::insert && bad.ops[0].ref != folio::document_start)
            bad.ops[0].lamport = 1;
          else
            bad.ops[0].kind = folio::op_kind::remove, bad.ops[0].backward = false, bad.ops[0].ref = bad.ops[0].id, bad.content.clear();
          deliver(folio::encode_batch(bad));
          spoilt_refused += !last_ok;
          ++spoilt;
          break;
        }
      }
      deliver(folio::encode_batch(b));
    }
    EXPECT_EQ(doc.as_text().to_u32string(), ref.to_u32string());
    EXPECT_GT(integrated, stream.size() / 2);
    EXPECT_GT(spoilt_refused, spoilt / 2);  // the spoilt ops were refused (the rest wait for what they need)
    if (bounded) {
      EXPECT_GT(refused_by_rule, 10u);
    } else {
      EXPECT_EQ(refused_by_rule, 0u);
    }
  }
}

}  // namespace
