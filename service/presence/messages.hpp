// service/presence/messages.hpp — presence as JSON (docs/API.md, "Presence"): the live message published
// on a record's channel, {"editorId", "presence": {"type", "clientId", "userId", "state", "selection",
// "updatedAt"}} (a leave without state and selection), and an entry of presence/get's answer.
// state and selection are stored as JSON text and written as they are. Thread-safety: free functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "presence/store.hpp"
#include "wire/json.hpp"

namespace folio::service {

/// The live message of `type` about `e` on `editor`'s record; `at_ms` is its updatedAt (a leave's: when it left).
std::string presence_message(std::string_view editor, std::string_view type, const presence_entry& e, std::int64_t at_ms);
/// {editorId, clientId, userId, state, selection, updatedAt}
void write_presence_entry(json_writer& w, const placed_entry& p);

}  // namespace folio::service
