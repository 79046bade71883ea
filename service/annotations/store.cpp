#include "annotations/store.hpp"

namespace folio::service {

namespace {

/// " AND ..." conditions for a filter over the columns of `annotations` (named as `table`.column when
/// `table` is given), and their values in bind order; `with_ids`: with the filter's annotation ids (false:
/// the rest of the filter).
struct where_clause {
  std::string text;
  std::vector<std::string> values;
};

where_clause conditions(const annotation_filter& f, const std::string& table = "", bool with_ids = true) {
  where_clause w;
  const std::string t = table.empty() ? "" : table + ".";
  auto in_list = [&](const char* column, const std::vector<std::string>& ids) {
    if (ids.empty()) return;
    w.text += " AND " + t + column + " IN (" + database::placeholders(ids.size()) + ")";
    w.values.insert(w.values.end(), ids.begin(), ids.end());
  };
  in_list("location_id", f.locations);
  in_list("user_id", f.users);
  if (with_ids) in_list("annotation_id", f.ids);
  in_list("status_id", f.statuses);
  if (f.updated_after) w.text += " AND " + t + "last_updated > ?", w.values.push_back(*f.updated_after);
  if (f.updated_before) w.text += " AND " + t + "last_updated < ?", w.values.push_back(*f.updated_before);
  if (f.after) {
    w.text += " AND (" + t + "created_at, " + t + "annotation_id) > (?, ?)";
    w.values.push_back(f.after->first);
    w.values.push_back(f.after->second);
  }
  if (f.through) {
    w.text += " AND (" + t + "created_at, " + t + "annotation_id) <= (?, ?)";
    w.values.push_back(f.through->first);
    w.values.push_back(f.through->second);
  }
  return w;
}

/// Oldest first, ties by id, at most f.limit rows (a LIMIT parameter) when it is not -1. With
/// annotation ids, SQLite's "+created_at" keeps its planner on the id index (a seek per id) rather
/// than walking the whole document in time order to save a sort of <= 1,000 rows (PostgreSQL's planner
/// costs both itself and knows no such hint).
std::string order_by(const database& db, const annotation_filter& f) {
  std::string o = f.ids.empty() || db.kind() != dialect::sqlite ? " ORDER BY created_at, annotation_id" : " ORDER BY +created_at, annotation_id";
  if (f.limit >= 0) o += " LIMIT ?";
  return o;
}

int bind_scope(query& q, const annotation_scope& s, int i = 1) {
  q.bind_view(i, s.tenant).bind_view(i + 1, s.org).bind_view(i + 2, s.doc);  // every query ends before its scope
  return i + 3;
}

}  // namespace

namespace {

/// The columns a thread scan selects: the annotation's (a.), with the comments its row holds, and one
/// comment's body (c.; NULL for an annotation whose row holds its comments or that has none), and the
/// join that pairs them: the comments of an annotation whose row does not hold them, by its key, in the
/// order they were added (for the others the join's key is NULL: no seek). `thread_order` is the order
/// of the scan: the annotations' (createdAt, annotationId; aid, unique, ends it so that the index walked
/// gives the order whole and no sort is needed), then each one's comments.
constexpr const char* thread_columns = "SELECT a.annotation_id, a.created_at, a.body, a.comments, c.body FROM ";
constexpr const char* thread_join = " LEFT JOIN annotation_comments c ON c.aid = CASE WHEN a.comments IS NULL THEN a.aid END";
constexpr const char* thread_order = " ORDER BY a.created_at, a.annotation_id, a.aid, c.position";

/// The aid of the annotation `?N` in the document `?1, ?2, ?3` (a scalar subquery: NULL if none).
#define FOLIO_AID_OF(N) "(SELECT aid FROM annotations WHERE tenant=?1 AND org=?2 AND doc=?3 AND annotation_id=?" #N ")"

/// Hands on the annotation of the row `q` is at (thread_columns' first four): begin, then the comments
/// its row holds. False when the visitor stopped.
bool begin_thread(query& q, annotation_head& h, const thread_visitor& v) {
  h.id.assign(q.text_view(0)), h.created_at.assign(q.text_view(1)), h.body.assign(q.text_view(2));  // into the capacity h has
  if (!v.begin(h)) return false;
  if (const std::string_view held = q.text_view(3); !held.empty()) v.comment(held);  // NULL or '' reads empty
  return true;
}

/// Walks a thread scan's rows (grouped by annotation, comments in order): begin at each new annotation.
/// Returns false when the visitor stopped it (begin answered false), true at the end of the rows.
bool visit_threads(query& q, const thread_visitor& v) {
  annotation_head h;
  bool any = false;
  while (q.step()) {
    if ((!any || q.text_view(0) != h.id) && !begin_thread(q, h, v)) return false;
    any = true;
    if (!q.is_null(4)) v.comment(q.text_view(4));
  }
  return true;
}

}  // namespace

void scan_threads(database& db, const annotation_scope& s, const annotation_filter& f, const thread_visitor& v) {
  // One join: the annotations in the filter's index, each one's comments by its key, in order with no
  // sort where the index gives the order (the visitor stops the scan). With a limit, the page's last
  // annotation is found first (the filter's index alone; one statement, in the caller's read
  // transaction) and the join is bounded by it, so that a plan which sorts sorts at most a page's
  // rows. Cutting the annotations in a subquery instead and joining that made SQLite sort every row of
  // the page, comments and bodies, into a temporary B-tree. With annotation ids the ids bound the rows
  // already (at most 1,000 annotations), and the bound's own query could walk the whole document.
  annotation_filter bounded = f;
  bounded.limit = -1;
  if (f.limit == 0) return;
  if (f.limit > 0 && f.ids.empty()) {
    const where_clause w = conditions(bounded);
    query last = db.prepare("SELECT created_at, annotation_id FROM annotations WHERE tenant=? AND org=? AND doc=?" + w.text + order_by(db, bounded) +
                            " LIMIT 1 OFFSET ?");
    int i = bind_scope(last, s);
    for (const std::string& value : w.values) last.bind(i++, value);
    last.bind(i, f.limit - 1);
    if (last.step()) bounded.through = std::pair(last.text(0), last.text(1));
  }
  const where_clause w = conditions(bounded, "a");
  // SQLite, with ids: a seek per id, then a sort of what they found (see order_by).
  const char* order = !f.ids.empty() && db.kind() == dialect::sqlite ? " ORDER BY +a.created_at, a.annotation_id, a.aid, c.position" : thread_order;
  query q = db.prepare(std::string(thread_columns) + "annotations a" + thread_join + " WHERE a.tenant=? AND a.org=? AND a.doc=?" + w.text + order);
  q.one_row_at_a_time();  // PostgreSQL: a document's threads are never held whole
  int i = bind_scope(q, s);
  for (const std::string& value : w.values) q.bind(i++, value);
  if (f.limit < 0) {
    visit_threads(q, v);
    return;
  }
  std::int64_t taken = 0;  // the limit itself (with ids nothing bounds the rows at the page's end)
  visit_threads(q, {[&](const annotation_head& h) { return taken++ < f.limit && v.begin(h); }, v.comment});
}

void scan_listed_threads(database& db, const annotation_scope& s, const std::vector<std::string>& ids, const annotation_filter& f,
                         const thread_visitor& v, const std::function<void()>& missing) {
  if (ids.empty()) return;
  const where_clause w = conditions(f, "a", false);
  // One statement tells what each requested id is: the requested ids as rows (their place, their id),
  // each joined to its annotation (by annotations_by_id), and of those only the ones that pass the
  // other filters or have no annotation (a.aid NULL: missing), with the annotation's head and the
  // comments its row holds (thread_columns' first four: NULL where there is none). VALUES names its
  // columns column1, column2 in both dialects. A place with no row is an annotation that fails the
  // filters: the statement leaves those out, so no row is handed over per id only to be dropped.
  // The rows come in request order: SQLite's plan walks the VALUES rows in order, the LEFT JOIN's left
  // side outermost (an ORDER BY would make it sort every row, bodies included); PostgreSQL, whose hash
  // joins give any order, is asked for it (ORDER BY r.column1). A row out of that order is refused
  // (store_error) before anything of it is handed on. So each passing thread whose row holds its
  // comments is handed on from its row as it comes. From the first passing thread whose row does not
  // hold them (`comments` NULL: more than held_comments_max bytes, or changed since they were last
  // held; reading them here would need a second statement while this one runs, which PostgreSQL's
  // row-at-a-time mode does not allow), only (state, key) is kept for each place not handed on yet
  // (two integers per id: at most 1,000), and those threads are then read one by one by key. One row
  // of threads in memory at a time either way.
  std::string text = "SELECT a.annotation_id, a.created_at, a.body, a.comments, r.column1, a.aid FROM (VALUES ";
  for (std::size_t i = 0; i < ids.size(); ++i) text += (i ? ",(" : "(") + std::to_string(i) + ",?)";
  text += ") r LEFT JOIN annotations a ON a.tenant=? AND a.org=? AND a.doc=? AND a.annotation_id = r.column2";
  if (!w.text.empty()) text += " WHERE a.aid IS NULL OR (1=1" + w.text + ")";
  if (db.kind() != dialect::sqlite) text += " ORDER BY r.column1";
  enum place_state : std::int64_t { passes, absent, fails };
  std::size_t next = 0;  // the first place not handed on (those before it without a row failed)
  std::vector<std::pair<std::int64_t, std::int64_t>> rest;  // (state, aid) from place `next` on, once a thread is not held
  {
    query q = db.prepare(text);
    q.one_row_at_a_time();  // PostgreSQL: the heads and held comments are never held whole
    int i = 1;  // ids, s and w outlive q: bound without copies
    for (const std::string& id : ids) q.bind_view(i++, id);
    i = bind_scope(q, s, i);
    for (const std::string& value : w.values) q.bind_view(i++, value);
    annotation_head h;
    std::int64_t last = -1;  // the place of the row before
    while (q.step()) {
      const std::int64_t at = q.integer(4);
      const bool exists = !q.is_null(5);
      if (at <= last || static_cast<std::size_t>(at) >= ids.size())
        throw store_error(failure::other, "scan_listed_threads: a place out of range or out of request order");
      last = at;
      if (rest.empty() && (!exists || !q.is_null(3))) {
        next = static_cast<std::size_t>(at) + 1;
        if (!exists) missing();
        else if (!begin_thread(q, h, v)) return;
        continue;
      }
      if (rest.empty()) rest.assign(ids.size() - static_cast<std::size_t>(at), {fails, 0}), next = static_cast<std::size_t>(at);
      rest[static_cast<std::size_t>(at) - next] = {exists ? passes : absent, exists ? q.integer(5) : 0};
    }
  }
  // Then each place not handed on, in order: a passing thread by its key (the row, then its comments
  // in order, no sort), streamed.
  static const std::string thread_by_key = std::string(thread_columns) + "annotations a" + thread_join + " WHERE a.aid = ? ORDER BY c.position";
  for (const auto& [state, aid] : rest) {
    if (state == absent) missing();
    if (state != passes) continue;
    query q = db.sql(thread_by_key.c_str());
    q.one_row_at_a_time();
    q.bind(1, aid);
    if (!visit_threads(q, v)) return;
  }
}

std::unordered_map<std::string, bool> annotations_passing(database& db, const annotation_scope& s, const std::vector<std::string>& ids,
                                                          const annotation_filter& f) {
  std::unordered_map<std::string, bool> out;
  if (ids.empty()) return out;
  const where_clause w = conditions(f, "", false);
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

namespace {

/// Adds `body` to `held`, the comments a row holds so far (a thread's first ones, joined by commas);
/// false, leaving it as it was, when that would pass held_comments_max bytes.
bool hold(std::string& held, std::string_view body) {
  if (held.size() + !held.empty() + body.size() > held_comments_max) return false;
  if (!held.empty()) held += ',';
  held += body;
  return true;
}

}  // namespace

bool insert_annotation(database& db, const annotation_scope& s, const annotation_row& a, const std::vector<comment_row>& comments) {
  std::int64_t aid = 0;
  {
    // Holding no comments ('') when it has none; with comments, they are held once they are in (a
    // comment's insert leaves its annotation's row holding none: the schema 9 triggers).
    query q = db.sql("INSERT INTO annotations (tenant, org, doc, annotation_id, location_id, user_id, status_id, created_at, last_updated, body, "
                     "next_comment_id, comments) VALUES (?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING RETURNING aid");
    int i = bind_scope(q, s);
    q.bind(i, a.id).bind_opt(i + 1, a.location).bind(i + 2, a.user).bind(i + 3, a.status).bind(i + 4, a.created_at).bind(i + 5, a.last_updated)
        .bind(i + 6, a.body).bind(i + 7, a.next_comment_id).bind_opt(i + 8, comments.empty() ? std::optional<std::string>("") : std::nullopt);
    if (!q.step()) return false;  // the id is taken: no row
    aid = q.integer(0);
    while (q.step()) {
    }
  }
  if (comments.empty()) return true;
  std::optional<std::string> held(std::in_place);
  std::int64_t position = 0;
  for (const comment_row& c : comments) {
    query q = db.sql("INSERT INTO annotation_comments (aid, position, comment_id, body) VALUES (?, ?, ?, ?)");
    q.bind(1, aid).bind(2, ++position).bind(3, c.id).bind(4, c.body).step();
    if (held && !hold(*held, c.body)) held.reset();
  }
  if (held) db.sql("UPDATE annotations SET comments = ? WHERE aid = ?").bind(1, *held).bind(2, aid).step();
  return true;
}

void update_annotation(database& db, const annotation_scope& s, const annotation_row& a) {
  query q = db.sql("UPDATE annotations SET location_id=?, user_id=?, status_id=?, last_updated=?, body=? "
                   "WHERE tenant=? AND org=? AND doc=? AND annotation_id=?");
  q.bind_opt(1, a.location).bind(2, a.user).bind(3, a.status).bind(4, a.last_updated).bind(5, a.body);
  q.bind(bind_scope(q, s, 6), a.id).step();
}

void touch_annotation(database& db, const annotation_scope& s, const std::string& id, const std::string& body, const std::string& last_updated,
                      std::int64_t next_comment_id) {
  if (db.kind() == dialect::postgresql) {
    // The row first. A comment another session writes meanwhile (a hand: this build's writers hold the
    // document's lock) then either committed before, and is read below, or waits in its trigger for
    // this transaction and makes the copy NULL after it; read first, its NULL could be overwritten by
    // a copy without it. SQLite has one writer at a time.
    query lock = db.sql("SELECT aid FROM annotations WHERE tenant=? AND org=? AND doc=? AND annotation_id=? FOR UPDATE");
    lock.bind(bind_scope(lock, s), id).step();
  }
  std::optional<std::string> held(std::in_place);
  {
    query c = db.sql("SELECT body FROM annotation_comments WHERE aid = " FOLIO_AID_OF(4) " ORDER BY position");
    c.one_row_at_a_time();  // PostgreSQL: the comments past the bound are never fetched
    c.bind(bind_scope(c, s), id);
    while (c.step())
      if (!hold(*held, c.text_view(0))) {
        held.reset();
        break;
      }
  }
  query q = db.sql("UPDATE annotations SET last_updated=?, body=?, next_comment_id=?, comments=? WHERE tenant=? AND org=? AND doc=? AND annotation_id=?");
  q.bind(1, last_updated).bind(2, body).bind(3, next_comment_id).bind_opt(4, held);
  q.bind(bind_scope(q, s, 5), id).step();
}

bool delete_annotation(database& db, const annotation_scope& s, const std::string& id) {
  {
    query q = db.sql("DELETE FROM annotation_comments WHERE aid = " FOLIO_AID_OF(4));
    q.bind(bind_scope(q, s), id).step();
  }
  query q = db.sql("DELETE FROM annotations WHERE tenant=? AND org=? AND doc=? AND annotation_id=?");
  q.bind(bind_scope(q, s), id).step();
  return db.changes() > 0;
}

std::vector<std::int64_t> comment_ids(database& db, const annotation_scope& s, const std::string& annotation) {
  query q = db.sql("SELECT comment_id FROM annotation_comments WHERE aid = " FOLIO_AID_OF(4) " ORDER BY position");
  q.bind(bind_scope(q, s), annotation);
  std::vector<std::int64_t> out;
  while (q.step()) out.push_back(q.integer(0));
  return out;
}

std::optional<std::string> load_comment(database& db, const annotation_scope& s, const std::string& annotation, std::int64_t id) {
  query q = db.sql("SELECT body FROM annotation_comments WHERE aid = " FOLIO_AID_OF(4) " AND comment_id=?5");
  q.bind(bind_scope(q, s), annotation).bind(5, id);
  if (!q.step()) return std::nullopt;
  return q.text(0);
}

bool insert_comment(database& db, const annotation_scope& s, const std::string& annotation, std::int64_t id, const std::string& body) {
  // After the thread's last comment (one seek to the end of its positions; writers are serialised). A
  // comment id the thread has is a conflict on annotation_comments_by_id: nothing is written.
  query q = db.sql(
      "INSERT INTO annotation_comments (aid, position, comment_id, body) "
      "SELECT a.aid, 1 + coalesce((SELECT max(c.position) FROM annotation_comments c WHERE c.aid = a.aid), 0), CAST(?5 AS BIGINT), ?6 "
      "FROM annotations a WHERE a.tenant=?1 AND a.org=?2 AND a.doc=?3 AND a.annotation_id=?4 ON CONFLICT DO NOTHING");
  q.bind(bind_scope(q, s), annotation).bind(5, id).bind(6, body).step();
  return db.changes() > 0;
}

void update_comment(database& db, const annotation_scope& s, const std::string& annotation, std::int64_t id, const std::string& body) {
  query q = db.sql("UPDATE annotation_comments SET body=?6 WHERE aid = " FOLIO_AID_OF(4) " AND comment_id=?5");
  q.bind(bind_scope(q, s), annotation).bind(5, id).bind(6, body).step();
}

bool delete_comment(database& db, const annotation_scope& s, const std::string& annotation, std::int64_t id) {
  query q = db.sql("DELETE FROM annotation_comments WHERE aid = " FOLIO_AID_OF(4) " AND comment_id=?5");
  q.bind(bind_scope(q, s), annotation).bind(5, id).step();
  return db.changes() > 0;
}

#undef FOLIO_AID_OF

}  // namespace folio::service
