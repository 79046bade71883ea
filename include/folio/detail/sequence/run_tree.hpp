// folio/detail/sequence/run_tree.hpp — the run B-tree of the sequence engine (detail/sequence/rga.hpp): the items of a
// sequence in document order, as runs in the leaves of a B-tree counted by live items.
//
// Model:
//  * A run is a stretch of items of one replica with consecutive seqs and Lamport values, each item
//    the origin of the next, all live or all deleted (16 bytes). Leaves hold up to leaf_capacity runs
//    and are linked in document order; inner nodes hold up to inner_capacity children.
//  * Every node counts the live items below it (position -> run in O(log n)) and keeps the smallest key
//    (lamport, replica, seq) of the items below it, deleted ones included: the RGA scan (first_below)
//    skips whole subtrees whose smallest key is larger, O(log n) per insert whatever the siblings.
//  * A position cache (the leaf and run of the last position lookup) makes typing and deleting at one
//    place O(1) amortised.
//
// Invariants (check_tree): node live counts are the sums of their children's, node minimum keys the
// minimum of their children's (a leaf's: of its runs' first keys); leaves hold 1..leaf_capacity runs (a
// lone root leaf may be empty); inner nodes hold 2..inner_capacity children; parent/prev/next links
// agree; the position cache names the live items before its leaf and run.
//
// The tree knows runs, not replicas: `Host` (the engine, CRTP) gives an item's key,
// `host.key_of(run, k)` (it maps the run's local replica index to the replica id), and keeps the id
// index (detail/sequence/id_index.hpp) up to date, `host.index_assign(replica, first seq, end seq, leaf)`, which
// the tree calls for the runs a leaf split moves and for new runs.
//
// Thread-safety: none.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "../../error.hpp"
#include "../../id.hpp"

namespace folio::detail {

inline constexpr int leaf_capacity = 32;
inline constexpr int inner_capacity = 16;

/// A run of items in document order. 16 bytes.
struct run {
  std::uint32_t replica;  ///< local replica index of the author (not the global id)
  std::uint32_t seq;      ///< seq of the first item; item k is (replica, seq + k)
  std::uint32_t lamport;  ///< Lamport value of the first item; item k has lamport + k (orders siblings)
  std::uint32_t len_del;  ///< bits 0-30: item count (>= 1); bit 31: all items deleted (tombstones)

  static constexpr std::uint32_t deleted_bit = 0x8000'0000u;
  std::uint32_t len() const noexcept { return len_del & ~deleted_bit; }
  bool deleted() const noexcept { return (len_del & deleted_bit) != 0; }
  std::uint32_t live() const noexcept { return deleted() ? 0 : len(); }
  void set_len(std::uint32_t n) noexcept { len_del = (len_del & deleted_bit) | n; }
  /// The items [k, len) as a run of their own.
  run tail(std::uint32_t k) const noexcept { return run{replica, seq + k, lamport + k, len_del - k}; }
};

/// Above every item's key: the smallest key of a node without items.
inline constexpr item_key above_every_key{UINT32_MAX, UINT64_MAX, UINT32_MAX};

struct inner_node;
struct node {
  inner_node* parent = nullptr;
  item_key min_key = above_every_key;  ///< smallest key of the items below (deleted ones included)
  std::uint32_t live = 0;              ///< live items below this node
  std::uint16_t count = 0;  ///< runs (leaf) or children (inner)
  bool is_leaf = true;
};
struct leaf_node : node {
  leaf_node* prev = nullptr;
  leaf_node* next = nullptr;
  run runs[leaf_capacity];
};
struct inner_node : node {
  node* child[inner_capacity];
};

/// An item: runs[idx] of `leaf`, `off` items into the run.
struct place {
  leaf_node* leaf = nullptr;
  int idx = 0;
  std::uint32_t off = 0;
};

template <class Host>
class run_tree {
 public:
  /// Live items. O(1).
  std::size_t size() const noexcept { return root_->live; }
  /// Number of runs in document order (tombstone runs included).
  std::size_t run_count() const noexcept {
    std::size_t n = 0;
    for (const leaf_node* l = first_leaf_; l; l = l->next) n += l->count;
    return n;
  }

 protected:
  run_tree() : root_(new leaf_node) { first_leaf_ = static_cast<leaf_node*>(root_); }
  ~run_tree() { destroy(root_); }
  run_tree(const run_tree&) = delete;
  run_tree& operator=(const run_tree&) = delete;
  run_tree(run_tree&& o) noexcept { steal(o); }
  run_tree& operator=(run_tree&& o) noexcept {
    if (this != &o) {
      destroy(root_);
      steal(o);
    }
    return *this;
  }

  [[noreturn]] static void bad(const char* what) { fail(error_code::invariant, what); }

  /// Forgets the position cache (before positions are looked up after other changes).
  void forget_position() const noexcept { cache_leaf_ = nullptr, cache_idx_ = -1; }

  /// Verifies the tree's invariants (top of this file) and returns its leaves in order.
  std::vector<const leaf_node*> check_tree() const {
    std::vector<const leaf_node*> leaves;
    check_node(root_, nullptr, leaves);
    const leaf_node* prev = nullptr;
    for (std::size_t i = 0; i < leaves.size(); ++i) {
      if (leaves[i]->prev != prev) bad("leaf prev link");
      if (i + 1 < leaves.size() ? leaves[i]->next != leaves[i + 1] : leaves[i]->next != nullptr) bad("leaf next link");
      prev = leaves[i];
    }
    if (first_leaf_ != leaves.front()) bad("first leaf");
    if (cache_leaf_) {
      std::size_t start = 0;
      for (const leaf_node* l : leaves) {
        if (l == cache_leaf_) break;
        start += l->live;
      }
      if (start != cache_start_) bad("position cache");
      if (cache_idx_ >= 0) {
        if (cache_idx_ >= cache_leaf_->count) bad("run cache index");
        std::size_t run_start = start;
        for (int i = 0; i < cache_idx_; ++i) run_start += cache_leaf_->runs[i].live();
        if (run_start != cache_run_start_) bad("run cache position");
      }
    }
    return leaves;
  }

  // ---- navigation -----------------------------------------------------------------------------

  /// The live item at `pos` (< size()). Uses and refreshes the position cache.
  place locate_live(std::size_t pos) const {
    leaf_node* l;
    std::size_t start;
    if (cache_leaf_ && pos >= cache_start_ && pos - cache_start_ < cache_leaf_->live) {
      l = cache_leaf_, start = cache_start_;
      if (cache_idx_ >= 0 && pos >= cache_run_start_ && pos - cache_run_start_ < l->runs[cache_idx_].live())
        return {l, cache_idx_, static_cast<std::uint32_t>(pos - cache_run_start_)};
    } else {
      node* n = root_;
      start = 0;
      while (!n->is_leaf) {
        auto* in = static_cast<inner_node*>(n);
        int c = 0;
        while (c + 1 < in->count && pos - start >= in->child[c]->live) start += in->child[c++]->live;
        n = in->child[c];
      }
      l = static_cast<leaf_node*>(n);
      cache_leaf_ = l, cache_start_ = start, cache_idx_ = -1;
    }
    std::size_t rel = pos - start;
    int i = 0;
    for (;; ++i) {
      const std::uint32_t lv = l->runs[i].live();
      if (rel < lv) break;
      rel -= lv;
    }
    cache_idx_ = i, cache_run_start_ = pos - rel;
    return {l, i, static_cast<std::uint32_t>(rel)};
  }

  /// The live items before the item at `p` (its position when it is live): the live items of the runs
  /// before it in its leaf (and p.off when its run is live), then, up through the parent links, those
  /// of every earlier sibling of each ancestor. O(log n · inner_capacity + leaf_capacity).
  std::size_t live_before(const place& p) const noexcept {
    std::size_t n = p.leaf->runs[p.idx].deleted() ? 0 : p.off;
    for (int i = 0; i < p.idx; ++i) n += p.leaf->runs[i].live();
    for (const node* c = p.leaf; c->parent; c = c->parent)
      for (int i = 0; c->parent->child[i] != c; ++i) n += c->parent->child[i]->live;
    return n;
  }

  /// The RGA scan: the first run at or after runs[i] of `l` whose first key is below `k` (the first
  /// item there with a smaller key: keys rise along a run), or the end of the last leaf if there is
  /// none. Runs of the leaf are scanned; beyond it, whole subtrees whose smallest key is larger are
  /// skipped: up to the nearest ancestor with a later child holding a smaller key, then down to that
  /// child's first such child. O(log n) whatever the siblings passed (not linear in them, as a walk
  /// over the runs would be).
  std::pair<leaf_node*, int> first_below(leaf_node* l, int i, const item_key& k) const noexcept {
    for (; i < l->count; ++i)
      if (host().key_of(l->runs[i], 0) < k) return {l, i};
    if (!l->next) return {l, i};  // the end (typing at the end of the document)
    node* n = l;
    for (;;) {
      inner_node* p = n->parent;
      if (!p) {  // nothing smaller follows: the end of the last leaf
        for (n = root_; !n->is_leaf;) n = static_cast<inner_node*>(n)->child[static_cast<inner_node*>(n)->count - 1];
        l = static_cast<leaf_node*>(n);
        return {l, l->count};
      }
      int c = 1;
      while (p->child[c - 1] != n) ++c;
      while (c < p->count && !(p->child[c]->min_key < k)) ++c;
      if (c < p->count) {
        n = p->child[c];
        break;
      }
      n = p;
    }
    while (!n->is_leaf) {
      auto* in = static_cast<inner_node*>(n);
      int c = 0;
      while (!(in->child[c]->min_key < k)) ++c;
      n = in->child[c];
    }
    l = static_cast<leaf_node*>(n);
    i = 0;
    while (!(host().key_of(l->runs[i], 0) < k)) ++i;
    return {l, i};
  }

  /// Moves a place past the end of its leaf onto the next leaf.
  static void normalize(place& p) noexcept {
    while (p.idx >= p.leaf->count && p.leaf->next) p.idx -= p.leaf->count, p.leaf = p.leaf->next;
  }

  // ---- mutation -------------------------------------------------------------------------------

  static void add_live(node* n, std::int64_t delta) noexcept {
    for (; n; n = n->parent) n->live = static_cast<std::uint32_t>(n->live + delta);
  }

  /// Accounts for an item with key `k` placed below `n`. The ancestors whose minimum is already
  /// smaller end the walk: theirs are smaller still.
  static void lower_min(node* n, const item_key& k) noexcept {
    for (; n && k < n->min_key; n = n->parent) n->min_key = k;
  }
  /// The smallest key in `l`: its runs' first keys (keys rise along a run). Replica ids are looked up
  /// only to break ties of Lamport values.
  item_key leaf_min(const leaf_node* l) const noexcept {
    const run* best = nullptr;
    for (const run* r = l->runs; r != l->runs + l->count; ++r)
      if (!best || r->lamport < best->lamport || (r->lamport == best->lamport && host().key_of(*r, 0) < host().key_of(*best, 0))) best = r;
    return best ? host().key_of(*best, 0) : above_every_key;
  }

  /// Inserts `m` (1..2) runs before runs[idx] of `l`, splitting the leaf if needed. Adds their live
  /// items to the counts. Bit k of `fresh` says run k holds new items; the others are pieces split off
  /// a run of `l`, whose ids already map to `l` unless the split moves them. Returns the place of the
  /// first inserted run.
  place insert_runs(leaf_node* l, int idx, const run* rs, int m, unsigned fresh) {
    if (l == cache_leaf_ && idx <= cache_idx_) cache_idx_ = -1;  // runs before the cached one change
    bool moved_leaf = false;
    if (l->count + m > leaf_capacity) {
      const int old = l->count;
      const int mid = idx == old ? old : old / 2;                  // appending at a leaf's end starts a fresh leaf
      if (l == cache_leaf_ && cache_idx_ >= mid) cache_idx_ = -1;  // the cached run moves away
      auto* r = new leaf_node;
      std::uint32_t moved = 0;
      for (int i = mid; i < old; ++i) r->runs[i - mid] = l->runs[i], moved += l->runs[i].live();
      r->count = static_cast<std::uint16_t>(old - mid);
      l->count = static_cast<std::uint16_t>(mid);
      l->live -= moved;
      r->live = moved;
      r->next = l->next, r->prev = l;
      if (l->next) l->next->prev = r;
      l->next = r;
      l->min_key = leaf_min(l), r->min_key = leaf_min(r);
      insert_child(l, r);
      for (int i = 0; i < r->count; ++i) host().index_assign(r->runs[i].replica, r->runs[i].seq, r->runs[i].seq + r->runs[i].len(), r);
      if (idx > mid || mid == old) l = r, idx -= mid, moved_leaf = true;
    }
    for (int i = l->count - 1; i >= idx; --i) l->runs[i + m] = l->runs[i];
    std::uint32_t live = 0;
    for (int k = 0; k < m; ++k) l->runs[idx + k] = rs[k], live += rs[k].live();
    l->count = static_cast<std::uint16_t>(l->count + m);
    add_live(l, live);
    for (int k = 0; k < m; ++k) lower_min(l, host().key_of(rs[k], 0));
    for (int k = 0; k < m; ++k)
      if (moved_leaf || (fresh >> k & 1)) host().index_assign(rs[k].replica, rs[k].seq, rs[k].seq + rs[k].len(), l);
    return {l, idx, 0};
  }

  /// Inserts `right` into left's parent just after `left`, splitting inner nodes up to the root.
  void insert_child(node* left, node* right) {
    for (;;) {
      inner_node* p = left->parent;
      if (!p) {
        auto* root = new inner_node;
        root->is_leaf = false;
        root->count = 2;
        root->child[0] = left, root->child[1] = right;
        root->live = left->live + right->live;
        root->min_key = std::min(left->min_key, right->min_key);
        left->parent = right->parent = root;
        root_ = root;
        return;
      }
      int i = 0;
      while (p->child[i] != left) ++i;
      if (p->count < inner_capacity) {
        for (int k = p->count - 1; k > i; --k) p->child[k + 1] = p->child[k];
        p->child[i + 1] = right;
        right->parent = p;
        ++p->count;
        return;
      }
      node* all[inner_capacity + 1];
      for (int k = 0, j = 0; k < p->count; ++k) {
        all[j++] = p->child[k];
        if (k == i) all[j++] = right;
      }
      auto* q = new inner_node;
      q->is_leaf = false;
      const int total = p->count + 1, half = total / 2;
      p->count = static_cast<std::uint16_t>(half);
      q->count = static_cast<std::uint16_t>(total - half);
      p->live = q->live = 0;
      p->min_key = q->min_key = above_every_key;
      for (int k = 0; k < total; ++k) {
        inner_node* owner = k < half ? p : q;
        owner->child[k < half ? k : k - half] = all[k];
        all[k]->parent = owner;
        owner->live += all[k]->live;
        owner->min_key = std::min(owner->min_key, all[k]->min_key);
      }
      left = p, right = q;
    }
  }

  /// Splits the run at p after p.off items and inserts `fresh` between the halves.
  void split_insert(const place& p, const run& fresh) {
    run& r = p.leaf->runs[p.idx];
    const run tail = r.tail(p.off + 1);
    r.set_len(p.off + 1);
    add_live(p.leaf, -static_cast<std::int64_t>(tail.live()));
    const run two[2] = {fresh, tail};
    insert_runs(p.leaf, p.idx + 1, two, 2, 1);
  }

  /// True if `b` continues `a`: same author, next seq and Lamport value, same deleted state.
  static bool continues(const run& a, const run& b) noexcept {
    return a.replica == b.replica && a.seq + a.len() == b.seq && a.lamport + a.len() == b.lamport && a.deleted() == b.deleted();
  }

  /// Removes runs[idx] of `l` (its items went into a neighbouring run of the same leaf). The run cache
  /// then names the run that followed, which starts where the dropped one did, if there is one.
  void drop_run(leaf_node* l, int idx) noexcept {
    for (int i = idx; i + 1 < l->count; ++i) l->runs[i] = l->runs[i + 1];
    --l->count;
    if (l == cache_leaf_ && cache_idx_ >= l->count) cache_idx_ = -1;
  }

  /// Marks `take` items from p deleted (the run at p is live, p.off + take <= len). Returns the place
  /// just after them (possibly one past the end of a leaf). Deleted items join a neighbouring tombstone
  /// run they continue (the usual result of backspacing), so tombstones do not fragment.
  place mark_deleted(place p, std::uint32_t take) {
    // Deleting before the cached run shifts its start; deleting in it or after it does not (items
    // only turn into tombstones, and a dropped run's successor starts where it did).
    if (p.leaf == cache_leaf_ && p.idx < cache_idx_) cache_idx_ = -1;
    leaf_node* l = p.leaf;
    run& r = l->runs[p.idx];
    const std::uint32_t len = r.len();
    add_live(l, -static_cast<std::int64_t>(take));
    run* prev = p.idx > 0 ? &l->runs[p.idx - 1] : nullptr;
    run* next = p.idx + 1 < l->count ? &l->runs[p.idx + 1] : nullptr;
    run gone = r.tail(p.off);
    gone.len_del = take | run::deleted_bit;
    if (p.off == 0 && prev && continues(*prev, gone)) {  // grow the tombstone run on the left
      prev->set_len(prev->len() + take);
      if (take == len) {
        drop_run(l, p.idx);
        return {l, p.idx, 0};
      }
      r = r.tail(take);
      return {l, p.idx, 0};
    }
    if (p.off + take == len && next && continues(gone, *next)) {  // grow the tombstone run on the right
      *next = run{gone.replica, gone.seq, gone.lamport, (next->len() + take) | run::deleted_bit};
      if (p.off == 0) {  // the whole run went: drop it
        drop_run(l, p.idx);
        return {l, p.idx + 1, 0};
      }
      r.set_len(p.off);
      return {l, p.idx + 2, 0};
    }
    if (p.off == 0 && take == len) {
      r.len_del |= run::deleted_bit;
      return {l, p.idx + 1, 0};
    }
    if (p.off == 0) {  // [deleted][rest]
      const run rest = r.tail(take);
      r.len_del = take | run::deleted_bit;
      add_live(l, -static_cast<std::int64_t>(rest.live()));
      return insert_runs(l, p.idx + 1, &rest, 1, 0);
    }
    const run rest = r.tail(p.off + take);
    r.set_len(p.off);
    const std::uint32_t moved = len - p.off - take;
    add_live(l, -static_cast<std::int64_t>(moved));
    const run two[2] = {gone, rest};
    place q = insert_runs(l, p.idx + 1, two, moved ? 2 : 1, 0);
    return {q.leaf, q.idx + 1, 0};
  }

  /// Heap bytes of the nodes.
  std::size_t tree_memory_usage() const noexcept { return count_nodes(root_); }

  node* root_ = nullptr;
  leaf_node* first_leaf_ = nullptr;
  mutable leaf_node* cache_leaf_ = nullptr;  ///< leaf of the last position lookup ...
  mutable std::size_t cache_start_ = 0;      ///< ... and the live items before it;
  mutable int cache_idx_ = -1;               ///< run of that lookup in cache_leaf_ (-1: none) ...
  mutable std::size_t cache_run_start_ = 0;  ///< ... and the live items before it. Reset by any
                                             ///< change that moves that run or what precedes it.
  /// A run the host looked up by id last (its leaf and index), for the host to try first: not kept up
  /// to date, so the host checks that the run there holds the id it wants. Leaves live as long as the
  /// tree (a split moves runs to a new leaf; no leaf is freed before the tree), so the pointer can
  /// always be read.
  mutable place id_hint_{};

 private:
  const Host& host() const noexcept { return static_cast<const Host&>(*this); }
  Host& host() noexcept { return static_cast<Host&>(*this); }

  void steal(run_tree& o) noexcept {
    root_ = std::exchange(o.root_, nullptr);
    first_leaf_ = std::exchange(o.first_leaf_, nullptr);
    cache_leaf_ = std::exchange(o.cache_leaf_, nullptr), cache_start_ = o.cache_start_;
    cache_idx_ = std::exchange(o.cache_idx_, -1), cache_run_start_ = o.cache_run_start_;
    id_hint_ = std::exchange(o.id_hint_, place{});
  }
  static void destroy(node* n) noexcept {
    if (!n) return;
    if (n->is_leaf) {
      delete static_cast<leaf_node*>(n);
      return;
    }
    auto* in = static_cast<inner_node*>(n);
    for (int i = 0; i < in->count; ++i) destroy(in->child[i]);
    delete in;
  }
  static std::size_t count_nodes(const node* n) noexcept {
    if (n->is_leaf) return sizeof(leaf_node);
    auto* in = static_cast<const inner_node*>(n);
    std::size_t b = sizeof(inner_node);
    for (int i = 0; i < in->count; ++i) b += count_nodes(in->child[i]);
    return b;
  }
  std::uint32_t check_node(const node* n, const inner_node* parent, std::vector<const leaf_node*>& leaves) const {
    if (n->parent != parent) bad("parent link");
    std::uint64_t live = 0;
    item_key min = above_every_key;
    if (n->is_leaf) {
      auto* l = static_cast<const leaf_node*>(n);
      if (l->count > leaf_capacity || (l->count == 0 && n != root_)) bad("leaf run count");
      for (int i = 0; i < l->count; ++i) live += l->runs[i].live();
      min = leaf_min(l);
      leaves.push_back(l);
    } else {
      auto* in = static_cast<const inner_node*>(n);
      if (in->count < 2 || in->count > inner_capacity) bad("inner child count");
      for (int i = 0; i < in->count; ++i) live += check_node(in->child[i], in, leaves), min = std::min(min, in->child[i]->min_key);
    }
    if (live != n->live) bad("live count");
    if (min != n->min_key) bad("smallest key of a node");
    return n->live;
  }
};

}  // namespace folio::detail
