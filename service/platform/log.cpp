#include "platform/log.hpp"

#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "platform/clock.hpp"
#include "platform/log_batch.hpp"
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

// Access lines are held in one batch (log_batch.hpp: 64 KiB, 1 s) and written by one write(2) (stderr is
// unbuffered); a flusher thread, started with the first access line, writes them when the oldest has
// waited a second, and an atexit handler stops it and writes what is held (main returns after SIGTERM's
// drain). Every other line is written at once, after the held ones. The state is never destroyed:
// threads may still log while the process exits (their lines are then written at once).
struct log_state {
  std::mutex mu;
  std::condition_variable wake;
  line_batch batch{64 * 1024, std::chrono::seconds(1)};
  std::thread flusher;
  pid_t flusher_pid = 0;  // a forked child has no flusher thread to join
  bool started = false, stopped = false;
};

log_state& state() {
  static log_state* s = new log_state;
  return *s;
}

void write_held(log_state& s) {  // s.mu held
  if (s.batch.held().empty()) return;
  std::fwrite(s.batch.held().data(), 1, s.batch.held().size(), stderr);
  s.batch.clear();
}

void run_flusher(log_state& s) {
  std::unique_lock<std::mutex> l(s.mu);
  while (!s.stopped) {
    if (const auto deadline = s.batch.deadline()) s.wake.wait_until(l, *deadline);
    else s.wake.wait(l);
    if (s.batch.due(line_batch::clock::now())) write_held(s);
  }
}

void stop_flusher() {
  log_state& s = state();
  {
    std::lock_guard<std::mutex> g(s.mu);
    s.stopped = true;
    write_held(s);
  }
  s.wake.notify_one();
  if (getpid() == s.flusher_pid) s.flusher.join();
}

void emit(rapidjson::StringBuffer& sb) {
  sb.Put('\n');
  log_state& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  write_held(s);
  std::fwrite(sb.GetString(), 1, sb.GetSize(), stderr);
}

void emit_access(rapidjson::StringBuffer& sb) {
  sb.Put('\n');
  log_state& s = state();
  bool first = false;
  {
    std::lock_guard<std::mutex> g(s.mu);
    if (s.stopped) {
      std::fwrite(sb.GetString(), 1, sb.GetSize(), stderr);
      return;
    }
    if (!s.started) {
      s.started = true;
      s.flusher = std::thread(run_flusher, std::ref(s));
      s.flusher_pid = getpid();
      std::atexit(stop_flusher);
    }
    first = s.batch.held().empty();
    if (s.batch.add({sb.GetString(), sb.GetSize()}, line_batch::clock::now())) write_held(s);
  }
  if (first) s.wake.notify_one();  // the flusher now has a deadline
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
  emit_access(sb);
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

void flush() {
  log_state& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  write_held(s);
}

}  // namespace folio::service::log
