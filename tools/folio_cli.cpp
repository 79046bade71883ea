// folio-cli: a client replica in a terminal (docs/API.md, crdt/sync and crdt/subscribe) — the engine's sync_client over HTTP.
//
//   folio-cli [--url URL] --org ORG --doc DOC --editor ED COMMAND
//     watch [--transport eventsource|longpoll] [--count N]   print the live value (one JSON line per change)
//     sync                                                     push local ops, pull the server's, print the value
//     edit EDIT [--offline]                                    change the local copy, then sync (unless --offline)
//       EDIT: --replace VALUE | --insert POS TEXT | --delete POS LEN   (text; positions in code points)
//             --insert POS JSON | --delete POS LEN                      (array; JSON: one object, the item)
//             --set KEY JSON | --remove KEY                             (map)
//     show                                                     print the local value
//     apply MESSAGE_JSON                                       apply one pushed message (from any transport)
//   --state FILE keeps the replica between runs (edit, sync, show, apply need it; without one, a
//   new replica starts from the server's copy). An edit is saved to FILE (written, fsynced, renamed)
//   before it is sent, so an edit whose answer was lost is sent again by the next run, never made
//   again under the same op ids (folio/sync.hpp: the client contract). The service: --url, or FOLIO_URL,
//   else http://127.0.0.1:8080. Credentials: --key/--token or FOLIO_API_KEY and FOLIO_AUTH_TOKEN
//   (scripts/run writes all three to var/dev-credentials). Exit status 1
//   with the server's JSON error on stderr when a call fails; the local edit stays in FILE.
#include <curl/curl.h>
#include <fcntl.h>
#include <rapidjson/document.h>
#include <strings.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <folio/sync.hpp>

#include "wire/base64.hpp"
#include "wire/crdt_values.hpp"
#include "wire/json.hpp"

namespace {

namespace svc = folio::service;

struct options {
  std::string url = "http://127.0.0.1:8080", key, token, org, doc, editor, state, transport = "eventsource";
  std::string command, a, b;    // command and its arguments
  std::string edit;             // --replace, --insert, --delete, --set, --remove
  bool offline = false;
  long count = -1;              // watch: exit after printing this many values
};

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "folio-cli: %s\n", why.c_str());
  std::exit(1);
}

// ---- HTTP ---------------------------------------------------------------------------------------

std::size_t append(char* p, std::size_t size, std::size_t n, void* out) {
  static_cast<std::string*>(out)->append(p, size * n);
  return size * n;
}

struct http_reply {
  long status = 0;
  std::string body;
};

http_reply post(const options& o, const std::string& path, const std::string& body) {
  CURL* c = curl_easy_init();
  http_reply r;
  curl_slist* h = nullptr;
  h = curl_slist_append(h, "Content-Type: application/json");
  h = curl_slist_append(h, ("x-folio-api-key: " + o.key).c_str());
  h = curl_slist_append(h, ("x-folio-auth-token: " + o.token).c_str());
  const std::string url = o.url + path;
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, append);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &r.body);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
  const CURLcode rc = curl_easy_perform(c);
  if (rc == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  curl_slist_free_all(h);
  curl_easy_cleanup(c);
  if (rc != CURLE_OK) r.body = std::string("{\"error\":{\"message\":\"") + curl_easy_strerror(rc) + "\",\"status\":\"UNAVAILABLE\"}}";
  return r;
}

/// {"data":{organizationId, documentId, editorId, version[, update][, incarnation]}} for /v2/crdt/sync.
std::string sync_body(const options& o, const folio::sync_request& q) {
  rapidjson::StringBuffer sb;
  svc::json_writer w(sb);
  w.StartObject();
  w.Key("data");
  w.StartObject();
  w.Key("organizationId"), svc::write_string(w, o.org);
  w.Key("documentId"), svc::write_string(w, o.doc);
  w.Key("editorId"), svc::write_string(w, o.editor);
  w.Key("version"), svc::write_string(w, svc::base64_encode(q.version.encode()));
  if (!q.update.empty()) w.Key("update"), svc::write_string(w, svc::base64_encode(q.update));
  if (!q.incarnation.empty()) w.Key("incarnation"), svc::write_string(w, q.incarnation);
  w.EndObject();
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

// ---- the replica --------------------------------------------------------------------------------

void print_value(const folio::document& d) {
  std::printf("%s\n", svc::value_json(d).c_str());
  std::fflush(stdout);
}

std::optional<folio::sync_client> load_state(const options& o) {
  if (o.state.empty()) return std::nullopt;
  std::ifstream in(o.state, std::ios::binary);
  if (!in) return std::nullopt;
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::optional<folio::sync_client> c;
  if (const folio::decode_result r = folio::sync_client::load(bytes, c); !r) die("state file " + o.state + " does not decode: " + r.description());
  return c;
}

/// Replaces the state file durably: the new state is written to a temporary file and fsynced, renamed
/// over the old one, and the directory fsynced, so after a crash the file holds the old state or the
/// new one, whole.
void save_state(const options& o, const folio::sync_client& c) {
  if (o.state.empty()) return;
  const std::string tmp = o.state + ".tmp", bytes = c.save();
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) die("cannot write " + tmp);
  for (std::size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) ::close(fd), die("cannot write " + tmp);
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) die("cannot write " + tmp);
  if (std::rename(tmp.c_str(), o.state.c_str()) != 0) die("cannot write " + o.state);
  const std::size_t slash = o.state.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : o.state.substr(0, slash);
  if (const int d = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); d >= 0) ::fsync(d), ::close(d);
}

std::string field(const rapidjson::Value& v, const char* name) {
  auto it = v.FindMember(name);
  return it != v.MemberEnd() && it->value.IsString() ? std::string(it->value.GetString(), it->value.GetStringLength()) : std::string();
}

folio::version_vector decode_version(const std::string& b64) {
  folio::version_vector v;
  const std::optional<std::string> bytes = svc::base64_decode(b64);
  if (!bytes || !folio::version_vector::decode(*bytes, v)) die("the server sent a malformed version");
  return v;
}

/// The service could not be reached (nginx or the responder restarting, the network): `watch` waits
/// and tries again; the other commands report it.
struct unreachable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The record was deleted and added again since this replica synced (the server answered ABORTED, or
/// a pushed change is of another incarnation): the local state is of a record that is gone. `watch`
/// follows the new record; the other commands report it, leaving the state file as it is.
struct recreated : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string recreated_message(const options& o) {
  return "the record was deleted and added again since this replica last synced; its state" + (o.state.empty() ? std::string() : " (" + o.state + ")") +
         " is of the old record: delete it and sync again (edits the server does not have are lost)";
}

/// One round trip: push what the server lacks, apply what it answers. Creates the replica from the
/// server's copy when `c` is empty. A push the server refuses as premature is followed by a pull and
/// a second push.
void sync(const options& o, std::optional<folio::sync_client>& c) {
  for (int round = 0; round < 3; ++round) {
    const folio::sync_request q = c ? c->request() : folio::sync_request{};
    const http_reply r = post(o, "/v2/crdt/sync", sync_body(o, q));
    rapidjson::Document d;
    d.Parse(r.body.c_str(), r.body.size());
    const std::string error = d.IsObject() && d.HasMember("error") ? field(d["error"], "status") : std::string();
    if (r.status == 400 && error == "FAILED_PRECONDITION" && c) {
      c->on_refused();
      continue;
    }
    if (r.status == 409 && error == "ABORTED") throw recreated(recreated_message(o));
    if (r.status == 0 || r.status == 502 || r.status == 503 || r.status == 504) throw unreachable("sync failed (HTTP " + std::to_string(r.status) + "): " + r.body);
    if (r.status != 200 || !d.IsObject() || !d.HasMember("result")) die("sync failed (HTTP " + std::to_string(r.status) + "): " + r.body);
    const rapidjson::Value& data = d["result"]["data"];
    if (!c) {
      const std::optional<folio::record_type> t = folio::parse_record_type(field(data, "type"));
      if (!t) die("the server sent an unknown record type");
      c.emplace(*t, folio::random_replica_id(), field(data, "contentKey"));
    }
    const std::optional<std::string> update = svc::base64_decode(field(data, "update"));
    if (!update || !c->on_answer(*update, decode_version(field(data, "version")), field(data, "incarnation"), field(data, "recordVersion"))) die("the server sent a malformed update");
    if (!c->needs_sync()) return;
  }
  if (c->needs_sync()) die("still out of step with the server after three syncs");
}

/// Applies one pushed message (the JSON the server publishes). False when the record was deleted.
bool apply_message(const options& o, std::optional<folio::sync_client>& c, const std::string& message) {
  rapidjson::Document m;
  m.Parse(message.c_str(), message.size());
  if (!m.IsObject()) return true;  // not ours (a keep-alive); ignore
  if (m.HasMember("presence")) return true;  // who is on the record (docs/API.md, "Presence"): nothing of its value
  // Messages of one record may arrive out of commit order (several nodes publish; docs/API.md): the
  // deletion of an incarnation this replica does not follow (one deleted before the record was added
  // again, arriving after the new one's changes) is not the end of the record it follows.
  if (m.HasMember("deleted")) return !(c->incarnation().empty() || field(m, "incarnation") == c->incarnation());
  if (!m.HasMember("update")) {  // a notice (a change too large to push, or one whose push failed): sync now
    sync(o, c);
    return true;
  }
  const std::optional<std::string> update = svc::base64_decode(field(m, "update"));
  const folio::push_status s = c->on_push(update ? *update : std::string(), decode_version(field(m, "version")), field(m, "incarnation"));
  if (s == folio::push_status::recreated) throw recreated(recreated_message(o));
  if (s != folio::push_status::applied) sync(o, c);  // a gap: missed messages
  return true;
}

// ---- watch --------------------------------------------------------------------------------------
//
// Subscribe, then sync, so nothing falls between the two: an EventSource catches up when Nchan greets
// it, a long-poll before each poll that has no cursor. Nothing is resumed from an event id (see
// nginx/folio.conf). With several nginx workers a subscription reaches the worker that owns the
// channel a moment after it opens, and a change committed in that moment reaches neither the sync nor
// the stream, so the watcher syncs once more a second later.

struct watcher {
  const options& o;
  std::optional<folio::sync_client>& c;
  long printed = 0;
  bool deleted = false;
  bool done = false;     // enough values printed
  bool lost = false;     // a sync during the transfer could not reach the service
  bool greeted = false;  // Nchan greeted this EventSource connection
  std::string buffer{}, data{};  // EventSource parsing state
  folio::version_vector shown{};
  std::optional<std::chrono::steady_clock::time_point> settle_at{};  // when to sync once more

  bool show() {  // prints when the value changed; false once enough values were printed
    if (c->doc().version() != shown || printed == 0) {
      shown = c->doc().version();
      print_value(c->doc());
      ++printed;
    }
    return o.count < 0 || printed < o.count;
  }

  /// Saves the replica and shows its value. False once enough values were printed.
  bool save_and_show() {
    save_state(o, *c);
    done = !show();
    return !done;
  }

  /// Syncs, saves and shows. False once enough values were printed.
  bool catch_up() {
    sync(o, c);
    return save_and_show();
  }

  /// Applies a pushed message, saves and shows. False when the record was deleted or enough values
  /// were printed.
  bool apply(const std::string& message) {
    if (!apply_message(o, c, message)) return !(deleted = true);
    return save_and_show();
  }

  /// Runs `f` where nothing may throw (libcurl's callbacks, the reconnect loop). False stops the
  /// transfer: `f` said so, or the service was unreachable, which `lost` then tells. A record deleted
  /// and added again is followed: the old replica is dropped and a new one joins the new record.
  template <class F>
  bool guarded(F f) {
    try {
      return f();
    } catch (const unreachable&) {
      lost = true;
      return false;
    } catch (const recreated&) {
      std::fprintf(stderr, "folio-cli: the record was deleted and added again; following the new one\n");
      c.reset();
      shown = {};
      try {
        return catch_up();
      } catch (const std::runtime_error&) {  // unreachable, or added again once more: reconnect and catch up
        lost = true;
        return false;
      }
    }
  }
};

std::size_t on_event_bytes(char* p, std::size_t size, std::size_t n, void* self) {
  watcher& w = *static_cast<watcher*>(self);
  w.buffer.append(p, size * n);
  std::size_t nl;
  while ((nl = w.buffer.find('\n')) != std::string::npos) {
    std::string line = w.buffer.substr(0, nl);
    w.buffer.erase(0, nl + 1);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind("data:", 0) == 0) {
      w.data += line.substr(line.size() > 5 && line[5] == ' ' ? 6 : 5);
    } else if (line.rfind(": hi", 0) == 0) {  // Nchan's greeting: subscribed; now catch up
      w.greeted = true;
      if (!w.guarded([&] { return w.catch_up(); })) return 0;
      w.settle_at = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    } else if (line.empty() && !w.data.empty()) {
      const std::string message = std::move(w.data);
      w.data.clear();
      if (!w.guarded([&] { return w.apply(message); })) return 0;
    }
  }
  return size * n;
}

/// libcurl calls this about once a second while a transfer waits: the time for the second sync.
int on_progress(void* self, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  watcher& w = *static_cast<watcher*>(self);
  if (!w.settle_at || std::chrono::steady_clock::now() < *w.settle_at) return 0;
  w.settle_at.reset();
  return w.guarded([&] { return w.catch_up(); }) ? 0 : 1;
}

struct longpoll_state {
  std::string etag, last_modified;
};

std::size_t on_header(char* p, std::size_t size, std::size_t n, void* self) {
  auto& s = *static_cast<longpoll_state*>(self);
  const std::string line(p, size * n);
  auto value = [&](const char* name) -> std::optional<std::string> {
    const std::size_t len = std::char_traits<char>::length(name);
    if (line.size() <= len || strncasecmp(line.c_str(), name, len) != 0) return std::nullopt;
    std::string v = line.substr(len);
    while (!v.empty() && (v.back() == '\r' || v.back() == '\n')) v.pop_back();
    return v;
  };
  if (auto v = value("etag: ")) s.etag = *v;
  if (auto v = value("last-modified: ")) s.last_modified = *v;
  return size * n;
}

int watch(const options& o, std::optional<folio::sync_client>& c) {
  watcher w{o, c};
  auto escape = [](const std::string& s) {
    char* e = curl_easy_escape(nullptr, s.c_str(), static_cast<int>(s.size()));
    std::string out(e);
    curl_free(e);
    return out;
  };
  const std::string url = o.url + "/v2/crdt/subscribe?organizationId=" + escape(o.org) + "&documentId=" + escape(o.doc) + "&editorId=" + escape(o.editor);
  const bool longpoll = o.transport == "longpoll";
  longpoll_state lp;
  auto wait = [](int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); };
  for (int failures = 0; failures < 600;) {
    w.buffer.clear(), w.data.clear(), w.lost = false, w.greeted = false, w.settle_at.reset();
    if (longpoll && lp.etag.empty() && lp.last_modified.empty()) {
      // A poll without a cursor waits for the next change: catch up before it, and again a second in.
      if (!w.guarded([&] { return w.catch_up(); })) {
        if (w.done) return 0;
        ++failures, wait(200);
        continue;
      }
      w.settle_at = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    }
    CURL* h = curl_easy_init();
    curl_slist* hs = nullptr;
    hs = curl_slist_append(hs, ("x-folio-api-key: " + o.key).c_str());
    hs = curl_slist_append(hs, ("x-folio-auth-token: " + o.token).c_str());
    std::string body;
    if (!longpoll) {
      hs = curl_slist_append(hs, "Accept: text/event-stream");
      curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_event_bytes);
      curl_easy_setopt(h, CURLOPT_WRITEDATA, &w);
    } else {
      if (!lp.etag.empty()) hs = curl_slist_append(hs, ("If-None-Match: " + lp.etag).c_str());
      if (!lp.last_modified.empty()) hs = curl_slist_append(hs, ("If-Modified-Since: " + lp.last_modified).c_str());
      curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, append);
      curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
      curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
      curl_easy_setopt(h, CURLOPT_HEADERDATA, &lp);
    }
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, &w);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hs);
    const CURLcode rc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hs);
    curl_easy_cleanup(h);
    if (w.deleted) return std::printf("deleted\n"), 0;
    if (w.done) return 0;
    // Nchan answers 408 to a long-poll that timed out and 410 to its subscribers when nginx stops.
    if (status >= 400 && status < 500 && status != 408 && status != 410) die("subscribe refused (HTTP " + std::to_string(status) + ")");
    if (longpoll && rc == CURLE_OK && status == 200 && !w.lost) {
      if (w.guarded([&] { return w.apply(body); })) {
        failures = 0;
        continue;
      }
      if (w.deleted) return std::printf("deleted\n"), 0;
      if (w.done) return 0;
    }
    // The subscription ended (nginx restarted, a timeout, the service unreachable): reconnect, and
    // catch up on the way.
    if (w.greeted) failures = 0;
    ++failures;
    std::fprintf(stderr, "folio-cli: subscription ended (%s, HTTP %ld); reconnecting\n",
                 w.lost ? "the service is unreachable" : rc == CURLE_OK ? "closed" : curl_easy_strerror(rc), status);
    // nginx may have restarted, and Nchan's message ids with it: an old cursor could skip a newer
    // message. Keep it only when the poll merely timed out.
    if (longpoll && !(rc == CURLE_OK && (status == 304 || status == 408))) lp = {};
    wait(rc == CURLE_OK && !w.lost ? 50 : 200);
  }
  die("gave up reconnecting");
}

// ---- edits --------------------------------------------------------------------------------------

std::size_t number(const std::string& s) {
  char* end = nullptr;
  const unsigned long long n = std::strtoull(s.c_str(), &end, 10);
  if (s.empty() || *end) die("not a position or length: " + s);
  return n;
}

void edit(const options& o, folio::document& d) {
  if (o.edit == "--replace") {  // text and xml take the value as it is, map and array as JSON
    const bool json = d.type() == folio::record_type::map || d.type() == folio::record_type::array;
    const rapidjson::Document v = json ? svc::parse_json(o.a) : rapidjson::Document();
    const rapidjson::Value raw(rapidjson::StringRef(o.a.data(), static_cast<rapidjson::SizeType>(o.a.size())));
    svc::replace(d, svc::parse_value(d.type(), json ? static_cast<const rapidjson::Value&>(v) : raw));
    return;
  }
  const bool array = d.type() == folio::record_type::array;
  if (o.edit == "--insert" && array) {
    if (const std::string why = svc::json_value_rule(folio::record_type::array, o.b); !why.empty()) die(why);
    d.as_array().insert(number(o.a), svc::canonical_json(svc::parse_json(o.b)));
  } else if (o.edit == "--insert") d.as_text().insert_utf8(number(o.a), o.b);
  else if (o.edit == "--delete" && array) d.as_array().erase(number(o.a), number(o.b));
  else if (o.edit == "--delete") d.as_text().erase(number(o.a), number(o.b));
  else if (o.edit == "--set") d.set(o.a, svc::canonical_json(svc::parse_json(o.b)));
  else if (o.edit == "--remove") d.remove(o.a);
  else die("edit needs --replace, --insert, --delete, --set or --remove");
}

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: folio-cli [--url URL] [--key K --token T] --org ORG --doc DOC --editor ED [--state FILE] COMMAND\n"
               "  --url: else $FOLIO_URL, else http://127.0.0.1:8080; --key, --token: else $FOLIO_API_KEY, $FOLIO_AUTH_TOKEN\n"
               "  (scripts/run writes the three to var/dev-credentials)\n"
               "  watch [--transport eventsource|longpoll] [--count N]\n"
               "  sync | show | apply MESSAGE_JSON\n"
               "  edit (--replace VALUE | --insert POS TEXT | --delete POS LEN | --set KEY JSON | --remove KEY) [--offline]\n");
  std::exit(2);
}

options parse(int argc, char** argv) {
  options o;
  if (const char* k = std::getenv("FOLIO_API_KEY")) o.key = k;
  if (const char* t = std::getenv("FOLIO_AUTH_TOKEN")) o.token = t;
  if (const char* u = std::getenv("FOLIO_URL")) o.url = u;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage();
      return argv[++i];
    };
    if (a == "--url") o.url = value();
    else if (a == "--key") o.key = value();
    else if (a == "--token") o.token = value();
    else if (a == "--org") o.org = value();
    else if (a == "--doc") o.doc = value();
    else if (a == "--editor") o.editor = value();
    else if (a == "--state") o.state = value();
    else if (a == "--transport") o.transport = value();
    else if (a == "--count") o.count = static_cast<long>(number(value()));
    else if (a == "--offline") o.offline = true;
    else if (a == "--replace" || a == "--remove") o.edit = a, o.a = value();
    else if (a == "--insert" || a == "--delete" || a == "--set") o.edit = a, o.a = value(), o.b = value();
    else if (o.command.empty() && a.rfind("--", 0) != 0) o.command = a;
    else if (o.command == "apply" && o.a.empty()) o.a = a;
    else usage();
  }
  if (o.command.empty() || o.org.empty() || o.doc.empty() || o.editor.empty()) usage();
  if (o.transport != "eventsource" && o.transport != "longpoll") usage();
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  curl_global_init(CURL_GLOBAL_DEFAULT);
  try {
    std::optional<folio::sync_client> c = load_state(o);
    if (o.command == "watch") return watch(o, c);
    if (o.command == "sync") {
      sync(o, c);
    } else if (o.command == "edit") {
      if (!c) sync(o, c);
      edit(o, c->doc());
      save_state(o, *c);  // before sending: the edit's op ids are taken for good
      if (!o.offline) sync(o, c);
    } else if (o.command == "show") {
      if (!c) die("no local copy: give --state FILE of an earlier sync");
    } else if (o.command == "apply") {
      if (!c) die("no local copy: give --state FILE of an earlier sync");
      if (!apply_message(o, c, o.a)) return std::printf("deleted\n"), 0;
    } else {
      usage();
    }
    save_state(o, *c);
    print_value(c->doc());
  } catch (const svc::api_error& e) {  // a value or JSON the record would refuse
    die(e.message);
  } catch (const std::exception& e) {
    die(e.what());
  }
  return 0;
}
