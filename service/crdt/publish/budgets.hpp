// service/crdt/publish/budgets.hpp — what the publisher may put into Nchan's shared memory per window.
//
// What nginx holds (nginx/publish.conf, docs/OPERATIONS.md has the arithmetic): a channel keeps its
// last 16 messages for 60 s. Budgets are token buckets refilled over a window (60 s, what nginx keeps
// a message): a tenant publishes at most messages_per_tenant_window messages a window (so it creates
// at most that many channels in it: a message makes at most one), and a change goes with its ops only
// while they fit in the tenant's full_bytes_per_tenant_window and in everyone's full_bytes_per_window;
// otherwise its notice goes (publisher.hpp). So what one tenant's changes, large or many, hold in
// Nchan's shared memory is bounded, and one tenant's flood spends only its own budgets.
// Presence messages (presence/family.hpp) have budgets of their own, a message and a byte bucket per
// tenant and a byte bucket of everyone's (take_presence): ephemeral, they are dropped when spent, and
// take nothing from the changes'; the bucket of everyone's bounds what all tenants' presence holds in
// Nchan's shared memory, so many tenants announcing at their budgets cannot fill it under the changes.
// Cost: one entry per tenant that published in the last window (at most 10,000 before those whose
// budgets are whole again are forgotten); a take is a lookup and a refill, O(1).
// Thread-safety: any thread (one mutex).
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>
#include <string>
#include <unordered_map>

namespace folio::service {

class publish_budgets {
 public:
  /// Bytes of messages with ops published per window, at most (a token bucket refilled over the window).
  static constexpr std::size_t full_bytes_per_window = std::size_t(32) << 20;
  /// A tenant's share of those: bytes of its messages with ops per window, at most.
  static constexpr std::size_t full_bytes_per_tenant_window = std::size_t(8) << 20;
  /// Messages (with ops or notices) a tenant publishes per window, at most; a channel it publishes to
  /// takes at least one, so it bounds the tenant's channels too.
  static constexpr std::size_t messages_per_tenant_window = 6000;
  static constexpr std::chrono::seconds window{60};  ///< nginx/publish.conf's nchan_message_timeout
  /// Presence messages (joins, updates, leaves) a tenant publishes per window, at most, and their bytes.
  static constexpr std::size_t presence_messages_per_tenant_window = 12000;
  static constexpr std::size_t presence_bytes_per_tenant_window = std::size_t(8) << 20;
  /// Bytes of presence messages published per window, of every tenant, at most.
  static constexpr std::size_t presence_bytes_per_window = std::size_t(16) << 20;

  /// Takes `bytes` of a message with ops from `tenant`'s and everyone's byte budgets; false (nothing
  /// taken) when either lacks them.
  bool take_bytes(const std::string& tenant, std::size_t bytes);
  /// Takes one message from `tenant`'s budget; false when it is spent (logged once until it has room again).
  bool take_message(const std::string& tenant);
  /// Takes one presence message of `bytes` from `tenant`'s presence budgets and everyone's presence
  /// bytes; false (nothing taken) when one is spent (logged once until the tenant's have room again).
  bool take_presence(const std::string& tenant, std::size_t bytes);

 private:
  struct tenant_budget {
    double messages = static_cast<double>(messages_per_tenant_window), full_bytes = static_cast<double>(full_bytes_per_tenant_window);
    std::chrono::steady_clock::time_point refilled = std::chrono::steady_clock::now();
    bool spent_logged = false;  ///< a line was written since its message budget last had room
    double presence_messages = static_cast<double>(presence_messages_per_tenant_window);
    double presence_bytes = static_cast<double>(presence_bytes_per_tenant_window);
    bool presence_spent_logged = false;
  };
  tenant_budget& refilled(const std::string& tenant);  ///< mu_ held

  std::mutex mu_;
  double bytes_ = static_cast<double>(full_bytes_per_window);  ///< bytes of full messages that may go now, of every tenant
  std::chrono::steady_clock::time_point refilled_ = std::chrono::steady_clock::now();
  double presence_bytes_ = static_cast<double>(presence_bytes_per_window);  ///< bytes of presence messages that may go now, of every tenant
  std::chrono::steady_clock::time_point presence_refilled_ = std::chrono::steady_clock::now();
  std::unordered_map<std::string, tenant_budget> tenants_;
};

}  // namespace folio::service
