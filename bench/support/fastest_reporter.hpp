// bench/support/fastest_reporter.hpp — a Google Benchmark console reporter that also keeps, per
// benchmark, the fastest repetition and its counters, so a program can print a summary of ratios
// after the run. With --benchmark_repetitions the fastest repetition is kept: the machines are shared
// and noise only ever adds time.
#pragma once

#include <benchmark/benchmark.h>

#include <map>
#include <string>
#include <vector>

namespace folio::bench {

struct figure {
  double ms = 0;  ///< in the benchmark's unit (these benchmarks use milliseconds)
  std::map<std::string, double> counters;
};

class fastest_reporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.run_type != Run::RT_Iteration || r.error_occurred) continue;
      figure& f = figures[r.run_name.function_name];
      const double ms = r.GetAdjustedRealTime();
      if (f.ms != 0 && f.ms <= ms) continue;
      f.ms = ms;
      for (const auto& [k, c] : r.counters) f.counters[k] = c.value;
    }
    ConsoleReporter::ReportRuns(runs);
  }

  /// The fastest repetition of `name`, or null if it did not run (or failed).
  const figure* find(const std::string& name) const {
    auto it = figures.find(name);
    return it == figures.end() ? nullptr : &it->second;
  }

  std::map<std::string, figure> figures;
};

}  // namespace folio::bench
