// Request bodies in and stored values out (service/wire/json.hpp), against RapidJSON on the same bytes in the
// same run: parse_json (iterative, validating, depth, duplicate keys, Unicode of every string with the
// field's path, numbers converted exactly) against RapidJSON's own validating DOM parse, and
// canonical_json (keys sorted, shortest doubles) against RapidJSON's writer of the same document.
// Three bodies of about 1 MiB: a map of numbers, a batch of comment threads (strings and keys), one
// text value.
#include <benchmark/benchmark.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cstdio>
#include <random>
#include <string>

#include "wire/json.hpp"
#include "support/fastest_reporter.hpp"

namespace {

namespace svc = folio::service;

/// {"data":{... "type":"map","data":{"k0":<number>,...}}}: doubles and integers, about 1 MiB.
const std::string& numbers_body() {
  static const std::string s = [] {
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> real(-1e6, 1e6);
    std::string b = R"({"data":{"organizationId":"o","documentId":"d","editorId":"e","type":"map","data":{)";
    for (int i = 0; b.size() < (1u << 20); ++i) {
      char v[40];
      if (i % 3 == 0)
        std::snprintf(v, sizeof v, "%lld", static_cast<long long>(rng() >> 12));
      else
        std::snprintf(v, sizeof v, "%.17g", real(rng));
      b += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":" + v;
    }
    return b + "}}}";
  }();
  return s;
}

/// A comment batch: 100 annotations of 100 comments, about 1 MiB of strings and keys.
const std::string& threads_body() {
  static const std::string s = [] {
    std::string b = R"({"data":{"organizationId":"o","documentId":"d","commentAnnotations":[)";
    for (int a = 0; a < 100; ++a) {
      b += (a ? "," : "");
      b += R"({"annotationId":"a)" + std::to_string(a) + R"(","from":{"userId":"u","name":"Ana","email":"ana@example.com"},"commentData":[)";
      for (int c = 0; c < 100; ++c)
        b += (c ? "," : "") + std::string(R"({"commentText":"A remark on paragraph )") + std::to_string(c) +
             R"(: shorter, please (é, 😀).","commentHtml":"<p>A remark</p>"})";
      b += "]}";
    }
    return b + "]}}";
  }();
  return s;
}

/// One text value of about 1 MiB, with non-ASCII characters and escapes.
const std::string& text_body() {
  static const std::string s = [] {
    std::string b = R"({"data":{"organizationId":"o","documentId":"d","editorId":"e","type":"text","data":")";
    while (b.size() < (1u << 20)) b += "Grüße aus Zürich, \\\"quoted\\\" \\u00e9\\n";
    return b + "\"}}";
  }();
  return s;
}

constexpr unsigned rapidjson_flags = rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag;

template <const std::string& (*Body)()>
void rapidjson_parse(benchmark::State& st) {
  for (auto _ : st) {
    rapidjson::Document d;
    d.Parse<rapidjson_flags>(Body().data(), Body().size());
    benchmark::DoNotOptimize(d.HasParseError());
  }
}
template <const std::string& (*Body)()>
void parse_json(benchmark::State& st) {
  for (auto _ : st) benchmark::DoNotOptimize(svc::parse_json(Body()).IsObject());
}
template <const std::string& (*Body)()>
void rapidjson_write(benchmark::State& st) {
  rapidjson::Document d;
  d.Parse<rapidjson_flags>(Body().data(), Body().size());
  for (auto _ : st) {
    rapidjson::StringBuffer sb;
    svc::json_writer w(sb);
    d.Accept(w);
    benchmark::DoNotOptimize(sb.GetSize());
  }
}
template <const std::string& (*Body)()>
void canonical_json(benchmark::State& st) {
  const rapidjson::Document d = svc::parse_json(Body());
  for (auto _ : st) benchmark::DoNotOptimize(svc::canonical_json(d).size());
}

}  // namespace

int main(int argc, char** argv) {
  using bench_fn = void (*)(benchmark::State&);
  struct body {
    const char* name;
    const std::string& (*bytes)();
    bench_fn fns[4];
  };
  const body bodies[] = {
      {"numbers", numbers_body, {rapidjson_parse<numbers_body>, parse_json<numbers_body>, rapidjson_write<numbers_body>, canonical_json<numbers_body>}},
      {"threads", threads_body, {rapidjson_parse<threads_body>, parse_json<threads_body>, rapidjson_write<threads_body>, canonical_json<threads_body>}},
      {"text", text_body, {rapidjson_parse<text_body>, parse_json<text_body>, rapidjson_write<text_body>, canonical_json<text_body>}},
  };
  const char* const kinds[] = {"rapidjson_parse", "parse_json", "rapidjson_write", "canonical_json"};
  // Each body's figures, then its two baselines again: the faster of a baseline's two measurements is
  // kept (the reporter keeps a name's fastest repetition), so a slow spell during one of them does not
  // flatter the ratios.
  for (const body& b : bodies)
    for (int k : {0, 1, 2, 3, 0, 2}) benchmark::RegisterBenchmark((std::string(b.name) + "/" + kinds[k]).c_str(), b.fns[k])->Unit(benchmark::kMillisecond);
  benchmark::Initialize(&argc, argv);
  folio::bench::fastest_reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  std::printf("\nSummary (fastest repetition; ratios against RapidJSON on the same bytes, same run: the baselines; no target is set)\n");
  std::printf("  %-8s %9s %12s %12s %8s %12s %12s %8s\n", "body", "bytes", "rapidjson", "parse_json", "ratio", "rj write", "canonical", "ratio");
  for (const body& b : bodies) {
    const auto* rp = reporter.find(std::string(b.name) + "/rapidjson_parse");
    const auto* pj = reporter.find(std::string(b.name) + "/parse_json");
    const auto* rw = reporter.find(std::string(b.name) + "/rapidjson_write");
    const auto* cj = reporter.find(std::string(b.name) + "/canonical_json");
    if (!rp || !pj || !rw || !cj) continue;
    std::printf("  %-8s %9zu %9.2f ms %9.2f ms %7.2fx %9.2f ms %9.2f ms %7.2fx\n", b.name, b.bytes().size(), rp->ms, pj->ms, pj->ms / rp->ms, rw->ms,
                cj->ms, cj->ms / rw->ms);
  }
  reporter.print_sharing();
  benchmark::Shutdown();
}
