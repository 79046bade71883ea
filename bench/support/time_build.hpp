// bench/support/time_build.hpp — times building an object and nothing else: each iteration builds into
// an empty slot, and what it built is destroyed with the timer paused. The figures claim a build
// (replay, merge, load, decode, parse); freeing a record made of hundreds of thousands of blocks costs a
// share of building it, and a baseline that frees one large block pays almost nothing for it, so
// timing the destruction too would skew every ratio. (Pausing costs two clock reads per iteration,
// far below these benchmarks' milliseconds.)
#pragma once

#include <benchmark/benchmark.h>

#include <optional>

namespace folio::bench {

/// Runs the benchmark loop of `st`: each iteration calls build(slot), slot an empty std::optional<T>
/// to emplace into; only that call is timed.
template <class T, class Build>
void time_build(benchmark::State& st, Build build) {
  std::optional<T> slot;
  for (auto _ : st) {
    build(slot);
    benchmark::DoNotOptimize(slot);
    st.PauseTiming();
    slot.reset();
    st.ResumeTiming();
  }
}

}  // namespace folio::bench
