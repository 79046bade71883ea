// The XML replace-by-value path, as far as it exists today: parse the new value strictly and diff it
// against the current tree (folio/markup.hpp, detail/xml_diff.hpp), on a 1 MiB document with one word
// changed. Baseline, measured in the same run: pugixml alone parsing the same markup.
// (The CRDT tree that will apply the script is the next step; see docs/INTERNALS.md.)
#include <benchmark/benchmark.h>

#include <cstdio>
#include <folio/detail/xml_diff.hpp>

#include "support/fastest_reporter.hpp"
#include "support/xml_documents.hpp"
#include <string>

namespace {

const std::string& before() {
  static const std::string s = folio::testing::xml_document(1u << 20);
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

}  // namespace

int main(int argc, char** argv) {
  benchmark::RegisterBenchmark("xml/pugixml_parse", pugixml_parse)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("xml/markup_parse", markup_parse)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("xml/parse_and_diff", parse_and_diff)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("xml/serialize", serialize)->Unit(benchmark::kMillisecond);
  benchmark::Initialize(&argc, argv);
  folio::bench::fastest_reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  if (const auto* base = reporter.find("xml/pugixml_parse"); base && base->ms > 0) {
    std::printf("\nSummary: 1 MiB XML document, one word changed (ratios against pugixml parsing it, same run)\n");
    for (const char* n : {"xml/markup_parse", "xml/parse_and_diff", "xml/serialize"})
      if (const auto* f = reporter.find(n)) std::printf("  %-20s %8.3f ms %7.2fx\n", n, f->ms, f->ms / base->ms);
    std::printf("  %-20s %8.3f ms   1.00x (baseline)\n", "pugixml parse", base->ms);
  }
  benchmark::Shutdown();
}
