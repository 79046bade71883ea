// folio/detail/or_map.hpp — the state of one observed-remove map (OR-map) object.
//
// Semantics (docs/INTERNALS.md, "one document model"):
//  * set(key, value) made by operation X removes the entries its author observed for that key (its
//    `preds`) and adds the entry X;
//  * remove(key) removes the observed entries only — a concurrent set is not among them and survives
//    (add-wins);
//  * the value of a key is its live entry with the largest item_key (lamport, replica, seq), so
//    concurrent sets resolve the same way on every replica; a key with no live entry is absent.
// Integration is commutative as long as every operation arrives after the entries in its preds (they
// are causal dependencies; the document core holds an operation pending until they are integrated):
// the live entries are then "every set not named in any integrated operation's preds", whatever the
// order. Removing an entry twice (two concurrent removes) is a no-op.
//
// Values are opaque bytes (the service stores canonical JSON). The document core owns op ids, the
// log and the version vector; this class only holds what a map's value depends on.
// Thread-safety: none.
#pragma once

#include <algorithm>
#include <cstddef>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../error.hpp"
#include "../id.hpp"

namespace folio::detail {

class or_map {
 public:
  struct entry {
    item_key id;        ///< the set operation that made it; orders concurrent entries
    std::string value;  ///< opaque bytes
    friend bool operator==(const entry&, const entry&) = default;
  };

  /// Integrates a set made by `id` that observed `preds`. Each operation must be integrated once: the
  /// document core skips what its version vector already holds (a set delivered again after its
  /// entry was removed would come back). O(log k + e) for k keys and e live entries of the key (e is
  /// 1 unless there are concurrent sets).
  void set(const std::string& key, const item_key& id, std::string value, std::span<const op_id> preds) {
    std::vector<entry>& live = keys_[key];
    remove_from(live, preds);
    live.push_back({id, std::move(value)});
    std::sort(live.begin(), live.end(), [](const entry& a, const entry& b) { return b.id < a.id; });  // winner first
  }

  /// Integrates a remove that observed `preds`.
  void remove(const std::string& key, std::span<const op_id> preds) {
    auto it = keys_.find(key);
    if (it == keys_.end()) return;
    remove_from(it->second, preds);
    if (it->second.empty()) keys_.erase(it);
  }

  /// The value of `key`, or null if absent. O(log k).
  const std::string* get(std::string_view key) const {
    auto it = keys_.find(std::string(key));
    return it == keys_.end() ? nullptr : &it->second.front().value;
  }

  /// The live entries of `key` (their ids are what a local set or remove names as its preds), winner first.
  std::span<const entry> entries(std::string_view key) const {
    auto it = keys_.find(std::string(key));
    return it == keys_.end() ? std::span<const entry>{} : std::span<const entry>(it->second);
  }

  /// Keys present, in byte order, with their values: f(key, value).
  template <class F>
  void for_each(F&& f) const {
    for (const auto& [k, live] : keys_) f(k, live.front().value);
  }

  std::size_t size() const noexcept { return keys_.size(); }
  bool empty() const noexcept { return keys_.empty(); }
  friend bool operator==(const or_map&, const or_map&) = default;

  /// Verifies: no key without entries, entries ordered winner first with distinct ids.
  void check() const {
    for (const auto& [k, live] : keys_) {
      if (live.empty()) fail("folio.invariant", "map key \"" + k + "\" has no live entry");
      for (std::size_t i = 1; i < live.size(); ++i)
        if (!(live[i].id < live[i - 1].id)) fail("folio.invariant", "map entries of \"" + k + "\" out of order or repeated");
    }
  }

 private:
  static void remove_from(std::vector<entry>& live, std::span<const op_id> preds) {
    std::erase_if(live, [&](const entry& e) { return std::find(preds.begin(), preds.end(), op_id{e.id.replica, e.id.seq}) != preds.end(); });
  }

  std::map<std::string, std::vector<entry>> keys_;  ///< only keys with at least one live entry
};

/// Replace-by-value for maps: what turns `current` into `desired` — a set for every key that is new or
/// whose value changed, a remove (nullopt) for every key that vanished, nothing for unchanged keys.
/// In key order. O(k log k).
inline std::vector<std::pair<std::string, std::optional<std::string>>> diff_map(const or_map& current,
                                                                                 const std::map<std::string, std::string>& desired) {
  std::vector<std::pair<std::string, std::optional<std::string>>> out;
  auto d = desired.begin();
  current.for_each([&](const std::string& key, const std::string& value) {
    for (; d != desired.end() && d->first < key; ++d) out.emplace_back(d->first, d->second);
    if (d != desired.end() && d->first == key) {
      if (d->second != value) out.emplace_back(key, d->second);
      ++d;
    } else {
      out.emplace_back(key, std::nullopt);
    }
  });
  for (; d != desired.end(); ++d) out.emplace_back(d->first, d->second);
  return out;
}

}  // namespace folio::detail
