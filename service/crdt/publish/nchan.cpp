#include "crdt/publish/nchan.hpp"

#include <curl/curl.h>
#include <openssl/hmac.h>

#include <memory>

namespace folio::service {

std::string channel_id(std::string_view secret, std::string_view tenant, std::string_view org, std::string_view doc, std::string_view editor) {
  std::string msg;
  msg.reserve(tenant.size() + org.size() + doc.size() + editor.size() + 3);
  msg.append(tenant).append(1, '\n').append(org).append(1, '\n').append(doc).append(1, '\n').append(editor);
  unsigned char mac[32];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), mac, &len);
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) out += hex[mac[i] >> 4], out += hex[mac[i] & 15];
  return out;
}

namespace {

struct curl_deleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};

std::size_t discard(char*, std::size_t size, std::size_t n, void*) { return size * n; }

/// One handle per thread, kept: its connection to nginx is reused from one request to the next.
CURL* thread_handle() {
  static const bool global = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
  thread_local std::unique_ptr<CURL, curl_deleter> handle(global ? curl_easy_init() : nullptr);
  return handle.get();
}

std::int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string nchan_endpoint::send(const std::string& channel, const std::string* message) {
  CURL* c = thread_handle();
  long code = 0;
  CURLcode rc = CURLE_FAILED_INIT;
  if (c) {
    curl_easy_reset(c);
    const std::string url = "http://localhost/_folio/publish/" + channel;
    struct curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, socket_.c_str());
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    if (message) {
      curl_easy_setopt(c, CURLOPT_POSTFIELDS, message->data());
      curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(message->size()));
    } else {
      curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "DELETE");
    }
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 1000L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 2000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    rc = curl_easy_perform(c);
    if (rc == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(headers);
  }
  if (rc == CURLE_OK && ((code >= 200 && code < 300) || (!message && code == 404))) return {};
  // 507: Nchan's shared memory is full; new subscribers are refused for a while (memory_full()).
  if (rc == CURLE_OK && code == 507) memory_full_until_ms_ = steady_ms() + std::chrono::duration_cast<std::chrono::milliseconds>(memory_full_hold).count();
  return (rc == CURLE_OK ? std::string("refused") : curl_easy_strerror(rc)) + " (HTTP " + std::to_string(code) + ")";
}

bool nchan_endpoint::memory_full() const { return steady_ms() < memory_full_until_ms_.load(); }

}  // namespace folio::service
