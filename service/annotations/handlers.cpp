// Comment annotations (docs/API.md, "Comment annotations"): /v1/commentannotations/get, the paged
// /v2/commentannotations/get, and the write side (/v2/commentannotations/add|update|delete and
// /v2/commentannotations/comments/add|update|delete).
//
// Batch calls check the request (ids, envelope, limits) first — a malformed request is one
// INVALID_ARGUMENT — then each item on its own: an item that fails gets `success: false` and a message
// and writes nothing, the others are written. The whole call is one transaction, so a call is also
// durable (or not) as a whole once it answers.
#include <openssl/evp.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "annotations/store.hpp"
#include "events/outbox.hpp"
#include "annotations/model.hpp"
#include "wire/base64.hpp"
#include "platform/fields.hpp"
#include "annotations/handlers.hpp"
#include "platform/clock.hpp"
#include "wire/json.hpp"

namespace folio::service {

namespace {

annotation_scope scope_of(context& c) {
  std::string org = required_id(c.data, "organizationId", "Organization ID is required");
  std::string doc = required_id(c.data, "documentId", "Document ID is required");
  return {c.who.tenant, std::move(org), std::move(doc)};
}

/// `ids` without repeats, each at its first place. The ids are compared in place (no copy of any):
/// sorted by (id, place), every one but the first of an id repeats. O(k log k), two allocations (a
/// hash set allocated a node per id).
std::vector<std::string> distinct(std::vector<std::string> ids) {
  std::vector<char> first(ids.size(), 1);
  {
    std::vector<std::pair<std::string_view, std::size_t>> by_id;
    by_id.reserve(ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i) by_id.emplace_back(ids[i], i);
    std::sort(by_id.begin(), by_id.end());
    for (std::size_t i = 1; i < by_id.size(); ++i)
      if (by_id[i].first == by_id[i - 1].first) first[by_id[i].second] = 0;
  }
  std::size_t kept = 0;
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (first[i]) {
      if (kept != i) ids[kept] = std::move(ids[i]);
      ++kept;
    }
  ids.resize(kept);
  return ids;
}

/// One entry of a per-item result map.
struct item_result {
  std::string key;
  bool success = false;
  std::string message;
  std::optional<std::string> annotation_id;
  std::optional<std::vector<std::int64_t>> comment_ids;
  std::optional<std::int64_t> comment_id;
};

std::string results_body(const std::string& message, const std::vector<item_result>& results) {
  return success_body(message, [&](json_writer& w) {
    w.StartObject();
    for (const item_result& r : results) {
      w.Key(r.key.data(), static_cast<rapidjson::SizeType>(r.key.size()));
      w.StartObject();
      w.Key("success");
      w.Bool(r.success);
      if (r.annotation_id) {
        write_member(w, "annotationId", *r.annotation_id);
      }
      if (r.comment_id) {
        w.Key("commentId");
        w.Int64(*r.comment_id);
      }
      if (r.comment_ids) {
        w.Key("commentIds");
        w.StartArray();
        for (std::int64_t id : *r.comment_ids) w.Int64(id);
        w.EndArray();
      }
      write_member(w, "message", r.message);
      w.EndObject();
    }
    w.EndObject();
  });
}

std::string count_message(const std::vector<item_result>& results, const char* noun, const char* verb) {
  const auto ok = std::count_if(results.begin(), results.end(), [](const item_result& r) { return r.success; });
  return std::to_string(ok) + " of " + std::to_string(results.size()) + " " + noun + " " + verb + ".";
}

/// A required array of 1..max items.
const rapidjson::Value& item_array(const rapidjson::Value& data, const char* field, std::size_t max, const char* noun) {
  const rapidjson::Value* v = field_value(data, field);
  if (!v) throw api_error(status::invalid_argument, std::string(field) + " is required.");
  if (!v->IsArray()) throw api_error(status::invalid_argument, std::string(field) + " must be an array.");
  if (v->Empty()) throw api_error(status::invalid_argument, std::string(field) + " must hold at least one " + noun + ".");
  if (v->Size() > max)
    throw api_error(status::invalid_argument, std::string(field) + " may hold at most " + std::to_string(max) + " " + noun + "s.");
  return *v;
}

// ---- reads --------------------------------------------------------------------------------------------

/// The page token: where the last page ended plus a digest of the query, so a token only continues the
/// query (tenant, document, filters) that produced it.
std::string query_digest(const annotation_scope& s, const annotation_filter& f) {
  std::string q = s.tenant + '\n' + s.org + '\n' + s.doc;
  for (const auto* list : {&f.locations, &f.users, &f.ids, &f.statuses}) {
    q += '\x1e';
    for (const std::string& id : *list) q += id + '\n';
  }
  q += '\x1e' + f.updated_after.value_or("") + '\x1e' + f.updated_before.value_or("");
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(q.data(), q.size(), md, &len, EVP_sha256(), nullptr) != 1) throw api_error(status::internal, "Internal error.");
  return std::string(reinterpret_cast<const char*>(md), 12);
}

std::string page_token(const annotation_scope& s, const annotation_filter& f, const std::string& created_at, const std::string& id) {
  return base64url_encode(query_digest(s, f) + created_at + id);
}

/// Streams threads as the API returns them, as a scan of threads visits them (store.hpp): each stored
/// annotation with "comments" (in the order they were added) appended as the scan hands them over (a
/// comment, or all that the annotation's row holds, at a time); `take`, when given, says whether an
/// annotation goes into the answer (false: the scan stops).
class thread_writer {
 public:
  explicit thread_writer(context& c, std::function<bool(const annotation_head&)> take = {}) : c_(c), take_(std::move(take)) {}
  thread_visitor visitor() {
    return {[this](const annotation_head& a) { return begin(a); }, [this](std::string_view comment) { add(comment); }};
  }
  /// Ends the thread being written, if any.
  void close() {
    if (!open_) return;
    c_.out.append("]}");
    c_.out.flush_if_full();
    open_ = false;
  }
  /// Writes the separator before the next item of the answer's array.
  void separate() {
    if (items_++) c_.out.append(",");
  }

 private:
  bool begin(const annotation_head& a) {
    close();
    if (take_ && !take_(a)) return false;
    separate();
    std::string_view body = a.body;
    body.remove_suffix(1);  // the stored object's closing brace
    c_.out.append(body);
    c_.out.append(body.size() > 1 ? ",\"comments\":[" : "\"comments\":[");
    open_ = true, first_comment_ = true;
    return true;
  }
  void add(std::string_view comments) {  // one or more, comma-separated; a scan stops at a refused annotation: a thread is open here
    if (!first_comment_) c_.out.append(",");
    first_comment_ = false;
    c_.out.append(comments);
    c_.out.flush_if_full();
  }

  context& c_;
  std::function<bool(const annotation_head&)> take_;
  std::size_t items_ = 0;
  bool open_ = false, first_comment_ = true;
};

std::pair<std::string, std::string> read_page_token(const rapidjson::Value& v, const annotation_scope& s, const annotation_filter& f) {
  if (!v.IsString()) throw api_error(status::invalid_argument, "pageToken must be a string.");
  const std::optional<std::string> raw = base64url_decode({v.GetString(), v.GetStringLength()});
  if (!raw || raw->size() < 12 + 24 + 1 || raw->compare(0, 12, query_digest(s, f)) != 0 || !is_timestamp(std::string_view(*raw).substr(12, 24)))
    throw api_error(status::invalid_argument, "pageToken is not valid for this query; start again without it.");
  return {raw->substr(12, 24), raw->substr(36)};
}

// ---- writes -------------------------------------------------------------------------------------------

/// Hands out the ids of comments sent without one: one more than the largest id the thread has ever
/// had (deleted ids are not given again) — until that would pass 2^53 - 1, which a client can reach by
/// giving the largest id itself; from then on the smallest ids the thread does not use now, so a thread
/// never runs out. `in_use(id)` tells whether a comment of the thread (or of this call) has `id`.
class comment_ids_for_new {
 public:
  explicit comment_ids_for_new(std::int64_t next) : next_(next) {}
  void saw(std::int64_t id) { next_ = std::max(next_, id + 1); }
  template <class InUse>
  std::int64_t take(InUse&& in_use) {
    if (next_ <= max_comment_id) return next_++;
    while (in_use(free_)) ++free_;  // ids taken are never below free_: linear over one call
    return free_++;
  }
  std::int64_t next() const { return std::min(next_, max_comment_id + 1); }

 private:
  std::int64_t next_, free_ = 1;
};

/// Writes one checked annotation with its comments; the result says why not if it was not written.
/// Inside the write's transaction: the event of an annotation's change (events/outbox.hpp), by `user`.
/// `data`: the event's data when not the annotation's or comment's ids alone. Subjects: "annotation\x1f<org>\x1f<doc>\x1f<id>", a comment's with "\x1f<commentId>" after it.
void annotation_event(database& db, const annotation_scope& s, std::string_view type, const std::string& annotation, std::optional<std::int64_t> comment,
                      std::string_view user, std::string data = {}) {
  std::string subject = std::string("annotation\x1f").append(s.org).append("\x1f").append(s.doc).append("\x1f").append(annotation);
  if (comment) subject.append("\x1f").append(std::to_string(*comment));
  if (data.empty()) data = comment ? comment_event_data(s.org, s.doc, annotation, *comment) : annotation_event_data(s.org, s.doc, annotation);
  record_event(db, {s.tenant, type, s.org, std::move(subject), false, user, now_unix_ms(), std::move(data)});
}

item_result add_annotation(database& db, const annotation_scope& s, annotation_value a, const std::string& now) {
  item_result r;
  const bool generated = !a.id;
  if (generated) a.id = random_annotation_id();
  r.key = *a.id;
  r.annotation_id = a.id;
  if (!a.created_at) a.created_at = now;
  if (!a.last_updated) a.last_updated = now;
  comment_ids_for_new fresh(1);
  std::unordered_set<std::int64_t> given, used;
  for (const comment_value& c : a.comments)
    if (c.id) fresh.saw(*c.id), given.insert(*c.id);
  std::vector<std::int64_t> ids;
  std::vector<comment_row> comments;
  for (std::size_t i = 0; i < a.comments.size(); ++i) {
    comment_value& c = a.comments[i];
    if (!c.id) c.id = fresh.take([&](std::int64_t id) { return given.count(id) || used.count(id); });
    if (!used.insert(*c.id).second) return r.message = "commentData[" + std::to_string(i) + "].commentId " + std::to_string(*c.id) + " is used twice.", r;
    if (!c.from) c.from = a.from;
    if (!c.created_at) c.created_at = now;
    if (!c.last_updated) c.last_updated = now;
    ids.push_back(*c.id);
    comments.push_back({*c.id, comment_body(c)});
  }
  const annotation_row row{*a.id, a.location ? std::optional(a.location->id) : std::nullopt, a.from.id, a.status.id, *a.created_at, *a.last_updated,
                           annotation_body(a), fresh.next()};
  if (!insert_annotation(db, s, row, comments)) return r.message = "Annotation already exists.", r;
  annotation_event(db, s, event_types::annotation_added, *a.id, std::nullopt, a.from.id);
  r.success = true;
  r.comment_ids = std::move(ids);
  r.message = "Annotation added successfully.";
  return r;
}

/// The annotations an update or delete acts on: the requested ids (each reported, found or not) and
/// the matches of the filters, AND'ed. A list that is present but empty selects nothing. With no list
/// at all, `everything` decides: every annotation of the document (delete) or an error (update).
struct targets {
  std::vector<std::string> ids;           ///< act on these
  std::vector<item_result> not_acted_on;  ///< requested ids that do not exist or do not match
};

targets select_targets(database& db, const annotation_scope& s, const rapidjson::Value& data, bool everything) {
  const std::optional<std::vector<std::string>> locations = selected_ids(data, "locationIds"), users = selected_ids(data, "userIds"),
                                                ids = selected_ids(data, "annotationIds");
  if (!locations && !users && !ids && !everything) throw api_error(status::invalid_argument, "annotationIds, locationIds or userIds is required.");
  targets t;
  annotation_filter f;
  if (locations) f.locations = *locations;
  if (users) f.users = *users;
  if (ids) f.ids = distinct(*ids);
  if (ids && ids->empty()) return t;
  // Another list present but empty selects nothing; the requested ids are still each reported.
  const bool none = (locations && locations->empty()) || (users && users->empty());
  if (!none) t.ids = match_annotations(db, s, f);
  if (f.ids.empty()) return t;
  const std::unordered_set<std::string> matched(t.ids.begin(), t.ids.end());
  const std::unordered_map<std::string, bool> exist = annotations_passing(db, s, f.ids, {});
  t.ids.clear();
  for (const std::string& id : f.ids) {
    if (matched.count(id)) t.ids.push_back(id);
    else t.not_acted_on.push_back({id, false, exist.count(id) ? "Annotation does not match locationIds or userIds." : "Annotation not found.", id, {}, {}});
  }
  return t;
}

/// The annotation a comments call works on; NOT_FOUND when it does not exist.
std::pair<std::string, annotation_row> target_annotation(database& db, const annotation_scope& s, const rapidjson::Value& data) {
  std::string id = required_id(data, "annotationId", "Annotation ID is required.");
  std::optional<annotation_row> row = load_annotation(db, s, id);
  if (!row) throw api_error(status::not_found, "Annotation not found.");
  return {std::move(id), std::move(*row)};
}

void touch(database& db, const annotation_scope& s, const annotation_row& row, const std::string& now, std::int64_t next_comment_id) {
  annotation_value a = stored_annotation(row.body);
  a.last_updated = now;
  touch_annotation(db, s, row.id, annotation_body(a), now, next_comment_id);
}

/// `commentIds`: up to 100 distinct comment ids; absent or null gives nullopt, and an empty list
/// selects no comment.
std::optional<std::vector<std::int64_t>> comment_id_list(const rapidjson::Value& data) {
  const rapidjson::Value* v = selection(data, "commentIds");
  if (!v) return std::nullopt;
  if (!v->IsArray()) throw api_error(status::invalid_argument, "commentIds must be an array of numbers.");
  if (v->Size() > max_comments_per_call) throw api_error(status::invalid_argument, "commentIds may hold at most 100 ids.");
  std::vector<std::int64_t> ids;
  for (rapidjson::SizeType i = 0; i < v->Size(); ++i) {
    const std::int64_t id = parse_comment_id((*v)[i], "commentIds[" + std::to_string(i) + "]");
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  }
  return ids;
}

/// Runs `act` on each annotation the request selects (select_targets; `everything`: as there), all in
/// one write transaction, and answers the selected ones "Annotation <verb> successfully." and each
/// requested id not acted on with why.
template <class F>
std::string for_each_target(context& c, const annotation_scope& s, bool everything, const char* verb, F&& act) {
  std::vector<item_result> results = c.db.write(document_key(s), [&] {
    targets t = select_targets(c.db, s, c.data, everything);
    std::vector<item_result> out;
    for (const std::string& id : t.ids) {
      act(id);
      out.push_back({id, true, std::string("Annotation ") + verb + " successfully.", id, {}, {}});
    }
    for (item_result& r : t.not_acted_on) out.push_back(std::move(r));
    return out;
  });
  return results_body(count_message(results, "annotations", verb), results);
}

/// The filters both reads take: locationIds, userIds and annotationIds (each id once).
annotation_filter filter_of(const rapidjson::Value& data) {
  annotation_filter f;
  f.locations = id_list(data, "locationIds");
  f.users = id_list(data, "userIds");
  f.ids = distinct(id_list(data, "annotationIds"));
  return f;
}

std::string annotations_get(context& c) {
  const annotation_scope s = scope_of(c);
  annotation_filter f = filter_of(c.data);
  // Streamed (body_output.hpp): an answer of any size holds one comment, or the comments one
  // annotation's row holds (store.hpp: at most held_comments_max bytes), at a time in memory.
  return c.db.read([&] {
    return success_body(c.out, "Annotations fetched successfully.", [&](json_writer& w) {
      w.RawValue("[", 1, rapidjson::kArrayType);  // the items are stored JSON, appended as they are
      if (f.ids.empty()) {
        thread_writer out(c);
        scan_threads(c.db, s, f, out.visitor());
        out.close();
      } else {
        // One slot per requested id in request order: the annotation, null where the id does not exist,
        // nothing where it exists but fails another filter.
        thread_writer out(c);
        scan_listed_threads(c.db, s, f.ids, f, out.visitor(), [&] {
          out.close();
          out.separate();
          c.out.append("null");
        });
        out.close();
      }
      c.out.append("]");
    });
  });
}

std::string annotations_get_page(context& c) {
  const annotation_scope s = scope_of(c);
  annotation_filter f = filter_of(c.data);
  f.statuses = id_list(c.data, "statusIds");
  f.updated_after = optional_timestamp(c.data, "updatedAfter", "updatedAfter");
  f.updated_before = optional_timestamp(c.data, "updatedBefore", "updatedBefore");
  const std::int64_t page_size = service::page_size(c.data, 1000);
  if (const rapidjson::Value* v = field_value(c.data, "pageToken")) f.after = read_page_token(*v, s, f);
  f.limit = page_size + 1;  // one more tells whether another page follows
  return c.db.read([&] {
    return success_body(c.out, "Annotations fetched successfully.", [&](json_writer& w) {
      w.RawValue("[", 1, rapidjson::kArrayType);
      std::int64_t n = 0;
      bool more = false;
      std::string last_created, last_id;
      thread_writer out(c, [&](const annotation_head& a) {
        if (n++ == page_size) return !(more = true);
        last_created = a.created_at, last_id = a.id;
        return true;
      });
      scan_threads(c.db, s, f, out.visitor());
      out.close();
      c.out.append("]");
      if (more) {
        w.Key("nextPageToken");  // URL-safe base64: nothing in it needs escaping
        write_string(w, page_token(s, f, last_created, last_id));
      }
    });
  });
}

std::string annotations_add(context& c) {
  const annotation_scope s = scope_of(c);
  const rapidjson::Value& items = item_array(c.data, "commentAnnotations", max_annotations_per_add, "annotation");
  // Checked before the transaction: the writer lock is held only for the writes.
  std::vector<std::optional<annotation_value>> checked;
  std::vector<item_result> results(items.Size());
  // The ids that key a result. An id keys the first item that has it; a later item with the same id is
  // keyed by its place, so the answer never holds a key twice.
  std::unordered_set<std::string> keys;
  for (rapidjson::SizeType i = 0; i < items.Size(); ++i) {
    results[i].key = "commentAnnotations[" + std::to_string(i) + "]";
    try {
      checked.push_back(parse_annotation(items[i]));
    } catch (const api_error& e) {
      checked.emplace_back();
      if (items[i].IsObject()) {  // a failed item names its id when it has a valid one
        try {
          if (auto id = optional_id(items[i], "annotationId")) {
            if (keys.insert(*id).second) results[i].key = *id;
            results[i].annotation_id = *id;
          }
        } catch (const api_error&) {
        }
      }
      results[i].message = e.message;
    }
  }
  const std::string now = now_iso();
  c.db.write(document_key(s), [&] {
    for (std::size_t i = 0; i < checked.size(); ++i) {
      if (!checked[i]) continue;
      if (checked[i]->id && !keys.insert(*checked[i]->id).second) {  // the same id twice in this call
        results[i].annotation_id = checked[i]->id;
        results[i].message = "Annotation " + *checked[i]->id + " appears more than once in commentAnnotations.";
        continue;
      }
      results[i] = add_annotation(c.db, s, std::move(*checked[i]), now);
    }
  });
  return results_body(count_message(results, "annotations", "added"), results);
}

std::string annotations_update(context& c) {
  const annotation_scope s = scope_of(c);
  const rapidjson::Value* data = field_value(c.data, "updatedData");
  if (!data) throw api_error(status::invalid_argument, "updatedData is required.");
  const annotation_update u = parse_annotation_update(*data);
  // The updated fields' names, for the events (docs/WEBHOOKS.md, comment_annotation.updated).
  std::string changed = "[";
  for (const auto& [present, name] : {std::pair{u.status.has_value(), "status"}, std::pair{u.location.has_value(), "location"},
                                      std::pair{u.color.has_value(), "color"}, std::pair{u.from.has_value(), "from"}, std::pair{u.context.has_value(), "context"}})
    if (present) changed.append(changed.size() > 1 ? ",\"" : "\"").append(name).append("\"");
  changed += ']';
  const std::string now = now_iso();
  return for_each_target(c, s, false, "updated", [&](const std::string& id) {
    const std::optional<annotation_row> row = load_annotation(c.db, s, id);
    annotation_value a = stored_annotation(row->body);
    if (u.status) a.status = *u.status;
    if (u.location) a.location = *u.location;
    if (u.color) a.color = *u.color;
    if (u.from) a.from = *u.from;
    if (u.context) a.context = *u.context;
    a.last_updated = now;
    update_annotation(c.db, s, {id, a.location ? std::optional(a.location->id) : std::nullopt, a.from.id, a.status.id, *a.created_at, now, annotation_body(a)});
    annotation_event(c.db, s, event_types::annotation_updated, id, std::nullopt, u.from ? u.from->id : c.who.subject,
                     annotation_event_data(s.org, s.doc, id, changed, a.status.id));
  });
}

std::string annotations_delete(context& c) {
  const annotation_scope s = scope_of(c);
  return for_each_target(c, s, true, "deleted", [&](const std::string& id) {
    delete_annotation(c.db, s, id);
    annotation_event(c.db, s, event_types::annotation_deleted, id, std::nullopt, c.who.subject);
  });
}

std::string comments_add(context& c) {
  const annotation_scope s = scope_of(c);
  const rapidjson::Value& items = item_array(c.data, "commentData", max_comments_per_call, "comment");
  std::vector<std::optional<comment_value>> checked;
  std::vector<item_result> results(items.Size());
  std::unordered_set<std::string> keys;  // as in annotations_add: an id keys the first item that has it
  for (rapidjson::SizeType i = 0; i < items.Size(); ++i) {
    results[i].key = "commentData[" + std::to_string(i) + "]";
    try {
      checked.push_back(parse_comment(items[i], "", true));
    } catch (const api_error& e) {
      checked.emplace_back();
      if (items[i].IsObject())  // a failed item names its id when it has a valid one
        if (auto it = items[i].FindMember("commentId"); it != items[i].MemberEnd() && it->value.IsInt64() && it->value.GetInt64() >= 0 &&
                                                        it->value.GetInt64() <= max_comment_id) {
          if (keys.insert(std::to_string(it->value.GetInt64())).second) results[i].key = std::to_string(it->value.GetInt64());
          results[i].comment_id = it->value.GetInt64();
        }
      results[i].message = e.message;
    }
  }
  const std::string now = now_iso();
  c.db.write(document_key(s), [&] {
    const auto [aid, row] = target_annotation(c.db, s, c.data);
    std::vector<std::int64_t> existing = comment_ids(c.db, s, aid);
    std::sort(existing.begin(), existing.end());
    comment_ids_for_new fresh(row.next_comment_id);  // never below an id the thread had: deleted ids are not reused
    std::unordered_set<std::int64_t> given;
    for (const auto& v : checked)
      if (v && v->id) fresh.saw(*v->id), given.insert(*v->id);
    bool wrote = false;
    for (std::size_t i = 0; i < checked.size(); ++i) {
      if (!checked[i]) continue;
      comment_value& v = *checked[i];
      item_result& r = results[i];
      if (!v.id) v.id = fresh.take([&](std::int64_t id) { return given.count(id) || std::binary_search(existing.begin(), existing.end(), id); });
      r.comment_id = v.id;
      const std::string key = std::to_string(*v.id);
      if (!keys.insert(key).second) {
        r.message = "Comment " + key + " appears more than once in commentData.";
        continue;
      }
      r.key = key;
      if (std::binary_search(existing.begin(), existing.end(), *v.id)) {
        r.message = "Comment already exists.";
        continue;
      }
      if (!v.created_at) v.created_at = now;
      if (!v.last_updated) v.last_updated = now;
      insert_comment(c.db, s, aid, *v.id, comment_body(v));
      annotation_event(c.db, s, event_types::comment_added, aid, *v.id, v.from ? v.from->id : stored_annotation(row.body).from.id);
      r.success = true;
      r.message = "Comment added successfully.";
      wrote = true;
    }
    if (wrote) touch(c.db, s, row, now, fresh.next());
  });
  return results_body(count_message(results, "comments", "added"), results);
}

std::string comments_update(context& c) {
  const annotation_scope s = scope_of(c);
  const std::optional<std::vector<std::int64_t>> ids = comment_id_list(c.data);
  if (!ids) throw api_error(status::invalid_argument, "commentIds is required.");
  const rapidjson::Value* data = field_value(c.data, "updatedData");
  if (!data) throw api_error(status::invalid_argument, "updatedData is required.");
  if (!data->IsObject()) throw api_error(status::invalid_argument, "updatedData must be an object.");
  std::optional<std::string> text, html;
  for (auto m = data->MemberBegin(); m != data->MemberEnd(); ++m) {
    const std::string name(m->name.GetString(), m->name.GetStringLength());
    if (name != "commentText" && name != "commentHtml") throw api_error(status::invalid_argument, "updatedData may hold only commentText and commentHtml.");
    if (!m->value.IsString()) throw api_error(status::invalid_argument, "updatedData." + name + " must be a string.");
    if (m->value.GetStringLength() > max_comment_bytes) throw api_error(status::invalid_argument, "updatedData." + name + " must be at most 65536 bytes.");
    (name == "commentText" ? text : html) = std::string(m->value.GetString(), m->value.GetStringLength());
  }
  if (!text && !html) throw api_error(status::invalid_argument, "updatedData must hold commentText or commentHtml.");
  const std::string now = now_iso();
  std::vector<item_result> results = c.db.write(document_key(s), [&] {
    const auto [aid, row] = target_annotation(c.db, s, c.data);
    std::vector<item_result> out;
    for (std::int64_t id : *ids) {
      item_result r{std::to_string(id), false, "Comment not found.", {}, {}, id};
      if (std::optional<std::string> body = load_comment(c.db, s, aid, id)) {
        comment_value v = stored_comment(*body);
        if (text) v.text = *text;
        if (html) v.html = *html;
        v.last_updated = now;
        if (v.text.empty() && v.html.empty()) {
          r.message = "commentText and commentHtml cannot both be empty.";
        } else {
          update_comment(c.db, s, aid, id, comment_body(v));
          annotation_event(c.db, s, event_types::comment_updated, aid, id, c.who.subject);
          r.success = true;
          r.message = "Comment updated successfully.";
        }
      }
      out.push_back(std::move(r));
    }
    if (std::any_of(out.begin(), out.end(), [](const item_result& r) { return r.success; })) touch(c.db, s, row, now, row.next_comment_id);
    return out;
  });
  return results_body(count_message(results, "comments", "updated"), results);
}

std::string comments_delete(context& c) {
  const annotation_scope s = scope_of(c);
  const std::optional<std::vector<std::int64_t>> requested = comment_id_list(c.data);
  const std::string now = now_iso();
  std::vector<item_result> results = c.db.write(document_key(s), [&] {
    const auto [aid, row] = target_annotation(c.db, s, c.data);
    const std::vector<std::int64_t> ids = requested ? *requested : comment_ids(c.db, s, aid);
    std::vector<item_result> out;
    for (std::int64_t id : ids) {
      const bool deleted = delete_comment(c.db, s, aid, id);
      if (deleted) annotation_event(c.db, s, event_types::comment_deleted, aid, id, c.who.subject);
      out.push_back({std::to_string(id), deleted, deleted ? "Comment deleted successfully." : "Comment not found.", {}, {}, id});
    }
    if (std::any_of(out.begin(), out.end(), [](const item_result& r) { return r.success; })) touch(c.db, s, row, now, row.next_comment_id);
    return out;
  });
  return results_body(count_message(results, "comments", "deleted"), results);
}

}  // namespace

void register_annotation_routes(route_table& routes) {
  routes.add({"/v1/commentannotations/get", annotations_get, false});
  routes.add({"/v2/commentannotations/get", annotations_get_page, false});
  routes.add({"/v2/commentannotations/add", annotations_add, true});
  routes.add({"/v2/commentannotations/update", annotations_update, true});
  routes.add({"/v2/commentannotations/delete", annotations_delete, true});
  routes.add({"/v2/commentannotations/comments/add", comments_add, true});
  routes.add({"/v2/commentannotations/comments/update", comments_update, true});
  routes.add({"/v2/commentannotations/comments/delete", comments_delete, true});
}

}  // namespace folio::service
