// Per-write latency and throughput of the two storage backends in the same run (issue 22): `/v2/crdt/update`
// through the responder (no socket, no nginx: the handler, the record session and the commit), each
// update a committed write of a one-character change. 1 writer (one record), then 4 writers (4 threads,
// own connection and record each), with folio-fcgi's compaction thread beside them. SQLite on a file in TMPDIR; PostgreSQL on the conninfo given (a
// private cluster: bench/storage.sh). Prints per backend the median and p90 latency, writes per second,
// and PostgreSQL / SQLite.
//   storage_bench [POSTGRESQL_CONNINFO] [--writes N]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "platform/auth.hpp"
#include "platform/clock.hpp"
#include "platform/log.hpp"
#include "responder.hpp"

namespace svc = folio::service;
using clk = std::chrono::steady_clock;

struct figures {
  double median_ms = 0, p90_ms = 0, per_second = 0;
};

/// `writers` threads, each `writes` updates of its own record on its own connection.
figures run(const std::string& target, int writers, int writes) {
  svc::database setup(target, svc::responder::tables());
  const std::string key = svc::create_key(setup, "bench", svc::now_iso());
  const std::string token = svc::create_token(setup, key.substr(3, 16), "bench", false, std::nullopt, svc::now_iso());
  svc::responder service{svc::config{}};
  auto call = [&](svc::database& db, const std::string& path, const std::string& body) {
    svc::request r{"POST", path, "application/json", key, token, body, body.size(), {}, {}, {}};
    const svc::response res = service.handle(db, r);
    if (res.http != 200) std::fprintf(stderr, "storage_bench: %s answered %d %s\n", path.c_str(), res.http, res.body.c_str()), std::exit(1);
  };
  std::thread compaction([&] {  // as folio-fcgi runs it: a thread and a connection of its own
    svc::database db(target, svc::responder::tables());
    service.crdt().compactions().run(db);
  });
  std::vector<std::future<std::vector<double>>> done;
  const clk::time_point start = clk::now();
  for (int w = 0; w < writers; ++w)
    done.push_back(std::async(std::launch::async, [&, w] {
      svc::database db(target, svc::responder::tables());
      const std::string ids = R"({"data":{"organizationId":"o","documentId":"d","editorId":"w)" + std::to_string(w) + "\"";
      call(db, "/v2/crdt/add", ids + R"(,"type":"text","data":""}})");
      std::vector<double> ms;
      std::string text;
      for (int i = 0; i < writes; ++i) {
        text += static_cast<char>('a' + i % 26);
        const clk::time_point t = clk::now();
        call(db, "/v2/crdt/update", ids + R"(,"data":")" + text + "\"}}");
        ms.push_back(std::chrono::duration<double, std::milli>(clk::now() - t).count());
      }
      return ms;
    }));
  std::vector<double> all;
  for (auto& f : done)
    for (double v : f.get()) all.push_back(v);
  const double seconds = std::chrono::duration<double>(clk::now() - start).count();
  service.crdt().compactions().stop();
  compaction.join();
  std::sort(all.begin(), all.end());
  return {all[all.size() / 2], all[all.size() * 9 / 10], static_cast<double>(all.size()) / seconds};
}

int main(int argc, char** argv) {
  std::string pg;
  int writes = 300;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--writes" && i + 1 < argc) writes = std::atoi(argv[++i]);
    else pg = a;
  }
  svc::log::set_access(false);
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("folio-storage-bench-" + std::to_string(::getpid()));
  std::printf("%-10s %-8s %12s %12s %12s\n", "backend", "writers", "median ms", "p90 ms", "writes/s");
  for (const int writers : {1, 4}) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    const figures lite = run((dir / "folio.db").string(), writers, writes);
    std::printf("%-10s %-8d %12.3f %12.3f %12.0f\n", "sqlite", writers, lite.median_ms, lite.p90_ms, lite.per_second);
    if (pg.empty()) continue;
    const figures post = run(pg, writers, writes);
    std::printf("%-10s %-8d %12.3f %12.3f %12.0f\n", "postgresql", writers, post.median_ms, post.p90_ms, post.per_second);
    std::printf("%-10s %-8d %12.2fx %11.2fx %11.2fx\n", "pg/sqlite", writers, post.median_ms / lite.median_ms, post.p90_ms / lite.p90_ms,
                post.per_second / lite.per_second);
  }
  std::filesystem::remove_all(dir);
}
