#include "annotations/store.hpp"

namespace folio::service {

namespace {

const migration steps[] = {
    {1, R"sql(
CREATE TABLE annotations (
  tenant TEXT NOT NULL, org TEXT NOT NULL, doc TEXT NOT NULL, annotation_id TEXT NOT NULL,
  location_id TEXT, user_id TEXT NOT NULL, created_at TEXT NOT NULL, body TEXT NOT NULL,
  PRIMARY KEY (tenant, org, doc, annotation_id)) WITHOUT ROWID;
CREATE INDEX annotations_by_time ON annotations (tenant, org, doc, created_at, annotation_id);
CREATE INDEX annotations_by_location ON annotations (tenant, org, doc, location_id, created_at, annotation_id);
CREATE INDEX annotations_by_user ON annotations (tenant, org, doc, user_id, created_at, annotation_id);
)sql"},
    // 2: the annotation write side. Comments move to their own table (a comment write no longer
    // rewrites its thread); status and lastUpdated become columns for the v2 filters.
    {2, R"sql(
CREATE TABLE annotation_comments (
  tenant TEXT NOT NULL, org TEXT NOT NULL, doc TEXT NOT NULL, annotation_id TEXT NOT NULL,
  comment_id INTEGER NOT NULL, body TEXT NOT NULL,
  PRIMARY KEY (tenant, org, doc, annotation_id, comment_id)) WITHOUT ROWID;
INSERT OR IGNORE INTO annotation_comments (tenant, org, doc, annotation_id, comment_id, body)
  SELECT a.tenant, a.org, a.doc, a.annotation_id, json_extract(c.value, '$.commentId'), json(c.value)
  FROM annotations a, json_each(a.body, '$.comments') c WHERE json_type(c.value, '$.commentId') = 'integer';
ALTER TABLE annotations ADD COLUMN status_id TEXT NOT NULL DEFAULT 'OPEN';
ALTER TABLE annotations ADD COLUMN last_updated TEXT NOT NULL DEFAULT '';
ALTER TABLE annotations ADD COLUMN next_comment_id INTEGER NOT NULL DEFAULT 1;
UPDATE annotations SET next_comment_id = 1 + coalesce((SELECT max(c.comment_id) FROM annotation_comments c WHERE c.tenant = annotations.tenant
  AND c.org = annotations.org AND c.doc = annotations.doc AND c.annotation_id = annotations.annotation_id), 0);
UPDATE annotations SET status_id = coalesce(json_extract(body, '$.status.id'), 'OPEN'),
  last_updated = coalesce(json_extract(body, '$.lastUpdated'), created_at), body = json_remove(body, '$.comments');
CREATE INDEX annotations_by_status ON annotations (tenant, org, doc, status_id, created_at, annotation_id);
)sql"},
    // 3: a thread lists its comments in the order they were added, whatever their ids. Comments stored
    // before keep the commentId order they were listed in; later ones follow them.
    {3, R"sql(
ALTER TABLE annotation_comments ADD COLUMN position INTEGER NOT NULL DEFAULT 0;
UPDATE annotation_comments SET position = comment_id + 1;
CREATE INDEX annotation_comments_in_order ON annotation_comments (tenant, org, doc, annotation_id, position);
)sql"},
};

// PostgreSQL (from schema 3, database.hpp): the tables as schema 3 left them, in its types.
const migration pg_steps[] = {
    {3, R"sql(
CREATE TABLE annotations (
  tenant TEXT NOT NULL, org TEXT NOT NULL, doc TEXT NOT NULL, annotation_id TEXT NOT NULL,
  location_id TEXT, user_id TEXT NOT NULL, created_at TEXT NOT NULL, body TEXT NOT NULL,
  status_id TEXT NOT NULL DEFAULT 'OPEN', last_updated TEXT NOT NULL DEFAULT '', next_comment_id BIGINT NOT NULL DEFAULT 1,
  PRIMARY KEY (tenant, org, doc, annotation_id));
CREATE INDEX annotations_by_time ON annotations (tenant, org, doc, created_at, annotation_id);
CREATE INDEX annotations_by_location ON annotations (tenant, org, doc, location_id, created_at, annotation_id);
CREATE INDEX annotations_by_user ON annotations (tenant, org, doc, user_id, created_at, annotation_id);
CREATE INDEX annotations_by_status ON annotations (tenant, org, doc, status_id, created_at, annotation_id);
CREATE TABLE annotation_comments (
  tenant TEXT NOT NULL, org TEXT NOT NULL, doc TEXT NOT NULL, annotation_id TEXT NOT NULL,
  comment_id BIGINT NOT NULL, body TEXT NOT NULL, position BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (tenant, org, doc, annotation_id, comment_id));
CREATE INDEX annotation_comments_in_order ON annotation_comments (tenant, org, doc, annotation_id, position);
)sql"},
};

/// " AND ..." conditions for a filter over the columns of `annotations` (named as `table`.column when
/// `table` is given), and their values in bind order.
struct where_clause {
  std::string text;
  std::vector<std::string> values;
};

where_clause conditions(const annotation_filter& f, const std::string& table = "") {
  where_clause w;
  const std::string t = table.empty() ? "" : table + ".";
  auto in_list = [&](const char* column, const std::vector<std::string>& ids) {
    if (ids.empty()) return;
    w.text += " AND " + t + column + " IN (" + database::placeholders(ids.size()) + ")";
    w.values.insert(w.values.end(), ids.begin(), ids.end());
  };
  in_list("location_id", f.locations);
  in_list("user_id", f.users);
  in_list("annotation_id", f.ids);
  in_list("status_id", f.statuses);
  if (f.updated_after) w.text += " AND " + t + "last_updated > ?", w.values.push_back(*f.updated_after);
  if (f.updated_before) w.text += " AND " + t + "last_updated < ?", w.values.push_back(*f.updated_before);
  if (f.after) {
    w.text += " AND (" + t + "created_at, " + t + "annotation_id) > (?, ?)";
    w.values.push_back(f.after->first);
    w.values.push_back(f.after->second);
  }
  return w;
}

/// Oldest first, ties by id, at most f.limit rows (a LIMIT parameter) when it is not -1. With
/// annotation ids, SQLite's "+created_at" keeps its planner on the primary key (a seek per id) rather
/// than walking the whole document in time order to save a sort of <= 1,000 rows (PostgreSQL's planner
/// costs both itself and knows no such hint).
std::string order_by(const database& db, const annotation_filter& f) {
  std::string o = f.ids.empty() || db.kind() != dialect::sqlite ? " ORDER BY created_at, annotation_id" : " ORDER BY +created_at, annotation_id";
  if (f.limit >= 0) o += " LIMIT ?";
  return o;
}

int bind_scope(query& q, const annotation_scope& s, int i = 1) {
  q.bind(i, s.tenant).bind(i + 1, s.org).bind(i + 2, s.doc);
  return i + 3;
}

}  // namespace

module_migrations annotation_migrations() { return {steps, pg_steps}; }

namespace {

/// The columns a thread scan selects: the annotation's (a.) and one comment's body (c.; NULL for an
/// annotation without comments), and the join that pairs them (each annotation's comments by primary key).
constexpr const char* thread_columns = "SELECT a.annotation_id, a.created_at, a.body, c.body FROM ";
constexpr const char* thread_join =
    " LEFT JOIN annotation_comments c ON c.tenant = a.tenant AND c.org = a.org AND c.doc = a.doc AND c.annotation_id = a.annotation_id";

/// Walks a thread scan's rows (grouped by annotation, comments in order): begin at each new annotation.
/// Returns whether there was a row.
bool visit_threads(query& q, const thread_visitor& v) {
  annotation_head h;
  bool any = false;
  while (q.step()) {
    const std::string_view id = q.text_view(0);
    if (!any || id != h.id) {
      any = true;
      h.id = id, h.created_at = q.text(1), h.body = q.text(2);
      if (!v.begin(h)) return true;
    }
    if (const std::optional<std::string> c = q.text_opt(3)) v.comment(*c);
  }
  return any;
}

}  // namespace

void scan_threads(database& db, const annotation_scope& s, const annotation_filter& f, const thread_visitor& v) {
  // Without a limit, the join walks the annotations in the filter's index and each one's comments,
  // sorting only those by position. With one, the annotations are cut first (a subquery), then joined.
  std::string text = thread_columns;
  where_clause w;
  if (f.limit < 0) {
    w = conditions(f, "a");
    text += std::string("annotations a") + thread_join + " WHERE a.tenant=? AND a.org=? AND a.doc=?" + w.text;
  } else {
    w = conditions(f);
    text += "(SELECT tenant, org, doc, annotation_id, created_at, body FROM annotations WHERE tenant=? AND org=? AND doc=?" + w.text +
            order_by(db, f) + ") a" + thread_join;
  }
  text += " ORDER BY a.created_at, a.annotation_id, c.position";
  query q = db.prepare(text);
  q.one_row_at_a_time();  // PostgreSQL: a document's threads are never held whole
  int i = bind_scope(q, s);
  for (const std::string& value : w.values) q.bind(i++, value);
  if (f.limit >= 0) q.bind(i, f.limit);
  visit_threads(q, v);
}

bool scan_thread(database& db, const annotation_scope& s, const std::string& id, const thread_visitor& v) {
  static const std::string text =
      std::string(thread_columns) + "annotations a" + thread_join + " WHERE a.tenant=? AND a.org=? AND a.doc=? AND a.annotation_id=? ORDER BY c.position";
  query q = db.sql(text.c_str());
  q.one_row_at_a_time();
  q.bind(bind_scope(q, s), id);
  return visit_threads(q, v);
}

std::unordered_map<std::string, bool> annotations_passing(database& db, const annotation_scope& s, const std::vector<std::string>& ids,
                                                          const annotation_filter& f) {
  std::unordered_map<std::string, bool> out;
  if (ids.empty()) return out;
  annotation_filter others = f;
  others.ids.clear();
  const where_clause w = conditions(others);
  query q = db.prepare("SELECT annotation_id, CASE WHEN 1=1" + w.text + " THEN 1 ELSE 0 END FROM annotations WHERE tenant=? AND org=? AND doc=? AND annotation_id IN (" +
                       database::placeholders(ids.size()) + ")");
  int i = 1;
  for (const std::string& value : w.values) q.bind(i++, value);
  i = bind_scope(q, s, i);
  for (const std::string& id : ids) q.bind(i++, id);
  while (q.step()) out.emplace(q.text(0), q.integer(1) != 0);
  return out;
}

std::vector<std::string> match_annotations(database& db, const annotation_scope& s, const annotation_filter& f) {
  const where_clause w = conditions(f);
  query q = db.prepare("SELECT annotation_id FROM annotations WHERE tenant=? AND org=? AND doc=?" + w.text + order_by(db, f));
  int i = bind_scope(q, s);
  for (const std::string& v : w.values) q.bind(i++, v);
  if (f.limit >= 0) q.bind(i, f.limit);
  std::vector<std::string> out;
  while (q.step()) out.push_back(q.text(0));
  return out;
}

std::optional<annotation_row> load_annotation(database& db, const annotation_scope& s, const std::string& id) {
  query q = db.sql("SELECT location_id, user_id, status_id, created_at, last_updated, body, next_comment_id FROM annotations "
                   "WHERE tenant=? AND org=? AND doc=? AND annotation_id=?");
  q.bind(bind_scope(q, s), id);
  if (!q.step()) return std::nullopt;
  return annotation_row{id, q.text_opt(0), q.text(1), q.text(2), q.text(3), q.text(4), q.text(5), q.integer(6)};
}

bool insert_annotation(database& db, const annotation_scope& s, const annotation_row& a) {
  query q = db.sql("INSERT INTO annotations (tenant, org, doc, annotation_id, location_id, user_id, status_id, created_at, last_updated, body, "
                   "next_comment_id) VALUES (?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING");
  int i = bind_scope(q, s);
  q.bind(i, a.id).bind_opt(i + 1, a.location).bind(i + 2, a.user).bind(i + 3, a.status).bind(i + 4, a.created_at).bind(i + 5, a.last_updated)
      .bind(i + 6, a.body).bind(i + 7, a.next_comment_id)
      .step();
  return db.changes() > 0;
}

void update_annotation(database& db, const annotation_scope& s, const annotation_row& a) {
  query q = db.sql("UPDATE annotations SET location_id=?, user_id=?, status_id=?, last_updated=?, body=? "
                   "WHERE tenant=? AND org=? AND doc=? AND annotation_id=?");
  q.bind_opt(1, a.location).bind(2, a.user).bind(3, a.status).bind(4, a.last_updated).bind(5, a.body);
  q.bind(bind_scope(q, s, 6), a.id).step();
}

void touch_annotation(database& db, const annotation_scope& s, const std::string& id, const std::string& body, const std::string& last_updated,
                      std::int64_t next_comment_id) {
  query q = db.sql("UPDATE annotations SET last_updated=?, body=?, next_comment_id=? WHERE tenant=? AND org=? AND doc=? AND annotation_id=?");
  q.bind(1, last_updated).bind(2, body).bind(3, next_comment_id);
  q.bind(bind_scope(q, s, 4), id).step();
}

bool delete_annotation(database& db, const annotation_scope& s, const std::string& id) {
  {
    query q = db.sql("DELETE FROM annotation_comments WHERE tenant=? AND org=? AND doc=? AND annotation_id=?");
    q.bind(bind_scope(q, s), id).step();
  }
  query q = db.sql("DELETE FROM annotations WHERE tenant=? AND org=? AND doc=? AND annotation_id=?");
  q.bind(bind_scope(q, s), id).step();
  return db.changes() > 0;
}

std::vector<std::int64_t> comment_ids(database& db, const annotation_scope& s, const std::string& annotation) {
  query q = db.sql("SELECT comment_id FROM annotation_comments WHERE tenant=? AND org=? AND doc=? AND annotation_id=? ORDER BY position");
  q.bind(bind_scope(q, s), annotation);
  std::vector<std::int64_t> out;
  while (q.step()) out.push_back(q.integer(0));
  return out;
}

std::optional<std::string> load_comment(database& db, const annotation_scope& s, const std::string& annotation, std::int64_t id) {
  query q = db.sql("SELECT body FROM annotation_comments WHERE tenant=? AND org=? AND doc=? AND annotation_id=? AND comment_id=?");
  q.bind(bind_scope(q, s), annotation).bind(5, id);
  if (!q.step()) return std::nullopt;
  return q.text(0);
}

bool insert_comment(database& db, const annotation_scope& s, const std::string& annotation, std::int64_t id, const std::string& body) {
  // After the thread's last comment (one seek in annotation_comments_in_order; writers are serialised).
  query q = db.sql(
      "INSERT INTO annotation_comments (tenant, org, doc, annotation_id, comment_id, body, position) "
      "SELECT ?1, ?2, ?3, ?4, CAST(?5 AS BIGINT), ?6, 1 + coalesce(max(position), 0) FROM annotation_comments "
      "WHERE tenant=?1 AND org=?2 AND doc=?3 AND annotation_id=?4 ON CONFLICT DO NOTHING");
  q.bind(bind_scope(q, s), annotation).bind(5, id).bind(6, body).step();
  return db.changes() > 0;
}

void update_comment(database& db, const annotation_scope& s, const std::string& annotation, std::int64_t id, const std::string& body) {
  query q = db.sql("UPDATE annotation_comments SET body=? WHERE tenant=? AND org=? AND doc=? AND annotation_id=? AND comment_id=?");
  q.bind(1, body);
  q.bind(bind_scope(q, s, 2), annotation).bind(6, id).step();
}

bool delete_comment(database& db, const annotation_scope& s, const std::string& annotation, std::int64_t id) {
  query q = db.sql("DELETE FROM annotation_comments WHERE tenant=? AND org=? AND doc=? AND annotation_id=? AND comment_id=?");
  q.bind(bind_scope(q, s), annotation).bind(5, id).step();
  return db.changes() > 0;
}

}  // namespace folio::service
