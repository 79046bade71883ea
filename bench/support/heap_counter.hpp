// bench/support/heap_counter.hpp — counts the bytes this program holds on the heap, by replacing the
// global operator new and delete (malloc_usable_size of each block, so allocator rounding counts).
// Include it in exactly one translation unit of a benchmark program.
//
// Counting happens only inside a heap_window, never in a timed loop: outside a window operator new is
// malloc and one predictable branch, as cheap as the standard library's. (Counted always, the atomic
// add, malloc_usable_size and peak update on every allocation slowed allocation-heavy code — Folio's
// records, the strict XML parser — and not the baselines that allocate a few large blocks, so ratios
// came out too high.) A window reports the net bytes allocated since it opened (blocks freed meanwhile
// subtract, whenever they were allocated) and the most that net reached. One window at a time; not
// thread-safe (the benchmarks run on one thread).
#pragma once

#include <malloc.h>

#include <cstdint>
#include <cstdlib>
#include <new>

namespace folio::bench {
inline bool g_counting = false;
inline std::int64_t g_heap = 0, g_peak = 0;

/// Counts while it lives: bytes() is what the heap grew by since it opened, peak() the most it had
/// grown by since it opened or since the last reset_peak().
class heap_window {
 public:
  heap_window() noexcept { g_heap = g_peak = 0, g_counting = true; }
  ~heap_window() { g_counting = false; }
  heap_window(const heap_window&) = delete;
  heap_window& operator=(const heap_window&) = delete;
  std::int64_t bytes() const noexcept { return g_heap; }
  std::int64_t peak() const noexcept { return g_peak; }
  void reset_peak() noexcept { g_peak = g_heap; }
};
}  // namespace folio::bench

void* operator new(std::size_t n) {
  void* p = std::malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  if (folio::bench::g_counting) {
    folio::bench::g_heap += static_cast<std::int64_t>(malloc_usable_size(p));
    if (folio::bench::g_heap > folio::bench::g_peak) folio::bench::g_peak = folio::bench::g_heap;
  }
  return p;
}
void operator delete(void* p) noexcept {
  if (p && folio::bench::g_counting) folio::bench::g_heap -= static_cast<std::int64_t>(malloc_usable_size(p));
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept { operator delete(p); }
