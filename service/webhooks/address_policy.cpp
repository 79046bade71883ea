#include "webhooks/address_policy.hpp"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netdb.h>
#include <netinet/in.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>

namespace folio::service {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool internal_v4(const unsigned char* b) {
  const std::uint32_t a = (std::uint32_t(b[0]) << 24) | (std::uint32_t(b[1]) << 16) | (std::uint32_t(b[2]) << 8) | b[3];
  const auto in = [a](std::uint32_t net, unsigned prefix) { return (a >> (32 - prefix)) == (net >> (32 - prefix)); };
  return in(0x00000000, 8) || in(0x7f000000, 8) || in(0x0a000000, 8) || in(0xac100000, 12) || in(0xc0a80000, 16) || in(0xa9fe0000, 16) ||
         in(0x64400000, 10) || in(0xc0000000, 24) || in(0xc6120000, 15) || in(0xe0000000, 4) || in(0xf0000000, 4);
}

bool prefix_match(const unsigned char* a, const unsigned char* net, unsigned prefix) {
  const unsigned whole = prefix / 8, rest = prefix % 8;
  if (std::memcmp(a, net, whole) != 0) return false;
  if (rest == 0) return true;
  const unsigned char mask = static_cast<unsigned char>(0xff << (8 - rest));
  return (a[whole] & mask) == (net[whole] & mask);
}

/// One lookup, shared by the thread that runs it and the caller that waits for it. Whichever of them
/// is last owns the answer: the caller takes it when it came within the limit; else the thread frees it.
struct lookup {
  std::mutex m;
  std::condition_variable finished;
  bool done = false, abandoned = false;
  int rc = EAI_FAIL;
  addrinfo* found = nullptr;
};

/// Lookups whose caller stopped waiting and whose thread still runs (bounded by max_abandoned_lookups).
std::atomic<int> abandoned_count{0};

/// `host`'s addresses by `resolve` on a detached thread, waited for at most `limit`: (rc, list) as
/// getaddrinfo answers, the list the caller's to free; nullopt when the limit passed first.
std::optional<std::pair<int, addrinfo*>> resolve_within(const std::string& host, std::chrono::milliseconds limit, const host_resolver& resolve) {
  if (abandoned_count.load() >= max_abandoned_lookups) return std::nullopt;
  const auto l = std::make_shared<lookup>();
  std::thread([l, host, resolve] {
    addrinfo* found = nullptr;
    int rc = EAI_FAIL;
    if (resolve) {
      rc = resolve(host, &found);
    } else {
      addrinfo hints{};
      hints.ai_socktype = SOCK_STREAM;
      rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
    }
    const std::lock_guard lock(l->m);
    if (l->abandoned) {
      if (found) freeaddrinfo(found);
      abandoned_count.fetch_sub(1);
      return;
    }
    l->rc = rc, l->found = found, l->done = true;
    l->finished.notify_one();
  }).detach();
  std::unique_lock lock(l->m);
  if (!l->finished.wait_for(lock, limit, [&] { return l->done; })) {
    l->abandoned = true;
    abandoned_count.fetch_add(1);
    return std::nullopt;
  }
  return std::pair(l->rc, l->found);
}

/// A limit as the refusal states it: in whole seconds ("N s"), else in milliseconds ("N ms").
std::string duration_text(std::chrono::milliseconds d) {
  return d.count() % 1000 == 0 ? std::to_string(d.count() / 1000) + " s" : std::to_string(d.count()) + " ms";
}

}  // namespace

int abandoned_lookups() { return abandoned_count.load(); }

std::string address_text(const sockaddr* a) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (a->sa_family == AF_INET) inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a)->sin_addr, buf, sizeof buf);
  else if (a->sa_family == AF_INET6) inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr, buf, sizeof buf);
  return buf;
}

bool is_internal_address(const sockaddr* a) {
  if (a->sa_family == AF_INET) return internal_v4(reinterpret_cast<const unsigned char*>(&reinterpret_cast<const sockaddr_in*>(a)->sin_addr));
  if (a->sa_family != AF_INET6) return true;  // nothing but IP is ever reached
  const unsigned char* b = reinterpret_cast<const unsigned char*>(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr);
  static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff}, nat64[12] = {0, 0x64, 0xff, 0x9b}, zero[16] = {};
  if (std::memcmp(b, mapped, 12) == 0 || std::memcmp(b, nat64, 12) == 0) return internal_v4(b + 12);
  if (std::memcmp(b, zero, 12) == 0) return true;  // ::, ::1 and the deprecated IPv4-compatible ::a.b.c.d
  if (b[0] == 0x20 && b[1] == 0x02) return internal_v4(b + 2);  // 6to4 2002::/16: the IPv4 address in bytes 2-5
  static const unsigned char local_nat64[6] = {0, 0x64, 0xff, 0x9b, 0, 1}, teredo[4] = {0x20, 0x01, 0, 0}, discard[8] = {1, 0};
  return std::memcmp(b, local_nat64, 6) == 0 /* 64:ff9b:1::/48: a translator of the operator's */ || std::memcmp(b, teredo, 4) == 0 /* Teredo */ ||
         std::memcmp(b, discard, 8) == 0 /* discard 100::/64 */ || (b[0] & 0xfe) == 0xfc /* fc00::/7 */ ||
         (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) /* fe80::/10 */ || (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0) /* site-local fec0::/10 */ ||
         b[0] == 0xff /* multicast */ || (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8) /* documentation */;
}

address_policy::address_policy(const std::vector<std::string>& allow) {
  for (const std::string& entry : allow) {
    if (entry.empty()) throw std::invalid_argument("an empty entry");
    const std::size_t slash = entry.find('/');
    const std::string addr = entry.substr(0, slash);
    range r{};
    const bool v4 = inet_pton(AF_INET, addr.c_str(), r.bytes.data()) == 1, v6 = !v4 && inet_pton(AF_INET6, addr.c_str(), r.bytes.data()) == 1;
    if (!v4 && !v6) {
      if (slash != std::string::npos) throw std::invalid_argument("not an address range: " + entry);
      hosts_.push_back(lower(entry));
      continue;
    }
    r.family = v4 ? AF_INET : AF_INET6;
    const unsigned max = v4 ? 32 : 128;
    r.prefix = max;
    if (slash != std::string::npos) {
      const std::string p = entry.substr(slash + 1);
      if (p.empty() || p.size() > 3 || !std::all_of(p.begin(), p.end(), [](unsigned char c) { return std::isdigit(c); }) || std::stoul(p) > max)
        throw std::invalid_argument("not an address range: " + entry);
      r.prefix = static_cast<unsigned>(std::stoul(p));
    }
    ranges_.push_back(r);
  }
}

bool address_policy::in_allowed_range(const sockaddr* a) const {
  for (const range& r : ranges_) {
    if (a->sa_family != r.family) continue;
    const unsigned char* b = a->sa_family == AF_INET ? reinterpret_cast<const unsigned char*>(&reinterpret_cast<const sockaddr_in*>(a)->sin_addr)
                                                     : reinterpret_cast<const unsigned char*>(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr);
    if (prefix_match(b, r.bytes.data(), r.prefix)) return true;
  }
  return false;
}

bool address_policy::allows(const sockaddr* a, std::string_view host) const {
  if (a->sa_family != AF_INET && a->sa_family != AF_INET6) return false;
  if (!is_internal_address(a)) return true;
  return std::find(hosts_.begin(), hosts_.end(), lower(host)) != hosts_.end() || in_allowed_range(a);
}

std::string address_policy::check_url(std::string_view url, std::chrono::milliseconds limit, const host_resolver& resolve) const {
  const std::unique_ptr<CURLU, decltype(&curl_url_cleanup)> u(curl_url(), curl_url_cleanup);
  const std::string text(url);
  if (!u || curl_url_set(u.get(), CURLUPART_URL, text.c_str(), 0) != CURLUE_OK) return "url must be an absolute http or https URL.";
  const auto part = [&](CURLUPart which) -> std::string {
    char* p = nullptr;
    if (curl_url_get(u.get(), which, &p, 0) != CURLUE_OK || !p) return {};
    std::string s(p);
    curl_free(p);
    return s;
  };
  const std::string scheme = lower(part(CURLUPART_SCHEME));
  if (scheme != "http" && scheme != "https") return "url must be an http or https URL.";
  if (!part(CURLUPART_USER).empty() || !part(CURLUPART_PASSWORD).empty()) return "url must not hold a user name or password.";
  std::string host = part(CURLUPART_HOST);
  if (host.empty()) return "url must name a host.";
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const std::optional<std::pair<int, addrinfo*>> answer = resolve_within(host, limit, resolve);
  if (!answer) return "url's host " + host + " did not resolve within " + duration_text(limit) + ".";
  addrinfo* found = answer->second;
  if (answer->first != 0 || !found) {
    if (found) freeaddrinfo(found);
    return "url's host " + host + " does not resolve.";
  }
  std::string refused;
  for (const addrinfo* ai = found; ai && refused.empty(); ai = ai->ai_next)
    if (!allows(ai->ai_addr, host)) refused = address_text(ai->ai_addr);
  freeaddrinfo(found);
  if (!refused.empty())
    return "url's host " + host + " resolves to " + refused + ", a loopback, private, link-local or reserved address; webhooks reach only public addresses.";
  return {};
}

}  // namespace folio::service
