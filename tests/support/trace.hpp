// tests/support/trace.hpp — loads the editing traces of bench/traces (gzip + JSON; see bench/traces/README.md).
// Test and benchmark support only: the engine itself never sees JSON.
#pragma once

#include <rapidjson/document.h>
#include <zlib.h>

#include <cstdint>
#include <folio/utf8.hpp>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#ifndef FOLIO_TRACES_DIR
#error "FOLIO_TRACES_DIR must name the editing-trace folder"
#endif

namespace folio::testing {

struct patch {
  std::size_t pos;  ///< code points
  std::size_t del;  ///< code points
  std::u32string ins;
};
struct txn {
  std::vector<std::size_t> parents;  ///< concurrent traces only
  std::size_t agent = 0;             ///< concurrent traces only
  std::vector<patch> patches;
};
struct trace {
  std::string name;
  std::u32string end;
  std::vector<txn> txns;
  std::size_t agents = 1;
  std::size_t patch_count() const {
    std::size_t n = 0;
    for (const txn& t : txns) n += t.patches.size();
    return n;
  }
};

inline std::string traces_dir() { return FOLIO_TRACES_DIR; }

inline std::string gunzip_file(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error("cannot open trace " + path + " (set FOLIO_TRACES_DIR)");
  std::string out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
  gzclose(f);
  if (n < 0) throw std::runtime_error("corrupt gzip in " + path);
  return out;
}

inline std::u32string to_u32(const rapidjson::Value& v) {
  std::u32string s;
  if (!folio::decode_utf8(std::string_view(v.GetString(), v.GetStringLength()), s)) throw std::runtime_error("bad UTF-8 in trace");
  return s;
}

/// Loads `<traces_dir>/<file>`. Throws if the file is missing or malformed.
inline trace load_trace(const std::string& file) {
  const std::string json = gunzip_file(traces_dir() + "/" + file);
  rapidjson::Document d;
  d.Parse(json.data(), json.size());
  if (d.HasParseError() || !d.IsObject()) throw std::runtime_error("bad JSON in trace " + file);
  trace t;
  t.name = file;
  t.end = to_u32(d["endContent"]);
  if (d.HasMember("numAgents")) t.agents = d["numAgents"].GetUint();
  for (const auto& x : d["txns"].GetArray()) {
    txn tx;
    if (x.HasMember("parents"))
      for (const auto& p : x["parents"].GetArray()) tx.parents.push_back(p.GetUint());
    if (x.HasMember("agent")) tx.agent = x["agent"].GetUint();
    for (const auto& p : x["patches"].GetArray()) tx.patches.push_back({p[0].GetUint(), p[1].GetUint(), to_u32(p[2])});
    t.txns.push_back(std::move(tx));
  }
  return t;
}

/// The sequential traces (every one in the folder but the concurrent one).
inline const std::vector<std::string>& sequential_traces() {
  static const std::vector<std::string> names{"automerge-paper.json.gz", "seph-blog1.json.gz", "seph-blog1.ascii.json.gz",
                                              "friendsforever_flat.json.gz", "clownschool_flat.json.gz"};
  return names;
}

}  // namespace folio::testing
