// clients/js/wasm/folio_wasm.cpp — the engine's client replica (folio::sync_client) behind a plain C
// interface for the WebAssembly build that clients/js/src/engine.js drives.
//
// One handle is one sync_client: the browser runs the same state machine as folio-cli (pending ops,
// gaps, resyncs, incarnations, what to push), and JavaScript only moves bytes between it and the
// network. Nothing here parses JSON or speaks HTTP.
//
// Calling convention: inputs are byte ranges in the module's memory (fw_alloc / fw_free); outputs of
// the last call are a list of byte strings ("parts", read with fw_part_ptr / fw_part_len) and a list
// of numbers (fw_num). A call that fails returns -1 with the message as part 0: local misuse of the
// engine ("[folio.range] ...") and malformed input alike; nothing throws across the boundary.
// Lists given to the module (array items, map entries) are packed as a u32 little-endian length then
// the bytes, one after the other.
//
// Text changes: with tracking on (fw_track), a replace or an applied remote batch on a text record
// leaves its change as hunks in the numbers — (from, removed, inserted) in code points of the value
// before, ascending — with the inserted text of each as a part. They are exact: the live items before
// and after are compared by id (items never move and ids never repeat, so an item live after the
// change either was live before, in the same order, or is new: its id is beyond the version before),
// never guessed from the characters, which in a run of equal ones ("t" + "wo t" + "hree" for an
// insert of "two " before "three") could put the insert beside where it was made. Cost: O(n) for the
// two id lists (runs of consecutive ids) and the value after.
// Xml changes: with tracking on, a replace or an applied remote batch on an xml record leaves as parts
// the ids of the elements it changed (document::xml_changed: "r.s", "root" for the fragment).
//
// Anchors and ids are strings: "r.s" (decimal replica id, decimal seq) names an item or a node, "end"
// the end of a text or array, "end:r.s" / "end:root" the end of a node's children or text. Paths are
// packed as u32 little-endian child indices. A malformed anchor or id fails with "[folio.value]".
// Thread-safety: none (WebAssembly without threads).
#include <emscripten/emscripten.h>

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <folio/sync.hpp>

namespace {

struct replica {
  std::optional<folio::sync_client> client;
  bool track = false;  ///< text records: report the hunks of replaces and remote changes
};

std::vector<std::string> parts;
std::vector<std::uint32_t> nums;

void reset_output() {
  parts.clear();
  nums.clear();
}

int fail(std::string message) {
  reset_output();
  parts.push_back(std::move(message));
  return -1;
}

std::string_view view(const char* p, std::size_t n) { return {p, n}; }

/// The packed list at p[0, n): u32 little-endian length, then the bytes, repeated.
std::vector<std::string> unpack(const char* p, std::size_t n) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < n) {
    if (n - at < 4) throw folio::error(folio::error_code::value, "packed list ends inside a length");
    const auto* b = reinterpret_cast<const unsigned char*>(p + at);
    const std::size_t len = std::size_t(b[0]) | std::size_t(b[1]) << 8 | std::size_t(b[2]) << 16 | std::size_t(b[3]) << 24;
    at += 4;
    if (n - at < len) throw folio::error(folio::error_code::value, "packed list ends inside an item");
    out.emplace_back(p + at, len);
    at += len;
  }
  return out;
}

folio::sync_client& client(replica* r) { return *r->client; }

/// Runs `f` (which fills the output and answers a count or status), turning any exception into -1.
template <class F>
int guarded(F&& f) {
  try {
    reset_output();
    return f();
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}

/// "r.s", or "root" for document_start (the xml fragment).
std::string id_string(const folio::op_id& id) {
  if (id == folio::document_start) return "root";
  return std::to_string(id.replica) + "." + std::to_string(id.seq);
}

/// Parses "r.s": a replica id 1..2^64-1 and a seq 0..max_counter, decimal without sign or leading
/// zeros. Throws "[folio.value]" for anything else.
folio::op_id parse_id(std::string_view s) {
  const auto bad = [&]() -> folio::op_id { throw folio::error(folio::error_code::value, "malformed anchor or id (want \"replica.seq\")"); };
  const std::size_t dot = s.find('.');
  if (dot == std::string_view::npos) return bad();
  const auto number = [&](std::string_view digits, auto& out) {
    if (digits.empty() || (digits.size() > 1 && digits[0] == '0')) return false;
    for (char c : digits)
      if (c < '0' || c > '9') return false;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), out);
    return ec == std::errc() && end == digits.data() + digits.size();
  };
  folio::op_id id;
  if (!number(s.substr(0, dot), id.replica) || !number(s.substr(dot + 1), id.seq) || id.replica == 0 || id.seq > folio::max_counter) return bad();
  return id;
}

/// An xml anchor: "r.s", "end:r.s" or "end:root".
folio::xml_anchor parse_xml_anchor(std::string_view s) {
  if (s.substr(0, 4) != "end:") return {parse_id(s), false};
  if (s == "end:root") return {folio::document_start, true};
  return {parse_id(s.substr(4)), true};
}

/// A path packed as u32 little-endian indices.
std::vector<std::size_t> read_path(const char* p, std::size_t n) {
  if (n % 4) throw folio::error(folio::error_code::value, "a packed path is not a whole number of u32 indices");
  std::vector<std::size_t> out(n / 4);
  const auto* b = reinterpret_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = std::size_t(b[4 * i]) | std::size_t(b[4 * i + 1]) << 8 | std::size_t(b[4 * i + 2]) << 16 | std::size_t(b[4 * i + 3]) << 24;
  return out;
}

void put_path(const std::vector<std::size_t>& path) {
  for (std::size_t i : path) nums.push_back(static_cast<std::uint32_t>(i));
}

using id_runs = std::vector<std::pair<folio::op_id, std::uint32_t>>;

/// A walk over the ids of runs of consecutive ids.
struct id_cursor {
  const id_runs& runs;
  std::size_t run = 0;
  std::uint32_t off = 0;
  bool done() const { return run == runs.size(); }
  folio::op_id id() const { return {runs[run].first.replica, runs[run].first.seq + off}; }
  void next() {
    if (++off == runs[run].second) ++run, off = 0;
  }
};

/// Runs `edit` on a text record with tracking on, reporting the hunks between the value before and after.
template <class F>
int tracked(replica* r, F&& edit) {
  folio::document& d = client(r).doc();
  if (!r->track || d.type() != folio::record_type::text) return edit();
  const folio::text& t = d.as_text();
  const folio::version_vector version = d.version();
  const id_runs before = t.live_ids(0, t.size());
  const int result = edit();
  if (result < 0) return result;
  const id_runs after = t.live_ids(0, t.size());
  const std::u32string value = t.to_u32string();
  id_cursor b{before}, a{after};
  std::size_t old_pos = 0, new_pos = 0;
  bool open = false;  // a hunk is being gathered: nums.back() - 2 .. back()
  const auto hunk = [&] {
    if (!open) nums.push_back(static_cast<std::uint32_t>(old_pos)), nums.push_back(0), nums.push_back(0), parts.emplace_back(), open = true;
  };
  const auto removed = [&] {
    hunk();
    ++nums[nums.size() - 2], ++old_pos, b.next();
  };
  for (; !a.done(); a.next(), ++new_pos) {
    const folio::op_id id = a.id();
    if (!version.contains(id)) {  // new: inserted here
      hunk();
      ++nums.back();
      folio::append_utf8(parts.back(), value[new_pos]);
      continue;
    }
    while (!b.done() && b.id() != id) removed();  // live before, not after: removed
    if (b.done()) throw folio::error(folio::error_code::invariant, "an item live after a change was not live before it");
    open = false, ++old_pos, b.next();
  }
  while (!b.done()) removed();
  return result;
}

/// Runs `edit` on an xml record with tracking on, reporting the elements it changed as parts.
template <class F>
int tracked_xml(replica* r, F&& edit) {
  folio::document& d = client(r).doc();
  if (!r->track || d.type() != folio::record_type::xml) return edit();
  struct recording {
    folio::document& d;
    ~recording() { d.record_xml_changes(false); }
  } on{d};
  d.record_xml_changes(true);
  const int result = edit();
  if (result < 0) return result;
  for (const folio::op_id& id : d.xml_changed()) parts.push_back(id_string(id));
  return result;
}

folio::version_vector read_version(const char* p, std::size_t n, bool& ok) {
  folio::version_vector v;
  ok = static_cast<bool>(folio::version_vector::decode(view(p, n), v));
  return v;
}

int count(const folio::local_change& c) { return static_cast<int>(c.count); }

}  // namespace

extern "C" {

EMSCRIPTEN_KEEPALIVE void* fw_alloc(std::size_t n) { return std::malloc(n ? n : 1); }
EMSCRIPTEN_KEEPALIVE void fw_free(void* p) { std::free(p); }

EMSCRIPTEN_KEEPALIVE std::size_t fw_part_count() { return parts.size(); }
EMSCRIPTEN_KEEPALIVE const char* fw_part_ptr(std::size_t i) { return parts[i].data(); }
EMSCRIPTEN_KEEPALIVE std::size_t fw_part_len(std::size_t i) { return parts[i].size(); }
EMSCRIPTEN_KEEPALIVE std::size_t fw_num_count() { return nums.size(); }
EMSCRIPTEN_KEEPALIVE std::uint32_t fw_num(std::size_t i) { return nums[i]; }

/// A new empty replica of a record of `type` (folio::record_type's number: 1 text, 2 array, 3 map, 4 xml) as replica hi·2^32 + lo.
EMSCRIPTEN_KEEPALIVE replica* fw_new(int type, std::uint32_t hi, std::uint32_t lo, const char* key, std::size_t key_len) {
  replica* out = nullptr;
  guarded([&] {
    const std::optional<folio::record_type> t = folio::record_type_of(static_cast<std::uint64_t>(type));
    if (!t) throw folio::error(folio::error_code::type, "unknown record type");
    auto r = std::make_unique<replica>();
    r->client.emplace(*t, folio::replica_id(hi) << 32 | lo, std::string(key, key_len));
    out = r.release();
    return 0;
  });
  return out;
}

/// A replica restored from sync_client::save bytes; null with the reason as part 0.
EMSCRIPTEN_KEEPALIVE replica* fw_load(const char* p, std::size_t n) {
  replica* out = nullptr;
  guarded([&] {
    auto r = std::make_unique<replica>();
    if (const folio::decode_result res = folio::sync_client::load(view(p, n), r->client); !res) return fail("saved state: " + res.description());
    out = r.release();
    return 0;
  });
  return out;
}

EMSCRIPTEN_KEEPALIVE void fw_delete(replica* r) { delete r; }

EMSCRIPTEN_KEEPALIVE void fw_track(replica* r, int on) { r->track = on != 0; }

/// The record type; parts: content key, incarnation, replica id (decimal), the record version of the
/// last answer applied (sync_client::record_version: "" before one).
EMSCRIPTEN_KEEPALIVE int fw_info(replica* r) {
  return guarded([&] {
    const folio::sync_client& c = client(r);
    parts.push_back(c.doc().content_key());
    parts.push_back(c.incarnation());
    parts.push_back(std::to_string(c.doc().replica()));
    parts.push_back(c.record_version());
    return static_cast<int>(c.doc().type());
  });
}

/// Parts: the client state (sync_client::save).
EMSCRIPTEN_KEEPALIVE int fw_save(replica* r) {
  return guarded([&] {
    parts.push_back(client(r).save());
    return 0;
  });
}

EMSCRIPTEN_KEEPALIVE int fw_needs_sync(replica* r) { return client(r).needs_sync() ? 1 : 0; }

/// Parts: the next sync request's version (encoded vector), update (batch, maybe empty), incarnation.
EMSCRIPTEN_KEEPALIVE int fw_request(replica* r) {
  return guarded([&] {
    folio::sync_request q = client(r).request();
    parts.push_back(q.version.encode());
    parts.push_back(std::move(q.update));
    parts.push_back(std::move(q.incarnation));
    return 0;
  });
}

/// Applies a sync answer (its update, version, incarnation and recordVersion): 1 if it integrated
/// operations, else 0; -1 with why it was refused (nothing changed then).
EMSCRIPTEN_KEEPALIVE int fw_on_answer(replica* r, const char* u, std::size_t un, const char* v, std::size_t vn, const char* inc, std::size_t in,
                                      const char* rv, std::size_t rvn) {
  return guarded([&] {
    bool ok = false;
    const folio::version_vector version = read_version(v, vn, ok);
    if (!ok) return fail("the answer's version is not a version vector");
    return tracked_xml(r, [&] {
      return tracked(r, [&] {
        const folio::apply_result res = client(r).on_answer(view(u, un), version, view(inc, in), view(rv, rvn));
        return res ? (res.applied > 0 ? 1 : 0) : fail(res.message);
      });
    });
  });
}

/// Applies a pushed change: 0 applied, 1 gap (sync), 2 invalid (sync), 3 recreated (drop this
/// replica), plus 0x10 when the document integrated operations (its version changed).
EMSCRIPTEN_KEEPALIVE int fw_on_push(replica* r, const char* u, std::size_t un, const char* v, std::size_t vn, const char* inc, std::size_t in) {
  return guarded([&] {
    bool ok = false;
    const folio::version_vector version = read_version(v, vn, ok);
    if (!ok) return static_cast<int>(folio::push_status::invalid);
    return tracked_xml(r, [&] {
      return tracked(r, [&] {
        const folio::version_vector before = client(r).doc().version();
        const auto status = static_cast<int>(client(r).on_push(view(u, un), version, view(inc, in)));
        return status | (client(r).doc().version() != before ? 0x10 : 0);
      });
    });
  });
}

EMSCRIPTEN_KEEPALIVE void fw_on_refused(replica* r) { client(r).on_refused(); }

/// Parts: text [utf8]; array [items...]; map [key, value, ...] by key; xml [markup].
EMSCRIPTEN_KEEPALIVE int fw_value(replica* r) {
  return guarded([&] {
    const folio::document& d = client(r).doc();
    switch (d.type()) {
      case folio::record_type::text: parts.push_back(d.text()); break;
      case folio::record_type::array: parts = d.array(); break;
      case folio::record_type::map:
        for (auto& [k, v] : d.map()) parts.push_back(k), parts.push_back(v);
        break;
      case folio::record_type::xml: parts.push_back(d.xml()); break;
    }
    return 0;
  });
}

/// Text and array records: the number of code points or items.
EMSCRIPTEN_KEEPALIVE int fw_length(replica* r) {
  return guarded([&] {
    folio::document& d = client(r).doc();
    return static_cast<int>(d.type() == folio::record_type::text ? d.as_text().size() : d.as_array().size());
  });
}

/// Replace-by-value: text and xml take UTF-8, array a packed list of items, map a packed list of
/// key, value, key, value... Answers the unit operations made (0: the value was equal).
EMSCRIPTEN_KEEPALIVE int fw_replace(replica* r, const char* p, std::size_t n) {
  return guarded([&] {
    folio::document& d = client(r).doc();
    switch (d.type()) {
      case folio::record_type::text:
        return tracked(r, [&] { return count(d.replace_text(view(p, n))); });
      case folio::record_type::array:
        return count(d.replace_array(unpack(p, n)));
      case folio::record_type::map: {
        std::vector<std::string> kv = unpack(p, n);
        if (kv.size() % 2) throw folio::error(folio::error_code::value, "a map's packed list holds a key without a value");
        std::map<std::string, std::string> entries;
        for (std::size_t i = 0; i < kv.size(); i += 2) entries[std::move(kv[i])] = std::move(kv[i + 1]);
        return count(d.replace_map(entries));
      }
      case folio::record_type::xml:
        return tracked_xml(r, [&] {
          auto [parsed, change] = d.replace_xml(view(p, n));
          if (!parsed) return fail(parsed.description());
          return count(change);
        });
    }
    return 0;
  });
}

/// Text: inserts UTF-8 before code point `pos`. Array: inserts the packed items before `pos`.
EMSCRIPTEN_KEEPALIVE int fw_insert(replica* r, std::size_t pos, const char* p, std::size_t n) {
  return guarded([&] {
    folio::document& d = client(r).doc();
    if (d.type() == folio::record_type::text) return count(d.as_text().insert_utf8(pos, view(p, n)));
    return count(d.as_array().insert(pos, unpack(p, n)));
  });
}

/// Text and array: removes `n` code points or items from `pos`.
EMSCRIPTEN_KEEPALIVE int fw_erase(replica* r, std::size_t pos, std::size_t n) {
  return guarded([&] {
    folio::document& d = client(r).doc();
    if (d.type() == folio::record_type::text) return count(d.as_text().erase(pos, n));
    return count(d.as_array().erase(pos, n));
  });
}

/// Map: sets or removes one key.
EMSCRIPTEN_KEEPALIVE int fw_set(replica* r, const char* k, std::size_t kn, const char* v, std::size_t vn) {
  return guarded([&] { return count(client(r).doc().set(std::string(k, kn), std::string(v, vn))); });
}
EMSCRIPTEN_KEEPALIVE int fw_remove(replica* r, const char* k, std::size_t kn) {
  return guarded([&] { return count(client(r).doc().remove(std::string(k, kn))); });
}

// ---- anchors and xml positions (docs/CLIENT-JS.md, Replica) ------------------------------------

/// Text and array: part 0, the anchor at `pos`: "r.s" of the item there, "end" at the length.
EMSCRIPTEN_KEEPALIVE int fw_anchor_at(replica* r, std::size_t pos) {
  return guarded([&] {
    const folio::document& d = client(r).doc();
    const std::size_t n = d.type() == folio::record_type::text ? d.as_text().size() : d.as_array().size();
    if (pos > n) throw folio::error(folio::error_code::range, "position " + std::to_string(pos) + " past the end (" + std::to_string(n) + ")");
    parts.push_back(pos == n ? std::string("end") : id_string(d.type() == folio::record_type::text ? d.as_text().id_at(pos) : d.as_array().id_at(pos)));
    return 0;
  });
}

/// Text and array: numbers (found, index) of anchor `a`: its item's index, or where it was if
/// removed; found 0 for an item this replica does not hold.
EMSCRIPTEN_KEEPALIVE int fw_index_of(replica* r, const char* a, std::size_t an) {
  return guarded([&] {
    const folio::document& d = client(r).doc();
    const bool text = d.type() == folio::record_type::text;
    const std::size_t n = text ? d.as_text().size() : d.as_array().size();
    const std::string_view anchor = view(a, an);
    std::optional<std::size_t> at = n;
    if (anchor != "end") at = text ? d.as_text().index_of(parse_id(anchor)) : d.as_array().index_of(parse_id(anchor));
    nums.push_back(at ? 1 : 0), nums.push_back(static_cast<std::uint32_t>(at.value_or(0)));
    return 0;
  });
}

/// Xml: part 0, the anchor at `offset` of the node at the packed path.
EMSCRIPTEN_KEEPALIVE int fw_xml_anchor_at(replica* r, const char* p, std::size_t n, std::size_t offset) {
  return guarded([&] {
    const folio::xml_anchor a = client(r).doc().xml_anchor_at(read_path(p, n), offset);
    parts.push_back(a.end ? "end:" + id_string(a.item) : id_string(a.item));
    return 0;
  });
}

/// Xml: numbers (found, offset, path...) of anchor `a` now; found 0 when it is not visible or unknown.
EMSCRIPTEN_KEEPALIVE int fw_xml_resolve(replica* r, const char* a, std::size_t an) {
  return guarded([&] {
    const std::optional<folio::xml_position> at = client(r).doc().xml_resolve(parse_xml_anchor(view(a, an)));
    nums.push_back(at ? 1 : 0), nums.push_back(at ? static_cast<std::uint32_t>(at->offset) : 0);
    if (at) put_path(at->path);
    return 0;
  });
}

/// Xml: makes the live children [from, to) of the node at the packed path equal to the markup's
/// nodes (document::replace_xml_range). Answers the unit operations made.
EMSCRIPTEN_KEEPALIVE int fw_xml_replace(replica* r, const char* p, std::size_t n, std::size_t from, std::size_t to, const char* m, std::size_t mn) {
  return guarded([&] {
    auto [parsed, change] = client(r).doc().replace_xml_range(read_path(p, n), from, to, view(m, mn));
    if (!parsed) return fail("[folio.value] " + parsed.description());
    return count(change);
  });
}

/// Xml: part 0, the ids of the live children of the node at the packed path, each followed by a
/// newline (one part, not one per id: JavaScript decodes it once, and a list of thousands of children
/// costs one decode instead of thousands).
EMSCRIPTEN_KEEPALIVE int fw_xml_child_ids(replica* r, const char* p, std::size_t n) {
  return guarded([&] {
    std::string joined;
    for (const folio::op_id& id : client(r).doc().xml_child_ids(read_path(p, n))) joined += id_string(id), joined += '\n';
    parts.push_back(std::move(joined));
    return 0;
  });
}

/// Xml: part 0, the markup of the node at the packed path (not empty).
EMSCRIPTEN_KEEPALIVE int fw_xml_markup(replica* r, const char* p, std::size_t n) {
  return guarded([&] {
    parts.push_back(client(r).doc().xml_markup(read_path(p, n)));
    return 0;
  });
}

/// Xml: numbers (found, path...) of the live node made by id "r.s" ("root": the fragment).
EMSCRIPTEN_KEEPALIVE int fw_xml_path_of(replica* r, const char* a, std::size_t an) {
  return guarded([&] {
    const std::string_view s = view(a, an);
    const std::optional<std::vector<std::size_t>> at = client(r).doc().xml_path_of(s == "root" ? folio::document_start : parse_id(s));
    nums.push_back(at ? 1 : 0);
    if (at) put_path(*at);
    return 0;
  });
}

// ---- replica to replica, without a server (tests, peer-to-peer transports) ----------------------

/// Parts: the replica's version vector (encoded).
EMSCRIPTEN_KEEPALIVE int fw_version(replica* r) {
  return guarded([&] {
    parts.push_back(client(r).doc().version().encode());
    return 0;
  });
}

/// Parts: a batch of what a replica at the encoded version `v` lacks.
EMSCRIPTEN_KEEPALIVE int fw_encode_since(replica* r, const char* v, std::size_t vn) {
  return guarded([&] {
    bool ok = false;
    const folio::version_vector since = read_version(v, vn, ok);
    if (!ok) return fail("not a version vector");
    parts.push_back(client(r).doc().encode_since(since));
    return 0;
  });
}

/// Integrates a batch from a peer: the unit operations it newly integrated, or -1 with why it was
/// refused (nothing changed). Numbers after the hunks (tracking): none; pending is fw_pending.
EMSCRIPTEN_KEEPALIVE int fw_apply(replica* r, const char* p, std::size_t n) {
  return guarded([&] {
    return tracked_xml(r, [&] {
      return tracked(r, [&] {
        const folio::apply_result res = client(r).doc().apply(view(p, n));
        return res ? static_cast<int>(res.applied) : fail(res.message);
      });
    });
  });
}

/// Unit operations held for missing dependencies.
EMSCRIPTEN_KEEPALIVE int fw_pending(replica* r) { return static_cast<int>(client(r).doc().pending()); }

/// Parts: the whole document (its encoding, docs/FORMAT.md).
EMSCRIPTEN_KEEPALIVE int fw_encode(replica* r) {
  return guarded([&] {
    parts.push_back(client(r).doc().encode());
    return 0;
  });
}

}  // extern "C"
