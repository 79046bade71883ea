// folio/sync.hpp — the client side of docs/API.md, crdt/sync and crdt/subscribe: a replica that keeps a local copy of one record in
// step with a server, over any transport.
//
//   folio::sync_client c(folio::record_type::text, folio::random_replica_id());
//   c.doc().replace_text("Hello");                 // local edits, online or offline
//   keep(c.save());                                // persist BEFORE sending (below)
//   folio::sync_request q = c.request();           // -> POST /v2/crdt/sync {version, update, incarnation}
//   c.on_answer(answer_update, answer_version, answer_incarnation, answer_record_version);  // <- the ops it lacked, the server's version
//   c.on_push(pushed_update, pushed_version, pushed_incarnation);    // <- each change the server publishes
//   if (c.needs_sync()) { /* send c.request() again */ }
//
// What the server lacks is computed, not remembered: everything beyond the last server version the
// client learned (from an answer or a pushed change), so a lost answer or a refused push is simply
// sent again (the server skips duplicates). A pushed change carries the server's version after it; a
// client that does not hold all of that version once the change is applied has missed something — a
// dropped message, a reconnect — and `needs_sync()` says so. Ops that arrive before their dependencies
// are held as pending by the document until the sync brings what they need.
//
// The contract every client keeps (docs/API.md, "The client contract"):
//  * Persist before sending. An op id names one op forever: the server refuses an op whose id it
//    knows with other content. A client that sent an op and lost the answer (a crash, a timeout, the
//    server killed mid-request) must not make another op with that id, so the state holding its
//    unacknowledged ops is saved (save()) before request() goes out, and a restarted client resumes
//    from it and sends them again.
//  * Incarnations. A record deleted and added again is a new record (its incarnation, an opaque
//    string from the server). The client learns it from its first answer, sends it with every
//    request, and a server holding another incarnation refuses (ABORTED): the client's state is of a
//    record that no longer exists and is never merged into the new one. A client that has not synced
//    yet pulls first, from the empty version; a push of another incarnation is `recreated`. Before
//    its first answer a client holds nothing but its own edits (no constructor takes a document;
//    load and on_answer refuse anything else), so only they join the record that answer names.
// Thread-safety: none; one thread at a time per client.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "document.hpp"
#include "version.hpp"

namespace folio {

/// A random replica id for a new client (1 .. 2^63-1: fits a signed 64-bit column). Two replicas must
/// never share an id; 63 random bits make a collision negligible. Allocates nothing.
inline replica_id random_replica_id() {
  std::random_device rd;
  replica_id r = 0;
  while (r == 0) r = ((static_cast<replica_id>(rd()) << 32) | rd()) >> 1;
  return r;
}

/// True if `have` holds every operation `want` holds. O(n + m).
inline bool covers(const version_vector& have, const version_vector& want) noexcept {
  const version_order o = have.compare(want);
  return o == version_order::equal || o == version_order::after;
}

/// What to send: the client's version, an encoded batch of the ops the server may lack (empty when
/// there is nothing to push — the request is then a pure pull), and the record's incarnation the
/// client's state belongs to ("" before the first answer: the request is then a pull from the empty
/// version, since the client cannot yet name the record its ops are for).
struct sync_request {
  version_vector version;
  std::string update;
  std::string incarnation;
};

enum class push_status {
  applied,   ///< integrated; the client holds everything the server had after this change
  gap,       ///< integrated as far as possible, but something is missing: sync
  invalid,   ///< malformed or not for this record; nothing changed; sync
  recreated  ///< of another incarnation: the record was deleted and added again; nothing changed.
             ///< This client's state is of a record that is gone: drop it and start a new client.
};

class sync_client {
 public:
  /// A new, empty replica of a record of `type` (join an existing record by syncing from empty).
  /// Throws "[folio.replica]" for replica 0.
  sync_client(record_type type, replica_id self, std::string content_key = "content") : doc_(type, self, std::move(content_key)) {}

  /// The local copy: read values, make local edits (replace_*, set, as_text()...) at any time.
  document& doc() noexcept { return doc_; }
  const document& doc() const noexcept { return doc_; }

  /// The last server version this client learned. A default-constructed (empty) one before any sync.
  const version_vector& server_version() const noexcept { return server_; }
  /// The incarnation of the record this client's state belongs to; "" before the first answer.
  const std::string& incarnation() const noexcept { return incarnation_; }
  /// The record version (docs/API.md: crdt/get's `version`, a sync answer's `recordVersion`) of the last
  /// answer this client applied: its state holds everything that version names, so a backend may send
  /// it as an update's `baseVersion` for a value computed from this copy without the client's own
  /// edits since. "" before the first answer that carried one, and after load() (not saved: the next
  /// sync answers it again).
  const std::string& record_version() const noexcept { return record_version_; }
  /// True when the client knows it is behind the server, or has local ops the server lacks.
  bool needs_sync() const { return behind_ || !covers(server_, doc_.version()); }

  /// The next sync request. After a refused push (FAILED_PRECONDITION: the server lacks what the
  /// update depends on, e.g. it was restored from a backup) this is a pull; the answer tells the client
  /// the server's real version, and the request after it pushes everything beyond that. Allocates the
  /// update bytes; O(ops to send).
  sync_request request() const {
    if (incarnation_.empty()) return {};
    sync_request q{doc_.version(), {}, incarnation_};
    if (!refused_ && !covers(server_, doc_.version())) q.update = doc_.encode_since(server_);
    return q;
  }

  /// Applies a sync answer: the ops the client lacked, the server's version and the record's
  /// incarnation. A malformed answer, or one of another incarnation than the client's, is `invalid`
  /// and changes nothing. The first answer names the record the client's state joins; a client that
  /// holds other replicas' ops before it (put into doc() by hand: they are of some record, maybe one
  /// deleted since) is `invalid` too, never merged into whichever record answers.
  apply_result on_answer(std::string_view update, const version_vector& server_version, std::string_view incarnation,
                         std::string_view record_version = {}) {
    const auto refuse = [](const char* why) {
      apply_result bad;
      bad.status = apply_status::invalid;
      bad.message = why;
      return bad;
    };
    if (incarnation.empty() || (!incarnation_.empty() && incarnation != incarnation_)) return refuse("answer of another incarnation of the record");
    if (incarnation_.empty() && !only_own_ops(doc_)) return refuse("this client names no incarnation but holds operations of other replicas");
    apply_result r = doc_.apply(update);
    if (!r) return r;
    server_ = server_version;  // assigned, not merged: a server restored from a backup went back
    incarnation_ = incarnation;
    record_version_ = record_version;
    refused_ = false;
    behind_ = !covers(doc_.version(), server_version);
    return r;
  }

  /// The server refused the last push with FAILED_PRECONDITION; the next request pulls first.
  void on_refused() noexcept { refused_ = true, behind_ = true; }

  /// Applies one pushed change: its ops, the server's version after it and the record's incarnation.
  /// Before the first answer the client cannot tell whose change it is: it applies nothing and
  /// reports a gap (sync). A notice (a message without ops and version: the change was too large to
  /// push, or a publish failed) is not for on_push: the client syncs (docs/API.md, live messages).
  push_status on_push(std::string_view update, const version_vector& server_version, std::string_view incarnation) {
    if (incarnation_.empty()) {
      behind_ = true;
      return push_status::gap;
    }
    if (incarnation != incarnation_) return push_status::recreated;
    if (!update.empty() && !doc_.apply(update)) {
      behind_ = true;
      return push_status::invalid;
    }
    server_.merge(server_version);
    if (!covers(doc_.version(), server_version)) {
      behind_ = true;
      return push_status::gap;
    }
    return push_status::applied;
  }

  // ---- keeping a client across runs -------------------------------------------------------------

  /// The client's state: "FoC" 2, varint replica, the incarnation (length + bytes), the server
  /// version, then the whole document — its own ops not yet acknowledged included, which is what
  /// makes saving before sending enough to never reuse an op id. Like every document encoding it
  /// keeps no values of removed items: an unacknowledged insert of an item removed since is sent again
  /// with a placeholder value, with its remove, and the server takes it (nothing can show that value;
  /// docs/INTERNALS.md). Pending ops are not kept (the next sync brings them again). docs/FORMAT.md
  /// has the table.
  std::string save() const {
    std::string out = "FoC";
    out.push_back(2);
    detail::put_varint(out, doc_.replica());
    detail::put_string(out, incarnation_);
    server_.encode(out);
    out += doc_.encode();
    return out;
  }

  /// Restores a saved client; `out` is unchanged on failure. The restored client syncs before trusting
  /// its copy (`needs_sync()` is true). A state of format 1 (before incarnations) is refused: it cannot
  /// say which incarnation of its record it holds, so it could be merged into a record added again.
  /// A state saved before the first answer names none either, but everything in it is the client's
  /// own edits made before it ever synced, which join whichever record that answer names (as a new
  /// client's do); such a state holding anything else is refused. This is the only way to give a
  /// client a document: a constructor taking any document with no incarnation would merge whatever it
  /// holds into the record the first answer names.
  static decode_result load(std::string_view bytes, std::optional<sync_client>& out) {
    detail::byte_reader r(bytes);
    if (bytes.substr(0, 4) == std::string_view("FoC\1", 4))
      return decode_result{decode_status::bad_magic, 3, "client state of format 1, which names no incarnation: start a new client"};
    if (bytes.substr(0, 4) != std::string_view("FoC\2", 4)) return decode_result{decode_status::bad_magic, 0, "client state"};
    r.byte("magic"), r.byte("magic"), r.byte("magic"), r.byte("version");
    const replica_id self = r.varint("client replica");
    std::string incarnation(r.bytes(r.varint("incarnation length", 64), "incarnation"));
    version_vector server;
    if (!r.ok() || !version_vector::read(r, server)) return r.result();
    if (self == 0) return decode_result{decode_status::inconsistent, 4, "client replica 0"};
    std::optional<document> d;
    const std::size_t at = r.offset();
    decode_result dr = document::decode(bytes.substr(at), self, d);
    if (!dr) return dr.offset += at, dr;
    if (incarnation.empty() && (!server.empty() || !only_own_ops(*d)))
      return decode_result{decode_status::inconsistent, at, "client state of no incarnation holds operations of other replicas"};
    sync_client c(std::move(*d), std::move(incarnation));
    c.server_ = std::move(server);
    c.behind_ = true;
    out.emplace(std::move(c));
    return {};
  }

 private:
  sync_client(document d, std::string incarnation) : doc_(std::move(d)), incarnation_(std::move(incarnation)) {}

  /// True if `d` holds no ops but its own replica's, none pending: all a client can hold before its
  /// first answer (a push before it is not applied).
  static bool only_own_ops(const document& d) {
    const std::vector<version_vector::entry>& v = d.version().entries();
    return d.pending() == 0 && (v.empty() || (v.size() == 1 && v[0].replica == d.replica()));
  }

  document doc_;
  version_vector server_;  ///< everything the server is known to hold
  std::string incarnation_;  ///< the record's incarnation this state belongs to ("" until the first answer)
  std::string record_version_;  ///< the last applied answer's recordVersion ("" when none)
  bool behind_ = true;     ///< the client may lack ops the server has (never synced, a gap, a bad push)
  bool refused_ = false;   ///< the last push was refused; pull before pushing again
};

}  // namespace folio
