// folio-admin: API keys (tenants) and tokens, against the service's database (docs/API.md, "Tenancy and credentials").
// --db takes what folio-fcgi's does: a SQLite file, or a PostgreSQL URI / conninfo (docs/OPERATIONS.md).
//
//   folio-admin --db var/folio.db create-key NAME
//   folio-admin --db var/folio.db create-token KEY_ID SUBJECT [--read-only] [--expires 2026-12-31T00:00:00.000Z]
//   folio-admin --db var/folio.db list
//   folio-admin --db var/folio.db revoke-key KEY_ID | revoke-token TOKEN_ID
//   folio-admin --db var/folio.db check
//   folio-admin --db var/folio.db export TENANT ORG DOC EDITOR
//   folio-admin --db var/folio.db repair TENANT ORG DOC EDITOR
//   folio-admin --db var/folio.db webhooks endpoints [--tenant KEY_ID]
//   folio-admin --db var/folio.db webhooks deliveries --endpoint ID [--tenant KEY_ID] [--message MSG_ID] [--limit N]
//   folio-admin --db var/folio.db webhooks replay --endpoint ID [--tenant KEY_ID] (--message MSG_ID | --failed-since TIME)
// A created key or token is printed once, on stdout; only its salted hash is stored. KEY_ID and
// TOKEN_ID are the ids `list` shows; the whole credential, or its "fk_<id>" / "ft_<id>" part, works too
// (revoking a leaked token by pasting it). `--expires` takes the API's timestamp form. `check` verifies
// a database (after a crash, a restore, a full disk): SQLite's integrity check (database::integrity_problems;
// none on PostgreSQL), every CRDT record's
// snapshot and log decode and pass the engine's check_invariants(), it holds no more operations than a snapshot
// can be read back with (folio::document::max_units), its map and array values are JSON, every
// annotation and comment body parses, every comment has its annotation, an annotation's row holds its comments
// as they are (or none).
// It changes nothing; exit status 1 when anything is wrong. `export` prints a record's value (the
// `data` crdt/get answers) on stdout, `repair` gives a record a fresh history holding its value: both
// read the record even when its history is past what the service reads back (document::max_units;
// docs/OPERATIONS.md, "Records past the operation limit"). TENANT is the tenant as `check` names it.
// `repair` makes the record a new incarnation (clients holding its state are told to sync again, as
// after a delete and add) at the next revision, in one write transaction.
// `webhooks` reads and replays what the webhooks' API does (docs/API.md, "Webhooks"; webhooks/endpoints.hpp):
// `endpoints` lists every tenant's endpoints (or one tenant's), never their secrets; `deliveries` an
// endpoint's deliveries by state and its newest attempts (--limit, default 50; --message: one message's);
// `replay` queues one message again, or every delivery that failed since TIME, as deliveries/replay
// does, up to --queue-max deliveries pending per endpoint (default 10,000, as folio-fcgi's
// --webhook-queue-max: give the value it runs with). An endpoint is found by its id alone unless two
// tenants hold it (then --tenant, the key id `list` shows).
#include <cstdint>
#include <cstdio>
#include <exception>
#include <folio/document.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "crdt/record_session.hpp"
#include "platform/auth.hpp"
#include "wire/crdt_values.hpp"
#include "platform/fields.hpp"
#include "wire/json.hpp"
#include "platform/clock.hpp"
#include "responder.hpp"
#include "webhooks/endpoints.hpp"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: folio-admin [--db PATH|postgresql://...] create-key NAME\n"
               "       folio-admin [--db PATH|postgresql://...] create-token KEY_ID SUBJECT [--read-only] [--expires 2027-01-01T00:00:00.000Z]\n"
               "       folio-admin [--db PATH|postgresql://...] list\n"
               "       folio-admin [--db PATH|postgresql://...] revoke-key KEY_ID | revoke-token TOKEN_ID\n"
               "       folio-admin [--db PATH|postgresql://...] check\n"
               "       folio-admin [--db PATH|postgresql://...] export|repair TENANT ORG DOC EDITOR\n"
               "       folio-admin [--db PATH|postgresql://...] webhooks endpoints [--tenant KEY_ID]\n"
               "       folio-admin [--db PATH|postgresql://...] webhooks deliveries --endpoint ID [--tenant KEY_ID] [--message MSG_ID] [--limit N]\n"
               "       folio-admin [--db PATH|postgresql://...] webhooks replay --endpoint ID [--tenant KEY_ID] (--message MSG_ID | --failed-since TIME) [--queue-max N]\n");
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
        problem(name + ": snapshot does not decode: " + r.description() +
                (r.status == folio::decode_status::too_large ? "; `folio-admin repair` gives it a fresh history holding its value" : ""));
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
      if (d->units() > folio::document::max_units(d->type()))  // its next snapshot would not decode
        problem(name + ": holds " + std::to_string(d->units()) + " operations, past the " + std::to_string(folio::document::max_units(d->type())) +
                " its snapshot can be read back with; `folio-admin repair` gives it a fresh history holding its value");
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

/// The whole stored record as a document, read with a limit past any a record can reach (a repair
/// reads records written past max_units). Throws std::runtime_error when there is no record, or it
/// does not decode or apply.
folio::document read_whole(folio::service::database& db, const folio::service::record_key& k, folio::service::record_row& row) {
  namespace svc = folio::service;
  std::optional<svc::stored_record> stored = svc::read_stored(db, k);
  if (!stored) throw std::runtime_error("no record " + k.tenant + " / " + k.org + " / " + k.doc + " / " + k.editor);
  row = stored->row;
  std::optional<folio::document> d;
  if (const folio::decode_result r = folio::document::decode(row.snapshot, row.incarnation, d, std::size_t(folio::max_counter) * 4); !r)
    throw std::runtime_error("snapshot does not decode: " + r.description());
  for (const svc::logged_change& c : stored->log)
    if (const folio::apply_result r = d->apply(c.batch); !r || r.pending) throw std::runtime_error("a logged change does not apply: " + r.message);
  return std::move(*d);
}

/// `repair`: the record's value as a fresh document of a new incarnation (its history dropped), stored
/// in place of the record at the next revision. Returns what it did, for stdout.
std::string repair(folio::service::database& db, const folio::service::record_key& k) {
  namespace svc = folio::service;
  svc::record_row row;
  const folio::document old = read_whole(db, k, row);
  const std::uint64_t incarnation = svc::new_incarnation();
  folio::document fresh(old.type(), incarnation, old.content_key());
  switch (old.type()) {
    case folio::record_type::text: fresh.replace_text(old.text()); break;
    case folio::record_type::array: fresh.replace_array(old.array()); break;
    case folio::record_type::map: fresh.replace_map(old.map()); break;
    case folio::record_type::xml: fresh.replace_xml(old.xml_fragment()); break;
  }
  if (fresh.units() > folio::document::max_units(fresh.type()))
    throw std::runtime_error("the record's value alone holds " + std::to_string(fresh.units()) + " operations, past the " +
                             std::to_string(folio::document::max_units(fresh.type())) + " a record can hold: export it instead");
  svc::record_row now = row;
  now.snapshot = fresh.encode(folio::kept_values::all);
  now.incarnation = incarnation;
  now.last_update = svc::now_iso();
  now.last_updated_by = "folio-admin repair";
  db.write(k.cache_key(), [&] {
    const std::optional<svc::record_row> current = svc::load_record(db, k, false);
    if (!current || current->revision != row.revision || current->incarnation != row.incarnation)
      throw std::runtime_error("the record changed while it was being repaired; run repair again");
    now.revision = current->revision + 1;
    svc::delete_record(db, k);
    svc::insert_record(db, k, now);
  });
  return "repaired: " + std::to_string(old.units()) + " operations of history replaced by " + std::to_string(fresh.units()) + " holding the same value, revision " +
         std::to_string(now.revision) + ", incarnation " + std::to_string(incarnation);
}

/// An endpoint's filter as a line shows it: "all", or its members comma-separated.
std::string filter_text(const std::optional<std::string>& json) {
  if (!json) return "all";
  const rapidjson::Document d = folio::service::parse_json(*json);
  std::string out;
  for (const auto& v : d.GetArray()) out += (out.empty() ? "" : ",") + std::string(v.GetString(), v.GetStringLength());
  return out;
}

/// `folio-admin webhooks ...` (args from "webhooks" on); returns the exit status.
int webhooks(folio::service::database& db, const std::vector<std::string>& args) {
  namespace svc = folio::service;
  std::optional<std::string> tenant, endpoint, message, failed_since;
  std::int64_t limit = 50;
  std::optional<std::size_t> queue_max;
  const auto digits = [](const std::string& v, std::size_t most) { return !v.empty() && v.size() <= most && v.find_first_not_of("0123456789") == std::string::npos; };
  for (std::size_t i = 2; i < args.size(); i += 2) {
    if (i + 1 >= args.size()) return usage();
    const std::string& v = args[i + 1];
    if (args[i] == "--tenant") tenant = id_argument(v, "fk_");
    else if (args[i] == "--endpoint") endpoint = v;
    else if (args[i] == "--message") message = v;
    else if (args[i] == "--failed-since") failed_since = v;
    else if (args[i] == "--limit" && digits(v, 6)) limit = std::stoll(v);
    else if (args[i] == "--queue-max" && digits(v, 9) && std::stoull(v) > 0) queue_max = std::stoull(v);
    else return usage();
  }
  const std::string sub = args.size() > 1 ? args[1] : "";
  if (queue_max && sub != "replay") return usage();
  if (sub == "endpoints" && !endpoint && !message && !failed_since) {
    const std::int64_t now = svc::now_unix_ms();
    for (const auto& [owner, e] : svc::list_endpoints(db, tenant)) {
      std::string line = e.id + "  tenant " + owner + "  " + (e.enabled ? "enabled" : "DISABLED") + "  " + e.url + "  events " + filter_text(e.events) +
                         "  organizations " + filter_text(e.org_ids) + "  queued " + std::to_string(e.queued) + "  dropped " + std::to_string(e.dropped) +
                         "  created " + svc::iso_time(e.created_at);
      if (e.failing_since) line += "  failing since " + svc::iso_time(*e.failing_since);
      if (svc::signing_secrets(e, now).size() > 1) line += "  old secret signs until " + svc::iso_time(*e.old_secret_until);
      if (e.disabled_reason) line += "  (" + *e.disabled_reason + ")";
      if (e.description) line += "  \"" + *e.description + "\"";
      std::printf("%s\n", line.c_str());
    }
    return 0;
  }
  if ((sub != "deliveries" && sub != "replay") || !endpoint) return usage();
  if (!tenant) tenant = svc::tenant_of_endpoint(db, *endpoint);
  if (!tenant || !svc::find_endpoint(db, *tenant, *endpoint)) return std::fprintf(stderr, "folio-admin: no webhook endpoint %s\n", endpoint->c_str()), 1;
  if (sub == "deliveries" && !failed_since && limit > 0) {
    std::string states;
    for (const auto& [state, n] : svc::delivery_states(db, *tenant, *endpoint)) states += "  " + state + " " + std::to_string(n);
    std::printf("%s  tenant %s  deliveries:%s\n", endpoint->c_str(), tenant->c_str(), states.empty() ? " none" : states.c_str());
    for (const svc::delivery_attempt& a : svc::list_attempts(db, *tenant, *endpoint, message, std::nullopt, static_cast<std::size_t>(limit))) {
      std::string line = svc::iso_time(a.attempted_at) + "  " + a.message_id + "  " + a.event_type.value_or("-") + "  attempt " + std::to_string(a.attempt) +
                         "  " + (a.http_status ? "HTTP " + std::to_string(*a.http_status) : std::string("no answer")) + "  " + std::to_string(a.latency_ms) + " ms";
      if (a.error) line += "  " + *a.error;
      std::printf("%s\n", line.c_str());
    }
    return 0;
  }
  if (sub != "replay" || message.has_value() == failed_since.has_value()) return usage();
  const std::optional<std::int64_t> since = failed_since ? svc::timestamp_ms(*failed_since) : std::nullopt;
  if (failed_since && !since)
    return std::fprintf(stderr, "folio-admin: --failed-since must be a UTC timestamp like 2027-01-31T00:00:00.000Z, not \"%s\"\n", failed_since->c_str()), 2;
  svc::webhook_config cfg;
  if (queue_max) cfg.queued_per_endpoint = *queue_max;
  const std::int64_t now = svc::now_unix_ms();
  try {
    const std::size_t n = message ? svc::replay_message(db, cfg, *tenant, *endpoint, *message, now)
                                  : svc::replay_failed_since(db, cfg, *tenant, *endpoint, *since, now);
    std::printf("replayed %zu deliver%s to %s\n", n, n == 1 ? "y" : "ies", endpoint->c_str());
  } catch (const svc::api_error& e) {
    return std::fprintf(stderr, "folio-admin: %s\n", e.message.c_str()), 1;
  }
  return 0;
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
    } else if ((cmd == "export" || cmd == "repair") && args.size() == 5) {
      const folio::service::record_key k{args[1], args[2], args[3], args[4]};
      if (cmd == "repair") {
        std::printf("%s\n", repair(db, k).c_str());
      } else {
        folio::service::record_row row;
        const folio::document d = read_whole(db, k, row);
        std::printf("%s\n", folio::service::value_json(d).c_str());
      }
    } else if (cmd == "webhooks") {
      return webhooks(db, args);
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
