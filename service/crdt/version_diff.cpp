#include "crdt/version_diff.hpp"

#include <folio/utf8.hpp>

#include <algorithm>
#include <map>
#include <unordered_map>
#include <string>
#include <string_view>
#include <vector>

namespace folio::service {

namespace {

/// Collects runs of (op, userIds) and writes each when the next item starts another one.
template <class T>
class run_writer {
 public:
  explicit run_writer(json_writer& w) : w_(w) {}
  void add(std::string_view op, const std::vector<std::string>& users, const T& value) {
    if (open_ && (op != op_ || users != users_)) flush();
    if (!open_) open_ = true, op_ = op, users_ = users;
    if constexpr (std::is_same_v<T, char32_t>)
      folio::append_utf8(text_, value);
    else
      values_.push_back(&value);
  }
  void flush() {
    if (!open_) return;
    w_.StartObject();
    write_member(w_, "op", op_);
    if constexpr (std::is_same_v<T, char32_t>) {
      write_member(w_, "text", text_);
    } else {
      w_.Key("values");
      w_.StartArray();
      // A removed element of a record stored before removed values were kept is a placeholder: null.
      for (const std::string* v : values_)
        v->empty() ? (void)w_.Null() : (void)w_.RawValue(v->data(), v->size(), rapidjson::kObjectType);
      w_.EndArray();
    }
    w_.Key("userIds");
    w_.StartArray();
    for (const std::string& u : users_) write_string(w_, u);
    w_.EndArray();
    w_.EndObject();
    open_ = false, text_.clear(), values_.clear();
  }

 private:
  json_writer& w_;
  bool open_ = false;
  std::string_view op_;
  std::vector<std::string> users_;
  std::string text_;
  std::vector<const std::string*> values_;  // valid during the walk: the document's own values
};

template <class Sequence>
void write_diff(json_writer& w, const Sequence& seq, const folio::version_vector& from, const folio::version_vector& to, const change_authors& authors) {
  using T = typename Sequence::value_type;
  run_writer<T> runs(w);
  std::vector<std::string> users;
  const auto holds = [](const folio::version_vector& v, folio::op_id id, const std::vector<folio::op_id>& removes) {
    return v.contains(id) && std::none_of(removes.begin(), removes.end(), [&](folio::op_id r) { return v.contains(r); });
  };
  w.StartArray();
  seq.for_each_item_with_removes([&](folio::op_id id, const T& value, const std::vector<folio::op_id>& removes) {
    const bool in_from = holds(from, id, removes), in_to = holds(to, id, removes);
    if (!in_from && !in_to) return;
    users.clear();
    if (in_from && in_to) return runs.add("equal", users, value);
    if (in_to) {
      if (const change_authors::change* c = authors.of(id)) users.push_back(c->by);
      return runs.add("insert", users, value);
    }
    // Deleted: by the removes `to` holds and `from` does not (none when the item was inserted after `to`).
    for (folio::op_id r : removes)
      if (to.contains(r) && !from.contains(r))
        if (const change_authors::change* c = authors.of(r)) users.push_back(c->by);
    std::sort(users.begin(), users.end());
    users.erase(std::unique(users.begin(), users.end()), users.end());
    runs.add("delete", users, value);
  });
  runs.flush();
  w.EndArray();
}

}  // namespace

void write_sequence_diff(json_writer& w, const folio::document& d, const folio::version_vector& from, const folio::version_vector& to,
                         const change_authors& authors) {
  if (d.type() == folio::record_type::text)
    write_diff(w, d.as_text(), from, to, authors);
  else
    write_diff(w, d.as_array(), from, to, authors);
}

void write_map_diff(json_writer& w, const folio::document& d, const folio::version_vector& from, const folio::version_vector& to, bool to_now,
                    const change_authors& authors) {
  const std::map<std::string, std::string> old_entries = d.checkout(from).map(), new_entries = to_now ? d.map() : d.checkout(to).map();
  std::unordered_map<std::string, std::vector<std::string>> users;  // key -> who changed it between the versions
  d.for_each_map_change([&](folio::op_id id, std::string_view key) {
    if (from.contains(id) == to.contains(id)) return;
    if (const change_authors::change* c = authors.of(id)) users[std::string(key)].push_back(c->by);
  });
  const auto write_users = [&](const std::string& key) {
    w.Key("userIds");
    w.StartArray();
    if (const auto it = users.find(key); it != users.end()) {
      std::vector<std::string>& u = it->second;
      std::sort(u.begin(), u.end());
      u.erase(std::unique(u.begin(), u.end()), u.end());
      for (const std::string& name : u) write_string(w, name);
    }
    w.EndArray();
  };
  const auto raw = [&](const std::string& json) { w.RawValue(json.data(), json.size(), rapidjson::kObjectType); };
  // One section: the keys of `a` that `keep` selects, with what `write` writes of each.
  const auto section = [&](const char* name, const std::map<std::string, std::string>& a, auto&& keep, auto&& write) {
    w.Key(name);
    w.StartObject();
    for (const auto& [key, value] : a)
      if (keep(key, value)) {
        write_string(w, key);
        w.StartObject();
        write(key, value);
        write_users(key);
        w.EndObject();
      }
    w.EndObject();
  };
  w.StartObject();
  section(
      "added", new_entries, [&](const std::string& k, const std::string&) { return !old_entries.contains(k); },
      [&](const std::string&, const std::string& v) { w.Key("value"), raw(v); });
  section(
      "removed", old_entries, [&](const std::string& k, const std::string&) { return !new_entries.contains(k); },
      [&](const std::string&, const std::string& v) { w.Key("value"), raw(v); });
  section(
      "changed", new_entries,
      [&](const std::string& k, const std::string& v) {
        const auto it = old_entries.find(k);
        return it != old_entries.end() && it->second != v;
      },
      [&](const std::string& k, const std::string& v) {
        w.Key("old"), raw(old_entries.at(k));
        w.Key("new"), raw(v);
      });
  w.EndObject();
}

void write_text_attribution(json_writer& w, const folio::document& d, const change_authors& authors) {
  w.StartArray();
  std::string text;
  const change_authors::change* run_change = nullptr;
  bool open = false;
  const auto flush = [&] {
    if (!open) return;
    w.StartObject();
    write_member(w, "text", text);
    w.Key("userId");
    run_change ? write_string(w, run_change->by) : (void)w.Null();
    w.Key("lastUpdate");
    run_change ? write_string(w, run_change->when) : (void)w.Null();
    w.EndObject();
    text.clear(), open = false;
  };
  // The live items' ids as runs in document order, read beside their values: O(n).
  const folio::text& t = d.as_text();
  const std::vector<std::pair<folio::op_id, std::uint32_t>> ids = t.live_ids(0, t.size());
  std::size_t at = 0;
  std::uint32_t k = 0;
  t.for_each([&](char32_t c) {
    const change_authors::change* made = authors.of(folio::op_id{ids[at].first.replica, ids[at].first.seq + k});
    if (++k == ids[at].second) ++at, k = 0;
    if (open && made != run_change) flush();
    open = true, run_change = made;
    folio::append_utf8(text, c);
  });
  flush();
  w.EndArray();
}

}  // namespace folio::service
