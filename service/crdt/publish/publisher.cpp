#include "crdt/publish/publisher.hpp"

#include "platform/log.hpp"

namespace folio::service {

publisher::publisher(live_config c, std::function<bool(std::string_view)> key_known)
    : config_(std::move(c)),
      nginx_(config_.publish_socket),
      streams_(nginx_, std::move(key_known)),
      owed_([this](const std::string& tenant) { return budgets_.take_message(tenant); },
            [this](const std::string& channel, const std::string& notice) { return streams_.end_due(channel) && nginx_.send(channel, &notice).empty(); }),
      queue_([this](const std::string& channel, const std::string& full, const std::string& notice, const std::string& tenant) {
        publish(channel, full, notice, tenant);
      }) {}

bool publisher::publish(const std::string& channel, const std::string& full, const std::string& notice, const std::string& tenant) {
  if (!nginx_.enabled()) return false;
  if (notice.empty()) {  // ephemeral (presence): as it is, or dropped
    const bool sent = streams_.end_due(channel) && nginx_.send(channel, &full).empty();
    if (!sent) ++presence_dropped_;  // published_ and failures_ count changes only
    return sent;
  }
  if (!streams_.end_due(channel)) {
    // Logged there; the channel's streams stay remembered, and the owed notice goes after a deletion that succeeds.
    ++failures_;
    owed_.owe(channel, notice, tenant);
    return false;
  }
  const std::string& message = full.size() <= max_message_bytes && budgets_.take_bytes(tenant, full.size()) ? full : notice;
  const std::string why = nginx_.send(channel, &message);
  if (why.empty()) {
    ++published_;
    return true;
  }
  ++failures_;
  log::write("warn", "publish_failed",
             "publish to channel " + channel.substr(0, 12) + "... failed: " + why + "; a notice to sync is resent until nginx takes one");
  owed_.owe(channel, notice, tenant);
  return false;
}

void publisher::enqueue(std::string channel, std::string full, std::string notice, const std::string& tenant) {
  if (!nginx_.enabled()) return;
  if (!budgets_.take_message(tenant)) {  // its budget is spent: one notice per channel, later
    ++over_budget_;
    owed_.owe(channel, notice, tenant, true);
    return;
  }
  if (queue_.push(std::move(channel), std::move(full), std::move(notice), tenant)) return;
  ++failures_;  // not queued: the strings were not moved from
  log::write("warn", "publish_queue_full",
             "channel " + channel.substr(0, 12) + "...: " + std::to_string(max_queued) + " messages already wait for nginx; the channel is owed a notice to sync");
  owed_.owe(channel, notice, tenant);
}

void publisher::enqueue_presence(std::string channel, std::string message, const std::string& tenant) {
  if (!nginx_.enabled()) return;
  if (!budgets_.take_presence(tenant, message.size()) || !queue_.push(std::move(channel), std::move(message), std::string(), tenant)) ++presence_dropped_;
}

}  // namespace folio::service
