// service/annotations/store.hpp — comment annotations in the database (database.hpp: SQLite or PostgreSQL) (docs/API.md, "Comment annotations").
//
// An annotation is a row of `annotations` (its filter columns + its JSON body without comments, and
// an integer key, `aid`, that never leaves the database) and rows of `annotation_comments` (one JSON
// body per comment, keyed by the annotation's aid and the comment's position in the thread: comments
// are listed in the order they were added, whatever their ids; a comment's numeric id is unique in its
// thread). Readers put threads together from both in one statement: the annotations through the index
// that fits the filter, joined to each one's comments by aid (scan_threads, scan_listed_threads). Every
// statement finds annotations by (tenant, org, doc) first, and comments only through an annotation so
// found (by aid): no query can reach another tenant's or another document's annotations or comments.
// An annotation's comments are deleted in the transaction that deletes it, and an aid is never
// handed out twice (SQLite: AUTOINCREMENT), so no annotation can find comments that were another's.
// Order: createdAt, then annotationId (both immutable), which is also the keyset pagination cursor, so
// a page boundary never moves under concurrent inserts, updates or deletes.
// This module owns both tables and their migrations (annotation_migrations).
// Thread-safety: as `database` (one thread at a time per connection).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "platform/database.hpp"

namespace folio::service {

/// The tables annotations (schema 1) and annotation_comments (schema 2), status and order columns
/// (schemas 2 and 3), the integer key that joins them (schema 8) and their indexes.
module_migrations annotation_migrations();

/// Where annotations live: a tenant's organization's document.
struct annotation_scope {
  std::string tenant, org, doc;
};

/// The key that annotation writes of a document serialise on (database::write(key, f)): a thread's
/// comment ids and positions are read and then written in one transaction.
inline std::string document_key(const annotation_scope& s) { return "annotations\x1f" + s.tenant + '\x1f' + s.org + '\x1f' + s.doc; }

/// Filters: ids within a list are OR'ed, lists (and the other conditions) are AND'ed; an empty list
/// is no filter.
struct annotation_filter {
  std::vector<std::string> locations, users, ids, statuses;
  std::optional<std::string> updated_after, updated_before;  ///< exclusive bounds on lastUpdated
  std::optional<std::pair<std::string, std::string>> after;  ///< keyset cursor: (createdAt, annotationId) last seen
  std::optional<std::pair<std::string, std::string>> through;  ///< (createdAt, annotationId) of the last to include
  std::int64_t limit = -1;                                    ///< at most this many (-1: all)
  bool empty() const { return locations.empty() && users.empty() && ids.empty() && statuses.empty() && !updated_after && !updated_before; }
};

/// One stored annotation without its comments.
struct annotation_row {
  std::string id;
  std::optional<std::string> location;  ///< location.id, for the location filter
  std::string user;                     ///< from.userId, for the user filter
  std::string status;                   ///< status.id, for the status filter
  std::string created_at, last_updated;
  std::string body;                     ///< the annotation's JSON object, without "comments"
  std::int64_t next_comment_id = 1;     ///< above every comment id the thread ever had: ids are never reused
};

/// A matching annotation as the store holds it: its JSON body without "comments".
struct annotation_head {
  std::string id, created_at;
  std::string body;
};

/// What a scan of threads calls: `begin` with each annotation (false: stop, nothing more is read),
/// then `comment` with the JSON body of each of its comments, in the order they were added.
struct thread_visitor {
  std::function<bool(const annotation_head&)> begin;
  std::function<void(std::string_view)> comment;
};

/// The matching annotations with their comments, oldest first, ties by id (f.limit: at most that many
/// annotations; then two statements, so call it inside a read transaction for one snapshot). One row
/// (an annotation's head, or one comment) in memory at a time where the plan walks an index in the
/// order asked; where it cannot (annotation ids, or a plan that sorts), SQLite sorts the rows first,
/// at most a page's (with a limit) or the listed ids' (at most 1,000 annotations).
void scan_threads(database& db, const annotation_scope& s, const annotation_filter& f, const thread_visitor& v);
/// The annotations `ids` (distinct, at most 1,000) in that order, with their comments as scan_threads
/// gives them: `missing()` in the place of an id the document does not have; an annotation that fails
/// the rest of `f` (its ids aside) is left out. One statement finds what each id is (an integer pair
/// per id, held), then one per passing thread reads it by its key, streamed with no sort; for one
/// snapshot, call it inside a read transaction.
void scan_listed_threads(database& db, const annotation_scope& s, const std::vector<std::string>& ids, const annotation_filter& f,
                         const thread_visitor& v, const std::function<void()>& missing);
/// Which of `ids` exist in the document, each with whether it passes the rest of `f` (its ids aside),
/// in one statement.
std::unordered_map<std::string, bool> annotations_passing(database& db, const annotation_scope& s, const std::vector<std::string>& ids,
                                                          const annotation_filter& f);
/// Ids of the matching annotations (no bodies), oldest first.
std::vector<std::string> match_annotations(database& db, const annotation_scope& s, const annotation_filter& f);

std::optional<annotation_row> load_annotation(database& db, const annotation_scope& s, const std::string& id);
/// Inserts a new annotation; false (nothing written) if the id exists in the document.
bool insert_annotation(database& db, const annotation_scope& s, const annotation_row& a);
/// Rewrites an existing annotation's columns and body (not next_comment_id).
void update_annotation(database& db, const annotation_scope& s, const annotation_row& a);
/// After a comment write: lastUpdated (column and body) and the next comment id.
void touch_annotation(database& db, const annotation_scope& s, const std::string& id, const std::string& body, const std::string& last_updated,
                      std::int64_t next_comment_id);
/// Deletes an annotation and its comments; false if it did not exist.
bool delete_annotation(database& db, const annotation_scope& s, const std::string& id);

/// The annotation's comment ids, in the order the comments were added.
std::vector<std::int64_t> comment_ids(database& db, const annotation_scope& s, const std::string& annotation);
std::optional<std::string> load_comment(database& db, const annotation_scope& s, const std::string& annotation, std::int64_t id);
/// Inserts a comment after the thread's last; false (nothing written) if the id exists in the annotation.
bool insert_comment(database& db, const annotation_scope& s, const std::string& annotation, std::int64_t id, const std::string& body);
void update_comment(database& db, const annotation_scope& s, const std::string& annotation, std::int64_t id, const std::string& body);
bool delete_comment(database& db, const annotation_scope& s, const std::string& annotation, std::int64_t id);

}  // namespace folio::service
