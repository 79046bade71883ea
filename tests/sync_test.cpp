// sync_client (folio/sync.hpp) against a model of the server's /v2/crdt/sync and its pushes: the same
// rules as service/crdt/handlers.cpp (an update is integrated whole or refused; the answer is what the
// client's version lacks; every change is published with the server's version after it); and that answer
// written in pieces (document::encode_since with a writer), as the server streams it.
#include <folio/document.hpp>
#include <folio/sync.hpp>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace {

using folio::push_status;
using folio::record_type;
using folio::sync_client;

struct pushed {
  std::string update;
  folio::version_vector version;
};

enum class outcome { ok, invalid, refused, aborted };

/// The service's rule for the values a push gives array items and map entries (json_value_rule in
/// service/wire/crdt_values.cpp), as far as these tests need it: the empty string — an array placeholder — is
/// never JSON.
std::string model_value_rule(std::string_view v) { return v.empty() ? "array item is not valid JSON" : ""; }

/// A client restarted from its saved state.
sync_client reload(const std::string& saved) {
  std::optional<sync_client> c;
  EXPECT_TRUE(sync_client::load(saved, c));
  if (!c) throw std::runtime_error("saved state does not load");
  return std::move(*c);
}

folio::document clone(const folio::document& d) {  // documents are move-only; copy through the encoding
  std::optional<folio::document> out;
  EXPECT_TRUE(folio::document::decode(d.encode(), d.replica(), out));
  return std::move(*out);
}

/// The server: one document, a sync step that never half-applies, and the messages it would publish.
/// The record's incarnation is its server replica's id, as in the service.
struct server_model {
  folio::document d;
  std::string incarnation = "1000";
  std::vector<pushed> channel;

  explicit server_model(record_type t) : d(t, 1000) {}

  /// The record deleted and added again with `value` (text): a new server replica, a new incarnation.
  void add_again(const std::string& value) {
    d = folio::document(d.type(), d.replica() + 1);
    incarnation = std::to_string(d.replica());
    rest_text(value);
  }

  outcome sync(sync_client& c) {
    const folio::sync_request q = c.request();
    if (q.incarnation.empty() && (!q.update.empty() || !q.version.empty())) return outcome::invalid;  // incarnation is required
    if (!q.incarnation.empty() && q.incarnation != incarnation) return outcome::aborted;
    const std::string answer = d.encode_since(q.version);  // before integrating: the client has its own ops
    if (!q.update.empty()) {
      folio::document next = clone(d);
      const folio::version_vector before = d.version();
      const folio::apply_result r = next.apply(q.update, model_value_rule);
      if (!r) return outcome::invalid;
      if (next.pending() != 0) {
        c.on_refused();
        return outcome::refused;
      }
      d = std::move(next);
      if (d.version() != before) channel.push_back({d.encode_since(before), d.version()});
    }
    EXPECT_TRUE(c.on_answer(answer, d.version(), incarnation));
    return outcome::ok;
  }
  /// A change made on the server itself (a REST update), published.
  void rest_text(const std::string& v) {
    const folio::version_vector before = d.version();
    d.replace_text(v);
    channel.push_back({d.encode_since(before), d.version()});
  }
};

void expect_same(const folio::document& a, const folio::document& b) {
  switch (a.type()) {
    case record_type::text: EXPECT_EQ(a.text(), b.text()); break;
    case record_type::array: EXPECT_EQ(a.array(), b.array()); break;
    case record_type::map: EXPECT_EQ(a.map(), b.map()); break;
    case record_type::xml: EXPECT_EQ(a.xml(), b.xml()); break;
  }
  EXPECT_EQ(a.version(), b.version());
  a.check_invariants();
  b.check_invariants();
}

TEST(SyncClient, TwoOfflineTextEditorsConvergeInBothSyncOrders) {
  for (int order = 0; order < 2; ++order) {
    server_model s(record_type::text);
    s.rest_text("the quick fox");
    sync_client a(record_type::text, 1), b(record_type::text, 2);
    s.sync(a), s.sync(b);
    ASSERT_EQ(a.doc().text(), "the quick fox");
    // Offline, interleaved inserts and deletes at the same places.
    a.doc().as_text().insert_utf8(4, "very ");
    b.doc().as_text().insert_utf8(4, "slow ");
    a.doc().as_text().erase(0, 4);
    b.doc().as_text().erase(10, 3);
    b.doc().as_text().insert_utf8(0, ">");
    a.doc().as_text().insert_utf8(a.doc().text().size(), "!");
    EXPECT_TRUE(a.needs_sync());
    sync_client& first = order ? b : a;
    sync_client& second = order ? a : b;
    ASSERT_EQ(s.sync(first), outcome::ok);
    ASSERT_EQ(s.sync(second), outcome::ok);
    ASSERT_EQ(s.sync(first), outcome::ok);
    expect_same(a.doc(), s.d);
    expect_same(b.doc(), s.d);
    EXPECT_FALSE(a.needs_sync());
    EXPECT_FALSE(b.needs_sync());
  }
}

TEST(SyncClient, EveryTypeConvergesThroughSyncAndPushes) {
  for (record_type t : {record_type::text, record_type::array, record_type::map, record_type::xml}) {
    SCOPED_TRACE(std::string(folio::to_string(t)));
    server_model s(t);
    sync_client a(t, 1), b(t, 2);
    s.sync(a), s.sync(b);
    for (int round = 0; round < 3; ++round) {
      const std::string r = std::to_string(round);
      switch (t) {
        case record_type::text:
          a.doc().as_text().insert_utf8(0, "a" + r);
          b.doc().as_text().insert_utf8(0, "b" + r);
          break;
        case record_type::array:
          a.doc().as_array().insert(0, "{\"a\":" + r + "}");
          b.doc().as_array().insert(0, "{\"b\":" + r + "}");
          break;
        case record_type::map:
          a.doc().set("k", "\"a" + r + "\"");
          b.doc().set("k", "\"b" + r + "\"");
          b.doc().set("b" + r, "1");
          if (round) a.doc().remove("b0");
          break;
        case record_type::xml:
          a.doc().replace_xml("<p x=\"a" + r + "\">a" + r + "</p>");
          b.doc().replace_xml("<p y=\"b" + r + "\">b" + r + "</p><q/>");
          break;
      }
      const std::size_t seen = s.channel.size();
      ASSERT_EQ(s.sync(round % 2 ? b : a), outcome::ok);
      // The other client hears about it by push, then pushes its own edit.
      for (std::size_t i = seen; i < s.channel.size(); ++i) (round % 2 ? a : b).on_push(s.channel[i].update, s.channel[i].version, s.incarnation);
      ASSERT_EQ(s.sync(round % 2 ? a : b), outcome::ok);
      for (std::size_t i = seen; i < s.channel.size(); ++i) (round % 2 ? b : a).on_push(s.channel[i].update, s.channel[i].version, s.incarnation);
      expect_same(a.doc(), s.d);
      expect_same(b.doc(), s.d);
      EXPECT_FALSE(a.needs_sync());
      EXPECT_FALSE(b.needs_sync());
    }
  }
}

TEST(SyncClient, AMissedPushIsAGapEvenWhenTheNextChangeDoesNotDependOnIt) {
  server_model s(record_type::map);
  sync_client watcher(record_type::map, 1), a(record_type::map, 2), b(record_type::map, 3);
  s.sync(watcher), s.sync(a), s.sync(b);
  a.doc().set("x", "1");
  s.sync(a);  // published; the watcher misses it
  b.doc().set("y", "2");
  s.sync(b);  // independent of a's change
  ASSERT_EQ(s.channel.size(), 2u);
  EXPECT_EQ(watcher.on_push(s.channel[1].update, s.channel[1].version, s.incarnation), push_status::gap);
  EXPECT_TRUE(watcher.needs_sync());
  ASSERT_EQ(s.sync(watcher), outcome::ok);
  EXPECT_FALSE(watcher.needs_sync());
  expect_same(watcher.doc(), s.d);
}

TEST(SyncClient, OutOfOrderPushesArePendingUntilTheGapIsFilled) {
  server_model s(record_type::text);
  sync_client w(record_type::text, 1);
  s.sync(w);
  s.rest_text("one");
  s.rest_text("one two");
  s.rest_text("one two three");
  EXPECT_EQ(w.on_push(s.channel[2].update, s.channel[2].version, s.incarnation), push_status::gap);
  EXPECT_GT(w.doc().pending(), 0u);
  EXPECT_EQ(w.doc().text(), "");
  EXPECT_EQ(w.on_push(s.channel[0].update, s.channel[0].version, s.incarnation), push_status::applied);  // covers its own version
  EXPECT_EQ(w.doc().text(), "one");
  EXPECT_EQ(w.on_push(s.channel[1].update, s.channel[1].version, s.incarnation), push_status::applied);  // releases #2
  EXPECT_EQ(w.doc().text(), "one two three");
  EXPECT_EQ(w.doc().pending(), 0u);
  // Still flagged: a gap was seen, and only a sync clears it.
  EXPECT_TRUE(w.needs_sync());
  s.sync(w);
  EXPECT_FALSE(w.needs_sync());
  // Delivered twice (a reconnect replaying the buffer): duplicates, nothing changes.
  EXPECT_EQ(w.on_push(s.channel[1].update, s.channel[1].version, s.incarnation), push_status::applied);
  expect_same(w.doc(), s.d);
}

TEST(SyncClient, AnInvalidPushChangesNothingAndAsksForASync) {
  server_model s(record_type::text);
  sync_client w(record_type::text, 1);
  s.rest_text("abc");
  s.sync(w);
  EXPECT_EQ(w.on_push("not a batch", s.d.version(), s.incarnation), push_status::invalid);
  EXPECT_EQ(w.doc().text(), "abc");
  EXPECT_TRUE(w.needs_sync());
  folio::document map_doc(record_type::map, 9);
  map_doc.set("k", "1");
  EXPECT_EQ(w.on_push(map_doc.encode_since({}), s.d.version(), s.incarnation), push_status::invalid);
}

TEST(SyncClient, APushTheServerCannotIntegrateIsRefusedThenResentAfterAPull) {
  // The server lost ops the client already had (restored from an older backup).
  server_model s(record_type::text);
  sync_client c(record_type::text, 1);
  s.rest_text("hello");
  folio::document backup = clone(s.d);
  s.rest_text("hello world");
  s.sync(c);
  s.d = std::move(backup);
  c.doc().as_text().insert_utf8(11, "!");  // depends on " world", which the server no longer has
  EXPECT_EQ(s.sync(c), outcome::refused);
  EXPECT_EQ(s.d.text(), "hello");  // never half-applied
  EXPECT_TRUE(c.request().update.empty());  // the next request is a pull
  ASSERT_EQ(s.sync(c), outcome::ok);
  EXPECT_TRUE(c.needs_sync());  // and now it knows what the server lacks
  ASSERT_EQ(s.sync(c), outcome::ok);
  EXPECT_EQ(s.d.text(), "hello world!");
  expect_same(c.doc(), s.d);
}

TEST(SyncClient, RequestsPushOnlyWhatTheServerLacks) {
  server_model s(record_type::text);
  sync_client c(record_type::text, 1);
  s.rest_text(std::string(1000, 'x'));
  s.sync(c);
  EXPECT_TRUE(c.request().update.empty());
  c.doc().as_text().insert_utf8(500, "y");
  const folio::sync_request q = c.request();
  EXPECT_LT(q.update.size(), 40u);
  s.sync(c);
  EXPECT_TRUE(c.request().update.empty());
}

TEST(SyncClient, SavedStateRestoresTheReplicaAndItsServerVersion) {
  server_model s(record_type::xml);
  sync_client c(record_type::xml, 77, "default");
  s.sync(c);
  c.doc().replace_xml("<p>hi</p>");
  const std::string saved = c.save();
  std::optional<sync_client> back;
  ASSERT_TRUE(sync_client::load(saved, back));
  EXPECT_EQ(back->doc().replica(), 77u);
  EXPECT_EQ(back->doc().content_key(), "default");
  EXPECT_EQ(back->doc().xml(), "<p>hi</p>");
  EXPECT_EQ(back->server_version(), c.server_version());
  EXPECT_EQ(back->incarnation(), c.incarnation());
  EXPECT_FALSE(back->request().update.empty());
  ASSERT_EQ(s.sync(*back), outcome::ok);
  expect_same(back->doc(), s.d);
  // Every truncation of the state is refused with an offset, never a crash.
  for (std::size_t n = 0; n < saved.size(); ++n) {
    std::optional<sync_client> bad;
    EXPECT_FALSE(sync_client::load(saved.substr(0, n), bad)) << n;
    EXPECT_FALSE(bad);
  }
}

TEST(SyncClient, ANewClientPullsFromTheEmptyVersionBeforeItPushesItsOfflineEdits) {
  server_model s(record_type::text);
  s.rest_text("server");
  sync_client c(record_type::text, 5);
  c.doc().as_text().insert_utf8(0, "offline ");  // before the client ever synced
  const folio::sync_request first = c.request();
  EXPECT_TRUE(first.version.empty());
  EXPECT_TRUE(first.update.empty());
  EXPECT_TRUE(first.incarnation.empty());
  ASSERT_EQ(s.sync(c), outcome::ok);
  EXPECT_EQ(c.incarnation(), "1000");
  EXPECT_TRUE(c.needs_sync());  // its own ops are still to be pushed
  EXPECT_EQ(c.request().incarnation, "1000");
  ASSERT_EQ(s.sync(c), outcome::ok);
  EXPECT_FALSE(c.needs_sync());
  expect_same(c.doc(), s.d);
  // A push before the first answer cannot be told apart from another incarnation's: a gap.
  sync_client fresh(record_type::text, 6);
  EXPECT_EQ(fresh.on_push(s.channel.back().update, s.channel.back().version, s.incarnation), push_status::gap);
  EXPECT_EQ(fresh.doc().text(), "");
}

TEST(SyncClient, AClientOfARecordAddedAgainIsToldAndNeverMerged) {
  server_model s(record_type::text);
  s.rest_text("old record");
  sync_client c(record_type::text, 5);
  ASSERT_EQ(s.sync(c), outcome::ok);
  c.doc().as_text().insert_utf8(0, "edit ");
  s.add_again("new record");
  // The new record's change, pushed: another incarnation; nothing applied.
  EXPECT_EQ(c.on_push(s.channel.back().update, s.channel.back().version, s.incarnation), push_status::recreated);
  EXPECT_EQ(c.doc().text(), "edit old record");
  // Its sync names the old incarnation, which the server refuses; an answer of another incarnation
  // changes nothing either.
  EXPECT_EQ(c.request().incarnation, "1000");
  EXPECT_EQ(s.sync(c), outcome::aborted);
  EXPECT_FALSE(c.on_answer(s.d.encode_since({}), s.d.version(), s.incarnation));
  EXPECT_EQ(c.doc().text(), "edit old record");
  EXPECT_EQ(s.d.text(), "new record");
  // A new client joins the new record.
  sync_client again(record_type::text, 6);
  ASSERT_EQ(s.sync(again), outcome::ok);
  EXPECT_EQ(again.doc().text(), "new record");
  EXPECT_EQ(again.incarnation(), s.incarnation);
}

TEST(SyncClient, ARestartedClientSendsItsUnacknowledgedOpsAgainAndNeverReusesTheirIds) {
  // The client edits, saves, sends; the answer is lost (the process dies), whether the push reached
  // the server or not. Restarted from the state it saved before sending, it still has the op it sent:
  // its next edit takes the next id, and the op goes again under its own (a duplicate if the server has
  // it). Restarted from a state saved before the edit instead — the contract broken — its next edit
  // takes the id of the op the server has, with other content: refused, never skipped as a duplicate
  // (which would leave the client and the server different for good, every sync succeeding).
  for (const bool reached : {false, true}) {
    SCOPED_TRACE(reached ? "the push reached the server" : "the push was lost");
    server_model s(record_type::text);
    s.rest_text("base");
    sync_client c(record_type::text, 5);
    ASSERT_EQ(s.sync(c), outcome::ok);
    const std::string before_edit = c.save();
    c.doc().as_text().insert_utf8(4, " one");
    const std::string saved = c.save();
    const folio::sync_request q = c.request();
    if (reached) {
      ASSERT_TRUE(s.d.apply(q.update));
    }
    sync_client back = reload(saved);
    EXPECT_EQ(back.incarnation(), "1000");
    const folio::local_change two = back.doc().as_text().insert_utf8(8, " two");
    EXPECT_EQ(two.first, q.version.get(5));  // the first id after every op sent
    ASSERT_EQ(s.sync(back), outcome::ok);
    EXPECT_EQ(s.d.text(), "base one two");
    expect_same(back.doc(), s.d);

    sync_client stale = reload(before_edit);
    const folio::local_change uno = stale.doc().as_text().insert_utf8(4, " uno");
    EXPECT_LT(uno.first, q.version.get(5));  // an id the server has, for another op
    EXPECT_EQ(s.sync(stale), outcome::invalid);
    EXPECT_EQ(s.d.text(), "base one two");
  }
}

TEST(SyncClient, AnUnacknowledgedItemRemovedAfterARestartIsSentAgainWithoutItsValueAndTaken) {
  // The client inserts, saves, sends; the answer is lost. The next run removes the item and saves: the
  // state keeps no value for it (no document encoding keeps the values of removed items), so the
  // insert goes again with a placeholder — for an array the empty string, never JSON — along with its
  // remove. Nothing can ever show that value, so the server does not judge it, whether the first push
  // reached it (the insert is a duplicate) or not (the batch removes it). Judged, it would be refused on
  // every sync: the client would be stuck for good.
  for (const record_type t : {record_type::array, record_type::text})
    for (const bool reached : {false, true}) {
      SCOPED_TRACE(std::string(folio::to_string(t)) + (reached ? ": the push reached the server" : ": the push was lost"));
      server_model s(t);
      sync_client c(t, 5);
      ASSERT_EQ(s.sync(c), outcome::ok);
      if (t == record_type::array)
        c.doc().as_array().insert(0, "{\"b\":2}");
      else
        c.doc().as_text().insert_utf8(0, "b");
      const std::string saved = c.save();
      if (reached) {
        ASSERT_TRUE(s.d.apply(c.request().update, model_value_rule));
      }
      sync_client next = reload(saved);
      if (t == record_type::array)
        next.doc().as_array().erase(0, 1);
      else
        next.doc().as_text().erase(0, 1);
      sync_client last = reload(next.save());
      ASSERT_EQ(s.sync(last), outcome::ok);
      EXPECT_FALSE(last.needs_sync());
      expect_same(last.doc(), s.d);
      EXPECT_EQ(s.d.version().get(5), 2u);
      EXPECT_TRUE(t == record_type::array ? s.d.array().empty() : s.d.text().empty());
      // The other way round, a placeholder can be what the server holds: it decoded its copy. The
      // client that still has the value sends it again: a duplicate, not another value.
      s.d = clone(s.d);
      ASSERT_EQ(s.sync(c), outcome::ok);
      expect_same(c.doc(), s.d);
    }
}

TEST(SyncClient, OnlyTheClientsOwnEditsJoinTheRecordItsFirstAnswerNames) {
  // Before its first answer a client names no record; that answer's incarnation is the one its state
  // joins. That is right for the edits it made before (a new client's, or ones saved before the first
  // answer), and for nothing else: a document from elsewhere is of some record, maybe one deleted
  // since. So no constructor takes one, and a client or a saved state holding other replicas' ops
  // with no incarnation is refused, never merged into whichever record answers.
  EXPECT_FALSE((std::is_constructible_v<sync_client, folio::document, std::string>));
  server_model s(record_type::text);
  s.rest_text("server");
  sync_client fresh(record_type::text, 5);
  fresh.doc().as_text().insert_utf8(0, "offline ");
  sync_client back = reload(fresh.save());
  ASSERT_EQ(s.sync(back), outcome::ok);
  ASSERT_EQ(s.sync(back), outcome::ok);
  EXPECT_NE(s.d.text().find("offline "), std::string::npos);
  expect_same(back.doc(), s.d);

  folio::document old_record(record_type::text, 9);
  old_record.replace_text("old record");
  sync_client other(record_type::text, 6);
  ASSERT_TRUE(other.doc().apply(old_record.encode_since({})));
  const std::string state = other.save();
  std::optional<sync_client> bad;
  const folio::decode_result r = sync_client::load(state, bad);
  EXPECT_FALSE(r);
  EXPECT_EQ(r.description(), "inconsistent at byte 7 (client state of no incarnation holds operations of other replicas)");
  EXPECT_FALSE(bad);
  const folio::apply_result a = other.on_answer(s.d.encode_since({}), s.d.version(), s.incarnation);
  EXPECT_FALSE(a);
  EXPECT_EQ(a.message, "this client names no incarnation but holds operations of other replicas");
  EXPECT_EQ(other.incarnation(), "");
  EXPECT_EQ(other.doc().text(), "old record");
}

TEST(SyncClient, AStateOfFormat1IsRefusedForItNamesNoIncarnation) {
  std::string v1 = "FoC";
  v1.push_back(1);
  std::optional<sync_client> out;
  const folio::decode_result r = sync_client::load(v1 + "\x05\x00", out);
  EXPECT_FALSE(r);
  EXPECT_EQ(r.description(), "not a Folio encoding at byte 3 (client state of format 1, which names no incarnation: start a new client)");
  EXPECT_FALSE(out);
}

TEST(SyncClient, RandomReplicaIdsAreNonZeroAndFitSigned64) {
  for (int i = 0; i < 100; ++i) {
    const folio::replica_id r = folio::random_replica_id();
    EXPECT_NE(r, 0u);
    EXPECT_LT(r, folio::replica_id(1) << 63);
  }
}

// ---- what a peer lacks, written in pieces -----------------------------------------------------------

// encode_since(since, upto, write, piece) hands on the bytes of encode_since(since) (cut at `upto`),
// whatever the piece size, for every record type, from every version a peer may hold: the empty one,
// one that holds part of each replica, and one ahead of the record; through the gathered picks and
// through the scan of the log that a version lacking many units takes. And cut at the version before a
// batch, it is what encode_since answered before the batch was applied (what crdt/sync answers a push).
TEST(EncodeSince, InPiecesWritesTheSameBytes) {
  using folio::document;
  std::mt19937 rng(49);
  const auto pieces = [](const document& d, const folio::version_vector& since, const folio::version_vector* upto, std::size_t piece) {
    std::string all;
    std::size_t calls = 0;
    d.encode_since(since, upto, [&](std::string_view b) {
      EXPECT_FALSE(b.empty());
      all += b, ++calls;
    }, piece);
    EXPECT_GE(calls, 1u);
    return all;
  };
  for (record_type t : {record_type::text, record_type::array, record_type::map, record_type::xml}) {
    SCOPED_TRACE(std::string(folio::to_string(t)));
    for (const int units : {40, 70'000}) {  // above 2^16 units lacking: the scan of the log
      document a(t, 11), b(t, 22);
      const auto edit = [&](document& d, int round) {
        const std::string n = std::to_string(round);
        switch (t) {
          case record_type::text: {
            std::string v;
            for (int i = 0; i < units / 4; ++i) v += char('a' + rng() % 26);
            v += "é€😀" + n;
            d.replace_text(v);
            break;
          }
          case record_type::array: {
            std::vector<std::string> v;
            for (int i = 0; i < units / 4; ++i) v.push_back(std::to_string(rng() % 50));
            d.replace_array(v);
            break;
          }
          case record_type::map: {
            std::map<std::string, std::string> v;
            for (int i = 0; i < units / 8; ++i) v["k" + std::to_string(rng() % (units / 4))] = "\"" + n + "\"";
            d.replace_map(v);
            break;
          }
          case record_type::xml: {
            std::string x = "<p";
            for (int i = 0; i < units / 16; ++i) x += " a" + std::to_string(i) + "=\"" + std::to_string(rng() % 3) + "\"";
            d.replace_xml(x + ">t" + n + "</p>");
            break;
          }
        }
      };
      edit(a, 0);
      ASSERT_TRUE(b.apply(a.encode_since(b.version())));
      const folio::version_vector partial = b.version();
      edit(b, 1), edit(a, 2);
      ASSERT_TRUE(a.apply(b.encode_since(folio::version_vector{})));
      edit(a, 3);
      folio::version_vector ahead = a.version();
      ahead.observe(99, 5);
      for (const folio::version_vector& since : {folio::version_vector{}, partial, b.version(), a.version(), ahead})
        for (const std::size_t piece : {std::size_t(1), std::size_t(100), std::size_t(64) << 10}) {
          const std::string whole = a.encode_since(since);
          ASSERT_EQ(pieces(a, since, nullptr, piece), whole) << piece;
        }
      // A push: what the record answered before it, cut at the version before it, after it.
      const std::string before_push = a.encode_since(partial);
      const folio::version_vector before = a.version();
      edit(b, 4);
      ASSERT_TRUE(a.apply(b.encode_since(a.version())));
      ASSERT_NE(a.version(), before);
      EXPECT_EQ(pieces(a, partial, &before, 1000), before_push);
      EXPECT_EQ(pieces(a, folio::version_vector{}, &before, 1000), pieces(a, folio::version_vector{}, &before, 7));
    }
  }
}

}  // namespace
