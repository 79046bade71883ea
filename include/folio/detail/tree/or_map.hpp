// folio/detail/tree/or_map.hpp — the state of one observed-remove map (OR-map) object.
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

#include <cstddef>
#include <iterator>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../../error.hpp"
#include "../../id.hpp"

namespace folio::detail {

class or_map {
 public:
  /// A live entry's name: its key and the id of the set that made it (lamport, replica, seq).
  struct entry_name {
    std::string key;
    item_key id;
    friend bool operator==(const entry_name&, const entry_name&) = default;
  };
  /// Entries by key, and within a key by descending id: a key's winner comes first. Transparent: a
  /// key alone (string_view) stands for all its entries, a (key, id) pair for one.
  struct entry_order {
    using is_transparent = void;
    using probe = std::pair<std::string_view, item_key>;
    static bool before(std::string_view ka, const item_key& ia, std::string_view kb, const item_key& ib) {
      const int c = ka.compare(kb);
      return c != 0 ? c < 0 : ib < ia;
    }
    bool operator()(const entry_name& a, const entry_name& b) const { return before(a.key, a.id, b.key, b.id); }
    bool operator()(const entry_name& a, const probe& b) const { return before(a.key, a.id, b.first, b.second); }
    bool operator()(const probe& a, const entry_name& b) const { return before(a.first, a.second, b.key, b.id); }
    bool operator()(const entry_name& a, std::string_view k) const { return std::string_view(a.key) < k; }
    bool operator()(std::string_view k, const entry_name& a) const { return k < std::string_view(a.key); }
  };
  /// Every live entry, with its value (opaque bytes).
  using entries_t = std::map<entry_name, std::string, entry_order>;
  /// A key's live entries, winner first: a range of the map.
  struct entry_range {
    entries_t::const_iterator first, last;
    entries_t::const_iterator begin() const noexcept { return first; }
    entries_t::const_iterator end() const noexcept { return last; }
    bool empty() const noexcept { return first == last; }
  };

  /// Integrates a set made by `id` that observed the entries `preds` (their ids; a pred that is not a
  /// live entry of `key` is ignored). Each operation must be integrated once: the document core skips
  /// what its version vector already holds (a set delivered again after its entry was removed would
  /// come back). O((p + 1) log e) for p preds and e live entries in all; a sorted vector of a key's
  /// entries, scanned and sorted again per op, made n concurrent sets of one key cost n^2 log n.
  void set(std::string_view key, const item_key& id, std::string value, std::span<const item_key> preds) {
    remove_from(key, preds);
    const auto it = entries_.emplace(entry_name{std::string(key), id}, std::move(value)).first;
    if (alone(it)) ++keys_;
  }

  /// Integrates a remove that observed `preds`. O(p log e).
  void remove(std::string_view key, std::span<const item_key> preds) { remove_from(key, preds); }

  /// The value of `key`, or null if absent. O(log e).
  const std::string* get(std::string_view key) const {
    const auto it = entries_.lower_bound(key);
    return it == entries_.end() || it->first.key != key ? nullptr : &it->second;
  }

  /// The live entries of `key` (their ids are what a local set or remove names as its preds), winner
  /// first; empty if the key is absent. O(log e).
  entry_range entries(std::string_view key) const {
    const auto [first, last] = entries_.equal_range(key);
    return {first, last};
  }

  /// Keys present, in byte order, with their values: f(key, value). O(e).
  template <class F>
  void for_each(F&& f) const {
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
      if (it == entries_.begin() || std::prev(it)->first.key != it->first.key) f(it->first.key, it->second);
  }

  std::size_t size() const noexcept { return keys_; }
  bool empty() const noexcept { return keys_ == 0; }
  friend bool operator==(const or_map&, const or_map&) = default;

  /// Verifies that the key count is the number of keys with entries.
  void check_invariants() const {
    std::size_t keys = 0;
    for_each([&](const std::string&, const std::string&) { ++keys; });
    if (keys != keys_) fail(error_code::invariant, "map key count " + std::to_string(keys_) + " differs from the keys present (" + std::to_string(keys) + ")");
  }

 private:
  /// True if the entry at `it` is the only one of its key.
  bool alone(entries_t::const_iterator it) const {
    const auto next = std::next(it);
    return (it == entries_.begin() || std::prev(it)->first.key != it->first.key) && (next == entries_.end() || next->first.key != it->first.key);
  }
  void remove_from(std::string_view key, std::span<const item_key> preds) {
    for (const item_key& p : preds) {
      const auto it = entries_.find(entry_order::probe{key, p});
      if (it == entries_.end()) continue;
      if (alone(it)) --keys_;
      entries_.erase(it);
    }
  }

  entries_t entries_;     ///< every live entry; a key is present while it has one
  std::size_t keys_ = 0;  ///< keys present
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
