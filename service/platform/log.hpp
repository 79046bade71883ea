// service/platform/log.hpp — the responder's log: one JSON object per line on stderr, so that journald, a file
// or a log shipper can take it as is.
//
//   {"time":"2026-11-22T10:30:00.123Z","level":"info","event":"request","requestId":"5f0c...",
//    "method":"POST","endpoint":"/v2/crdt/update","status":200,"code":"OK","durationMs":0.84,"keyId":"3fa1..."}
//   {"time":"...","level":"error","event":"storage_error","requestId":"5f0c...","endpoint":"...","message":"step: database or disk is full"}
//
// requestId is nginx's $request_id (passed as FOLIO_REQUEST_ID; nginx's own access log carries the
// same id), keyId the caller's API key id. Never logged: tokens, keys' secrets, ids of records,
// request or document content.
// Access lines are held and written together, at least every second and at exit (log_batch.hpp); every
// other line is written at once, after them, so the log keeps its order.
// Thread-safety: lines from many threads never interleave.
#pragma once

#include <string>
#include <string_view>

namespace folio::service::log {

/// Access lines on or off (errors are always written).
void set_access(bool on);
bool access_enabled();

/// The request the calling thread is answering: later lines from this thread carry its id.
void begin_request(std::string_view request_id, std::string_view endpoint);
void end_request();

struct access_entry {
  std::string_view method, endpoint, code, key_id;
  int status = 0;
  double duration_ms = 0;
};
void access(const access_entry& e);

/// Writes the held access lines now.
void flush();

/// level "error" or "warn"; `event` a fixed word (storage_error, internal_error, publish_failed, ...).
void write(std::string_view level, std::string_view event, std::string_view message);

}  // namespace folio::service::log
