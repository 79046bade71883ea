// document::checkout (a record's value at an earlier version) and document::rebase (a local change
// made on such a checkout, integrated as the replica's next ops): the merged value, and convergence of
// every replica whatever order the batches reach it in; and the document encoding that keeps removed
// values (kept_values::all, format version 3), which a checkout of a decoded record needs.
#include <gtest/gtest.h>

#include <folio/document.hpp>
#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "support/documents.hpp"

namespace {

using folio::document;
using folio::local_change;
using folio::record_type;
using folio::replica_id;
using folio::version_vector;
using folio::testing::round_trip;

/// The value of any record type as one string (array elements and map entries joined).
std::string value_of(const document& d) {
  std::string out;
  switch (d.type()) {
    case record_type::text:
      return d.text();
    case record_type::array:
      for (const std::string& v : d.array()) out += v + "|";
      return out;
    case record_type::map:
      for (const auto& [k, v] : d.map()) out += k + "=" + v + ";";
      return out;
    case record_type::xml:
      break;
  }
  return d.xml();
}

/// A replica of type `t` holding `initial` and then `batches` in the given order: all integrated.
void expect_value_after(record_type t, const std::string& initial, const std::vector<std::string>& batches, const std::string& want,
                        replica_id self = 90) {
  document p(t, self);
  ASSERT_TRUE(p.apply(initial));
  for (const std::string& b : batches) {
    const folio::apply_result r = p.apply(b);
    ASSERT_TRUE(r) << r.message;
  }
  EXPECT_EQ(p.pending(), 0u);
  EXPECT_EQ(value_of(p), want);
  p.check_invariants();
}

/// Every order of `batches` after `initial` ends at `want`.
void expect_converges_in_every_order(record_type t, const std::string& initial, std::vector<std::string> batches, const std::string& want) {
  std::vector<std::size_t> order(batches.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  do {
    std::vector<std::string> in;
    for (std::size_t i : order) in.push_back(batches[i]);
    SCOPED_TRACE("delivery order starting with batch " + std::to_string(order.empty() ? 0 : order[0]));
    expect_value_after(t, initial, in, want);
  } while (std::next_permutation(order.begin(), order.end()));
}

/// The issue's scenario for any type: the server (replica 1) holds `setup`'s value at version V;
/// clients (replicas 10, 11, ...) each edit from V and the server integrates their batches; a backend
/// computes a value from checkout(V) (`backend`), which rebase merges. The server, every client that
/// then receives the others' batches, and a replica receiving everything in any order all end at `want`.
void expect_rebased_merge(record_type t, const std::function<void(document&)>& setup, const std::vector<std::function<void(document&)>>& clients,
                          const std::function<local_change(document&)>& backend, const std::string& want,
                          const std::function<void(document&)>& server_since = nullptr) {
  SCOPED_TRACE(std::string(folio::to_string(t)));
  document server(t, 1);
  setup(server);
  const std::string initial = server.encode_since({});
  const version_vector v = server.version();
  const std::string at_v = value_of(server);
  std::vector<document> replicas;
  std::vector<std::string> batches;
  for (std::size_t i = 0; i < clients.size(); ++i) {
    replicas.emplace_back(t, replica_id(10 + i));
    ASSERT_TRUE(replicas.back().apply(initial));
    clients[i](replicas.back());
    batches.push_back(replicas.back().encode_since(v));
    ASSERT_TRUE(server.apply(batches.back()));
  }
  if (server_since) {
    const version_vector before = server.version();
    server_since(server);
    batches.push_back(server.encode_since(before));
  }
  document base = server.checkout(v);
  EXPECT_EQ(value_of(base), at_v);
  EXPECT_EQ(base.version(), v);
  EXPECT_EQ(base.replica(), server.replica());
  const local_change c = backend(base);
  // The same rebase on the record as stored and read back (version 3 keeps every value), checked out
  // there: the same batch.
  std::optional<document> stored;
  ASSERT_TRUE(document::decode(server.encode(folio::kept_values::all), 1, stored));
  document stored_base = stored->checkout(v);
  EXPECT_EQ(value_of(stored_base), at_v);
  const local_change stored_c = backend(stored_base);
  const version_vector before = server.version();
  const local_change r = server.rebase(base, c);
  EXPECT_EQ(r.replica, 1u);
  EXPECT_EQ(r.first, before.get(1));
  EXPECT_EQ(r.count, c.count);
  server.check_invariants();
  EXPECT_EQ(value_of(server), want);
  const std::string rebased = server.encode_change(r);
  EXPECT_EQ(rebased, server.encode_since(before));
  EXPECT_EQ(stored->encode_change(stored->rebase(stored_base, stored_c)), rebased);
  EXPECT_EQ(value_of(*stored), want);
  EXPECT_EQ(value_of(round_trip(server, 5)), want);
  // Each client gets what it lacks, in the order the server integrated it.
  for (std::size_t i = 0; i < replicas.size(); ++i) {
    for (std::size_t j = 0; j < batches.size(); ++j) {
      if (j == i) continue;
      ASSERT_TRUE(replicas[i].apply(batches[j]));
    }
    ASSERT_TRUE(replicas[i].apply(rebased));
    EXPECT_EQ(value_of(replicas[i]), want);
  }
  batches.push_back(rebased);
  expect_converges_in_every_order(t, initial, batches, want);
}

/// An edit setting each of `entries` in order (map records).
std::function<void(document&)> sets(std::vector<std::pair<std::string, std::string>> entries) {
  return [entries = std::move(entries)](document& d) {
    for (const auto& [k, v] : entries) d.set(k, v);
  };
}

// ---- the merged value -------------------------------------------------------------------------

TEST(DocumentRebase, TextKeepsWhatAClientInsertedSince) {
  expect_rebased_merge(
      record_type::text, [](document& d) { d.replace_text("Hello world"); }, {[](document& d) { d.as_text().insert(6, U"big "); }},
      [](document& base) { return base.replace_text("Hello world!"); }, "Hello big world!");
}

TEST(DocumentRebase, TextMergesSeveralClientsAndRemoves) {
  expect_rebased_merge(
      record_type::text, [](document& d) { d.replace_text("one two three four"); },
      {[](document& d) { d.as_text().insert(0, U"zero "); }, [](document& d) { d.as_text().erase(8, 6); } /* "three " */},
      [](document& base) { return base.replace_text("one 2 three four five"); }, "zero one 2 four five");
}

TEST(DocumentRebase, TextOnTopOfTheServersOwnEditsSince) {
  // The server replica itself changed the record after V (another write): the rebased ops take ids
  // after those, so nothing collides, and both edits stay.
  expect_rebased_merge(
      record_type::text, [](document& d) { d.replace_text("Hello world"); }, {[](document& d) { d.as_text().insert(6, U"big "); }},
      [](document& base) { return base.replace_text("Hello world!"); }, "Hi, Hello big world!",
      [](document& server) { server.as_text().insert(0, U"Hi, "); });
}

TEST(DocumentRebase, ArrayKeepsConcurrentInsertsAndRemoves) {
  expect_rebased_merge(
      record_type::array, [](document& d) { d.replace_array({"1", "2", "3"}); },
      {[](document& d) {
        d.as_array().insert(1, std::vector<std::string>{"x"});
        d.as_array().erase(3, 1);  // "3"
      }},
      [](document& base) { return base.replace_array({"0", "1", "2", "3", "4"}); }, "0|1|x|2|4|");
}

TEST(DocumentRebase, MapKeepsKeysTheBackendDidNotChangeAndAddWins) {
  // The backend read {a, b, c} and writes {a: 10, b: 2}: a changed, b unchanged, c removed. Meanwhile
  // a client set b, c and d. b and d keep the client's values; c, removed by the backend while the
  // client set it, stays (add-wins: the backend's unset observed only the entry it read).
  expect_rebased_merge(
      record_type::map, sets({{"a", "1"}, {"b", "2"}, {"c", "3"}}), {sets({{"b", "20"}, {"c", "30"}, {"d", "4"}})},
      [](document& base) { return base.replace_map({{"a", "10"}, {"b", "2"}}); }, "a=10;b=20;c=30;d=4;");
}

TEST(DocumentRebase, MapKeyBothChangedTakesTheRebasedWrite) {
  // The rebased set is the server's latest write: its Lamport value is above everything the server
  // held, so it wins over the client's concurrent set of the same key on every replica.
  expect_rebased_merge(
      record_type::map, sets({{"a", "1"}}), {sets({{"x", "1"}, {"a", "client"}})},
      [](document& base) { return base.replace_map({{"a", "backend"}}); }, "a=backend;x=1;");
}

TEST(DocumentRebase, MapRemovesWhatNobodyChangedSince) {
  expect_rebased_merge(
      record_type::map, sets({{"a", "1"}, {"b", "2"}}), {sets({{"c", "3"}})}, [](document& base) { return base.replace_map({{"a", "1"}}); }, "a=1;c=3;");
}

TEST(DocumentRebase, XmlKeepsCharactersInTextNodesAndAttributes) {
  expect_rebased_merge(
      record_type::xml, [](document& d) { d.replace_xml("<p a=\"1\" t=\"Hello world\">Hello world</p><q/>"); },
      {[](document& d) { d.replace_xml("<p a=\"2\" t=\"Hello big world\">Hello big world</p><q/>"); }},
      [](document& base) { return base.replace_xml("<p a=\"1\" b=\"3\" t=\"Hello world\">Hello world!</p><q/><r/>").second; },
      "<p a=\"2\" b=\"3\" t=\"Hello big world\">Hello big world!</p><q/><r/>");
}

TEST(DocumentRebase, NothingSinceTheBaseIsAPlainReplace) {
  for (record_type t : {record_type::text, record_type::array, record_type::map, record_type::xml}) {
    SCOPED_TRACE(std::string(folio::to_string(t)));
    document server(t, 1), plain(t, 1);
    const auto edit = [t](document& d, int step) -> local_change {
      const std::string n = std::to_string(step);
      switch (t) {
        case record_type::text:
          return d.replace_text("text " + n);
        case record_type::array:
          return d.replace_array({n, "x", n});
        case record_type::map:
          return d.replace_map({{"k", n}, {n, "v"}});
        case record_type::xml:
          break;
      }
      return d.replace_xml("<p n=\"" + n + "\">" + n + "</p>").second;
    };
    edit(server, 1), edit(plain, 1);
    document base = server.checkout(server.version());
    const local_change c = edit(base, 2), want = edit(plain, 2);
    const local_change r = server.rebase(base, c);
    EXPECT_EQ(r.first, want.first);
    EXPECT_EQ(r.count, want.count);
    EXPECT_EQ(value_of(server), value_of(plain));
    EXPECT_EQ(server.encode(), plain.encode());
    EXPECT_EQ(server.clock(), plain.clock());
    const local_change none = server.rebase(base, local_change{1, base.version().get(1), 0});
    EXPECT_TRUE(none.empty());
    EXPECT_EQ(none.first, server.version().get(1));
  }
}

TEST(DocumentRebase, TwoBackendsFromTheSameVersion) {
  document server(record_type::text, 1);
  server.replace_text("abc");
  const version_vector v = server.version();
  document first = server.checkout(v), second = server.checkout(v);
  const local_change c1 = first.replace_text("abcX"), c2 = second.replace_text("Yabc");
  const local_change r1 = server.rebase(first, c1);
  const local_change r2 = server.rebase(second, c2);
  EXPECT_EQ(server.text(), "YabcX");
  EXPECT_EQ(r2.first, r1.first + r1.count);
  document peer(record_type::text, 2);
  ASSERT_TRUE(peer.apply(server.encode_since({})));
  EXPECT_EQ(peer.text(), "YabcX");
}

// ---- checkout ---------------------------------------------------------------------------------

TEST(DocumentCheckout, OfTheCurrentVersionIsTheDocument) {
  for (record_type t : {record_type::text, record_type::array, record_type::map, record_type::xml}) {
    SCOPED_TRACE(std::string(folio::to_string(t)));
    document d(t, 3, "body");
    if (t == record_type::text) d.replace_text("abc"), d.replace_text("aXc");
    if (t == record_type::array) d.replace_array({"1", "2"}), d.replace_array({"2", "3"});
    if (t == record_type::map) d.set("a", "1"), d.remove("a"), d.set("b", "2");
    if (t == record_type::xml) d.replace_xml("<a x=\"1\">t</a>"), d.replace_xml("<a x=\"2\">tu</a><b/>");
    const document c = d.checkout(d.version());
    c.check_invariants();
    EXPECT_EQ(c.type(), t);
    EXPECT_EQ(c.content_key(), "body");
    EXPECT_EQ(c.replica(), 3u);
    EXPECT_EQ(c.version(), d.version());
    EXPECT_EQ(c.clock(), d.clock());
    EXPECT_EQ(value_of(c), value_of(d));
    EXPECT_EQ(c.encode(), d.encode());
    const document empty = d.checkout(version_vector{});
    EXPECT_TRUE(empty.version().empty());
    EXPECT_EQ(value_of(empty), value_of(document(t, 3)));
  }
}

TEST(DocumentCheckout, OfAnIntermediateVersionIsAReplicaThatHadThoseOps) {
  for (record_type t : {record_type::text, record_type::array, record_type::map, record_type::xml}) {
    SCOPED_TRACE(std::string(folio::to_string(t)));
    document server(t, 1), a(t, 2), b(t, 3), then(t, 4);
    const auto edit = [t](document& d, const std::string& n) {
      if (t == record_type::text) d.as_text().insert_utf8(d.as_text().size() / 2, n);
      if (t == record_type::array) d.as_array().insert(0, std::vector<std::string>{n});
      if (t == record_type::map) d.set("k", n), d.set(n, n);
      if (t == record_type::xml) d.replace_xml("<p>" + n + "</p>");
    };
    edit(server, "s");
    ASSERT_TRUE(a.apply(server.encode_since({})));
    ASSERT_TRUE(b.apply(server.encode_since({})));
    edit(a, "a1");
    ASSERT_TRUE(server.apply(a.encode_since({})));
    edit(a, "a2");
    edit(b, "b1");
    ASSERT_TRUE(server.apply(b.encode_since({})));
    ASSERT_TRUE(then.apply(server.encode_since({})));  // s, a1, b1
    const version_vector v = server.version();
    ASSERT_TRUE(server.apply(a.encode_since({})));  // a2
    edit(server, "s2");
    const document c = server.checkout(v);
    c.check_invariants();
    EXPECT_EQ(c.version(), then.version());
    EXPECT_EQ(value_of(c), value_of(then));
    EXPECT_NE(value_of(c), value_of(server));
    EXPECT_EQ(c.encode_since({}), then.encode_since({}));
  }
}

TEST(DocumentCheckout, RefusesAVersionTheDocumentNeverHad) {
  document server(record_type::text, 1), a(record_type::text, 2), b(record_type::text, 3);
  server.replace_text("x");
  ASSERT_TRUE(a.apply(server.encode_since({})));
  a.as_text().insert(0, U"a");
  ASSERT_TRUE(b.apply(a.encode_since({})));
  b.as_text().insert(1, U"b");  // after a's "a": depends on a's op
  ASSERT_TRUE(server.apply(a.encode_since({})));
  ASSERT_TRUE(server.apply(b.encode_since({})));
  const auto refused = [&](const version_vector& at, const char* says) {
    try {
      (void)server.checkout(at);
      ADD_FAILURE() << "checkout accepted a version it never had";
    } catch (const folio::error& e) {
      EXPECT_EQ(e.code(), folio::error_code::value);
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  version_vector unknown = server.version();
  unknown.observe(7, 1);
  refused(unknown, "names operations this document does not hold");
  version_vector ahead;
  ahead.observe(1, server.version().get(1) + 1);
  refused(ahead, "names operations this document does not hold");
  version_vector open;  // b's op without a's, which it names
  open.observe(1, server.version().get(1));
  open.observe(3, 1);
  refused(open, "not causally closed");
}

// ---- what rebase refuses ----------------------------------------------------------------------

template <class F>
void expect_throws(F&& f, folio::error_code code, const char* says) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const folio::error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

TEST(DocumentRebase, RefusesWhatIsNotACheckoutsLastChange) {
  document server(record_type::text, 1);
  server.replace_text("abc");
  const std::string before = server.encode();
  document other_replica(record_type::text, 2);
  ASSERT_TRUE(other_replica.apply(server.encode_since({})));
  const local_change c2 = other_replica.replace_text("abcd");
  expect_throws([&] { server.rebase(other_replica, c2); }, folio::error_code::value, "edited as this document's replica");
  document map(record_type::map, 1);
  const local_change cm = map.set("k", "v");
  expect_throws([&] { server.rebase(map, cm); }, folio::error_code::type, "rebase: the base is a map record");
  document base = server.checkout(server.version());
  const local_change first = base.replace_text("abcd");
  base.replace_text("abcde");
  expect_throws([&] { server.rebase(base, first); }, folio::error_code::value, "not the last edit of the base");
  // A base that is not a checkout of this document: its change refers to what this one lacks.
  document stranger(record_type::text, 1);
  stranger.replace_text("xyz");
  stranger.replace_text("xyz!");
  document fresh(record_type::text, 1);
  fresh.replace_text("q");
  document sb = stranger.checkout(stranger.version());
  const local_change sc = sb.replace_text("x");
  expect_throws([&] { fresh.rebase(sb, sc); }, folio::error_code::value, "the base holds operations of this replica that this document does not");
  document peer(record_type::text, 2);
  peer.replace_text("pq");
  document elsewhere(record_type::text, 1);
  ASSERT_TRUE(elsewhere.apply(peer.encode_since({})));
  document eb = elsewhere.checkout(elsewhere.version());
  const local_change ec = eb.replace_text("pXq");
  expect_throws([&] { server.rebase(eb, ec); }, folio::error_code::value, "that this document does not hold");
  EXPECT_EQ(server.encode(), before);
}

TEST(DocumentRebase, RefusesToPassTwoToThe31BeforeIntegratingAnything) {
  document server(record_type::text, 1);
  server.replace_text("ab");
  const version_vector v = server.version();
  // A peer's op with a Lamport value near 2^31 takes the server's clock there.
  folio::op_batch<char32_t> high;
  high.ops.push_back(folio::op{folio::op_kind::insert, {2, 0}, folio::max_counter - 2, 1, folio::document_start, false});
  high.content.push_back(U'z');
  ASSERT_TRUE(server.apply(folio::encode_batch(high)));
  const std::string before = server.encode();
  const version_vector held = server.version();
  document base = server.checkout(v);
  const local_change c = base.replace_text("a-b-c-d");
  expect_throws([&] { server.rebase(base, c); }, folio::error_code::overflow, "2^31");
  EXPECT_EQ(server.encode(), before);
  EXPECT_EQ(server.version(), held);
  server.check_invariants();
}

// ---- randomized ---------------------------------------------------------------------------------

/// Clients edit at random and send their batches to the server, which integrates some at once and
/// some later; backends rebase replaces computed from checkouts of versions the server had, some of
/// them old. At the end every replica receives every batch (clients in a shuffled order, out of causal
/// order too) and all agree with the server.
void random_history(record_type t, unsigned seed) {
  SCOPED_TRACE(std::string(folio::to_string(t)) + " seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const auto pick = [&](std::size_t n) { return std::size_t(rng() % n); };
  const auto token = [&]() { return std::string(1, char('a' + pick(26))) + std::to_string(pick(100)); };
  document server(t, 1);
  std::vector<document> clients;
  for (replica_id r = 2; r <= 4; ++r) clients.emplace_back(t, r);
  std::vector<std::string> log;                     // every batch made, in the order made
  std::vector<version_vector> history{server.version()};
  std::vector<std::pair<std::size_t, std::string>> held;  // batches the server has not integrated yet
  const auto random_edit = [&](document& d) {
    switch (t) {
      case record_type::text: {
        folio::text& x = d.as_text();
        if (x.size() > 3 && pick(3) == 0) {
          const std::size_t at = pick(x.size() - 1);
          x.erase(at, 1 + pick(std::min<std::size_t>(3, x.size() - at)));
        } else {
          x.insert_utf8(pick(x.size() + 1), token());
        }
        break;
      }
      case record_type::array: {
        folio::array& x = d.as_array();
        if (x.size() > 2 && pick(3) == 0)
          x.erase(pick(x.size()), 1);
        else
          x.insert(pick(x.size() + 1), std::vector<std::string>{token()});
        break;
      }
      case record_type::map:
        if (pick(3) == 0)
          d.remove(std::string(1, char('a' + pick(6))));
        else
          d.set(std::string(1, char('a' + pick(6))), token());
        break;
      case record_type::xml:
        d.replace_xml("<p k=\"" + token() + "\">" + token() + "</p><q>" + token() + "</q>");
        break;
    }
  };
  std::string written;  // what the backend's last write must leave in the server's value at once ("" nothing)
  int writes = 0;
  const auto backend_value = [&](document& base) -> local_change {
    written.clear();
    const std::string mine = "B" + std::to_string(++writes);  // a value no one else writes
    switch (t) {
      case record_type::text: {
        std::string s = base.text();
        s.insert(pick(s.size() + 1), "<" + token() + ">");
        if (s.size() > 6 && pick(2) == 0) s.erase(pick(s.size() - 3), 2);
        return base.replace_text(s);
      }
      case record_type::array: {
        std::vector<std::string> v = base.array();
        v.insert(v.begin() + std::ptrdiff_t(pick(v.size() + 1)), mine);
        if (v.size() > 2 && pick(2) == 0) v.erase(v.begin() + std::ptrdiff_t(pick(v.size())));
        if (std::find(v.begin(), v.end(), mine) != v.end()) written = mine + "|";
        return base.replace_array(v);
      }
      case record_type::map: {
        std::map<std::string, std::string> m = base.map();
        const std::string key(1, char('a' + pick(6)));
        m[key] = mine;
        if (!m.empty() && pick(2) == 0) m.erase(std::next(m.begin(), std::ptrdiff_t(pick(m.size()))));
        if (m.count(key)) written = key + "=" + mine + ";";  // the newest write of the key: it shows
        return base.replace_map(m);
      }
      case record_type::xml:
        break;
    }
    return base.replace_xml("<p k=\"B" + token() + "\">" + token() + "</p>").second;
  };
  for (int round = 0; round < 120; ++round) {
    const std::size_t what = pick(10);
    if (what < 6) {  // a client edits from what it has
      document& c = clients[pick(clients.size())];
      const version_vector before = c.version();
      random_edit(c);
      std::string b = c.encode_since(before);
      log.push_back(b);
      held.emplace_back(log.size() - 1, std::move(b));
    } else if (what < 8 && !held.empty()) {  // the server integrates a held batch
      const std::size_t i = pick(held.size());
      ASSERT_TRUE(server.apply(held[i].second));
      held.erase(held.begin() + std::ptrdiff_t(i));
      if (server.pending() == 0) history.push_back(server.version());
    } else if (what < 9) {  // a backend writes from a version the server had
      const version_vector& at = history[pick(history.size())];
      document base = server.checkout(at);
      const local_change c = backend_value(base);
      const version_vector before = server.version();
      const local_change r = server.rebase(base, c);
      EXPECT_EQ(r.first, before.get(1));
      EXPECT_NE(value_of(server).find(written), std::string::npos) << "the backend's write " << written << " is not in " << value_of(server);
      if (!r.empty()) log.push_back(server.encode_change(r));
      history.push_back(server.version());
    } else {  // a client catches up with the server (its own batches come back as duplicates)
      document& c = clients[pick(clients.size())];
      ASSERT_TRUE(c.apply(server.encode_since(c.version())));
    }
  }
  for (auto& [i, b] : held) ASSERT_TRUE(server.apply(b));
  ASSERT_EQ(server.pending(), 0u);
  server.check_invariants();
  for (document& c : clients) {
    std::vector<std::string> in = log;
    std::shuffle(in.begin(), in.end(), rng);
    for (const std::string& b : in) ASSERT_TRUE(c.apply(b));
    EXPECT_EQ(c.pending(), 0u);
    EXPECT_EQ(c.version(), server.version());
    EXPECT_EQ(value_of(c), value_of(server));
    c.check_invariants();
  }
  EXPECT_EQ(value_of(round_trip(server, 6)), value_of(server));
}

TEST(DocumentRebase, RandomConcurrentEditsAndRebasedReplacesConverge) {
  for (unsigned seed = 1; seed <= 12; ++seed)
    for (record_type t : {record_type::text, record_type::array, record_type::map, record_type::xml}) random_history(t, seed);
}

}  // namespace

// ---- encodings that keep removed values (format version 3) ----------------------------------

namespace all_values {

using folio::decode_result;
using folio::decode_status;
using folio::kept_values;

/// A text and an array record with removed items: `old` is the version at which they were live.
struct history {
  document d;
  version_vector old;
  std::string old_value;
};
history removed_items(record_type t) {
  history h{document(t, 1, "body"), {}, {}};
  if (t == record_type::text) {
    h.d.replace_text("Hello wörld 😀 and more");
    h.old = h.d.version(), h.old_value = h.d.text();
    h.d.replace_text("Hi");
  } else {
    h.d.replace_array({"1", "{\"k\":2}", "3", "4"});
    h.old = h.d.version(), h.old_value = value_of(h.d);
    h.d.replace_array({"3"});
  }
  return h;
}

std::optional<document> decoded(const std::string& bytes, decode_result* why = nullptr) {
  std::optional<document> out;
  const decode_result r = document::decode(bytes, 1, out);
  if (why) *why = r;
  return out;
}

TEST(DocumentAllValues, RoundTripKeepsRemovedValuesForCheckout) {
  for (record_type t : {record_type::text, record_type::array}) {
    SCOPED_TRACE(std::string(folio::to_string(t)));
    history h = removed_items(t);
    const std::string all = h.d.encode(kept_values::all), live = h.d.encode();
    EXPECT_EQ(all[2], 3);
    EXPECT_EQ(live[2], 2);
    EXPECT_EQ(live, h.d.encode(kept_values::live));
    EXPECT_EQ(all.substr(3, live.size() - 3), live.substr(3));  // version 2, then one more section
    std::optional<document> e = decoded(all);
    ASSERT_TRUE(e);
    e->check_invariants();
    EXPECT_EQ(value_of(*e), value_of(h.d));
    EXPECT_EQ(e->content_key(), "body");
    EXPECT_EQ(value_of(e->checkout(h.old)), h.old_value);
    EXPECT_EQ(e->encode(kept_values::all), all);
    EXPECT_EQ(e->encode(), live);
    EXPECT_EQ(e->encode_since({}), h.d.encode_since({}));  // batches carry the real values again
    // Version 2 still decodes; its removed items are placeholders, so the old value is not there.
    std::optional<document> v2 = decoded(live);
    ASSERT_TRUE(v2);
    EXPECT_EQ(value_of(*v2), value_of(h.d));
    const std::string at_old = value_of(v2->checkout(h.old));
    EXPECT_NE(at_old, h.old_value);
    // A version 3 copy of the version 2 one keeps what it has: placeholders.
    std::optional<document> again = decoded(v2->encode(kept_values::all));
    ASSERT_TRUE(again);
    EXPECT_EQ(value_of(again->checkout(h.old)), at_old);
  }
}

TEST(DocumentAllValues, MapAndXmlKeepEveryValueAlready) {
  for (record_type t : {record_type::map, record_type::xml}) {
    SCOPED_TRACE(std::string(folio::to_string(t)));
    document d(t, 1);
    if (t == record_type::map) {
      d.replace_map({{"a", "1"}, {"b", "2"}});
    } else {
      d.replace_xml("<p x=\"1\">old text</p><q/>");
    }
    const version_vector old = d.version();
    const std::string old_value = value_of(d);
    if (t == record_type::map) {
      d.replace_map({{"a", "3"}});
    } else {
      d.replace_xml("<p x=\"2\">new</p>");
    }
    EXPECT_EQ(d.encode(kept_values::all), d.encode());
    std::optional<document> e = decoded(d.encode());
    ASSERT_TRUE(e);
    EXPECT_EQ(value_of(*e), value_of(d));
    EXPECT_EQ(value_of(e->checkout(old)), old_value);
  }
}

/// The version 2 encoding of `h.d` marked version 3, followed by `removed_section` (raw bytes).
std::string v3_with(const history& h, const std::string& removed_section) {
  std::string bytes = h.d.encode();
  bytes[2] = 3;
  return bytes + removed_section;
}

void expect_refused(const std::string& bytes, decode_status status, const char* detail) {
  decode_result r;
  EXPECT_FALSE(decoded(bytes, &r));
  EXPECT_EQ(r.status, status) << r.description();
  EXPECT_STREQ(r.detail, detail) << r.description();
}

TEST(DocumentAllValues, MalformedVersion3IsRefusedSayingWhy) {
  history text = removed_items(record_type::text), array = removed_items(record_type::array);
  const auto section = [](const std::string& raw) {
    std::string s;
    folio::detail::put_section(s, raw);
    return s;
  };
  const auto text_content = [](const std::string& utf8) {
    std::string raw;
    folio::detail::put_string(raw, utf8);
    return raw;
  };
  // No section at all: the version 2 bytes marked 3.
  expect_refused(v3_with(text, ""), decode_status::truncated, "removed values");
  // A count that is not the removed items'.
  expect_refused(v3_with(text, section(text_content("x"))), decode_status::inconsistent, "removed value count differs from the op log");
  std::string one_value;
  folio::detail::put_varint(one_value, 1);
  folio::detail::put_string(one_value, std::string("9"));
  expect_refused(v3_with(array, section(one_value)), decode_status::inconsistent, "removed value count differs from the op log");
  // Strict UTF-8 (a lone continuation byte, a surrogate).
  expect_refused(v3_with(text, section(text_content("ab\x80"))), decode_status::inconsistent, "text content is not valid UTF-8");
  expect_refused(v3_with(text, section(text_content("\xED\xA0\x80"))), decode_status::inconsistent, "text content is not valid UTF-8");
  // Bytes after the values inside the section, and after the section.
  const std::string all = text.d.encode(kept_values::all);
  expect_refused(all + "x", decode_status::trailing_bytes, "after document");
  std::optional<document> ok = decoded(all);
  ASSERT_TRUE(ok);
  std::string removed_raw;
  const std::string live = text.d.encode();
  {  // the section as written, with one byte more inside it
    folio::detail::byte_reader r(std::string_view(all).substr(live.size()));
    std::string buffer;
    folio::detail::section s;
    ASSERT_TRUE(folio::detail::read_section(r, buffer, s, "removed values"));
    removed_raw.assign(s.bytes);
  }
  expect_refused(v3_with(text, section(removed_raw + "!")), decode_status::trailing_bytes, "after the removed values");
  // A section claiming more than the op log's items could hold is refused before it is read.
  std::string huge;
  huge.push_back(0);  // stored
  folio::detail::put_varint(huge, std::uint64_t(1) << 40);
  expect_refused(v3_with(text, huge), decode_status::too_large, "removed values");
  // Version 3 is a text and array document's only; versions past 3 are unknown.
  document m(record_type::map, 1);
  m.set("a", "1");
  std::string map3 = m.encode();
  map3[2] = 3;
  expect_refused(map3, decode_status::bad_magic, "format version");
  std::string v4 = all;
  v4[2] = 4;
  expect_refused(v4, decode_status::bad_magic, "format version");
  std::string batch3 = text.d.encode_since({});
  batch3[2] = 3;
  EXPECT_FALSE(document(record_type::text, 2).apply(batch3));
}

}  // namespace all_values

// ---- every item with its removes: what a diff between two versions reads -------------------------

namespace {
/// The text at `v` from the walk alone: the items whose insert v holds and none of whose removes.
std::string text_at(const document& d, const version_vector& v) {
  std::string out;
  d.as_text().for_each_item_with_removes([&](folio::op_id id, char32_t c, const std::vector<folio::op_id>& removes) {
    const bool removed = std::any_of(removes.begin(), removes.end(), [&](folio::op_id r) { return v.contains(r); });
    if (v.contains(id) && !removed) folio::append_utf8(out, c);
  });
  return out;
}
}  // namespace

TEST(DocumentItems, EveryItemInOrderWithTheRemovesThatTargetedIt) {
  document a(record_type::text, 1), b(record_type::text, 2);
  a.as_text().insert_utf8(0, "abcd");  // items (1,0..3)
  ASSERT_TRUE(b.apply(a.encode_since({})));
  b.as_text().erase(1, 2);  // removes b and c: (2,0), (2,1)
  a.as_text().erase(2, 1);  // removes c concurrently: (1,4)
  ASSERT_TRUE(a.apply(b.encode_since({})));
  ASSERT_TRUE(b.apply(a.encode_since({})));
  for (const document* d : {&a, &b}) {  // the same walk on both replicas
    std::vector<std::pair<folio::op_id, std::vector<folio::op_id>>> seen;
    std::u32string values;
    d->as_text().for_each_item_with_removes([&](folio::op_id id, char32_t c, const std::vector<folio::op_id>& removes) {
      std::vector<folio::op_id> sorted = removes;
      std::sort(sorted.begin(), sorted.end());
      seen.emplace_back(id, sorted);
      values += c;
    });
    EXPECT_EQ(values, U"abcd");
    ASSERT_EQ(seen.size(), 4u);
    EXPECT_EQ(seen[0], (std::pair<folio::op_id, std::vector<folio::op_id>>{{1, 0}, {}}));
    EXPECT_EQ(seen[1], (std::pair<folio::op_id, std::vector<folio::op_id>>{{1, 1}, {{2, 0}}}));
    EXPECT_EQ(seen[2], (std::pair<folio::op_id, std::vector<folio::op_id>>{{1, 2}, {{1, 4}, {2, 1}}}));
    EXPECT_EQ(seen[3], (std::pair<folio::op_id, std::vector<folio::op_id>>{{1, 3}, {}}));
  }
}

TEST(DocumentItems, LiveAtAVersionIsTheCheckoutsText) {
  std::mt19937 rng(51);
  document server(record_type::text, 1), a(record_type::text, 2), b(record_type::text, 3);
  std::vector<version_vector> versions{server.version()};
  for (int round = 0; round < 60; ++round) {
    for (document* d : {&a, &b, &server}) {
      folio::text& t = d->as_text();
      if (t.size() > 3 && rng() % 3 == 0)
        t.erase(rng() % (t.size() - 2), 1 + rng() % 2);
      else
        t.insert_utf8(t.size() ? rng() % t.size() : 0, std::string(1, char('a' + rng() % 26)) + "é");
    }
    ASSERT_TRUE(server.apply(a.encode_since(server.version())));
    ASSERT_TRUE(server.apply(b.encode_since(server.version())));
    if (round % 2) {
      ASSERT_TRUE(a.apply(server.encode_since(a.version())));
    }
    if (round % 3) {
      ASSERT_TRUE(b.apply(server.encode_since(b.version())));
    }
    versions.push_back(server.version());
  }
  const std::optional<document> decoded_all = [&] {
    std::optional<document> out;
    EXPECT_TRUE(document::decode(server.encode(folio::kept_values::all), 1, out));
    return out;
  }();
  ASSERT_TRUE(decoded_all);
  for (const version_vector& v : versions) {
    const std::string expected = server.checkout(v).text();
    EXPECT_EQ(text_at(server, v), expected);
    EXPECT_EQ(text_at(*decoded_all, v), expected);
  }
}

TEST(DocumentItems, XmlElementsPairByTheirInsertAcrossCheckouts) {
  document d(record_type::xml, 1);
  ASSERT_TRUE(d.replace_xml(R"(<doc><p class="a">x</p><q/></doc>)").first);
  const version_vector v1 = d.version();
  ASSERT_TRUE(d.replace_xml(R"(<doc><p class="b">x</p><h1/></doc>)").first);
  const auto elements = [](const document& doc) {
    std::vector<std::tuple<folio::op_id, std::string, std::map<std::string, std::string>>> out;
    doc.for_each_xml_element([&](folio::op_id id, std::string_view tag, const std::map<std::string, std::string>& a) { out.emplace_back(id, tag, a); });
    return out;
  };
  const auto before = elements(d.checkout(v1)), after = elements(d);
  ASSERT_EQ(before.size(), 3u);  // doc, p, q: an element before its children
  ASSERT_EQ(after.size(), 3u);   // doc, p, h1
  EXPECT_EQ(std::get<1>(before[0]), "doc");
  EXPECT_EQ(std::get<1>(before[2]), "q");
  EXPECT_EQ(std::get<1>(after[2]), "h1");
  EXPECT_EQ(std::get<0>(before[1]), std::get<0>(after[1]));  // p kept its id, its attribute changed
  EXPECT_EQ(std::get<2>(before[1]).at("class"), "a");
  EXPECT_EQ(std::get<2>(after[1]).at("class"), "b");
  EXPECT_NE(std::get<0>(before[2]), std::get<0>(after[2]));
}

TEST(DocumentItems, MapChangesNameTheirKeys) {
  document a(record_type::map, 1), b(record_type::map, 2);
  a.set("k", "1");
  ASSERT_TRUE(b.apply(a.encode_since({})));
  b.set("k", "2");
  b.remove("k");
  a.set("j", "3");
  ASSERT_TRUE(a.apply(b.encode_since({})));
  std::vector<std::pair<folio::op_id, std::string>> seen;
  a.for_each_map_change([&](folio::op_id id, std::string_view key) { seen.emplace_back(id, std::string(key)); });
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<std::pair<folio::op_id, std::string>>{{{1, 0}, "k"}, {{1, 1}, "j"}, {{2, 0}, "k"}, {{2, 1}, "k"}}));
}
