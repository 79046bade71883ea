#include "crdt/auto_versions.hpp"

#include <algorithm>
#include <exception>
#include <map>
#include <string>
#include <vector>

#include "crdt/family.hpp"
#include "crdt/record_session.hpp"
#include "crdt/versions.hpp"
#include "platform/clock.hpp"
#include "platform/log.hpp"

namespace folio::service {

namespace {

std::vector<record_key> due_records(database& db, const std::string& quiet_before, const std::string& started_before, std::size_t limit) {
  return db.read([&] {
    query q = db.sql("SELECT tenant, org, doc, editor FROM crdt_records WHERE unversioned_since IS NOT NULL "
                     "AND (last_update <= ? OR unversioned_since <= ?) LIMIT ?");
    q.bind(1, quiet_before).bind(2, started_before).bind(3, static_cast<std::int64_t>(limit));
    std::vector<record_key> out;
    while (q.step()) out.push_back({q.text(0), q.text(1), q.text(2), q.text(3)});
    return out;
  });
}

/// Takes the automatic version of `k` if it is still due; true when it did.
bool take_version(crdt_family& f, database& db, const record_key& k, const std::string& now, const std::string& quiet_before,
                  const std::string& started_before) {
  record_session s(f, db, k);
  const std::optional<record_row>& row = s.open();
  if (!row || !row->unversioned_since || (row->last_update > quiet_before && *row->unversioned_since > started_before)) return false;
  version_row v;
  v.revision = row->revision, v.version_vector = s.doc().version().encode(), v.kind = "auto", v.created_at = now;
  bool took = false;
  s.write_beside([&] {
    // Another node may have taken it since this one read the row: at most one version a revision.
    query q = db.sql("SELECT versioned_revision FROM crdt_records WHERE tenant=? AND org=? AND doc=? AND editor=?");
    q.bind(1, k.tenant).bind(2, k.org).bind(3, k.doc).bind(4, k.editor);
    if (!q.step() || q.integer(0) >= v.revision) return;
    if (count_versions(db, k).all >= max_versions) {  // full: this state is passed over, not tried at every pass
      db.sql("UPDATE crdt_records SET versioned_revision=?, unversioned_since=NULL WHERE tenant=? AND org=? AND doc=? AND editor=?")
          .bind(1, v.revision).bind(2, k.tenant).bind(3, k.org).bind(4, k.doc).bind(5, k.editor)
          .step();
      return;
    }
    insert_version(db, k, v);
    took = true;
  });
  return took;
}

/// The bucket an automatic version of `created_at` falls in when thinned as of now: "" (kept: younger
/// than keep_all), its hour, or its day.
std::string bucket_of(const std::string& created_at, const std::string& keep_all_after, const std::string& hourly_after) {
  if (created_at >= keep_all_after) return "";
  return created_at.substr(0, created_at >= hourly_after ? 13 : 10);
}

}  // namespace

std::size_t take_due_versions(crdt_family& f, database& db, const history_config& cfg, std::int64_t now_ms, std::size_t limit) {
  const std::string now = iso_time(now_ms), quiet_before = iso_time(now_ms - cfg.quiet.count()), started_before = iso_time(now_ms - cfg.at_most.count());
  std::size_t taken = 0;
  // Each record's wait for its lock and write is bounded like a request's; the caller's deadline is back after.
  struct deadline_scope {
    database& db;
    deadline_clock::time_point before = db.deadline();
    ~deadline_scope() { db.set_deadline(before); }
  } scope{db};
  for (const record_key& k : due_records(db, quiet_before, started_before, limit)) {
    db.set_deadline(deadline_clock::now() + f.platform().settings().request_timeout);
    try {
      taken += take_version(f, db, k, now, quiet_before, started_before) ? 1 : 0;
    } catch (const record_moved&) {
      // written meanwhile: due again at a later pass
    } catch (const deadline_exceeded&) {
      // held by writers meanwhile: due again at a later pass
    } catch (const std::exception& e) {
      // A record that cannot be read (damage: folio-admin check names it) is passed over until its next change.
      log::write("error", "auto_version_failed", "no automatic version of a record (passed over until it changes): " + std::string(e.what()));
      db.set_deadline(deadline_clock::now() + f.platform().settings().request_timeout);
      db.write(k.cache_key(), [&] {
        db.sql("UPDATE crdt_records SET unversioned_since=NULL WHERE tenant=? AND org=? AND doc=? AND editor=?")
            .bind(1, k.tenant).bind(2, k.org).bind(3, k.doc).bind(4, k.editor)
            .step();
      });
    }
  }
  return taken;
}

std::size_t thin_versions(database& db, const history_config& cfg, std::int64_t now_ms) {
  const std::string keep_all_after = iso_time(now_ms - cfg.keep_all.count()), hourly_after = iso_time(now_ms - cfg.hourly_for.count());
  // The records with automatic versions old enough to thin; then each record on its own, newest first:
  // an automatic, unpinned version in the same bucket as the version kept just after it is dropped, and
  // its authors go to that one.
  const std::vector<record_key> records = db.read([&] {
    query q = db.sql("SELECT DISTINCT tenant, org, doc, editor FROM crdt_versions WHERE kind='auto' AND pinned=0 AND created_at < ?");
    q.bind(1, keep_all_after);
    std::vector<record_key> out;
    while (q.step()) out.push_back({q.text(0), q.text(1), q.text(2), q.text(3)});
    return out;
  });
  std::size_t dropped = 0;
  for (const record_key& k : records) {
    dropped += db.write(k.cache_key(), [&] {
      std::vector<version_row> all = list_versions(db, k, 0, SIZE_MAX >> 1);
      std::size_t n = 0;
      version_row* kept = nullptr;  // the newer neighbour a dropped version's authors go to
      std::string kept_bucket;
      std::map<std::int64_t, std::vector<std::string>> authors;  // of the versions kept that gained some
      for (version_row& v : all) {
        const std::string bucket = bucket_of(v.created_at, keep_all_after, hourly_after);
        const bool thinnable = v.kind == "auto" && !v.pinned && !bucket.empty();
        if (thinnable && kept && kept_bucket == bucket) {
          std::vector<std::string>& to = authors.try_emplace(kept->number, kept->authors).first->second;
          for (const std::string& a : v.authors)
            if (to.size() < max_version_authors && std::find(to.begin(), to.end(), a) == to.end()) to.push_back(a);
          delete_version(db, k, v.number);
          ++n;
          continue;
        }
        kept = &v, kept_bucket = thinnable ? bucket : std::string("\x01");
      }
      for (const auto& [number, list] : authors) set_version_authors(db, k, number, list);
      return n;
    });
  }
  return dropped;
}

std::size_t prune_history(database& db, const history_config& cfg, std::int64_t now_ms) {
  const std::string before = iso_time(now_ms - cfg.history.count());
  const std::vector<std::pair<record_key, std::int64_t>> records = db.read([&] {
    query q = db.sql("SELECT tenant, org, doc, editor, max(revision) FROM crdt_changes WHERE changed_at < ? GROUP BY tenant, org, doc, editor");
    q.bind(1, before);
    std::vector<std::pair<record_key, std::int64_t>> out;
    while (q.step()) out.push_back({{q.text(0), q.text(1), q.text(2), q.text(3)}, q.integer(4)});
    return out;
  });
  std::size_t pruned = 0;
  for (const auto& record : records) {
    const record_key& k = record.first;
    const std::int64_t through = record.second;  // not a structured binding: clang 14 cannot capture one
    pruned += db.write(k.cache_key(), [&] {
      // Versions up to `through` are known no more: the rows after it undo the version now down to it.
      db.sql("UPDATE crdt_records SET history_from=? WHERE tenant=? AND org=? AND doc=? AND editor=? AND history_from<?")
          .bind(1, through).bind(2, k.tenant).bind(3, k.org).bind(4, k.doc).bind(5, k.editor).bind(6, through)
          .step();
      db.sql("DELETE FROM crdt_changes WHERE tenant=? AND org=? AND doc=? AND editor=? AND revision<=?")
          .bind(1, k.tenant).bind(2, k.org).bind(3, k.doc).bind(4, k.editor).bind(5, through)
          .step();
      return static_cast<std::size_t>(db.changes());
    });
  }
  return pruned;
}

void history_keeper::run(crdt_family& f, database& db) {
  std::int64_t upkeep_due = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> l(mu_);
      wake_.wait_for(l, std::min(cfg_.pass_every, std::max(cfg_.quiet / 2, std::chrono::milliseconds(200))), [&] { return stopping_; });
      if (stopping_) return;
    }
    const std::int64_t now = now_unix_ms();
    try {
      take_due_versions(f, db, cfg_, now);
      if (now >= upkeep_due) {
        thin_versions(db, cfg_, now);
        prune_history(db, cfg_, now);
        upkeep_due = now + 3600 * 1000;
      }
    } catch (const std::exception& e) {
      log::write("error", "history_upkeep_failed", std::string("automatic versions or history upkeep failed (tried again at the next pass): ") + e.what());
    }
  }
}

void history_keeper::stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
}

}  // namespace folio::service
