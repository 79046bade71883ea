// service/webhooks/address_policy.hpp — which addresses a webhook may reach (docs/WEBHOOKS.md, "Safe by
// default"; docs/OPERATIONS.md, --webhook-allow). An endpoint's URL is http or https with a host; the
// addresses it names or resolves to must be public: loopback (127.0.0.0/8, ::1), unspecified (0.0.0.0/8,
// ::), link-local (169.254.0.0/16 — the cloud metadata address among them — and fe80::/10), private
// (10/8, 172.16/12, 192.168/16), shared (100.64/10), unique-local (fc00::/7), site-local (fec0::/10),
// multicast and reserved (224/4, 240/4, ff00::/8, discard 100::/64, documentation 2001:db8::/32) are
// refused, and so are the IPv6 ranges that reach IPv4 through a translator or tunnel not named by the
// address (local-use NAT64 64:ff9b:1::/48, Teredo 2001::/32); an IPv4 address embedded in IPv6
// (::ffff:a.b.c.d, 64:ff9b::/96, 6to4 2002:AABB:CCDD::/48) is judged as that address (the deprecated
// ::a.b.c.d is refused). The
// operator may allow hosts (as written in the URL, compared without case) and ranges (CIDR); tests
// allow their loopback receiver so.
//
// The rule is applied twice: when an endpoint is added or its URL changed (check_url resolves the host
// and refuses it if any address is refused), and when a delivery connects (allows(), on the address
// libcurl is about to connect to), so a name that resolves elsewhere later is still refused; redirects
// are never followed.
// Thread-safety: immutable after construction.
#pragma once

#include <netdb.h>
#include <sys/socket.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace folio::service {

/// Resolves a host name as getaddrinfo(host, nullptr, {SOCK_STREAM}) does: 0 and a list to free with
/// freeaddrinfo, else an EAI_ code.
using host_resolver = std::function<int(const std::string& host, addrinfo** found)>;
/// How long check_url waits for its host's addresses.
inline constexpr std::chrono::milliseconds url_resolve_limit{3000};
/// The most lookups check_url leaves running past their limit (each holds a thread until the resolver
/// answers; lookups under way when the count reaches it may add one each); past it, a lookup is not
/// started and its URL is refused as one that did not resolve in time.
inline constexpr int max_abandoned_lookups = 64;
/// How many lookups run past their limit now (of this process).
int abandoned_lookups();

/// Whether `a` is an address webhooks never reach unless allowed (the ranges above).
bool is_internal_address(const sockaddr* a);
/// `a`'s address as text ("127.0.0.1", "::1"); "" for a family other than IPv4 and IPv6.
std::string address_text(const sockaddr* a);

class address_policy {
 public:
  /// `allow`: host names and CIDR ranges ("10.0.0.0/8", "::1/128", a bare address is /32 or /128).
  /// Throws std::invalid_argument naming an entry that is neither.
  explicit address_policy(const std::vector<std::string>& allow = {});
  /// Whether a delivery to `host` (the URL's host, as written) may connect to `a`.
  bool allows(const sockaddr* a, std::string_view host) const;
  /// An endpoint's URL as given: "" when it may be used, else the reason, a sentence naming the rule
  /// ("url must be an http or https URL.", "url resolves to 127.0.0.1, a loopback, private or
  /// link-local address; webhooks reach only public addresses."...). Resolves the host with `resolve`
  /// (getaddrinfo when empty) on a thread of its own and waits at most `limit` for it ("url's host x did
  /// not resolve within 3 s."): a slow resolver holds that thread, not the caller, and that thread frees
  /// the answer when it comes after the limit.
  std::string check_url(std::string_view url, std::chrono::milliseconds limit = url_resolve_limit, const host_resolver& resolve = {}) const;

 private:
  struct range {
    int family;                          ///< AF_INET or AF_INET6
    std::array<unsigned char, 16> bytes;  ///< the network, in network order
    unsigned prefix;
  };
  bool in_allowed_range(const sockaddr* a) const;
  std::vector<std::string> hosts_;  ///< lower case
  std::vector<range> ranges_;
};

}  // namespace folio::service
