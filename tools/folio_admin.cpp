// folio-admin: API keys (tenants) and tokens, against the service's database (docs/API.md, "Tenancy and credentials").
// --db takes what folio-fcgi's does: a SQLite file, or a PostgreSQL URI / conninfo (docs/OPERATIONS.md).
//
//   folio-admin --db var/folio.db create-key NAME
//   folio-admin --db var/folio.db create-token KEY_ID SUBJECT [--read-only] [--expires 2026-12-31T00:00:00.000Z]
//   folio-admin --db var/folio.db list
//   folio-admin --db var/folio.db revoke-key KEY_ID | revoke-token TOKEN_ID
//   folio-admin --db var/folio.db check
// A created key or token is printed once, on stdout; only its salted hash is stored. KEY_ID and
// TOKEN_ID are the ids `list` shows; the whole credential, or its "fk_<id>" / "ft_<id>" part, works too
// (revoking a leaked token by pasting it). `--expires` takes the API's timestamp form. `check` verifies
// a database (after a crash, a restore, a full disk): SQLite's integrity check (database::integrity_problems;
// none on PostgreSQL), every CRDT record's
// snapshot and log decode and pass the engine's check_invariants(), its map and array values are JSON, every
// annotation and comment body parses, every comment has its annotation, an annotation's row holds its comments
// as they are (or none).
// It changes nothing; exit status 1 when anything is wrong.
#include <cstdint>
#include <cstdio>
#include <exception>
#include <folio/document.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "platform/auth.hpp"
#include "wire/crdt_values.hpp"
#include "platform/fields.hpp"
#include "wire/json.hpp"
#include "platform/clock.hpp"
#include "responder.hpp"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: folio-admin [--db PATH|postgresql://...] create-key NAME\n"
               "       folio-admin [--db PATH|postgresql://...] create-token KEY_ID SUBJECT [--read-only] [--expires 2027-01-01T00:00:00.000Z]\n"
               "       folio-admin [--db PATH|postgresql://...] list\n"
               "       folio-admin [--db PATH|postgresql://...] revoke-key KEY_ID | revoke-token TOKEN_ID\n"
               "       folio-admin [--db PATH|postgresql://...] check\n");
  return 2;
}

/// The id in a KEY_ID / TOKEN_ID argument: a bare id, "<prefix><id>", or a whole credential.
std::string id_argument(const std::string& arg, std::string_view prefix) {
  if (std::string id = folio::service::credential_id(arg, prefix); !id.empty()) return id;
  return arg.starts_with(prefix) ? arg.substr(prefix.size()) : arg;
}

/// `check`: prints what it verified; returns the number of problems (each printed on stderr).
int check(folio::service::database& db) {
  namespace svc = folio::service;
  int problems = 0;
  auto problem = [&](const std::string& what) {
    std::fprintf(stderr, "folio-admin check: %s\n", what.c_str());
    ++problems;
  };
  return db.read([&] {
    for (const std::string& line : db.integrity_problems()) problem("integrity: " + line);
    std::size_t records = 0, annotations = 0, comments = 0;
    svc::query q = db.sql("SELECT tenant, org, doc, editor FROM crdt_records ORDER BY tenant, org, doc, editor");
    while (q.step()) {
      const svc::record_key k{q.text(0), q.text(1), q.text(2), q.text(3)};
      const std::string name = "record " + k.tenant + " / " + k.org + " / " + k.doc + " / " + k.editor;
      ++records;
      std::optional<svc::record_row> row;
      try {
        row = svc::load_record(db, k);
      } catch (const svc::store_error& e) {
        problem(name + ": " + e.what());
        continue;
      }
      if (row->incarnation == 0) {  // the server could not edit it: replica 0 is no replica
        problem(name + ": incarnation 0");
        continue;
      }
      std::optional<folio::document> d;
      if (const folio::decode_result r = folio::document::decode(row->snapshot, row->incarnation, d); !r) {
        problem(name + ": snapshot does not decode: " + r.description());
        continue;
      }
      const std::vector<svc::logged_change> log = svc::load_log(db, k);
      if (static_cast<std::int64_t>(log.size()) != row->log_len) problem(name + ": log has " + std::to_string(log.size()) + " batches, row says " + std::to_string(row->log_len));
      const std::int64_t log_bytes = svc::folded_of(log).bytes;
      if (log_bytes != row->log_bytes) problem(name + ": log has " + std::to_string(log_bytes) + " bytes, row says " + std::to_string(row->log_bytes));
      if (static_cast<std::int64_t>(row->snapshot.size()) != row->snapshot_bytes)
        problem(name + ": snapshot has " + std::to_string(row->snapshot.size()) + " bytes, row says " + std::to_string(row->snapshot_bytes));
      if (!log.empty() && log.back().revision > row->revision)  // a change is logged under the revision it made (or, before schema 7, below it)
        problem(name + ": a change is logged under revision " + std::to_string(log.back().revision) + ", past the record's " + std::to_string(row->revision));
      for (const svc::logged_change& c : log)
        if (const folio::apply_result r = d->apply(c.batch); !r || r.pending) problem(name + ": a logged change does not apply: " + r.message);
      try {
        d->check_invariants();
      } catch (const std::exception& e) {
        problem(name + ": " + e.what());
      }
      std::vector<std::string> values;  // what `get` writes into its answer as it is
      if (d->type() == folio::record_type::array) values = d->array();
      if (d->type() == folio::record_type::map)
        for (auto& [key, value] : d->map()) values.push_back(std::move(value));
      for (const std::string& value : values)
        if (const std::string why = svc::json_value_rule(d->type(), value); !why.empty()) problem(name + ": " + why);
    }
    svc::query orphans = db.sql("SELECT tenant, org, doc, editor FROM crdt_snapshots s WHERE NOT EXISTS (SELECT 1 FROM crdt_records r "
                                "WHERE r.tenant = s.tenant AND r.org = s.org AND r.doc = s.doc AND r.editor = s.editor) ORDER BY tenant, org, doc, editor");
    while (orphans.step())
      problem("snapshot " + orphans.text(0) + " / " + orphans.text(1) + " / " + orphans.text(2) + " / " + orphans.text(3) + ": no record has it");
    svc::query stray = db.sql("SELECT c.aid, c.comment_id FROM annotation_comments c WHERE NOT EXISTS (SELECT 1 FROM annotations a WHERE a.aid = c.aid) "
                              "ORDER BY c.aid, c.position");
    while (stray.step())
      problem("comment " + std::to_string(stray.integer(1)) + " of annotation key " + std::to_string(stray.integer(0)) + ": no annotation has it");
    {
      // An annotation's row holds its comments (schema 9; annotations/store.hpp) exactly as their table has them, or not at all.
      svc::query held = db.sql("SELECT a.aid, a.tenant, a.org, a.doc, a.annotation_id, a.comments, c.body FROM annotations a "
                               "LEFT JOIN annotation_comments c ON c.aid = a.aid WHERE a.comments IS NOT NULL ORDER BY a.aid, c.position");
      held.one_row_at_a_time();
      std::optional<std::int64_t> aid;
      std::string name, holds, joined;
      auto compare = [&] {
        if (aid && holds != joined) problem("annotation " + name + ": the comments its row holds are not its comments");
      };
      while (held.step()) {
        if (!aid || held.integer(0) != *aid) {
          compare();
          aid = held.integer(0);
          name = held.text(1) + " / " + held.text(2) + " / " + held.text(3) + " / " + held.text(4);
          holds = held.text(5);
          joined.clear();
        }
        if (held.is_null(6)) continue;
        if (!joined.empty()) joined += ',';
        joined += held.text_view(6);
      }
      compare();
    }
    for (const bool is_comment : {false, true}) {
      svc::query bodies = db.prepare(is_comment ? "SELECT a.tenant, a.org, a.doc, a.annotation_id, c.body, c.comment_id FROM annotation_comments c "
                                                  "JOIN annotations a ON a.aid = c.aid"
                                                : "SELECT tenant, org, doc, annotation_id, body FROM annotations");
      while (bodies.step()) {
        ++(is_comment ? comments : annotations);
        const std::string name = (is_comment ? "comment " : "annotation ") + bodies.text(0) + " / " + bodies.text(1) + " / " + bodies.text(2) +
                                 " / " + bodies.text(3) + (is_comment ? " / " + std::to_string(bodies.integer(5)) : "");
        try {
          if (!svc::parse_json(bodies.text(4)).IsObject()) problem(name + ": body is not a JSON object");
        } catch (const svc::api_error& e) {
          problem(name + ": body does not parse: " + e.message);
        }
      }
    }
    std::printf("%s: %zu records decode and check, %zu annotations and %zu comments parse, %d problems\n", problems ? "FAILED" : "ok", records,
                annotations, comments, problems);
    return problems;
  });
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string db_path = "var/folio.db";
  if (args.size() >= 2 && args[0] == "--db") db_path = args[1], args.erase(args.begin(), args.begin() + 2);
  if (args.empty()) return usage();
  try {
    folio::service::database db(db_path, folio::service::responder::tables());
    const std::string now = folio::service::now_iso();
    const std::string& cmd = args[0];
    if (cmd == "create-key" && args.size() == 2) {
      std::printf("%s\n", folio::service::create_key(db, args[1], now).c_str());
    } else if (cmd == "create-token" && args.size() >= 3) {
      bool read_only = false;
      std::optional<std::string> expires;
      for (std::size_t i = 3; i < args.size(); ++i) {
        if (args[i] == "--read-only") read_only = true;
        else if (args[i] == "--expires" && i + 1 < args.size()) expires = args[++i];
        else return usage();
      }
      // Expiry is compared as text against the time of each request: anything but this one form could
      // compare after every timestamp and never expire.
      if (expires && !folio::service::is_timestamp(*expires))
        return std::fprintf(stderr, "folio-admin: --expires must be a UTC timestamp like 2027-01-31T00:00:00.000Z, not \"%s\"\n", expires->c_str()), 2;
      if (expires && *expires <= now) std::fprintf(stderr, "folio-admin: warning: --expires %s has passed; the token is created expired\n", expires->c_str());
      std::printf("%s\n", folio::service::create_token(db, id_argument(args[1], "fk_"), args[2], read_only, expires, now).c_str());
    } else if (cmd == "list" && args.size() == 1) {
      for (const auto& c : folio::service::list_credentials(db))
        std::printf("%-5s %s  %s%s%s%s created %s%s\n", c.kind.c_str(), c.id.c_str(), c.name.c_str(), c.kind == "token" ? (" key " + c.key_id).c_str() : "",
                    c.read_only ? " read-only" : "", c.expires_at ? (" expires " + *c.expires_at).c_str() : "", c.created_at.c_str(),
                    c.revoked_at ? (" REVOKED " + *c.revoked_at).c_str() : "");
    } else if (cmd == "check" && args.size() == 1) {
      return check(db) ? 1 : 0;
    } else if ((cmd == "revoke-key" || cmd == "revoke-token") && args.size() == 2) {
      const bool key = cmd == "revoke-key";
      const std::string id = id_argument(args[1], key ? "fk_" : "ft_");
      const bool done = key ? folio::service::revoke_key(db, id, now) : folio::service::revoke_token(db, id, now);
      if (!done) return std::fprintf(stderr, "folio-admin: no live %s with id %s\n", cmd.c_str() + 7, id.c_str()), 1;
    } else {
      return usage();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "folio-admin: %s\n", e.what());
    return 1;
  }
  return 0;
}
