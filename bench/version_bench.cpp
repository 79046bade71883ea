// Versions and history at the size of a real editing session (issue 51): the automerge-paper trace
// (260k patches, a 104 kB text at the end) replayed through `/v2/crdt/update` as REST-sized changes —
// each update carries the value after the next `--step` patches (default 100: about 2,600 updates, each
// one a backend's read-compute-write of a few lines' worth of typing, and a few thousand requests keep
// the run under a minute) — on a database through the responder (no socket, no nginx): a SQLite file
// in TMPDIR, or the PostgreSQL conninfo given (a fresh database: bench/versions.sh), with an
// automatic version taken every 1,000 patches by the background pass's own function
// (take_due_versions, crdt/auto_versions.hpp) run at an injected time past the quiet interval.
// Prints, each beside its baseline from the same run:
//   * bytes per version (the crdt_versions row: vector blob, kind, name, authors, times) against the
//     record's stored snapshot (what a full copy per version would cost), and bytes per change row;
//   * versions/get with versionId of the 10th and the 250th version (median and p90 of --samples each,
//     interleaved), against crdt/get of the record now, and their ratio (issue 51's target: near 1),
//     also per byte of the version's value and per patch before the version (a checkout costs the
//     operations up to the version, folio::document::checkout);
//   * crdt/update with a baseVersion 1,000 patches old, and one 1,000 updates old, against one with the
//     current version (each a one-character insertion into the value read at that version; a stale one
//     merges it past what was committed since).
//   version_bench [POSTGRESQL_CONNINFO] [--step N] [--samples N] [--trace FILE]
#include <unistd.h>


#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <folio/document.hpp>
#include <folio/utf8.hpp>
#include <string>
#include <vector>

#include "crdt/auto_versions.hpp"
#include "platform/auth.hpp"
#include "platform/clock.hpp"
#include "platform/log.hpp"
#include "responder.hpp"
#include "support/trace.hpp"
#include "wire/json.hpp"

namespace svc = folio::service;
using clk = std::chrono::steady_clock;

namespace {

constexpr std::size_t patches_per_version = 1000;

struct spread {
  double median_ms = 0, p90_ms = 0;
};
spread of(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms[ms.size() * 9 / 10]};
}

class bench_service {
 public:
  explicit bench_service(const std::string& target) : db_(target, svc::responder::tables()) {
    key_ = svc::create_key(db_, "bench", svc::now_iso());
    token_ = svc::create_token(db_, key_.substr(3, 16), "bench", false, std::nullopt, svc::now_iso());
  }
  /// The answer's body; exits on anything but 200.
  std::string call(const std::string& path, const std::string& body) {
    svc::request r{"POST", path, "application/json", key_, token_, body, body.size(), {}, {}, {}};
    svc::response res = service_.handle(db_, r);
    if (res.http != 200) std::fprintf(stderr, "version_bench: %s answered %d %.300s\n", path.c_str(), res.http, res.body.c_str()), std::exit(1);
    return std::move(res.body);
  }
  double timed(const std::string& path, const std::string& body) {
    const clk::time_point t = clk::now();
    call(path, body);
    return std::chrono::duration<double, std::milli>(clk::now() - t).count();
  }
  svc::responder& responder() { return service_; }
  svc::database& db() { return db_; }

 private:
  svc::database db_;
  svc::responder service_{svc::config{}};
  std::string key_, token_;
};

/// `{"data":{ids..., fields...}}` with every value a JSON string.
std::string body(std::initializer_list<std::pair<const char*, std::string_view>> fields) {
  rapidjson::StringBuffer sb;
  svc::json_writer w(sb);
  w.StartObject();
  w.Key("data");
  w.StartObject();
  for (const auto& [k, v] : {std::pair<const char*, std::string_view>{"organizationId", "o"}, {"documentId", "d"}, {"editorId", "paper"}})
    w.Key(k), w.String(v.data(), static_cast<rapidjson::SizeType>(v.size()));
  for (const auto& [k, v] : fields) w.Key(k), w.String(v.data(), static_cast<rapidjson::SizeType>(v.size()));
  w.EndObject();
  w.EndObject();
  return sb.GetString();
}

struct read_record {
  std::string value, version;
};
read_record get(bench_service& s) {
  const rapidjson::Document d = svc::parse_json(s.call("/v2/crdt/get", body({})));
  const rapidjson::Value& r = d["result"]["data"][0];
  return {r["data"].GetString(), r["version"].GetString()};
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t step = 100, samples = 41;
  std::string pg;
  std::string trace_file = "automerge-paper.json.gz";  // in FOLIO_TRACES_DIR
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--step" && i + 1 < argc) step = std::strtoul(argv[++i], nullptr, 10);
    else if (a == "--samples" && i + 1 < argc) samples = std::strtoul(argv[++i], nullptr, 10);
    else if (a == "--trace" && i + 1 < argc) trace_file = argv[++i];
    else if (pg.empty() && a.rfind("--", 0) != 0) pg = a;
    else return std::fprintf(stderr, "usage: version_bench [POSTGRESQL_CONNINFO] [--step N] [--samples N] [--trace FILE]\n"), 2;
  }
  if (step == 0 || patches_per_version % step != 0 || samples == 0)
    return std::fprintf(stderr, "version_bench: --step must divide %zu; --samples must be positive\n", patches_per_version), 2;
  svc::log::set_access(false);
  const folio::testing::trace t = folio::testing::load_trace(trace_file);
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("folio-version-bench-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  int status = 0;
  {
    bench_service s(pg.empty() ? (dir / "folio.db").string() : pg);
    s.call("/v2/crdt/add", body({{"type", "text"}, {"data", ""}}));
    const svc::history_config cfg;  // the defaults: a version once a record is 30 s quiet
    const std::int64_t quiet_ms = cfg.quiet.count();

    // The replay. `text` is the value after the patches applied so far (the trace's own model: a
    // document edited locally, read whole after each step).
    folio::document model(folio::record_type::text, 1);
    folio::text& text = model.as_text();
    std::size_t applied = 0, updates = 0, versions = 0;
    double sent_bytes = 0;
    std::vector<double> replay_ms;
    // The stale-baseVersion figures' bases: the state at the last step at least 1,000 patches, and
    // 1,000 updates, before the end.
    const std::size_t total = t.patch_count();
    struct base {
      std::size_t back;  ///< patches before the end, at least
      read_record read;
      std::size_t at = 0;
    };
    std::vector<base> bases = {{patches_per_version, {}}, {1000 * step, {}}};
    const clk::time_point replay_start = clk::now();
    const auto send = [&] {
      const std::string value = model.text();
      sent_bytes += static_cast<double>(value.size());
      replay_ms.push_back(s.timed("/v2/crdt/update", body({{"data", value}, {"userId", updates % 2 ? "ann" : "bob"}})));
      ++updates;
      s.responder().crdt().compactions().drain(s.db());  // what folio-fcgi's compaction thread does meanwhile
      if (applied % patches_per_version == 0)
        versions += svc::take_due_versions(s.responder().crdt(), s.db(), cfg, svc::now_unix_ms() + quiet_ms + 1000);
      for (base& b : bases)
        if (applied + b.back <= total && applied + b.back + step > total) b.read = get(s), b.at = applied;
    };
    for (const auto& tx : t.txns)
      for (const auto& p : tx.patches) {
        if (p.del) text.erase(p.pos, p.del);
        if (!p.ins.empty()) text.insert(p.pos, p.ins);
        if (++applied % step == 0) send();
      }
    if (applied % step != 0) send();
    const double replay_s = std::chrono::duration<double>(clk::now() - replay_start).count();
    const read_record end = get(s);
    std::string trace_end;
    folio::append_utf8(trace_end, t.end);
    if (end.value != trace_end) std::fprintf(stderr, "version_bench: the record does not end as the trace does\n"), status = 1;

    // Storage.
    std::int64_t version_rows = 0, version_bytes = 0, vector_bytes = 0, change_rows = 0, change_bytes = 0, snapshot_bytes = 0;
    {
      svc::query q = s.db().sql(
          "SELECT count(*), coalesce(sum(length(version_vector)),0), coalesce(sum(length(version_vector) + length(kind) + "
          "length(coalesce(name,'')) + length(created_at) + length(created_by) + length(authors) + 16),0) FROM crdt_versions");
      q.step();
      version_rows = q.integer(0), vector_bytes = q.integer(1), version_bytes = q.integer(2);
    }
    {
      svc::query q = s.db().sql(
          "SELECT count(*), coalesce(sum(length(before_counts) + length(after_counts) + length(changed_by) + length(changed_at) + 8),0) "
          "FROM crdt_changes");
      q.step();
      change_rows = q.integer(0), change_bytes = q.integer(1);
    }
    {
      svc::query q = s.db().sql("SELECT coalesce(sum(length(snapshot)),0) FROM crdt_snapshots");
      q.step();
      snapshot_bytes = q.integer(0);
    }
    if (version_rows < 250) std::fprintf(stderr, "version_bench: %lld versions, fewer than 250\n", static_cast<long long>(version_rows)), status = 1;

    // versions/get of the 10th and the 250th version, crdt/get beside them.
    const std::string tag = end.version.substr(end.version.find('-') + 1);
    const std::string v10 = "v10-" + tag, v250 = "v250-" + tag;
    const auto value_bytes = [&](const std::string& id) {
      const rapidjson::Document d = svc::parse_json(s.call("/v2/crdt/versions/get", body({{"versionId", id}})));
      return static_cast<double>(d["result"]["data"][0]["data"].GetStringLength());
    };
    const double bytes10 = value_bytes(v10), bytes250 = value_bytes(v250), bytes_now = static_cast<double>(end.value.size());
    std::vector<double> get10, get250, get_now;
    for (std::size_t i = 0; i < samples; ++i) {
      get10.push_back(s.timed("/v2/crdt/versions/get", body({{"versionId", v10}})));
      get250.push_back(s.timed("/v2/crdt/versions/get", body({{"versionId", v250}})));
      get_now.push_back(s.timed("/v2/crdt/get", body({})));
    }

    // Updates with a baseVersion 1,000 patches old against the current one, interleaved: each inserts
    // one character into the middle of the value read at its base.
    std::vector<std::vector<double>> stale_ms(bases.size());
    std::vector<double> current_ms;
    for (std::size_t i = 0; i < samples; ++i) {
      std::string edited;
      for (std::size_t b = 0; b < bases.size(); ++b) {
        edited = bases[b].read.value;
        edited.insert(edited.size() / 2, "#");
        stale_ms[b].push_back(s.timed("/v2/crdt/update", body({{"data", edited}, {"baseVersion", bases[b].read.version}, {"userId", "late"}})));
      }
      const read_record now = get(s);
      edited = now.value;
      edited.insert(edited.size() / 2, "#");
      current_ms.push_back(s.timed("/v2/crdt/update", body({{"data", edited}, {"baseVersion", now.version}, {"userId", "fresh"}})));
    }
    const std::string merged = get(s).value;
    if (merged.size() != trace_end.size() + (bases.size() + 1) * samples) std::fprintf(stderr, "version_bench: a merged update was lost\n"), status = 1;

    const spread r = of(replay_ms), g10 = of(get10), g250 = of(get250), gnow = of(get_now), cur = of(current_ms);
    std::printf("automerge-paper: %zu patches as %zu updates of %zu patches (replay %.1f s, update median %.3f ms, p90 %.3f ms), "
                "%s; %zu automatic versions (take_due_versions every %zu patches)\n",
                applied, updates, step, replay_s, r.median_ms, r.p90_ms, pg.empty() ? "SQLite" : "PostgreSQL", versions, patches_per_version);
    std::printf("%-40s %12s %14s %10s\n", "storage", "bytes", "baseline", "ratio");
    std::printf("%-40s %12.1f %14lld %9.4fx   (baseline: the record's snapshot, a full copy per version)\n", "per version row", double(version_bytes) / double(version_rows),
                static_cast<long long>(snapshot_bytes), double(version_bytes) / double(version_rows) / double(snapshot_bytes));
    std::printf("%-40s %12.1f %14s %10s\n", "  of which the version vector", double(vector_bytes) / double(version_rows), "", "");
    std::printf("%-40s %12.1f %14.1f %9.4fx   (baseline: bytes of value an update sends, mean)\n", "per change row", double(change_bytes) / double(change_rows),
                sent_bytes / double(updates), double(change_bytes) / double(change_rows) / (sent_bytes / double(updates)));
    std::printf("%-40s %12s %12s %14s %10s\n", ("request (of " + std::to_string(samples) + ")").c_str(), "median ms", "p90 ms", "baseline", "ratio");
    std::printf("%-40s %12.3f %12.3f %14s %10s   (value %.0f bytes)\n", "crdt/get now (baseline)", gnow.median_ms, gnow.p90_ms, "", "", bytes_now);
    std::printf("%-40s %12.3f %12.3f %14s %9.2fx   (value %.0f bytes)\n", "versions/get v10 (10,000 patches)", g10.median_ms, g10.p90_ms, "crdt/get",
                g10.median_ms / gnow.median_ms, bytes10);
    std::printf("%-40s %12.3f %12.3f %14s %9.2fx   (value %.0f bytes)\n", "versions/get v250 (250,000 patches)", g250.median_ms, g250.p90_ms, "crdt/get",
                g250.median_ms / gnow.median_ms, bytes250);
    const double get_ratio = g250.median_ms / g10.median_ms;
    std::printf("%-40s %12.2fx %11.2fx %14s %10s   (target near 1, at most 2x: %s; per byte of value %.2fx, per patch before the version %.2fx)\n",
                "versions/get v250 / v10", get_ratio, g250.p90_ms / g10.p90_ms, "", "", get_ratio <= 2 ? "met" : "MISSED",
                (g250.median_ms / bytes250) / (g10.median_ms / bytes10), get_ratio / 25);
    std::printf("%-40s %12.3f %12.3f %14s %10s\n", "update, baseVersion current", cur.median_ms, cur.p90_ms, "(baseline)", "");
    for (std::size_t b = 0; b < bases.size(); ++b) {
      const spread st = of(stale_ms[b]);
      std::printf("%-40s %12.3f %12.3f %14s %9.2fx   (p90 %.2fx; %zu updates back)\n",
                  ("update, baseVersion " + std::to_string(total - bases[b].at) + " patches back").c_str(), st.median_ms, st.p90_ms, "current",
                  st.median_ms / cur.median_ms, st.p90_ms / cur.p90_ms, (total - bases[b].at + step - 1) / step);
    }
  }
  std::filesystem::remove_all(dir);
  return status;
}
