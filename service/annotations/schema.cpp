#include "annotations/schema.hpp"

namespace folio::service {

namespace {

// Schema 8 (both dialects; the key columns' types are each dialect's own): an annotation has an
// integer key, `aid` (SQLite: the rowid), and its comments are keyed by it and their position, so a
// read joins an annotation to its comments by one integer rather than four text columns; SQLite's
// indexes of annotations end in their table's key, so they lead to the row by an integer too.
// annotations_by_id is only ever searched with all four columns equal, so the id comes first: it
// tells entries apart at the first column compared, where the document's columns are the same in
// most entries a seek passes. Positions are renumbered 1, 2, ...
// in each thread in the order they had (ties, which no build wrote, by comment id); a comment
// without its annotation (none a build wrote) is not copied. An annotation's aid is never seen
// outside the database and never handed out again (SQLite: AUTOINCREMENT; PostgreSQL: an identity),
// so comments left behind by hand can never become another annotation's; every delete also removes
// the annotation's comments in its transaction.
#define FOLIO_SCHEMA_8_COPY \
  "INSERT INTO annotations_8 (tenant, org, doc, annotation_id, location_id, user_id, created_at, body, status_id, last_updated, next_comment_id)\n" \
  "  SELECT tenant, org, doc, annotation_id, location_id, user_id, created_at, body, status_id, last_updated, next_comment_id FROM annotations\n" \
  "  ORDER BY tenant, org, doc, created_at, annotation_id;\n" \
  "INSERT INTO annotation_comments_8 (aid, position, comment_id, body)\n" \
  "  SELECT a.aid, row_number() OVER (PARTITION BY a.aid ORDER BY c.position, c.comment_id), c.comment_id, c.body\n" \
  "  FROM annotation_comments c JOIN annotations_8 a ON a.tenant = c.tenant AND a.org = c.org AND a.doc = c.doc AND a.annotation_id = c.annotation_id;\n" \
  "DROP TABLE annotation_comments;\n" \
  "DROP TABLE annotations;\n" \
  "ALTER TABLE annotations_8 RENAME TO annotations;\n" \
  "ALTER TABLE annotation_comments_8 RENAME TO annotation_comments;\n" \
  "CREATE UNIQUE INDEX annotations_by_id ON annotations (annotation_id, doc, org, tenant);\n" \
  "CREATE INDEX annotations_by_time ON annotations (tenant, org, doc, created_at, annotation_id);\n" \
  "CREATE INDEX annotations_by_location ON annotations (tenant, org, doc, location_id, created_at, annotation_id);\n" \
  "CREATE INDEX annotations_by_user ON annotations (tenant, org, doc, user_id, created_at, annotation_id);\n" \
  "CREATE INDEX annotations_by_status ON annotations (tenant, org, doc, status_id, created_at, annotation_id);\n" \
  "CREATE UNIQUE INDEX annotation_comments_by_id ON annotation_comments (aid, comment_id);\n"
#define FOLIO_SCHEMA_8_COLUMNS \
  "  tenant TEXT NOT NULL, org TEXT NOT NULL, doc TEXT NOT NULL, annotation_id TEXT NOT NULL,\n" \
  "  location_id TEXT, user_id TEXT NOT NULL, created_at TEXT NOT NULL, body TEXT NOT NULL,\n" \
  "  status_id TEXT NOT NULL DEFAULT 'OPEN', last_updated TEXT NOT NULL DEFAULT '',"
constexpr const char* schema_8 =
    "CREATE TABLE annotations_8 (\n  aid INTEGER PRIMARY KEY AUTOINCREMENT,\n" FOLIO_SCHEMA_8_COLUMNS " next_comment_id INTEGER NOT NULL DEFAULT 1);\n"
    "CREATE TABLE annotation_comments_8 (\n"
    "  aid INTEGER NOT NULL, position INTEGER NOT NULL, comment_id INTEGER NOT NULL, body TEXT NOT NULL,\n"
    "  PRIMARY KEY (aid, position)) WITHOUT ROWID;\n" FOLIO_SCHEMA_8_COPY;
constexpr const char* pg_schema_8 =
    "CREATE TABLE annotations_8 (\n  aid BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,\n" FOLIO_SCHEMA_8_COLUMNS
    " next_comment_id BIGINT NOT NULL DEFAULT 1);\n"
    "CREATE TABLE annotation_comments_8 (\n"
    "  aid BIGINT NOT NULL, position BIGINT NOT NULL, comment_id BIGINT NOT NULL, body TEXT NOT NULL,\n"
    "  PRIMARY KEY (aid, position));\n" FOLIO_SCHEMA_8_COPY
    "ALTER INDEX annotations_8_pkey RENAME TO annotations_pkey;\n"
    "ALTER INDEX annotation_comments_8_pkey RENAME TO annotation_comments_pkey;\n"
    "ALTER SEQUENCE annotations_8_aid_seq RENAME TO annotations_aid_seq;\n";
#undef FOLIO_SCHEMA_8_COLUMNS
#undef FOLIO_SCHEMA_8_COPY

// Schema 9: an annotation's row holds its thread's comments as a read gives them (`comments`: the
// bodies in position order joined by commas, '' for none), or NULL when they pass held_comments_max
// (65536) bytes (store.hpp), so a read of a document's threads seeks no comments. The migration holds
// every thread within the bound, in one pass over the comments (linear): PostgreSQL through
// string_agg's ORDER BY; SQLite (whose group_concat takes no ORDER BY before 3.44) over each thread's
// comments as a subquery ordered by position, which an aggregate reads as it runs, never flattened
// into it (a running group_concat window would materialise every prefix of every thread: quadratic).
// `folio-admin check` compares every held copy with the comments. Triggers keep the copy from going
// stale whoever writes a comment (this build, an older folio-fcgi still running, a
// hand): any insert, update or delete of a comment leaves its annotation's row holding none (NULL),
// and this build holds them again after its writes (touch_annotation, insert_annotation).
constexpr const char* schema_9 = R"sql(
ALTER TABLE annotations ADD COLUMN comments TEXT;
UPDATE annotations SET comments = '' WHERE NOT EXISTS (SELECT 1 FROM annotation_comments c WHERE c.aid = annotations.aid);
UPDATE annotations SET comments = (SELECT group_concat(body, ',') FROM (SELECT body FROM annotation_comments c WHERE c.aid = annotations.aid ORDER BY c.position))
WHERE aid IN (SELECT aid FROM annotation_comments GROUP BY aid HAVING sum(length(CAST(body AS BLOB)) + 1) - 1 <= 65536);
CREATE TRIGGER annotation_comments_inserted AFTER INSERT ON annotation_comments
  BEGIN UPDATE annotations SET comments = NULL WHERE aid = NEW.aid AND comments IS NOT NULL; END;
CREATE TRIGGER annotation_comments_updated AFTER UPDATE ON annotation_comments
  BEGIN UPDATE annotations SET comments = NULL WHERE aid IN (OLD.aid, NEW.aid) AND comments IS NOT NULL; END;
CREATE TRIGGER annotation_comments_deleted AFTER DELETE ON annotation_comments
  BEGIN UPDATE annotations SET comments = NULL WHERE aid = OLD.aid AND comments IS NOT NULL; END;
)sql";
constexpr const char* pg_schema_9 = R"sql(
ALTER TABLE annotations ADD COLUMN comments TEXT;
UPDATE annotations SET comments = '' WHERE NOT EXISTS (SELECT 1 FROM annotation_comments c WHERE c.aid = annotations.aid);
UPDATE annotations a SET comments = t.joined FROM (
  SELECT aid, string_agg(body, ',' ORDER BY position) AS joined FROM annotation_comments
  GROUP BY aid HAVING sum(octet_length(body) + 1) - 1 <= 65536) t
WHERE t.aid = a.aid;
CREATE FUNCTION annotation_comments_unhold() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'INSERT' THEN UPDATE annotations SET comments = NULL WHERE aid = OLD.aid AND comments IS NOT NULL; END IF;
  IF TG_OP <> 'DELETE' THEN UPDATE annotations SET comments = NULL WHERE aid = NEW.aid AND comments IS NOT NULL; END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER annotation_comments_unhold AFTER INSERT OR UPDATE OR DELETE ON annotation_comments
  FOR EACH ROW EXECUTE FUNCTION annotation_comments_unhold();
)sql";

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
    {8, schema_8},
    {9, schema_9},
};

// PostgreSQL: the tables as schema 3 leaves them, in its types (its list starts there).
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
    {8, pg_schema_8},
    {9, pg_schema_9},
};

}  // namespace

module_migrations annotation_migrations() { return {steps, pg_steps}; }

}  // namespace folio::service
