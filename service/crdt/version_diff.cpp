#include "crdt/version_diff.hpp"

#include <folio/utf8.hpp>

#include <algorithm>
#include <map>
#include <optional>
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

namespace {

void append_text_content(const folio::markup::fragment& nodes, std::string& out) {
  for (const folio::markup::node& n : nodes)
    n.type == folio::markup::node::kind::text ? (void)(out += n.text) : append_text_content(n.children, out);
}

struct op_id_hash {
  std::size_t operator()(folio::op_id id) const noexcept { return std::hash<std::uint64_t>{}(std::uint64_t(id.replica) * 0x9e3779b97f4a7c15ULL ^ id.seq); }
};

struct element {
  std::string tag;
  std::map<std::string, std::string> attributes;
};

/// The live elements of an xml document by insert id, in document order.
std::vector<std::pair<folio::op_id, element>> elements_of(const folio::document& d) {
  std::vector<std::pair<folio::op_id, element>> out;
  d.for_each_xml_element([&](folio::op_id id, std::string_view tag, const std::map<std::string, std::string>& attributes) {
    out.push_back({id, element{std::string(tag), attributes}});
  });
  return out;
}

}  // namespace

void write_xml_diff(json_writer& w, const folio::document& d, const folio::version_vector& from, const folio::version_vector& to, bool to_now,
                    const change_authors& authors) {
  const folio::document old_doc = d.checkout(from);
  const std::optional<folio::document> new_checkout = to_now ? std::nullopt : std::optional<folio::document>(d.checkout(to));
  const folio::document& new_doc = new_checkout ? *new_checkout : d;
  w.StartObject();
  // The text content: the old text as replica 1's first items, then replaced by the new one.
  {
    std::string old_text, new_text;
    append_text_content(old_doc.xml_fragment(), old_text);
    append_text_content(new_doc.xml_fragment(), new_text);
    folio::document scratch(folio::record_type::text, 1);
    scratch.replace_text(old_text);
    const std::uint32_t old_items = scratch.version().get(1);
    scratch.replace_text(new_text);
    run_writer<char32_t> runs(w);
    const std::vector<std::string> none;
    w.Key("text");
    w.StartArray();
    scratch.as_text().for_each_item_with_removes([&](folio::op_id id, char32_t c, const std::vector<folio::op_id>& removes) {
      runs.add(!removes.empty() ? "delete" : id.seq >= old_items ? "insert" : "equal", none, c);
    });
    runs.flush();
    w.EndArray();
  }
  const std::vector<std::pair<folio::op_id, element>> olds = elements_of(old_doc), news = elements_of(new_doc);
  std::unordered_map<folio::op_id, const element*, op_id_hash> old_by_id, new_by_id;
  for (const auto& [id, e] : olds) old_by_id.emplace(id, &e);
  for (const auto& [id, e] : news) new_by_id.emplace(id, &e);
  const auto write_element = [&](const element& e, const change_authors::change* by) {
    w.StartObject();
    write_member(w, "tag", e.tag);
    w.Key("userIds");
    w.StartArray();
    if (by) write_string(w, by->by);
    w.EndArray();
    w.EndObject();
  };
  w.Key("elements");
  w.StartObject();
  w.Key("added");
  w.StartArray();
  for (const auto& [id, e] : news)
    if (!old_by_id.contains(id)) write_element(e, authors.of(id));
  w.EndArray();
  w.Key("removed");
  w.StartArray();
  for (const auto& [id, e] : olds)
    if (!new_by_id.contains(id)) write_element(e, nullptr);
  w.EndArray();
  w.EndObject();
  // Attributes of the elements in both states, in the `to` state's document order, then by name.
  w.Key("attributes");
  w.StartArray();
  const auto write_attribute = [&](const element& e, const std::string& name, const char* op, const std::string* was, const std::string* now) {
    w.StartObject();
    write_member(w, "tag", e.tag);
    write_member(w, "name", name);
    write_member(w, "op", op);
    if (was) write_member(w, "old", *was);
    if (now) write_member(w, "new", *now);
    w.EndObject();
  };
  for (const auto& [id, e] : news) {
    const auto it = old_by_id.find(id);
    if (it == old_by_id.end()) continue;
    const std::map<std::string, std::string>& a = it->second->attributes;
    const std::map<std::string, std::string>& b = e.attributes;
    for (auto x = a.begin(), y = b.begin(); x != a.end() || y != b.end();) {
      if (y == b.end() || (x != a.end() && x->first < y->first)) {
        write_attribute(e, x->first, "removed", &x->second, nullptr), ++x;
      } else if (x == a.end() || y->first < x->first) {
        write_attribute(e, y->first, "added", nullptr, &y->second), ++y;
      } else {
        if (x->second != y->second) write_attribute(e, x->first, "changed", &x->second, &y->second);
        ++x, ++y;
      }
    }
  }
  w.EndArray();
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
