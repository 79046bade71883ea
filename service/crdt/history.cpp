#include "crdt/history.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <map>

#include "wire/status.hpp"

namespace folio::service {

std::string history_tag(const record_key& k, std::uint64_t incarnation) {
  const std::string named = k.cache_key() + '\x1f' + std::to_string(incarnation);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(named.data(), named.size(), md, &len, EVP_sha256(), nullptr) != 1) throw api_error(status::internal, "Internal error.");
  static constexpr char hex[] = "0123456789abcdef";
  std::string tag;
  for (int i = 0; i < 6; ++i) tag += hex[md[i] >> 4], tag += hex[md[i] & 15];
  return tag;
}

std::string record_version(const record_key& k, std::uint64_t incarnation, std::int64_t revision) {
  return std::to_string(revision) + '-' + history_tag(k, incarnation);
}

std::int64_t revision_of_version(std::string_view text, const record_key& k, std::uint64_t incarnation, std::int64_t now, const char* field) {
  const std::size_t dash = text.find('-');
  const std::string_view digits = text.substr(0, dash);
  const bool shaped = dash != std::string_view::npos && !digits.empty() && digits.size() <= 18 && digits[0] != '0' &&
                      digits.find_first_not_of("0123456789") == std::string_view::npos && text.size() - dash - 1 == 12;
  if (!shaped) throw api_error(status::invalid_argument, std::string(field) + " must be a version string that crdt/get answered (like \"12-3f2a9c0d1e4b\").");
  if (text.substr(dash + 1) != history_tag(k, incarnation))
    throw api_error(status::invalid_argument, std::string(field) +
                                                  " is a version of another record, or of this record before it was deleted and added again; send a "
                                                  "version crdt/get answered for this record.");
  const std::int64_t revision = std::stoll(std::string(digits));
  if (revision > now) throw api_error(status::invalid_argument, std::string(field) + " names a revision this record has not reached.");
  return revision;
}

void record_change(database& db, const record_key& k, std::int64_t revision, const folio::version_vector& before,
                   const folio::version_vector& after, const change_meta& meta) {
  folio::version_vector from, to;
  for (const folio::version_vector::entry& e : after.entries())
    if (const std::uint32_t was = before.get(e.replica); e.count > was) from.observe(e.replica, was), to.observe(e.replica, e.count);
  if (to.empty()) return;
  db.sql("INSERT INTO crdt_changes (tenant, org, doc, editor, revision, before_counts, after_counts, changed_by, changed_at) VALUES (?,?,?,?,?,?,?,?,?)")
      .bind(1, k.tenant).bind(2, k.org).bind(3, k.doc).bind(4, k.editor).bind(5, revision)
      .bind_blob(6, from.encode()).bind_blob(7, to.encode()).bind(8, meta.by).bind(9, meta.when)
      .step();
}

folio::version_vector version_at(database& db, const record_key& k, const folio::version_vector& now, std::int64_t revision) {
  std::map<folio::replica_id, std::uint32_t> counts;
  for (const folio::version_vector::entry& e : now.entries()) counts[e.replica] = e.count;
  // Newest first: each replica ends at its `before` in the earliest row after `revision`.
  query q = db.sql("SELECT before_counts, after_counts FROM crdt_changes WHERE tenant=? AND org=? AND doc=? AND editor=? AND revision>? "
                   "ORDER BY revision DESC");
  q.bind(1, k.tenant).bind(2, k.org).bind(3, k.doc).bind(4, k.editor).bind(5, revision);
  while (q.step()) {
    folio::version_vector from, to;
    if (!folio::version_vector::decode(q.blob(0), from) || !folio::version_vector::decode(q.blob(1), to))
      throw store_error(failure::other, "a change row of the record does not decode");  // damage
    for (const folio::version_vector::entry& e : to.entries()) {
      if (const std::uint32_t was = from.get(e.replica))
        counts[e.replica] = was;
      else
        counts.erase(e.replica);
    }
  }
  folio::version_vector at;
  for (const auto& [replica, count] : counts) at.observe(replica, count);
  return at;
}

change_authors change_authors::load(database& db, const record_key& k) {
  change_authors out;
  {
    query q = db.sql("SELECT before_counts, after_counts, changed_by, changed_at FROM crdt_changes WHERE tenant=? AND org=? AND doc=? AND editor=? "
                     "ORDER BY revision");
    q.bind(1, k.tenant).bind(2, k.org).bind(3, k.doc).bind(4, k.editor);
    while (q.step()) {
      folio::version_vector from, to;
      if (!folio::version_vector::decode(q.blob(0), from) || !folio::version_vector::decode(q.blob(1), to))
        throw store_error(failure::other, "a change row of the record does not decode");  // damage
      for (const folio::version_vector::entry& e : to.entries())
        out.ranges_[e.replica].push_back(range{from.get(e.replica), e.count, out.changes_.size()});
      out.changes_.push_back(change{q.text(2), q.text(3)});
    }
  }
  // Rows in revision order advance each replica's counts, so each list is sorted by `before` already.
  return out;
}

const change_authors::change* change_authors::of(folio::op_id id) const {
  if (last_ && last_replica_ == id.replica && last_->before <= id.seq && id.seq < last_->after) return &changes_[last_->change];
  const auto it = ranges_.find(id.replica);
  if (it == ranges_.end()) return nullptr;
  const std::vector<range>& rs = it->second;
  // The last range starting at or before seq.
  const auto after = std::upper_bound(rs.begin(), rs.end(), id.seq, [](std::uint32_t seq, const range& r) { return seq < r.before; });
  if (after == rs.begin() || id.seq >= std::prev(after)->after) return nullptr;
  last_ = &*std::prev(after), last_replica_ = id.replica;
  return &changes_[last_->change];
}

}  // namespace folio::service
