#include "crdt/record_session.hpp"

#include "crdt/family.hpp"
#include "crdt/history.hpp"
#include "events/outbox.hpp"
#include "platform/clock.hpp"
#include "wire/crdt_values.hpp"

#include <exception>
#include <utility>

#include "platform/log.hpp"

namespace folio::service {

void commit_events::emit(const committed_change& c) const noexcept {
  for (const subscriber& s : subscribers_) {
    try {
      s(c);
    } catch (const std::exception& e) {
      log::write("error", "commit_subscriber_failed", std::string("a subscriber of committed changes failed (the change is committed): ") + e.what());
    } catch (...) {
      log::write("error", "commit_subscriber_failed", "a subscriber of committed changes failed (the change is committed)");
    }
  }
}

std::optional<stored_record> read_stored(database& db, const record_key& k) {
  std::optional<stored_record> out;
  db.read([&] {
    std::optional<record_row> row = load_record(db, k, true);
    if (!row) return;
    out.emplace();
    out->row = std::move(*row);
    if (out->row.log_len > 0) out->log = load_log(db, k);
  });
  return out;
}

folio::document fold_log(const record_row& row, const std::vector<logged_change>& log) {
  std::optional<folio::document> d;
  if (const folio::decode_result r = folio::document::decode(row.snapshot, row.incarnation, d); !r)
    throw std::runtime_error("stored snapshot does not decode: " + r.description());
  for (const logged_change& c : log) {
    const folio::apply_result r = d->apply(c.batch);
    if (!r || r.pending) throw std::runtime_error("stored change does not apply: " + r.message);
  }
  return std::move(*d);
}

record_session::record_session(crdt_family& family, database& db, record_key k, bool exclusive)
    : family_(family), db_(db), key_(std::move(k)), cache_key_(key_.cache_key()), exclusive_(exclusive) {}

void record_session::lock(std::shared_ptr<cached_doc> entry) {
  if (entry_ == entry) return;
  std::unique_lock<std::timed_mutex> l(entry->lock, std::defer_lock);
  if (!l.try_lock_until(db_.deadline())) throw deadline_exceeded();
  adopt(std::move(entry), std::move(l));
}

void record_session::adopt(std::shared_ptr<cached_doc> entry, std::unique_lock<std::timed_mutex> l) {
  if (lock_.owns_lock()) lock_.unlock();
  entry_ = std::move(entry);
  lock_ = std::move(l);
}

record_session::~record_session() {
  if (changing_ && entry_) {  // changed and not committed: the entry must not keep the change
    entry_->doc.reset();
    entry_->revision = -1;
  }
  if (too_large_ && entry_) {  // served, not kept (doc_cache.hpp): the cache counts nothing for it already
    entry_->doc.reset();
    entry_->revision = -1;
    entry_->rendered.store(nullptr);
  }
}

const std::optional<record_row>& record_session::open(bool with_document) {
  std::shared_ptr<cached_doc> entry = family_.cache().find(cache_key_);
  if (!entry && !exclusive_) {  // nothing cached: is there a record at all?
    row_ = load_record(db_, key_, false);
    if (!row_) return row_;
  }
  if (!entry) entry = family_.cache().get(cache_key_);
  lock(std::move(entry));
  if (exclusive_ && !hold_) hold_.emplace(db_, cache_key_);  // the entry's lock first, then the record's
  row_ = load_record(db_, key_, false);  // under the lock: the revision no other request of ours can move
  if (!row_ || !with_document) return row_;
  cached_doc& e = *entry_;
  const bool hit = e.doc && e.revision == row_->revision && e.doc->replica() == row_->incarnation;
  family_.cache().note(hit);
  if (hit) return row_;
  e.doc.reset();
  e.revision = -1;
  // The snapshot and the log at one revision: the row is read again inside the transaction (another
  // process may have written since the read above).
  std::optional<stored_record> stored = read_stored(db_, key_);
  if (!stored) return row_ = std::nullopt;
  e.doc.emplace(fold_log(stored->row, stored->log));
  row_ = std::move(stored->row);
  if (wants_compaction(row_->log_len, row_->log_bytes, row_->snapshot_bytes)) family_.compactions().schedule(key_);  // e.g. left long by a restart
  row_->snapshot.clear();
  row_->snapshot.shrink_to_fit();
  e.revision = row_->revision;
  account();
  return row_;
}

const std::optional<record_row>& record_session::open_rendered(renderer render, std::shared_ptr<const rendered_value>& value) {
  auto current = [&](const std::shared_ptr<const rendered_value>& v) {
    return v && v->revision == row_->revision && v->incarnation == row_->incarnation;
  };
  const std::shared_ptr<cached_doc> entry = exclusive_ ? nullptr : family_.cache().find(cache_key_);
  if (std::shared_ptr<const rendered_value> held = entry ? entry->rendered.load() : nullptr) {  // immutable: any revision's is safe to hold
    row_ = load_record(db_, key_, false);
    if (!row_) return row_;
    if (current(held)) {
      family_.cache().note(true);
      value = std::move(held);
      return row_;
    }
  }
  if (!open()) return row_;
  value = entry_->rendered.load();  // rendered by a get that held the entry before this one
  if (!current(value)) {
    value = std::make_shared<const rendered_value>(rendered_value{row_->revision, row_->incarnation, render(*entry_->doc)});
    entry_->rendered.store(value);
    account();
  }
  return row_;
}

const record_row& record_session::open_existing(bool with_document) {
  const std::optional<record_row>& row = open(with_document);
  if (!row) throw api_error(status::not_found, "No CRDT data found for this editor ID.");
  return *row;
}

std::optional<std::string> record_session::event_value(const folio::document& d) const {
  const std::size_t bound = family_.platform().settings().webhooks.value_bytes;
  if (bound == 0 || d.units() > 16 * std::uint64_t(bound)) return std::nullopt;  // every unit of a value takes a byte or more
  std::string v = value_json(d);
  if (v.size() > bound) return std::nullopt;
  return v;
}

void record_session::record_commit_event(std::string_view type, const std::string& record_type, std::uint64_t incarnation, std::int64_t revision,
                                         const change_meta& meta, const std::optional<std::string>& value) {
  record_event(db_, {key_.tenant, type, key_.org, std::string("crdt\x1f").append(key_.org).append("\x1f").append(key_.doc).append("\x1f").append(key_.editor),
                     type == event_types::record_updated, meta.by, now_unix_ms(),
                     record_event_data(key_.org, key_.doc, key_.editor, record_type,
                                       revision < 0 ? std::nullopt : std::optional(record_version(key_, incarnation, revision)), value)});
}

void record_session::add(folio::document d, const record_row& row) {
  const change_meta meta{row.last_update, row.last_updated_by, row.session_id};
  const std::optional<std::string> value = event_value(d);
  commit([&] {
    insert_record(db_, key_, row);
    record_change(db_, key_, row.revision, folio::version_vector{}, d.version(), meta);
    record_commit_event(event_types::record_added, row.type, row.incarnation, row.revision, meta, value);
    return row.revision;
  });
  family_.commits().emit({committed_change::kind::added, key_, row.incarnation, row.revision, nullptr, &d.version(), meta});
  hold(std::move(d), row.revision);
}

std::int64_t record_session::append(const std::string* batch, const change_meta& meta, const std::function<void(std::int64_t)>& beside) {
  const std::optional<std::string> value = batch ? event_value(*entry_->doc) : std::nullopt;
  const std::int64_t revision = commit([&] {
    const std::int64_t made = append_change(db_, key_, *row_, batch, meta.when, meta.by, meta.session);
    if (batch) {
      record_change(db_, key_, made, before_change_, entry_->doc->version(), meta);
      record_commit_event(event_types::record_updated, row_->type, row_->incarnation, made, meta, value);
    }
    if (beside) beside(made);
    return made;
  });
  if (batch && wants_compaction(row_->log_len + 1, row_->log_bytes + static_cast<std::int64_t>(batch->size()), row_->snapshot_bytes))
    family_.compactions().schedule(key_);
  family_.commits().emit({committed_change::kind::changed, key_, row_->incarnation, revision, batch, &entry_->doc->version(), meta});
  return revision;
}

void record_session::erase(const change_meta& meta) {
  commit([&] {
    delete_record(db_, key_);
    record_commit_event(event_types::record_deleted, row_->type, row_->incarnation, -1, meta, std::nullopt);
    return std::int64_t(-1);
  });
  // Emitted while the entry is still locked: once forgotten, a request that adds the record again
  // takes a fresh entry, and its events must come after this one.
  family_.commits().emit({committed_change::kind::deleted, key_, row_->incarnation, -1, nullptr, nullptr, meta});
  forget();
}

folio::document& record_session::change() {
  if (!changing_) before_change_ = entry_->doc->version();
  changing_ = true;
  entry_->revision = -1;
  return *entry_->doc;
}

void record_session::unchanged() {
  changing_ = false;
  if (entry_->doc && row_) entry_->revision = row_->revision;
}

void record_session::committing() {
  if (const std::function<void(const record_key&)>& hook = family_.before_commit()) hook(key_);
}

void record_session::committed(std::int64_t revision) {
  changing_ = false;
  hold_.reset();  // other nodes' writers go on now; the entry's lock still orders this node's publish
  if (!entry_) return;  // a record added: hold() puts it in the cache
  entry_->revision = revision;
  entry_->rendered.store(nullptr);  // the revision before's
  account();
}

void record_session::hold(folio::document d, std::int64_t revision) {
  // After the commit: never wait for the entry (a deadline passing here would answer 503 "nothing was
  // changed" for a record that is stored). Another request holding it read the record from storage;
  // the entry then stays as that request leaves it, and the next miss rebuilds from storage.
  std::shared_ptr<cached_doc> entry = family_.cache().get(cache_key_);
  if (entry_ != entry) {
    std::unique_lock<std::timed_mutex> l(entry->lock, std::try_to_lock);
    if (!l.owns_lock()) return;
    adopt(std::move(entry), std::move(l));
  }
  entry_->doc = std::move(d);
  committed(revision);
}

void record_session::forget() {
  changing_ = false;
  if (entry_) {
    entry_->doc.reset();
    entry_->revision = -1;
    entry_->rendered.store(nullptr);
  }
  family_.cache().erase(cache_key_);
}

void record_session::account() {
  const std::shared_ptr<const rendered_value> r = entry_ ? entry_->rendered.load() : nullptr;
  too_large_ = !family_.cache().account(cache_key_, (entry_ && entry_->doc ? entry_->doc->memory_usage() : 0) + (r ? r->json.size() : 0));
}

}  // namespace folio::service
