// bench/support/heap_counter.hpp — counts the bytes this program holds on the heap, by replacing the
// global operator new and delete (malloc_usable_size of each block, so allocator rounding counts).
// Include it in exactly one translation unit of a benchmark program; read folio::bench::heap_bytes()
// before and after building something to learn what it holds, and reset_peak() / peak_bytes() around
// it to learn the most it held meanwhile. Not thread-safe for the peak (benchmarks are single-threaded).
#pragma once

#include <malloc.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace folio::bench {
inline std::atomic<std::int64_t> g_heap{0};
inline std::int64_t g_peak = 0;
inline std::int64_t heap_bytes() noexcept { return g_heap.load(std::memory_order_relaxed); }
inline void reset_peak() noexcept { g_peak = heap_bytes(); }
inline std::int64_t peak_bytes() noexcept { return g_peak; }
}  // namespace folio::bench

void* operator new(std::size_t n) {
  void* p = std::malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  const std::int64_t now = folio::bench::g_heap += static_cast<std::int64_t>(malloc_usable_size(p));
  if (now > folio::bench::g_peak) folio::bench::g_peak = now;
  return p;
}
void operator delete(void* p) noexcept {
  if (p) folio::bench::g_heap -= static_cast<std::int64_t>(malloc_usable_size(p));
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept { operator delete(p); }
