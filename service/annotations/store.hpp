// service/annotations/store.hpp — comment annotations in the database (storage/database.hpp: SQLite or PostgreSQL) (docs/API.md, "Comment annotations").
//
// An annotation is a row of `annotations` (its filter columns + its JSON body without comments, and
// an integer key, `aid`, that never leaves the database) and rows of `annotation_comments` (one JSON
// body per comment, keyed by the annotation's aid and the comment's position in the thread: comments
// are listed in the order they were added, whatever their ids; a comment's numeric id is unique in its
// thread). The annotation's row also holds its thread's comments as a read gives them (`comments`: the
// bodies in order, joined by commas) while they take at most held_comments_max bytes, so
// that a read finds a thread in one row where a seek per thread into the comments (a random one in a
// scan: scans go in createdAt order, comments lie in aid order) cost more than the rest of the read.
// Invariant: `comments` is NULL or exactly the thread's comments so joined. The database keeps it
// whoever writes a comment (triggers, annotations/schema.cpp: a comment's insert, update or delete makes its
// annotation's `comments` NULL); insert_annotation and touch_annotation hold the comments again after
// this build's writes. NULL only means that readers take the comments from their table. Readers put
// threads together in one statement: the annotations through the index that fits the filter, joined by
// aid to the comments of those whose row does not hold them (scan_threads, scan_listed_threads). Every statement finds
// annotations by (tenant, org, doc) first, and comments only through an annotation so found (by aid):
// no query can reach another tenant's or another document's annotations or comments.
// An annotation's comments are deleted in the transaction that deletes it, and an aid is never
// handed out twice (SQLite: AUTOINCREMENT), so no annotation can find comments that were another's.
// Order: createdAt, then annotationId (both immutable), which is also the keyset pagination cursor, so
// a page boundary never moves under concurrent inserts, updates or deletes.
// Its tables' migrations are annotations/schema.cpp's (annotation_migrations).
// Thread-safety: as `database` (one thread at a time per connection).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "storage/database.hpp"

namespace folio::service {

/// The most bytes of comments (their bodies and the commas between them) that an annotation's row
/// holds; a thread with more is read from annotation_comments. A bound on what a row and a write that
/// holds it again (touch_annotation) take, well above a usual thread (hundreds of bytes a comment).
inline constexpr std::size_t held_comments_max = 64 * 1024;

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
/// then `comment` with the JSON bodies of its comments in the order they were added: one or more at a
/// call, separated by commas (the comments an annotation's row holds come in one call), never empty.
struct thread_visitor {
  std::function<bool(const annotation_head&)> begin;
  std::function<void(std::string_view)> comment;
};

/// The matching annotations with their comments, oldest first, ties by id (f.limit: at most that many
/// annotations; then two statements, so call it inside a read transaction for one snapshot). One row
/// (an annotation's head with the comments it holds, or one comment) in memory at a time where the
/// plan walks an index in the order asked; where it cannot (annotation ids, or a plan that sorts),
/// SQLite sorts the rows first, at most a page's (with a limit) or the listed ids' (at most 1,000
/// annotations).
void scan_threads(database& db, const annotation_scope& s, const annotation_filter& f, const thread_visitor& v);
/// The annotations `ids` (distinct, at most 1,000) in that order, with their comments as scan_threads
/// gives them: `missing()` in the place of an id the document does not have; an annotation that fails
/// the rest of `f` (its ids aside) is left out. One statement finds the ids that are missing or pass
/// (a failing one gives no row), in request order (SQLite's plan; PostgreSQL: ORDER BY; a row out of
/// order throws store_error), with the annotation's head and the comments its row holds, and hands
/// each thread on from its row while the row holds the thread; for the places after one that does
/// not, it keeps an integer pair per id and reads each passing thread by its key afterwards (one
/// statement each, streamed with no sort). For one snapshot, call it inside a read transaction.
void scan_listed_threads(database& db, const annotation_scope& s, const std::vector<std::string>& ids, const annotation_filter& f,
                         const thread_visitor& v, const std::function<void()>& missing);
/// Which of `ids` exist in the document, each with whether it passes the rest of `f` (its ids aside),
/// in one statement.
std::unordered_map<std::string, bool> annotations_passing(database& db, const annotation_scope& s, const std::vector<std::string>& ids,
                                                          const annotation_filter& f);
/// Ids of the matching annotations (no bodies), oldest first.
std::vector<std::string> match_annotations(database& db, const annotation_scope& s, const annotation_filter& f);

std::optional<annotation_row> load_annotation(database& db, const annotation_scope& s, const std::string& id);
/// A comment as a thread is written with: its id and its JSON body.
struct comment_row {
  std::int64_t id;
  std::string body;
};
/// Inserts a new annotation with its comments (in that order; their ids distinct), the row holding
/// them; false (nothing written) if the id exists in the document.
bool insert_annotation(database& db, const annotation_scope& s, const annotation_row& a, const std::vector<comment_row>& comments = {});
/// Rewrites an existing annotation's columns and body (not next_comment_id).
void update_annotation(database& db, const annotation_scope& s, const annotation_row& a);
/// After a comment write: lastUpdated (column and body), the next comment id, and the thread's comments
/// held in its row again (read from their table: at most held_comments_max bytes and one comment more).
void touch_annotation(database& db, const annotation_scope& s, const std::string& id, const std::string& body, const std::string& last_updated,
                      std::int64_t next_comment_id);
/// Deletes an annotation and its comments; false if it did not exist.
bool delete_annotation(database& db, const annotation_scope& s, const std::string& id);

/// The annotation's comment ids, in the order the comments were added.
std::vector<std::int64_t> comment_ids(database& db, const annotation_scope& s, const std::string& annotation);
std::optional<std::string> load_comment(database& db, const annotation_scope& s, const std::string& annotation, std::int64_t id);
/// Inserts a comment after the thread's last; false (nothing written) if the id exists in the annotation.
/// This and the next two leave the thread's comments unheld (read from their table: the
/// comment triggers) when they write: call touch_annotation after a request's comment writes to hold them again.
bool insert_comment(database& db, const annotation_scope& s, const std::string& annotation, std::int64_t id, const std::string& body);
void update_comment(database& db, const annotation_scope& s, const std::string& annotation, std::int64_t id, const std::string& body);
bool delete_comment(database& db, const annotation_scope& s, const std::string& annotation, std::int64_t id);

}  // namespace folio::service
