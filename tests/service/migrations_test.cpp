// The schema's migrations (service/storage/migrations.hpp, each module's schema.cpp): a fresh database
// has the pinned schema, older databases (schema 1, schema 4) reach the current one with their data,
// and a newer one is refused.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <folio/document.hpp>

#include <cstdint>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "annotations/schema.hpp"
#include "annotations/store.hpp"
#include "crdt/record_session.hpp"
#include "crdt/records.hpp"
#include "crdt/schema.hpp"
#include "platform/schema.hpp"
#include "support.hpp"

namespace {

using namespace folio_service_test;

/// `path`'s schema as tests/golden/schema-sqlite.txt writes it: user_version, then sqlite_master in
/// creation order (type, name, table, SQL with newlines as \n), a line each.
std::string schema_of(const std::string& path) {
  sqlite3* raw = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
  std::string out;
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(raw, "PRAGMA user_version", -1, &st, nullptr);
  if (sqlite3_step(st) == SQLITE_ROW) out += "user_version\t" + std::to_string(sqlite3_column_int64(st, 0)) + "\n";
  sqlite3_finalize(st);
  sqlite3_prepare_v2(raw, "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY rowid", -1, &st, nullptr);
  while (sqlite3_step(st) == SQLITE_ROW) {
    for (int c = 0; c < 4; ++c) {
      const unsigned char* t = sqlite3_column_text(st, c);
      std::string v = t ? reinterpret_cast<const char*>(t) : "";
      for (std::size_t at = 0; (at = v.find('\n', at)) != std::string::npos; at += 2) v.replace(at, 1, "\\n");
      out += v + (c == 3 ? "\n" : "\t");
    }
  }
  sqlite3_finalize(st);
  sqlite3_close(raw);
  return out;
}

TEST_F(fixture, AFreshDatabaseHasThePinnedSchema) {
  FOLIO_SQLITE_ONLY();
  // Each family creates its own tables (docs/SERVICE.md); together they must make exactly the schema
  // the single migration list made before the split, table by table and in the same order.
  std::ifstream in(FOLIO_SCHEMA_GOLDEN);
  std::string golden, line;
  while (std::getline(in, line))
    if (!line.empty() && line[0] != '#') golden += line + "\n";
  ASSERT_FALSE(golden.empty()) << "nothing read from " << FOLIO_SCHEMA_GOLDEN;
  EXPECT_EQ(schema_of(tmp.path()), golden);
}

/// What the row of annotation `id` holds of its comments (schema 9): nullopt for NULL (none held).
std::optional<std::string> held_comments(svc::database& db, const svc::annotation_scope& s, const std::string& id) {
  svc::query q = db.sql("SELECT comments FROM annotations WHERE tenant=? AND org=? AND doc=? AND annotation_id=?");
  q.bind(1, s.tenant).bind(2, s.org).bind(3, s.doc).bind(4, id);
  return q.step() ? q.text_opt(0) : std::optional<std::string>("(no such annotation)");
}

/// A module's migrations up to `version` (a database as an older build left it).
svc::module_migrations up_to(svc::module_migrations m, int version) {
  auto cut = [&](std::span<const svc::migration> steps) {
    std::size_t n = 0;
    while (n < steps.size() && steps[n].version <= version) ++n;
    return steps.first(n);
  };
  return {cut(m.sqlite), cut(m.postgresql)};
}

TEST(Store, MigratesASchema1DatabaseToTheCurrentOne) {
  temp_db tmp;
  FOLIO_SQLITE_ONLY();  // no PostgreSQL database is older than schema 4
  folio::document record(folio::record_type::text, 777);  // edited as the database's one server replica, as schema 1-3 did
  record.replace_text("kept");
  {
    // Schema 1 as shipped (its steps, which the pinned schema holds to their text), with one annotation
    // whose comments sit in its body and one text record.
    svc::database v1(tmp.path(), svc::schema()
                                     .add(up_to(svc::platform_migrations(), 1))
                                     .add(up_to(svc::crdt_migrations(), 1))
                                     .add(up_to(svc::annotation_migrations(), 1)));
    ASSERT_EQ(v1.version(), 1);
    v1.write([&] {
      v1.exec("INSERT INTO meta VALUES ('server_replica', '777')");
      v1.exec(R"sql(INSERT INTO annotations VALUES ('t', 'o', 'd', 'a1', 'L1', 'u1', '2025-01-01T00:00:00.000Z',
  '{"annotationId":"a1","color":"#f00","comments":[{"commentId":2,"commentText":"two"},{"commentId":1,"commentText":"one"}],"createdAt":"2025-01-01T00:00:00.000Z","lastUpdated":"2025-01-02T00:00:00.000Z","status":{"id":"RESOLVED"}}'))sql");
      v1.sql("INSERT INTO crdt_records VALUES ('t', 'o', 'd', 'e', 'text', 'content', ?, 0, 1, '2025-01-01T00:00:00.000Z', 'u', NULL)")
          .bind_blob(1, record.encode())
          .step();
    });
  }
  svc::database db(tmp.path(), svc::responder::tables());
  EXPECT_EQ(db.version(), svc::responder::tables().version());
  // 2: comments in their own table; 3: listed in the order they were before (commentId), and a comment
  // added now comes after them, whatever its id.
  const svc::annotation_scope s{"t", "o", "d"};
  std::vector<svc::annotation_head> found;
  std::string comments;  // as a thread's answer lists them (the scan hands over one or more at a time, comma-separated)
  svc::scan_threads(db, s, {}, {[&](const svc::annotation_head& a) { return found.push_back(a), true; }, [&](std::string_view c) {
                      comments += (comments.empty() ? "" : ",") + std::string(c);
                    }});
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].body, R"({"annotationId":"a1","color":"#f00","createdAt":"2025-01-01T00:00:00.000Z","lastUpdated":"2025-01-02T00:00:00.000Z",)"
                           R"("status":{"id":"RESOLVED"}})");
  EXPECT_EQ(comments, R"({"commentId":1,"commentText":"one"},{"commentId":2,"commentText":"two"})");
  EXPECT_EQ(held_comments(db, s, "a1"), comments);  // 9: held in the annotation's row
  svc::annotation_filter by_status;
  by_status.statuses = {"RESOLVED"};
  by_status.updated_after = "2025-01-01T12:00:00.000Z";
  EXPECT_EQ(svc::match_annotations(db, s, by_status), std::vector<std::string>{"a1"});
  EXPECT_EQ(svc::load_annotation(db, s, "a1")->next_comment_id, 3);
  db.write([&] { svc::insert_comment(db, s, "a1", 0, R"({"commentId":0,"commentText":"zero"})"); });
  EXPECT_EQ(svc::comment_ids(db, s, "a1"), (std::vector<std::int64_t>{1, 2, 0}));
  // 4: the record's incarnation is the replica it was edited as, so the service goes on editing it as
  // that replica.
  const std::optional<svc::record_row> row = svc::load_record(db, {"t", "o", "d", "e"});
  ASSERT_TRUE(row);
  EXPECT_EQ(row->incarnation, 777u);
}

// Schema 5 moves each record's snapshot out of crdt_records: a database schema 4 left (on either
// backend) keeps its records, and their snapshots, through the migration. The snapshot is one an
// earlier build wrote (document format version 1, tests/golden/version1/), which still decodes. Its
// log holds a change numbered as builds before schema 7 numbered them (by position, from 0); a change
// logged now (under its revision) comes after it.
TEST(Store, MigratesASchema4DatabaseToTheCurrentOne) {
  temp_db tmp;
  std::ifstream v1(std::string(FOLIO_GOLDEN_DIR) + "/version1/text-pair.doc", std::ios::binary);
  const std::string snapshot((std::istreambuf_iterator<char>(v1)), std::istreambuf_iterator<char>());
  ASSERT_EQ(snapshot.substr(0, 4), std::string("Fo\x01" "D"));
  std::optional<folio::document> client;  // another replica's edits, logged by the old build and by this one
  ASSERT_TRUE(folio::document::decode(snapshot, 99, client));
  const std::string first = client->encode_change(client->replace_text("Hallo brave world! 😀 bis morgen"));
  const std::string second = client->encode_change(client->replace_text("Hallo world! 😀 bis morgen"));
  {
    const svc::schema v4 = svc::schema().add(up_to(svc::platform_migrations(), 4)).add(up_to(svc::crdt_migrations(), 4))
                               .add(up_to(svc::annotation_migrations(), 4));
    ASSERT_EQ(v4.version(), 4);
    svc::database old(tmp.path(), v4);
    old.write([&] {
      old.sql("INSERT INTO crdt_records (tenant, org, doc, editor, type, content_key, snapshot, log_len, revision, last_update, last_updated_by, "
              "session_id, incarnation) VALUES ('t', 'o', 'd', 'e', 'text', 'content', ?, 1, 3, '2026-01-01T00:00:00.000Z', 'u', NULL, 7)")
          .bind_blob(1, snapshot)
          .step();
      old.sql("INSERT INTO crdt_log (tenant, org, doc, editor, seq, batch) VALUES ('t', 'o', 'd', 'e', 0, ?)").bind_blob(1, first).step();
      // A thread whose comments are listed in another order than their ids (schema 3's positions).
      old.sql("INSERT INTO annotations (tenant, org, doc, annotation_id, location_id, user_id, created_at, body, status_id, last_updated, "
              "next_comment_id) VALUES ('t', 'o', 'd', 'a', 'l', 'u', '2026-01-01T00:00:00.000Z', '{}', 'OPEN', '2026-01-01T00:00:00.000Z', 4)")
          .step();
      old.sql("INSERT INTO annotation_comments (tenant, org, doc, annotation_id, comment_id, body, position) VALUES "
              "('t', 'o', 'd', 'a', 3, '{\"commentId\":3}', 2), ('t', 'o', 'd', 'a', 1, '{\"commentId\":1}', 2), ('t', 'o', 'd', 'a', 2, '{\"commentId\":2}', 1)")
          .step();
      // The same annotation id in another document, and in another tenant's: their own threads.
      old.sql("INSERT INTO annotations (tenant, org, doc, annotation_id, location_id, user_id, created_at, body, status_id, last_updated, "
              "next_comment_id) VALUES ('t', 'o', 'd2', 'a', 'l', 'u', '2025-01-01T00:00:00.000Z', '{}', 'OPEN', '2025-01-01T00:00:00.000Z', 2), "
              "('t2', 'o', 'd', 'a', 'l', 'u', '2025-01-01T00:00:00.000Z', '{}', 'OPEN', '2025-01-01T00:00:00.000Z', 2)")
          .step();
      old.sql("INSERT INTO annotation_comments (tenant, org, doc, annotation_id, comment_id, body, position) VALUES "
              "('t', 'o', 'd2', 'a', 1, '{\"in\":\"d2\"}', 2), ('t2', 'o', 'd', 'a', 1, '{\"in\":\"t2\"}', 2)")
          .step();
      // A thread with no comment, and one whose comments pass what a row holds (schema 9): 65,536 bytes
      // with the commas between them hold, one byte more does not.
      for (const char* id : {"none", "bound", "past"})
        old.sql("INSERT INTO annotations (tenant, org, doc, annotation_id, location_id, user_id, created_at, body, status_id, last_updated, "
                "next_comment_id) VALUES ('t', 'o', 'd3', ?, 'l', 'u', '2025-01-01T00:00:00.000Z', '{}', 'OPEN', '2025-01-01T00:00:00.000Z', 5)")
            .bind(1, id)
            .step();
      for (const char* id : {"bound", "past"})
        for (int n = 1; n <= 4; ++n) {
          // 3 bodies of 16,384 bytes, one of 16,381 and 3 commas: 65,536 bytes for "bound"; in "past" one
          // character of the last takes two bytes (the bound counts bytes, not characters)
          std::string body = "{\"c\":\"" + std::string(n == 4 ? 16373 : 16376, 'y') + "\"}";
          if (std::string(id) == "past" && n == 4) body.replace(6, 1, "\xc3\xa9");
          old.sql("INSERT INTO annotation_comments (tenant, org, doc, annotation_id, comment_id, body, position) VALUES ('t', 'o', 'd3', ?, ?, ?, ?)")
              .bind(1, id).bind(2, std::int64_t(n)).bind(3, body).bind(4, std::int64_t(n))
              .step();
        }
    });
  }
  svc::database db(tmp.path(), svc::responder::tables());
  EXPECT_EQ(db.version(), 13);
  const svc::record_key k{"t", "o", "d", "e"};
  std::optional<svc::record_row> row = svc::load_record(db, k);
  ASSERT_TRUE(row);
  EXPECT_EQ(row->revision, 3);
  EXPECT_EQ(row->snapshot, snapshot);
  EXPECT_EQ(row->log_bytes, static_cast<std::int64_t>(first.size()));  // counted by the migration
  EXPECT_EQ(row->snapshot_bytes, static_cast<std::int64_t>(snapshot.size()));
  std::optional<folio::document> back;
  ASSERT_TRUE(folio::document::decode(row->snapshot, row->incarnation, back));
  EXPECT_EQ(back->text(), "Hallo brave world! 😀 bis übermorgen");
  db.write([&] { EXPECT_EQ(svc::append_change(db, k, *row, &second, "2026-01-02T00:00:00.000Z", "u", std::nullopt), 4); });
  row = svc::load_record(db, k);
  const std::vector<svc::logged_change> log = svc::load_log(db, k);
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(row->log_len, 2);
  EXPECT_EQ(row->log_bytes, static_cast<std::int64_t>(first.size() + second.size()));
  EXPECT_EQ(log[0].revision, 0);  // its position, as logged by the old build
  EXPECT_EQ(log[1].revision, 4);
  EXPECT_EQ(log[1].batch, second);
  EXPECT_EQ(svc::fold_log(*row, log).text(), "Hallo world! 😀 bis morgen");
  // The thread keeps its order through the migrations, and its comment ids stay unique in it.
  const svc::annotation_scope s{"t", "o", "d"};
  EXPECT_EQ(svc::comment_ids(db, s, "a"), (std::vector<std::int64_t>{2, 1, 3}));  // 8: a tie of positions (no build wrote one) by comment id
  // 9: each thread's row holds its comments in that order, within the bound; none for none.
  EXPECT_EQ(held_comments(db, s, "a"), std::optional<std::string>(R"({"commentId":2},{"commentId":1},{"commentId":3})"));
  EXPECT_EQ(held_comments(db, {"t", "o", "d2"}, "a"), std::optional<std::string>(R"({"in":"d2"})"));
  EXPECT_EQ(held_comments(db, {"t2", "o", "d"}, "a"), std::optional<std::string>(R"({"in":"t2"})"));
  const svc::annotation_scope d3{"t", "o", "d3"};
  EXPECT_EQ(held_comments(db, d3, "none"), std::optional<std::string>(""));
  ASSERT_TRUE(held_comments(db, d3, "bound"));
  EXPECT_EQ(held_comments(db, d3, "bound")->size(), svc::held_comments_max);
  EXPECT_EQ(held_comments(db, d3, "past"), std::nullopt);
  std::string listed;  // either way, a read gives every thread whole
  svc::scan_threads(db, d3, {}, {[&](const svc::annotation_head& h) { return listed += "[" + h.id, true; }, [&](std::string_view c) {
                      listed += std::to_string(c.size()) + ";";
                    }});
  EXPECT_EQ(listed, "[bound65536;[none[past16384;16384;16384;16382;");
  db.write([&] {
    EXPECT_FALSE(svc::insert_comment(db, s, "a", 1, R"({"commentId":1,"again":true})"));
    EXPECT_TRUE(svc::insert_comment(db, s, "a", 5, R"({"commentId":5})"));
  });
  EXPECT_EQ(svc::comment_ids(db, s, "a"), (std::vector<std::int64_t>{2, 1, 3, 5}));
  EXPECT_EQ(svc::load_comment(db, s, "a", 1), std::optional<std::string>(R"({"commentId":1})"));
  std::string thread;
  svc::scan_listed_threads(db, s, {"a"}, {}, {[](const svc::annotation_head&) { return true; }, [&](std::string_view c) { thread += std::string(c) + ';'; }},
                           [] { ADD_FAILURE() << "a is there"; });
  EXPECT_EQ(thread, R"({"commentId":2};{"commentId":1};{"commentId":3};{"commentId":5};)");
  // 8: comments keyed by their annotation's integer key: each thread kept its own.
  for (const auto& [scope, body] : {std::pair<svc::annotation_scope, std::string>{{"t", "o", "d2"}, R"({"in":"d2"})"},
                                    std::pair<svc::annotation_scope, std::string>{{"t2", "o", "d"}, R"({"in":"t2"})"}}) {
    EXPECT_EQ(svc::comment_ids(db, scope, "a"), std::vector<std::int64_t>{1}) << scope.tenant << scope.doc;
    EXPECT_EQ(svc::load_comment(db, scope, "a", 1), std::optional<std::string>(body));
  }
  db.write([&] { EXPECT_TRUE(svc::delete_annotation(db, s, "a")); });
  EXPECT_EQ(svc::comment_ids(db, {"t", "o", "d2"}, "a"), std::vector<std::int64_t>{1});  // another document's thread stays
  svc::query left = db.sql("SELECT count(*) FROM annotation_comments");
  ASSERT_TRUE(left.step());
  EXPECT_EQ(left.integer(0), 2 + 8);  // the deleted thread's comments went with it (d3's threads keep theirs)
  if (db.kind() == svc::dialect::sqlite) {  // the copy's keys are counted: none is handed out again (AUTOINCREMENT)
    svc::query seq = db.sql("SELECT seq FROM sqlite_sequence WHERE name = 'annotations'");
    ASSERT_TRUE(seq.step());
    EXPECT_EQ(seq.integer(0), 6);
  }
}

TEST(Store, OpensACurrentDatabaseAndRefusesANewerOneWhileAnotherProcessHoldsTheWriteLock) {
  // folio-fcgi's workers open their connections after the socket listens: one that waited for another
  // process's write lock (the schema check ran in a write transaction, with no deadline) stalled every
  // request queued for it. The raw connection below stands for that process (a backup, sqlite3).
  temp_db tmp;
  FOLIO_SQLITE_ONLY();
  const int target = [&] {
    svc::database created(tmp.path(), svc::responder::tables());
    return created.version();
  }();
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open(tmp.path().c_str(), &other), SQLITE_OK);
  std::unique_ptr<sqlite3, int (*)(sqlite3*)> close_other(other, sqlite3_close);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  {
    svc::database opened(tmp.path(), svc::responder::tables());  // the lock held: reads the version, writes nothing
    EXPECT_EQ(opened.version(), target);
  }
  // A newer build's schema is refused as such, not after waiting for the lock (then as "busy").
  const std::string newer = std::to_string(target + 1);
  ASSERT_EQ(sqlite3_exec(other, ("PRAGMA user_version = " + newer + "; COMMIT; BEGIN IMMEDIATE").c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  try {
    svc::database refused(tmp.path(), svc::responder::tables());
    ADD_FAILURE() << "a database of schema " << newer << " was opened";
  } catch (const svc::store_error& e) {
    EXPECT_EQ(std::string(e.what()), "database schema " + newer + " is newer than this build's");
  }
  ASSERT_EQ(sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr), SQLITE_OK);
}

}  // namespace
