#include "presence/redis_store.hpp"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <tuple>

#include "wire/json.hpp"

namespace folio::service {

namespace {

constexpr std::string_view prefix = "folio:presence:";

// join or refresh. KEYS: the record's hash, expiry, the document's editors, the tenant's count.
// ARGV: clientId, userId, has state (1/0), state, has selection, selection, now, expiry member, editorId,
// max per record, max per tenant. Answers {outcome, userId, state, selection, updatedAt, changed (1/0)}.
constexpr const char* set_script = R"(
local cur = redis.call('HGET', KEYS[1], ARGV[1])
local state, sel, outcome, changed = '{}', 'null', 'joined', '1'
if cur then
  local e = cjson.decode(cur)
  if e[1] ~= ARGV[2] then return {'other_user', e[1], e[2], e[3], e[4]} end
  state, sel, outcome = e[2], e[3], 'updated'
else
  if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[10]) then return {'record_full'} end
  if tonumber(redis.call('GET', KEYS[4]) or '0') >= tonumber(ARGV[11]) then return {'tenant_full'} end
  redis.call('INCR', KEYS[4])
  redis.call('SADD', KEYS[3], ARGV[9])
end
if cur then changed = '0' end
if ARGV[3] == '1' and state ~= ARGV[4] then state, changed = ARGV[4], '1' end
if ARGV[5] == '1' and sel ~= ARGV[6] then sel, changed = ARGV[6], '1' end
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode({ARGV[2], state, sel, ARGV[7]}))
redis.call('ZADD', KEYS[2], ARGV[7], ARGV[8])
return {outcome, ARGV[2], state, sel, ARGV[7], changed}
)";

// leave. KEYS as set's; ARGV: clientId, userId ('' = any), expiry member, editorId.
constexpr const char* leave_script = R"(
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if not cur then return {'absent'} end
local e = cjson.decode(cur)
if ARGV[2] ~= '' and e[1] ~= ARGV[2] then return {'other_user', e[1], e[2], e[3], e[4]} end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[3])
if redis.call('HLEN', KEYS[1]) == 0 then redis.call('SREM', KEYS[3], ARGV[4]) end
if redis.call('DECR', KEYS[4]) <= 0 then redis.call('DEL', KEYS[4]) end
return {'left', e[1], e[2], e[3], e[4]}
)";

// expiry. KEYS: expiry. ARGV: before (exclusive), limit, the key prefix. Answers member, entry, ... of
// the entries removed here.
constexpr const char* expire_script = R"(
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
local out = {}
for _, m in ipairs(due) do
  redis.call('ZREM', KEYS[1], m)
  local p = {}
  for part in string.gmatch(m, '[^\31]+') do p[#p + 1] = part end
  local h = ARGV[3] .. 'r:' .. p[1] .. '\31' .. p[2] .. '\31' .. p[3] .. '\31' .. p[4]
  local cur = redis.call('HGET', h, p[5])
  if cur then
    redis.call('HDEL', h, p[5])
    if redis.call('HLEN', h) == 0 then redis.call('SREM', ARGV[3] .. 'd:' .. p[1] .. '\31' .. p[2] .. '\31' .. p[3], p[4]) end
    local t = ARGV[3] .. 't:' .. p[1]
    if redis.call('DECR', t) <= 0 then redis.call('DEL', t) end
    out[#out + 1] = m
    out[#out + 1] = cur
  end
end
return out
)";

// get. KEYS: the document's editors. ARGV: the hash key's prefix up to the editorId, editorId ('' = all).
// Answers editorId, clientId, entry, ...
constexpr const char* get_script = R"(
local editors = ARGV[2] ~= '' and {ARGV[2]} or redis.call('SMEMBERS', KEYS[1])
local out = {}
for _, ed in ipairs(editors) do
  local all = redis.call('HGETALL', ARGV[1] .. ed)
  for i = 1, #all, 2 do
    out[#out + 1] = ed
    out[#out + 1] = all[i]
    out[#out + 1] = all[i + 1]
  end
end
return out
)";

std::string document_of(const record_key& k) { return k.tenant + '\x1f' + k.org + '\x1f' + k.doc; }
std::string hash_of(const record_key& k) { return std::string(prefix) + "r:" + k.cache_key(); }

std::string text(const redisReply* r) { return r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) ? std::string(r->str, r->len) : std::string(); }

/// An entry from the stored JSON array [userId, state, selection, updatedAt].
presence_entry stored_entry(const std::string& client, std::string_view stored) {
  const rapidjson::Document d = parse_stored_json(stored);
  presence_entry e;
  e.client = client;
  if (d.IsArray() && d.Size() == 4 && d[0].IsString() && d[1].IsString() && d[2].IsString() && d[3].IsString()) {
    e.user.assign(d[0].GetString(), d[0].GetStringLength());
    e.state.assign(d[1].GetString(), d[1].GetStringLength());
    e.selection.assign(d[2].GetString(), d[2].GetStringLength());
    e.updated_ms = std::strtoll(d[3].GetString(), nullptr, 10);
  }
  return e;
}

presence_entry answered_entry(const redisReply* r, const std::string& client) {
  presence_entry e;
  e.client = client;
  if (r->elements >= 5) {
    e.user = text(r->element[1]), e.state = text(r->element[2]), e.selection = text(r->element[3]);
    e.updated_ms = std::strtoll(text(r->element[4]).c_str(), nullptr, 10);
  }
  return e;
}

}  // namespace

void redis_presence_store::reply_deleter::operator()(redisReply* r) const { freeReplyObject(r); }

redis_presence_store::redis_presence_store(const std::string& address, std::string password, std::size_t per_tenant)
    : password_(std::move(password)), shown_(address), per_tenant_(per_tenant) {
  if (address.starts_with("unix:") && address.size() > 5) {
    unix_path_ = address.substr(5);
    return;
  }
  const std::size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size() ||
      address.find_first_not_of("0123456789", colon + 1) != std::string::npos || address.size() - colon > 6)
    throw std::invalid_argument("not unix:/path or host:port: " + address);
  host_ = address.substr(0, colon);
  port_ = std::stoi(address.substr(colon + 1));
  if (port_ < 1 || port_ > 65535) throw std::invalid_argument("port out of range: " + address);
}

redis_presence_store::~redis_presence_store() {
  for (redisContext* c : idle_) redisFree(c);
}

redisContext* redis_presence_store::connect() {
  const timeval second{1, 0};
  redisContext* c = unix_path_.empty() ? redisConnectWithTimeout(host_.c_str(), port_, second) : redisConnectUnixWithTimeout(unix_path_.c_str(), second);
  const auto fail = [&](const std::string& why) {
    if (c) redisFree(c);
    throw api_error(status::unavailable, "Presence is unavailable: its Redis at " + shown_ + " " + why + ".");
  };
  if (!c) fail("could not be reached");
  if (c->err) fail("could not be reached (" + std::string(c->errstr) + ")");
  redisSetTimeout(c, second);
  if (!password_.empty()) {
    const char* argv[] = {"AUTH", password_.c_str()};
    const std::size_t lens[] = {4, password_.size()};
    reply r(static_cast<redisReply*>(redisCommandArgv(c, 2, argv, lens)));
    if (!r || r->type == REDIS_REPLY_ERROR) fail("refused the password");
  }
  return c;
}

redis_presence_store::reply redis_presence_store::command(const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  for (const std::string& a : args) argv.push_back(a.data()), lens.push_back(a.size());
  // A pooled connection may have died with its Redis (a restart): its failure is retried once on a fresh one.
  for (bool pooled = true;;) {
    redisContext* c = nullptr;
    {
      std::lock_guard<std::mutex> g(mu_);
      if (pooled && !idle_.empty()) c = idle_.back(), idle_.pop_back();
    }
    pooled = c != nullptr;
    if (!c) c = connect();
    reply r(static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(args.size()), argv.data(), lens.data())));
    if (!r || c->err) {
      const std::string why = c->err ? std::string(c->errstr) : std::string("no answer");
      redisFree(c);
      if (pooled) {
        pooled = false;
        continue;
      }
      throw api_error(status::unavailable, "Presence is unavailable: its Redis at " + shown_ + " failed (" + why + ").");
    }
    {
      std::lock_guard<std::mutex> g(mu_);
      idle_.push_back(c);
    }
    if (r->type == REDIS_REPLY_ERROR)
      throw api_error(status::unavailable, "Presence is unavailable: its Redis at " + shown_ + " answered " + std::string(r->str, r->len) + ".");
    return r;
  }
}

presence_store::set_result redis_presence_store::set(const record_key& k, const std::string& client, const std::string& user,
                                                     const std::optional<std::string>& state, const std::optional<std::string>& selection,
                                                     std::int64_t now_ms) {
  const std::string p(prefix);
  const reply r = command({"EVAL", set_script, "4", hash_of(k), p + "expiry", p + "d:" + document_of(k), p + "t:" + k.tenant, client, user,
                           state ? "1" : "0", state.value_or(""), selection ? "1" : "0", selection.value_or(""), std::to_string(now_ms),
                           k.cache_key() + '\x1f' + client, k.editor, std::to_string(max_per_record), std::to_string(per_tenant_)});
  const std::string outcome = r->type == REDIS_REPLY_ARRAY && r->elements > 0 ? text(r->element[0]) : std::string();
  if (outcome == "record_full") return {set_outcome::record_full, {}};
  if (outcome == "tenant_full") return {set_outcome::tenant_full, {}};
  const set_outcome o = outcome == "joined" ? set_outcome::joined : outcome == "updated" ? set_outcome::updated : set_outcome::other_user;
  const bool changed = r->elements < 6 || text(r->element[5]) == "1";
  return {o, answered_entry(r.get(), client), changed};
}

presence_store::leave_result redis_presence_store::leave(const record_key& k, const std::string& client, const std::optional<std::string>& user) {
  const std::string p(prefix);
  const reply r = command({"EVAL", leave_script, "4", hash_of(k), p + "expiry", p + "d:" + document_of(k), p + "t:" + k.tenant, client,
                           user.value_or(""), k.cache_key() + '\x1f' + client, k.editor});
  const std::string outcome = r->type == REDIS_REPLY_ARRAY && r->elements > 0 ? text(r->element[0]) : std::string();
  if (outcome == "left") return {leave_outcome::left, answered_entry(r.get(), client)};
  if (outcome == "other_user") return {leave_outcome::other_user, answered_entry(r.get(), client)};
  return {};
}

std::vector<placed_entry> redis_presence_store::get(const record_key& k, std::int64_t since_ms) {
  const std::string p(prefix);
  const reply r = command({"EVAL", get_script, "1", p + "d:" + document_of(k), p + "r:" + document_of(k) + '\x1f', k.editor});
  std::vector<placed_entry> out;
  if (r->type != REDIS_REPLY_ARRAY) return out;
  for (std::size_t i = 0; i + 2 < r->elements; i += 3) {
    placed_entry e{k, stored_entry(text(r->element[i + 1]), text(r->element[i + 2]))};
    if (e.entry.updated_ms < since_ms) continue;
    e.record.editor = text(r->element[i]);
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end(), [](const placed_entry& a, const placed_entry& b) {
    return std::tie(a.record.editor, a.entry.client) < std::tie(b.record.editor, b.entry.client);
  });
  return out;
}

std::vector<placed_entry> redis_presence_store::expire(std::int64_t before_ms, std::size_t limit) {
  const reply r = command({"EVAL", expire_script, "1", std::string(prefix) + "expiry", std::to_string(before_ms), std::to_string(limit), std::string(prefix)});
  std::vector<placed_entry> out;
  if (r->type != REDIS_REPLY_ARRAY) return out;
  for (std::size_t i = 0; i + 1 < r->elements; i += 2) {
    // "<tenant>\x1f<org>\x1f<doc>\x1f<editor>\x1f<clientId>"
    const std::string member = text(r->element[i]);
    std::string parts[5];
    std::size_t at = 0;
    for (std::string& part : parts) {
      const std::size_t end = std::min(member.find('\x1f', at), member.size());
      part.assign(member, at, end - at);
      at = end + 1;
    }
    out.push_back({record_key{parts[0], parts[1], parts[2], parts[3]}, stored_entry(parts[4], text(r->element[i + 1]))});
  }
  return out;
}

}  // namespace folio::service
