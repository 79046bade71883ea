// folio/detail/replica/id_table.hpp — a hash table from replica ids to small values (an index into a table
// of replicas, a counter), in one flat array.
//
// Model: open addressing with linear probing over a power-of-two array of (id, value) slots, at most
// half full; a slot whose id is 0 is empty, and the id 0 itself (which a replica table writer may be
// given: a forged op of replica 0) is kept beside the array. Ids are hashed with the process's key
// (hash.hpp, id_hash), so which ids collide cannot be chosen from outside. Entries are never removed.
// Why not std::unordered_map: a node per entry, allocated on insert and reached through a bucket
// array, costs a cache miss per lookup more than a probe in one array once a document has tens of
// thousands of replicas (bench/linearity_bench, "n authors"), and an allocation per new replica.
// Complexity: find and try_emplace O(1) expected; growth doubles the array (amortised O(1)).
// Thread-safety: none (as the engines that own one).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "../../id.hpp"
#include "../util/hash.hpp"

namespace folio::detail {

template <class V>
class id_table {
 public:
  /// The value of `id`, or nullptr.
  const V* find(replica_id id) const noexcept {
    if (id == 0) return has_zero_ ? &zero_ : nullptr;
    if (slots_.empty()) return nullptr;
    for (std::size_t i = id_hash{}(id) & mask();; i = (i + 1) & mask()) {
      const slot& s = slots_[i];
      if (s.id == id) return &s.value;
      if (s.id == 0) return nullptr;
    }
  }
  V* find(replica_id id) noexcept { return const_cast<V*>(static_cast<const id_table&>(*this).find(id)); }
  /// The value of `id`, inserting `v` for it first if it has none; and whether it was inserted.
  std::pair<V*, bool> try_emplace(replica_id id, V v) {
    if (id == 0) {
      if (has_zero_) return {&zero_, false};
      has_zero_ = true, zero_ = v, ++size_;
      return {&zero_, true};
    }
    if (2 * (size_ + 1) > slots_.size()) grow();
    for (std::size_t i = id_hash{}(id) & mask();; i = (i + 1) & mask()) {
      slot& s = slots_[i];
      if (s.id == id) return {&s.value, false};
      if (s.id == 0) {
        s.id = id, s.value = v, ++size_;
        return {&s.value, true};
      }
    }
  }
  std::size_t size() const noexcept { return size_; }
  /// Heap bytes.
  std::size_t memory_usage() const noexcept { return slots_.capacity() * sizeof(slot); }

 private:
  struct slot {
    replica_id id = 0;  ///< 0: empty
    V value{};
  };
  std::size_t mask() const noexcept { return slots_.size() - 1; }
  void grow() {
    std::vector<slot> old(slots_.empty() ? 8 : 2 * slots_.size());
    old.swap(slots_);
    for (const slot& s : old) {
      if (s.id == 0) continue;
      std::size_t i = id_hash{}(s.id) & mask();
      while (slots_[i].id != 0) i = (i + 1) & mask();
      slots_[i] = s;
    }
  }

  std::vector<slot> slots_;  ///< empty, or a power of two, at most half used
  std::size_t size_ = 0;     ///< entries, the id 0 included
  bool has_zero_ = false;
  V zero_{};
};

}  // namespace folio::detail
