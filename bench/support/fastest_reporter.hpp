// bench/support/fastest_reporter.hpp — a Google Benchmark console reporter that also keeps, per
// benchmark, the fastest repetition and its counters, so a program can print a summary of ratios
// after the run. With --benchmark_repetitions the fastest repetition is kept: the machines are shared
// and noise only ever adds time. Figures are wall-clock time; the CPU time of the same repetitions
// shows whether the benchmark had its core to itself (print_sharing()). Colours only on a terminal.
#pragma once

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace folio::bench {

struct figure {
  double ms = 0;      ///< in the benchmark's unit (these benchmarks use milliseconds)
  double cpu_ms = 0;  ///< CPU time of the same repetition
  std::map<std::string, double> counters;
};

class fastest_reporter : public benchmark::ConsoleReporter {
 public:
  fastest_reporter() : ConsoleReporter(isatty(STDOUT_FILENO) ? OO_Defaults : OO_Tabular) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.run_type != Run::RT_Iteration || r.error_occurred) continue;
      figure& f = figures[r.run_name.function_name];
      const double ms = r.GetAdjustedRealTime();
      if (f.ms != 0 && f.ms <= ms) continue;
      f.ms = ms;
      f.cpu_ms = r.GetAdjustedCPUTime();
      for (const auto& [k, c] : r.counters) f.counters[k] = c.value;
    }
    ConsoleReporter::ReportRuns(runs);
  }

  /// The fastest repetition of `name`, or null if it did not run (or failed).
  const figure* find(const std::string& name) const {
    auto it = figures.find(name);
    return it == figures.end() ? nullptr : &it->second;
  }

  /// One line: the largest ratio of wall-clock to CPU time among the kept repetitions. Near 1 the
  /// benchmarks had a core each; well above, other work shared the cores and every figure is inflated
  /// by it, unevenly (the ratios too).
  void print_sharing() const {
    double worst = 1;
    for (const auto& [name, f] : figures)
      if (f.cpu_ms > 0) worst = std::max(worst, f.ms / f.cpu_ms);
    std::printf("\nWall-clock / CPU time of the figures above: up to %.2fx%s\n", worst,
                worst > 1.1 ? ": the cores were shared with other work; times are inflated and ratios noisy" : "");
  }

  std::map<std::string, figure> figures;
};

}  // namespace folio::bench
