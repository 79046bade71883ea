// bench/support/heap_counter.hpp — counts the bytes this program holds on the heap, by replacing the
// global operator new and delete (malloc_usable_size of each block, so allocator rounding counts).
// Include it in exactly one translation unit of a benchmark program; read folio::bench::heap_bytes()
// before and after building something to learn what it holds.
#pragma once

#include <malloc.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace folio::bench {
inline std::atomic<std::int64_t> g_heap{0};
inline std::int64_t heap_bytes() noexcept { return g_heap.load(std::memory_order_relaxed); }
}  // namespace folio::bench

void* operator new(std::size_t n) {
  void* p = std::malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  folio::bench::g_heap += static_cast<std::int64_t>(malloc_usable_size(p));
  return p;
}
void operator delete(void* p) noexcept {
  if (p) folio::bench::g_heap -= static_cast<std::int64_t>(malloc_usable_size(p));
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept { operator delete(p); }
