#include "platform/log.hpp"

#include <atomic>
#include <cstdio>
#include <mutex>

#include "platform/clock.hpp"
#include "wire/json.hpp"

namespace folio::service::log {

namespace {

std::atomic<bool> access_on{true};
thread_local std::string current_id, current_endpoint;

using writer = json_writer;  // escapes every control character (see wire/json.hpp)

void str(writer& w, const char* key, std::string_view v) {
  w.Key(key);
  w.String(v.data(), static_cast<rapidjson::SizeType>(v.size()));
}

void head(writer& w, std::string_view level, std::string_view event) {
  w.StartObject();
  str(w, "time", iso_time_chars(now_unix_ms()).view());
  str(w, "level", level);
  str(w, "event", event);
  if (!current_id.empty()) str(w, "requestId", current_id);
}

/// The thread's line buffer, emptied: its room is kept from line to line (a line allocated twice
/// before: the buffer and rapidjson's allocator), unless a long message grew it past 16 KiB.
rapidjson::StringBuffer& line_buffer() {
  thread_local rapidjson::StringBuffer sb;
  if (sb.stack_.GetCapacity() > 16 * 1024) sb = rapidjson::StringBuffer();
  sb.Clear();
  return sb;
}

void emit(rapidjson::StringBuffer& sb) {  // one write(2) per line: stderr is unbuffered
  sb.Put('\n');
  static std::mutex mu;
  std::lock_guard<std::mutex> g(mu);
  std::fwrite(sb.GetString(), 1, sb.GetSize(), stderr);
}

}  // namespace

void set_access(bool on) { access_on = on; }
bool access_enabled() { return access_on.load(); }

void begin_request(std::string_view request_id, std::string_view endpoint) {
  // nginx's $request_id is 32 hex digits; anything else (a direct FastCGI client) is cut and kept printable.
  current_id.clear();
  for (char c : request_id.substr(0, 64))
    if (c > 0x20 && c < 0x7f && c != '"' && c != '\\') current_id += c;
  current_endpoint = endpoint;
}

void end_request() {
  current_id.clear();
  current_endpoint.clear();
}

void access(const access_entry& e) {
  if (!access_on.load()) return;
  rapidjson::StringBuffer& sb = line_buffer();
  writer w(sb);
  head(w, "info", "request");
  str(w, "method", e.method);
  str(w, "endpoint", e.endpoint);
  w.Key("status");
  w.Int(e.status);
  str(w, "code", e.code);
  w.Key("durationMs");
  w.Double(static_cast<double>(static_cast<long long>(e.duration_ms * 1000 + 0.5)) / 1000);
  if (!e.key_id.empty()) str(w, "keyId", e.key_id);
  w.EndObject();
  emit(sb);
}

void write(std::string_view level, std::string_view event, std::string_view message) {
  rapidjson::StringBuffer& sb = line_buffer();
  writer w(sb);
  head(w, level, event);
  if (!current_endpoint.empty()) str(w, "endpoint", current_endpoint);
  str(w, "message", message);
  w.EndObject();
  emit(sb);
}

}  // namespace folio::service::log
