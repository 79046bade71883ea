// service/wire/body_output.hpp — a response body sent while it is produced, so that an answer of any size
// costs the responder a bounded buffer rather than the answer's size (v1 commentannotations/get of a
// large document, crdt/get of a document with many records; the request limits (docs/API.md, "Every call") bound requests, not
// what a document grows to).
//
// Handlers write through a json_writer over buffer() or append stored JSON as it is, and call
// flush_if_full() at boundaries between items. Until the first flush nothing has left the process, so
// a failure is still answered with its JSON error; after it the answer is committed as a 200, and a
// failure can only cut it short: folio-fcgi then drops the connection without ending the response, so
// the client sees an incomplete answer (a transfer error), never a complete-looking wrong one.
// Without a sink (handlers called directly, as in tests) everything stays in the buffer.
// The buffer is the thread's spare one when it has one: its room is kept from answer to answer (up to
// two chunks), where a new buffer grew from 256 bytes by a reallocation and a copy every half again.
// Thread-safety: one request's, used by one thread.
#pragma once

#include <rapidjson/stringbuffer.h>

#include <cstddef>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace folio::service {

class body_output {
 public:
  /// Receives the body's bytes in order; the first call commits the answer as 200.
  using sink = std::function<void(std::string_view)>;

  explicit body_output(sink s = {}, std::size_t chunk_bytes = 64 * 1024) : sink_(std::move(s)), chunk_(chunk_bytes), buffer_(take_spare()) {}
  body_output(const body_output&) = delete;
  body_output& operator=(const body_output&) = delete;
  ~body_output() {
    buffer_->Clear();
    if (std::unique_ptr<rapidjson::StringBuffer>& s = spare(); !s && buffer_->stack_.GetCapacity() <= 2 * chunk_) s = std::move(buffer_);
  }

  rapidjson::StringBuffer& buffer() noexcept { return *buffer_; }
  void append(std::string_view raw) {
    if (!raw.empty()) std::memcpy(buffer_->Push(raw.size()), raw.data(), raw.size());
  }
  /// Sends what is buffered once it holds a chunk. Call it only where the bytes so far may be sent.
  void flush_if_full() {
    if (sink_ && buffer_->GetSize() >= chunk_) send_buffer();
  }
  /// append(), except that bytes of a chunk or more go to the sink as they are, after what is buffered,
  /// rather than copied through the buffer (a large stored value). Call it only where the bytes so far
  /// and `raw` may be sent, as flush_if_full().
  void append_or_send(std::string_view raw) {
    if (!sink_ || raw.size() < chunk_) return append(raw);
    if (buffer_->GetSize() != 0) send_buffer();
    started_ = true;
    sink_(raw);
  }
  /// Some of the body has been sent: the answer can no longer be an error.
  bool started() const noexcept { return started_; }
  /// What is buffered and not sent (the whole body when nothing was), emptying the buffer.
  std::string take() {
    std::string rest(buffer_->GetString(), buffer_->GetSize());
    buffer_->Clear();
    return rest;
  }

 private:
  void send_buffer() {
    started_ = true;
    sink_({buffer_->GetString(), buffer_->GetSize()});
    buffer_->Clear();
  }
  /// The thread's spare buffer: none while a body_output of the thread holds it.
  static std::unique_ptr<rapidjson::StringBuffer>& spare() {
    thread_local std::unique_ptr<rapidjson::StringBuffer> s;
    return s;
  }
  static std::unique_ptr<rapidjson::StringBuffer> take_spare() {
    if (std::unique_ptr<rapidjson::StringBuffer>& s = spare()) return std::move(s);
    return std::make_unique<rapidjson::StringBuffer>();
  }

  sink sink_;
  std::size_t chunk_;
  std::unique_ptr<rapidjson::StringBuffer> buffer_;  ///< never null
  bool started_ = false;
};

}  // namespace folio::service
