#include "crdt/records.hpp"

#include <openssl/rand.h>

namespace folio::service {

void keep_token_stream(database& db, const std::string& owner, const token_stream_row& r) {
  db.write([&] {
    db.sql("INSERT INTO crdt_token_streams (owner, channel, stream_key, expires) VALUES (?, ?, ?, ?) "
           "ON CONFLICT (owner, channel, stream_key) DO UPDATE SET expires = excluded.expires")
        .bind(1, owner)
        .bind(2, r.channel)
        .bind(3, r.stream_key)
        .bind(4, r.expires)
        .step();
  });
}

void forget_token_streams(database& db, const std::string& owner, const std::string& channel) {
  db.write([&] { db.sql("DELETE FROM crdt_token_streams WHERE owner = ? AND channel = ?").bind(1, owner).bind(2, channel).step(); });
}

std::vector<token_stream_row> adopt_token_streams(database& db, const std::string& owner) {
  // Nothing kept (the usual start, and any start without client tokens): no write, so a responder
  // starts while another process holds the database's write lock.
  const bool any = db.read([&] {
    query q = db.sql("SELECT 1 FROM crdt_token_streams LIMIT 1");
    return q.step();
  });
  if (!any) return {};
  return db.write([&] {
    // The other owners' rows come back as `owner`'s, the earliest expiry per channel and key (`owner`
    // is drawn anew at each start: it has no rows yet, so the INSERT meets no conflict). PostgreSQL:
    // in one statement, so a row another node commits meanwhile is either taken whole or stays its
    // own. SQLite: this transaction holds the only write lock from its start.
    if (db.kind() == dialect::postgresql) {
      db.sql("WITH taken AS (DELETE FROM crdt_token_streams WHERE owner <> ?1 RETURNING channel, stream_key, expires) "
             "INSERT INTO crdt_token_streams (owner, channel, stream_key, expires) "
             "SELECT CAST(?1 AS TEXT), channel, stream_key, min(expires) FROM taken GROUP BY channel, stream_key")
          .bind(1, owner)
          .step();
    } else {
      db.sql("INSERT INTO crdt_token_streams (owner, channel, stream_key, expires) "
             "SELECT ?1, channel, stream_key, min(expires) FROM crdt_token_streams WHERE owner <> ?1 GROUP BY channel, stream_key")
          .bind(1, owner)
          .step();
      db.sql("DELETE FROM crdt_token_streams WHERE owner <> ?").bind(1, owner).step();
    }
    std::vector<token_stream_row> rows;
    query q = db.sql("SELECT channel, stream_key, expires FROM crdt_token_streams WHERE owner = ? ORDER BY expires, channel, stream_key");
    q.bind(1, owner);
    while (q.step()) rows.push_back({q.text(0), q.text(1), q.integer(2)});
    return rows;
  });
}

std::uint64_t new_incarnation() {
  std::uint64_t r = 0;
  while (r == 0) {
    if (RAND_bytes(reinterpret_cast<unsigned char*>(&r), sizeof r) != 1) throw store_error(failure::other, "no randomness for a record's incarnation");
    r >>= 1;  // below 2^63: fits a signed 64-bit column
  }
  return r;
}

namespace {
record_row row_of(query& q, bool with_snapshot) {
  record_row r;
  r.editor = q.text(0), r.type = q.text(1), r.content_key = q.text(2);
  if (with_snapshot) {
    if (!q.text_opt(3)) throw store_error(failure::other, "the record has no snapshot (no row in crdt_snapshots)");  // damage: a row removed by hand
    r.snapshot = q.blob(3);
  }
  r.log_len = q.integer(4), r.revision = q.integer(5);
  r.last_update = q.text(6), r.last_updated_by = q.text(7), r.session_id = q.text_opt(8);
  r.incarnation = static_cast<std::uint64_t>(q.integer(9));
  r.log_bytes = q.integer(10), r.snapshot_bytes = q.integer(11);
  r.history_from = q.integer(12), r.versions_made = q.integer(13), r.versioned_revision = q.integer(14), r.unversioned_since = q.text_opt(15);
  return r;
}
}  // namespace

std::optional<record_row> load_record(database& db, const record_key& k, bool with_snapshot) {
  query q = db.sql(with_snapshot ? "SELECT r.editor, r.type, r.content_key, s.snapshot, r.log_len, r.revision, r.last_update, r.last_updated_by, "
                                   "r.session_id, r.incarnation, r.log_bytes, r.snapshot_bytes, r.history_from, r.versions_made, r.versioned_revision, r.unversioned_since "
                                   "FROM crdt_records r LEFT JOIN crdt_snapshots s "
                                   "ON s.tenant = r.tenant AND s.org = r.org AND s.doc = r.doc AND s.editor = r.editor "
                                   "WHERE r.tenant=? AND r.org=? AND r.doc=? AND r.editor=?"
                                 : "SELECT editor, type, content_key, NULL, log_len, revision, last_update, last_updated_by, session_id, incarnation, "
                                   "log_bytes, snapshot_bytes, history_from, versions_made, versioned_revision, unversioned_since FROM crdt_records "
                                   "WHERE tenant=? AND org=? AND doc=? AND editor=?");
  q.bind(1, k.tenant).bind(2, k.org).bind(3, k.doc).bind(4, k.editor);
  if (!q.step()) return std::nullopt;
  return row_of(q, with_snapshot);
}

std::vector<std::string> document_editors(database& db, const std::string& tenant, const std::string& org, const std::string& doc) {
  query q = db.sql("SELECT editor FROM crdt_records WHERE tenant=? AND org=? AND doc=? ORDER BY editor");
  q.bind(1, tenant).bind(2, org).bind(3, doc);
  std::vector<std::string> out;
  while (q.step()) out.push_back(q.text(0));
  return out;
}

std::vector<logged_change> load_log(database& db, const record_key& k) {
  query q = db.sql("SELECT revision, batch FROM crdt_log WHERE tenant=? AND org=? AND doc=? AND editor=? ORDER BY revision");
  q.bind(1, k.tenant).bind(2, k.org).bind(3, k.doc).bind(4, k.editor);
  std::vector<logged_change> out;
  while (q.step()) out.push_back({q.integer(0), q.blob(1)});
  return out;
}

void insert_record(database& db, const record_key& k, const record_row& r) {
  db.sql("INSERT INTO crdt_records (tenant, org, doc, editor, type, content_key, log_len, revision, last_update, last_updated_by, session_id, "
         "incarnation, log_bytes, snapshot_bytes, history_from, unversioned_since) VALUES (?,?,?,?,?,?,0,?,?,?,?,?,0,?,?,?)")
      .bind(1, k.tenant).bind(2, k.org).bind(3, k.doc).bind(4, k.editor).bind(5, r.type).bind(6, r.content_key)
      .bind(7, r.revision).bind(8, r.last_update).bind(9, r.last_updated_by).bind_opt(10, r.session_id).bind(11, static_cast<std::int64_t>(r.incarnation))
      .bind(12, static_cast<std::int64_t>(r.snapshot.size())).bind(13, r.revision).bind(14, r.last_update)
      .step();
  db.sql("INSERT INTO crdt_snapshots (tenant, org, doc, editor, snapshot) VALUES (?,?,?,?,?)")
      .bind(1, k.tenant).bind(2, k.org).bind(3, k.doc).bind(4, k.editor).bind_blob(5, r.snapshot)
      .step();
}

std::int64_t append_change(database& db, const record_key& k, const record_row& before, const std::string* batch, const std::string& last_update,
                           const std::string& by, const std::optional<std::string>& session) {
  const std::int64_t revision = before.revision + 1;
  if (batch)
    db.sql("INSERT INTO crdt_log (tenant, org, doc, editor, revision, batch) VALUES (?,?,?,?,?,?)")
        .bind(1, k.tenant).bind(2, k.org).bind(3, k.doc).bind(4, k.editor).bind(5, revision).bind_blob(6, *batch)
        .step();
  // The log's size counted in the statement: a compaction may have shortened it since `before` was read.
  // A change with operations starts the wait for an automatic version, unless one is running.
  db.sql("UPDATE crdt_records SET log_len=log_len+?, log_bytes=log_bytes+?, revision=?, last_update=?, last_updated_by=?, session_id=?, "
         "unversioned_since=CASE WHEN ? = 1 AND unversioned_since IS NULL THEN ? ELSE unversioned_since END "
         "WHERE tenant=? AND org=? AND doc=? AND editor=?")
      .bind(1, std::int64_t(batch ? 1 : 0)).bind(2, static_cast<std::int64_t>(batch ? batch->size() : 0)).bind(3, revision).bind(4, last_update)
      .bind(5, by).bind_opt(6, session).bind(7, std::int64_t(batch ? 1 : 0)).bind(8, last_update)
      .bind(9, k.tenant).bind(10, k.org).bind(11, k.doc).bind(12, k.editor)
      .step();
  return revision;
}

bool wants_compaction(std::int64_t log_len, std::int64_t log_bytes, std::int64_t snapshot_bytes) {
  return log_len >= compact_after && (log_len >= compact_always_after || log_bytes * compact_log_share >= snapshot_bytes);
}

folded_log folded_of(const std::vector<logged_change>& log) {
  folded_log f;
  for (const logged_change& c : log) f.through = c.revision, ++f.count, f.bytes += static_cast<std::int64_t>(c.batch.size());
  return f;
}

bool compact(database& db, const record_key& k, std::uint64_t incarnation, const std::string& snapshot, const folded_log& folded) {
  query now = db.sql("SELECT incarnation FROM crdt_records WHERE tenant=? AND org=? AND doc=? AND editor=?");
  now.bind(1, k.tenant).bind(2, k.org).bind(3, k.doc).bind(4, k.editor);
  if (!now.step() || static_cast<std::uint64_t>(now.integer(0)) != incarnation) return false;  // deleted, or added again
  db.sql("DELETE FROM crdt_log WHERE tenant=? AND org=? AND doc=? AND editor=? AND revision<=?")
      .bind(1, k.tenant).bind(2, k.org).bind(3, k.doc).bind(4, k.editor).bind(5, folded.through)
      .step();
  if (static_cast<std::int64_t>(db.changes()) != folded.count) return false;
  db.sql("UPDATE crdt_snapshots SET snapshot=? WHERE tenant=? AND org=? AND doc=? AND editor=?")
      .bind_blob(1, snapshot).bind(2, k.tenant).bind(3, k.org).bind(4, k.doc).bind(5, k.editor)
      .step();
  db.sql("UPDATE crdt_records SET log_len=log_len-?, log_bytes=log_bytes-?, snapshot_bytes=? WHERE tenant=? AND org=? AND doc=? AND editor=?")
      .bind(1, folded.count).bind(2, folded.bytes).bind(3, static_cast<std::int64_t>(snapshot.size()))
      .bind(4, k.tenant).bind(5, k.org).bind(6, k.doc).bind(7, k.editor)
      .step();
  return true;
}

bool delete_record(database& db, const record_key& k) {
  db.sql("DELETE FROM crdt_changes WHERE tenant=? AND org=? AND doc=? AND editor=?").bind(1, k.tenant).bind(2, k.org).bind(3, k.doc).bind(4, k.editor).step();
  db.sql("DELETE FROM crdt_versions WHERE tenant=? AND org=? AND doc=? AND editor=?").bind(1, k.tenant).bind(2, k.org).bind(3, k.doc).bind(4, k.editor).step();
  db.sql("DELETE FROM crdt_log WHERE tenant=? AND org=? AND doc=? AND editor=?").bind(1, k.tenant).bind(2, k.org).bind(3, k.doc).bind(4, k.editor).step();
  db.sql("DELETE FROM crdt_snapshots WHERE tenant=? AND org=? AND doc=? AND editor=?").bind(1, k.tenant).bind(2, k.org).bind(3, k.doc).bind(4, k.editor).step();
  db.sql("DELETE FROM crdt_records WHERE tenant=? AND org=? AND doc=? AND editor=?").bind(1, k.tenant).bind(2, k.org).bind(3, k.doc).bind(4, k.editor).step();
  return db.changes() > 0;
}

}  // namespace folio::service
