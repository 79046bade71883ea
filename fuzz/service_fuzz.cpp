// libFuzzer targets for whole requests: the server and the handlers (responder::handle) against a
// temporary SQLite database holding a record of each type and a comment thread. FOLIO_FUZZ_TARGET:
//   1 request: byte 0 picks the path (every endpoint but the two that resolve a URL's host —
//     webhooks/endpoints/add and update —, /healthz, /metrics, an unknown one), the rest is the body,
//     sent with valid credentials.
//   2 sync: byte 0 picks the record (text, map, xml, array; bit 4 set: no incarnation is sent), byte 1
//     is the length of the version vector that follows, the rest is the update; both sent base64 in a
//     /v2/crdt/sync body with the record's incarnation.
//   3 client_token: byte 0 even: the rest is a client token, checked against a fixed key ring; odd: the
//     rest is a claims text sealed with the ring's signing key, so that the claims parser is reached
//     past the signature. Oracle: a token that verifies (expired or not) is exactly what signing its
//     claims gives — one spelling per token. No database.
// Oracles: the answer is never a 500 (an unexpected exception) and its body is JSON; after a sync
// push is taken, the record reads as JSON and a reader with an empty cache (the state on disk)
// answers exactly what the cached document answers. The database is recreated every 500 inputs so
// that its records stay small: a sync answers with what the client lacks, which for a random version
// is the whole record, and the oracle reloads the record from disk: small records keep an input's
// cost small, and so the executions per second high.
#include <rapidjson/document.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "platform/auth.hpp"
#include "wire/base64.hpp"
#include "platform/client_token.hpp"
#include "platform/log.hpp"
#include "platform/clock.hpp"
#include "responder.hpp"

namespace {

namespace svc = folio::service;

constexpr std::string_view paths[] = {
    "/v1/commentannotations/get",       "/v2/commentannotations/get",    "/v2/commentannotations/add",
    "/v2/commentannotations/update",    "/v2/commentannotations/delete", "/v2/commentannotations/comments/add",
    "/v2/commentannotations/comments/update", "/v2/commentannotations/comments/delete", "/v2/crdt/add",
    "/v2/crdt/update",                  "/v2/crdt/get",                  "/v2/crdt/delete",
    "/v2/crdt/sync",                    "/healthz",                      "/metrics",
    "/v2/crdt/nothing",
    "/v2/crdt/versions/add",            "/v2/crdt/versions/get",         "/v2/crdt/versions/update",
    "/v2/crdt/versions/delete",         "/v2/crdt/versions/restore",     "/v2/crdt/versions/diff",
    // The webhooks' endpoints but add and update, which resolve the URL's host (a name would wait for DNS).
    "/v2/webhooks/endpoints/get",       "/v2/webhooks/endpoints/delete", "/v2/webhooks/endpoints/rotate-secret",
    "/v2/webhooks/endpoints/test",      "/v2/webhooks/deliveries/get",   "/v2/webhooks/deliveries/replay",
    "/v2/events/get",
    "/v2/presence/set",                 "/v2/presence/leave",            "/v2/presence/get",
};
constexpr const char* editors[] = {"t", "m", "x", "a"};

struct world {
  std::filesystem::path dir;
  std::unique_ptr<svc::database> db;
  std::unique_ptr<svc::responder> service;
  std::string key, token;
  std::string incarnations[std::size(editors)];  ///< each record's, as a first sync answers it
  std::size_t runs = 0;

  world() {
    svc::log::set_access(false);
    const char* shm = "/dev/shm";  // memory-backed: the synchronous writes cost no disk flush
    dir = std::filesystem::path(std::filesystem::exists(shm) ? shm : std::filesystem::temp_directory_path().c_str()) /
          ("folio-fuzz-" + std::to_string(::getpid()));
    reset();
  }
  ~world() {
    service.reset();
    db.reset();
    std::filesystem::remove_all(dir);
  }

  void reset() {
    service.reset();
    db.reset();
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    db = std::make_unique<svc::database>((dir / "folio.db").string(), svc::responder::tables());
    svc::config c;
    c.cache_bytes = std::size_t(8) << 20;
    service = std::make_unique<svc::responder>(c);
    key = svc::create_key(*db, "fuzz", svc::now_iso());
    token = svc::create_token(*db, key.substr(3, 16), "fuzzer", false, std::nullopt, svc::now_iso());
    const std::pair<std::string_view, std::string> seeds[] = {
        {"/v2/crdt/add", R"({"data":{"organizationId":"o","documentId":"d","editorId":"t","type":"text","data":"hello world"}})"},
        {"/v2/crdt/add", R"({"data":{"organizationId":"o","documentId":"d","editorId":"m","type":"map","data":{"a":1,"b":[true,null]}}})"},
        {"/v2/crdt/add", R"({"data":{"organizationId":"o","documentId":"d","editorId":"x","type":"xml","data":"<p a=\"1\">x<b>y</b></p>"}})"},
        {"/v2/crdt/add", R"({"data":{"organizationId":"o","documentId":"d","editorId":"a","type":"array","data":[{"k":1},{"k":2}]}})"},
        {"/v2/commentannotations/add",
         R"({"data":{"organizationId":"o","documentId":"d","commentAnnotations":[{"annotationId":"n","from":{"userId":"u","name":"U","email":"u@example.com"},"commentData":[{"commentText":"c"}]}]}})"},
        {"/v2/crdt/versions/add", R"({"data":{"organizationId":"o","documentId":"d","editorId":"t","name":"v"}})"},
        {"/v2/webhooks/endpoints/add", R"({"data":{"url":"https://192.0.2.1/hook"}})"},  // an address literal: nothing to resolve
    };
    for (const auto& [path, body] : seeds) call(path, body);
    for (std::size_t i = 0; i < std::size(editors); ++i) {
      const svc::response first = call("/v2/crdt/sync", std::string(R"({"data":{"organizationId":"o","documentId":"d","editorId":")") + editors[i] +
                                                           R"(","version":"AA=="}})");
      rapidjson::Document answer;
      answer.Parse(first.body.data(), first.body.size());
      incarnations[i] = answer["result"]["data"]["incarnation"].GetString();
    }
  }

  svc::response call(std::string_view path, const std::string& body, svc::responder* with = nullptr) {
    svc::request r;
    r.method = path == "/healthz" || path == "/metrics" ? "GET" : "POST";
    r.path = path;
    r.content_type = "application/json";
    r.api_key = key;
    r.auth_token = token;
    r.body = body;
    r.content_length = body.size();
    return (with ? *with : *service).handle(*db, r);
  }

  void next() {
    if (++runs % 500 == 0) reset();
  }
};

world& the_world() {
  static world w;
  return w;
}

void check_answer(const svc::response& res) {
  if (res.http >= 500 && res.http != 503) __builtin_trap();  // 503: the database is busy; anything else is a bug
  if (res.content_type != "application/json") return;
  rapidjson::Document d;
  if (d.Parse(res.body.data(), res.body.size()).HasParseError() || !d.IsObject()) __builtin_trap();
}

void request(world& w, std::string_view bytes) {
  if (bytes.empty()) return;
  const std::string_view path = paths[static_cast<unsigned char>(bytes[0]) % std::size(paths)];
  check_answer(w.call(path, std::string(bytes.substr(1))));
}

void sync(world& w, std::string_view bytes) {
  if (bytes.size() < 2) return;
  const std::size_t record = static_cast<unsigned char>(bytes[0]) % std::size(editors);
  const char* editor = editors[record];
  const std::size_t version_len = std::min<std::size_t>(static_cast<unsigned char>(bytes[1]), bytes.size() - 2);
  const std::string version(bytes.substr(2, version_len)), update(bytes.substr(2 + version_len));
  const std::string ids = std::string(R"({"data":{"organizationId":"o","documentId":"d","editorId":")") + editor + "\"";
  const std::string incarnation = bytes[0] & 0x10 ? std::string() : R"(,"incarnation":")" + w.incarnations[record] + "\"";
  const svc::response res = w.call("/v2/crdt/sync", ids + R"(,"version":")" + svc::base64_encode(version) + R"(","update":")" +
                                                        svc::base64_encode(update) + "\"" + incarnation + "}}");
  check_answer(res);
  if (res.http != 200 || update.empty()) return;
  // What the cache answers and what the database holds must be the same record.
  const std::string get = ids + "}}";
  svc::responder fresh{svc::config{}};
  const svc::response cached = w.call("/v2/crdt/get", get), stored = w.call("/v2/crdt/get", get, &fresh);
  check_answer(cached);  // the record's value, written into the answer, is JSON too
  if (cached.http != 200 || cached.body != stored.body) __builtin_trap();
}

void client_token(std::string_view bytes) {
  static const svc::key_ring ring = svc::key_ring::parse("k1 " + std::string(64, 'c') + "\nk2 " + std::string(64, 'd') + "\n");
  if (bytes.empty()) return;
  const std::string token = bytes[0] & 1 ? svc::seal_client_token("0123456789abcdef", ring.signer(), bytes.substr(1)) : std::string(bytes.substr(1));
  const svc::token_check v = svc::verify_client_token(token, ring, 0);
  if (v.problem != svc::token_problem::none && v.problem != svc::token_problem::expired) return;
  const svc::signing_key* key = ring.find(std::string_view(token).substr(22, 2));  // "fct1." + 16 hex + "."
  if (!key || svc::sign_client_token(v.claims, *key) != token) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (FOLIO_FUZZ_TARGET == 3) return client_token(bytes), 0;
  world& w = the_world();
  if (FOLIO_FUZZ_TARGET == 1)
    request(w, bytes);
  else
    sync(w, bytes);
  w.next();
  return 0;
}
