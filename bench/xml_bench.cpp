// The XML replace-by-value path, as far as it exists today: parse the new value strictly and diff it
// against the current tree (folio/markup.hpp, detail/xml_diff.hpp), on a 1 MiB document with one word
// changed. Baseline, measured in the same run: pugixml alone parsing the same markup.
// (The CRDT tree that will apply the script is the next step; see docs/INTERNALS.md.)
#include <benchmark/benchmark.h>

#include <cstdio>
#include <folio/detail/xml_diff.hpp>
#include <map>
#include <random>
#include <string>

namespace {

std::string document() {
  std::string doc = "<doc>";
  std::mt19937 rng(3);
  for (int i = 0; doc.size() < (1u << 20); ++i) {
    doc += "<p id=\"p" + std::to_string(i) + "\" class=\"body\">";
    for (int w = 0; w < 12; ++w) doc += "word" + std::to_string(rng() % 1000) + " ";
    doc += "<em>emphasis &amp; more</em></p>";
  }
  return doc + "</doc>";
}

const std::string& before() {
  static const std::string s = document();
  return s;
}
const std::string& after() {
  static const std::string s = [] {
    std::string c = before();
    c.replace(c.find("word", c.size() / 2), 4, "WORD");
    return c;
  }();
  return s;
}

void pugixml_parse(benchmark::State& st) {
  for (auto _ : st) {
    pugi::xml_document d;
    const auto r = d.load_buffer(after().data(), after().size(), pugi::parse_default | pugi::parse_fragment, pugi::encoding_utf8);
    if (!r) st.SkipWithError("pugixml refused the document");
    benchmark::DoNotOptimize(d);
  }
  st.counters["bytes"] = double(after().size());
}

void markup_parse(benchmark::State& st) {
  for (auto _ : st) {
    folio::markup::fragment f;
    if (!folio::markup::parse(after(), f)) st.SkipWithError("parse failed");
    benchmark::DoNotOptimize(f);
  }
}

void parse_and_diff(benchmark::State& st) {
  folio::markup::fragment old_tree;
  folio::markup::parse(before(), old_tree);
  std::size_t edits = 0;
  for (auto _ : st) {
    folio::markup::fragment f;
    if (!folio::markup::parse(after(), f)) st.SkipWithError("parse failed");
    const auto script = folio::detail::diff_xml(old_tree, f);
    edits = folio::detail::xml_edit_size(script);
    benchmark::DoNotOptimize(script);
  }
  st.counters["edits"] = double(edits);
}

void serialize(benchmark::State& st) {
  folio::markup::fragment f;
  folio::markup::parse(after(), f);
  std::size_t size = 0;
  for (auto _ : st) {
    const std::string s = folio::markup::serialize(f);
    size = s.size();
    benchmark::DoNotOptimize(s.data());
  }
  st.counters["bytes"] = double(size);
}

std::map<std::string, double> g_ms;
class summary_reporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.run_type != Run::RT_Iteration || r.error_occurred) continue;
      const std::string name = r.run_name.function_name;
      const double ms = r.GetAdjustedRealTime();
      if (!g_ms.count(name) || ms < g_ms[name]) g_ms[name] = ms;
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::RegisterBenchmark("xml/pugixml_parse", pugixml_parse)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("xml/markup_parse", markup_parse)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("xml/parse_and_diff", parse_and_diff)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("xml/serialize", serialize)->Unit(benchmark::kMillisecond);
  benchmark::Initialize(&argc, argv);
  summary_reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  const double base = g_ms["xml/pugixml_parse"];
  if (base > 0) {
    std::printf("\nSummary: 1 MiB XML document, one word changed (ratios against pugixml parsing it, same run)\n");
    for (const char* n : {"xml/markup_parse", "xml/parse_and_diff", "xml/serialize"})
      if (g_ms.count(n)) std::printf("  %-20s %8.3f ms %7.2fx\n", n, g_ms[n], g_ms[n] / base);
    std::printf("  %-20s %8.3f ms   1.00x (baseline)\n", "pugixml parse", base);
  }
  benchmark::Shutdown();
}
