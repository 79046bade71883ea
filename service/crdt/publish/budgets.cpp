#include "crdt/publish/budgets.hpp"

#include <algorithm>

#include "platform/log.hpp"

namespace folio::service {

publish_budgets::tenant_budget& publish_budgets::refilled(const std::string& tenant) {
  const auto now = std::chrono::steady_clock::now();
  if (tenants_.size() >= 10000 && !tenants_.count(tenant))  // forget the tenants whose budgets are whole again
    std::erase_if(tenants_, [&](const auto& b) { return now - b.second.refilled >= window; });
  tenant_budget& b = tenants_[tenant];
  const double part = std::chrono::duration<double>(now - b.refilled).count() / std::chrono::duration<double>(window).count();
  b.messages = std::min<double>(messages_per_tenant_window, b.messages + messages_per_tenant_window * part);
  b.full_bytes = std::min<double>(full_bytes_per_tenant_window, b.full_bytes + full_bytes_per_tenant_window * part);
  b.presence_messages = std::min<double>(presence_messages_per_tenant_window, b.presence_messages + presence_messages_per_tenant_window * part);
  b.presence_bytes = std::min<double>(presence_bytes_per_tenant_window, b.presence_bytes + presence_bytes_per_tenant_window * part);
  b.refilled = now;
  return b;
}

bool publish_budgets::take_bytes(const std::string& tenant, std::size_t bytes) {
  std::lock_guard<std::mutex> g(mu_);
  const auto now = std::chrono::steady_clock::now();
  const double full = static_cast<double>(full_bytes_per_window);
  bytes_ = std::min(full, bytes_ + full * std::chrono::duration<double>(now - refilled_).count() / std::chrono::duration<double>(window).count());
  refilled_ = now;
  tenant_budget& mine = refilled(tenant);
  if (bytes_ < static_cast<double>(bytes) || mine.full_bytes < static_cast<double>(bytes)) return false;
  bytes_ -= static_cast<double>(bytes);
  mine.full_bytes -= static_cast<double>(bytes);
  return true;
}

bool publish_budgets::take_message(const std::string& tenant) {
  bool log_spent = false;
  {
    std::lock_guard<std::mutex> g(mu_);
    tenant_budget& mine = refilled(tenant);
    if (mine.messages >= 1) {
      mine.messages -= 1;
      mine.spent_logged = false;
      return true;
    }
    log_spent = !mine.spent_logged;
    mine.spent_logged = true;
  }
  if (log_spent)
    log::write("warn", "publish_budget_spent",
               "key " + tenant + " published " + std::to_string(messages_per_tenant_window) + " messages in the last " + std::to_string(window.count()) +
                   " s; its further changes owe their channels a notice to sync, sent as its budget refills");
  return false;
}

bool publish_budgets::take_presence(const std::string& tenant, std::size_t bytes) {
  bool log_spent = false;
  {
    std::lock_guard<std::mutex> g(mu_);
    const auto now = std::chrono::steady_clock::now();
    const double all = static_cast<double>(presence_bytes_per_window);
    presence_bytes_ = std::min(all, presence_bytes_ + all * std::chrono::duration<double>(now - presence_refilled_).count() /
                                                          std::chrono::duration<double>(window).count());
    presence_refilled_ = now;
    tenant_budget& mine = refilled(tenant);
    const double size = static_cast<double>(bytes);
    if (mine.presence_messages >= 1 && mine.presence_bytes >= size && presence_bytes_ >= size) {
      mine.presence_messages -= 1;
      mine.presence_bytes -= size;
      presence_bytes_ -= size;
      mine.presence_spent_logged = false;
      return true;
    }
    log_spent = !mine.presence_spent_logged;
    mine.presence_spent_logged = true;
  }
  if (log_spent)
    log::write("warn", "presence_budget_spent",
               "key " + tenant + " spent its presence budget (" + std::to_string(presence_messages_per_tenant_window) + " messages or " +
                   std::to_string(presence_bytes_per_tenant_window >> 20) + " MiB in " + std::to_string(window.count()) +
                   " s); its presence messages are dropped until it refills");
  return false;
}

}  // namespace folio::service
