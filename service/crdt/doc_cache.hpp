// service/crdt/doc_cache.hpp — decoded CRDT documents kept in memory (the README's "Running it for real", storage), so that an update of a hot
// record costs the diff, not a reload. Bounded by bytes (docs/OPERATIONS.md, "Memory"): what each entry
// holds — its document's memory_usage(), its rendered value's bytes and the entry's own bookkeeping
// (entry_overhead) — least recently used first out; and by a number of entries (--cache-entries).
// Each entry carries the record revision it reflects; users compare it with the revision
// read in their transaction and rebuild on a mismatch (another process, a failed write), so a stale
// entry is never used. An entry's mutex serialises the requests of one record in this process that
// read or change its document; its rendered value (the document as a get answers it, at one revision)
// is read without the mutex (record_session::open_rendered).
// A record whose document and value take more than a quarter of the budget (max_record_bytes) is not
// kept: account() counts it as nothing, and its session drops the document and value when it ends
// (record_session.hpp), so such a record is served from storage every time and never pushes the cache
// past its bound nor evicts the other records for itself; its entry (a mutex, bookkeeping) stays, so
// its requests still take one lock.
// Thread-safety: all members are safe to call concurrently.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <folio/document.hpp>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace folio::service {

/// A record's value as crdt/get writes it (JSON), at one revision of one incarnation: immutable, so
/// whoever holds it may read it without any lock.
struct rendered_value {
  std::int64_t revision = -1;
  std::uint64_t incarnation = 0;
  std::string json;
};

struct cached_doc {
  std::timed_mutex lock;             ///< held while the record is read or written through this entry
  std::optional<folio::document> doc;
  std::int64_t revision = -1;        ///< record revision `doc` reflects (-1: none)
  std::size_t bytes = 0;             ///< memory_usage() when last stored
  /// The value rendered by a get, stored under `lock`, loaded by gets without it; null or of an older
  /// revision once the record moved (gets compare it with the revision they read).
  std::atomic<std::shared_ptr<const rendered_value>> rendered;
};

class doc_cache {
 public:
  /// What an entry costs besides its document and value: the entry, its map and list nodes, and its key twice.
  static std::size_t entry_overhead(const std::string& key) noexcept { return sizeof(cached_doc) + 160 + 2 * key.capacity(); }
  /// The entries a budget of `max_bytes` keeps when --cache-entries does not say: one per KiB.
  static std::size_t default_max_entries(std::size_t max_bytes) noexcept { return std::max<std::size_t>(max_bytes >> 10, 1024); }

  explicit doc_cache(std::size_t max_bytes, std::size_t max_entries = 0)
      : max_bytes_(max_bytes), max_entries_(max_entries ? max_entries : default_max_entries(max_bytes)) {}

  /// The most a record's document and value may take and be kept: a quarter of the budget.
  std::size_t max_record_bytes() const noexcept { return max_bytes_ / 4; }
  std::size_t max_entries() const noexcept { return max_entries_; }

  /// The entry of `key` if there is one (marked most recently used), else null.
  std::shared_ptr<cached_doc> find(const std::string& key) {
    std::lock_guard<std::mutex> g(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return nullptr;
    lru_.splice(lru_.begin(), lru_, it->second.pos);
    return it->second.entry;
  }

  /// The entry of `key`, created empty if absent; marks it most recently used.
  std::shared_ptr<cached_doc> get(const std::string& key) {
    std::lock_guard<std::mutex> g(mu_);
    auto it = map_.find(key);
    if (it != map_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.pos);
      return it->second.entry;
    }
    // Entries are made before anyone knows the record exists (an update of a missing editorId), so
    // their number is bounded too, not just their bytes.
    while (map_.size() >= max_entries_) evict_last();
    auto e = std::make_shared<cached_doc>();
    lru_.push_front(key);
    const std::size_t overhead = entry_overhead(key);
    map_.emplace(key, slot{e, lru_.begin(), overhead});
    total_ += overhead;
    while (total_ > max_bytes_ && lru_.size() > 1) evict_last();
    return e;
  }

  /// Records the size of `key`'s document and value after a change and evicts least recently used
  /// entries beyond the budget (never `key` itself). Answers whether the record may be kept: false when
  /// `bytes` is above max_record_bytes(), and then only the entry's overhead is counted (the holder must
  /// drop the document and value before it lets the entry go: record_session). Eviction drops only the
  /// cache's reference; holders keep theirs.
  bool account(const std::string& key, std::size_t bytes) {
    const bool kept = bytes <= max_record_bytes();
    std::lock_guard<std::mutex> g(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return kept;
    const std::size_t counted = entry_overhead(key) + (kept ? bytes : 0);
    total_ = total_ - it->second.bytes + counted;
    it->second.bytes = counted;
    lru_.splice(lru_.begin(), lru_, it->second.pos);  // just used
    while (total_ > max_bytes_ && lru_.size() > 1) evict_last();
    return kept;
  }

  void erase(const std::string& key) {
    std::lock_guard<std::mutex> g(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return;
    total_ -= it->second.bytes;
    lru_.erase(it->second.pos);
    map_.erase(it);
  }

  std::size_t bytes() const {
    std::lock_guard<std::mutex> g(mu_);
    return total_;
  }
  std::size_t size() const {
    std::lock_guard<std::mutex> g(mu_);
    return map_.size();
  }

  /// Counts a use of an entry: `hit` when its document was at the wanted revision (for /metrics).
  void note(bool hit) noexcept { ++(hit ? hits_ : misses_); }
  std::uint64_t hits() const noexcept { return hits_.load(); }
  std::uint64_t misses() const noexcept { return misses_.load(); }

 private:
  void evict_last() {  // caller holds mu_
    auto victim = map_.find(lru_.back());
    total_ -= victim->second.bytes;
    map_.erase(victim);
    lru_.pop_back();
  }

  struct slot {
    std::shared_ptr<cached_doc> entry;
    std::list<std::string>::iterator pos;
    std::size_t bytes;
  };
  std::size_t max_bytes_, max_entries_;
  mutable std::mutex mu_;
  std::list<std::string> lru_;
  std::unordered_map<std::string, slot> map_;
  std::size_t total_ = 0;
  std::atomic<std::uint64_t> hits_{0}, misses_{0};
};

}  // namespace folio::service
