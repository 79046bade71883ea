// folio-admin: API keys (tenants) and tokens, against the service's database (DESIGN.md §3).
//
//   folio-admin --db var/folio.db create-key NAME
//   folio-admin --db var/folio.db create-token KEY_ID SUBJECT [--read-only] [--expires 2026-12-31T00:00:00.000Z]
//   folio-admin --db var/folio.db list
//   folio-admin --db var/folio.db revoke-key KEY_ID | revoke-token TOKEN_ID
// A created key or token is printed once, on stdout; only its salted hash is stored.
#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "auth.hpp"
#include "service.hpp"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: folio-admin [--db PATH] create-key NAME\n"
               "       folio-admin [--db PATH] create-token KEY_ID SUBJECT [--read-only] [--expires ISO8601]\n"
               "       folio-admin [--db PATH] list\n"
               "       folio-admin [--db PATH] revoke-key KEY_ID | revoke-token TOKEN_ID\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string db_path = "var/folio.db";
  if (args.size() >= 2 && args[0] == "--db") db_path = args[1], args.erase(args.begin(), args.begin() + 2);
  if (args.empty()) return usage();
  try {
    folio::service::database db(db_path);
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
      std::printf("%s\n", folio::service::create_token(db, args[1], args[2], read_only, expires, now).c_str());
    } else if (cmd == "list" && args.size() == 1) {
      for (const auto& c : folio::service::list_credentials(db))
        std::printf("%-5s %s  %s%s%s%s created %s%s\n", c.kind.c_str(), c.id.c_str(), c.name.c_str(), c.kind == "token" ? (" key " + c.key_id).c_str() : "",
                    c.read_only ? " read-only" : "", c.expires_at ? (" expires " + *c.expires_at).c_str() : "", c.created_at.c_str(),
                    c.revoked_at ? (" REVOKED " + *c.revoked_at).c_str() : "");
    } else if ((cmd == "revoke-key" || cmd == "revoke-token") && args.size() == 2) {
      const bool done = cmd == "revoke-key" ? folio::service::revoke_key(db, args[1], now) : folio::service::revoke_token(db, args[1], now);
      if (!done) return std::fprintf(stderr, "folio-admin: no live %s with id %s\n", cmd.c_str() + 7, args[1].c_str()), 1;
    } else {
      return usage();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "folio-admin: %s\n", e.what());
    return 1;
  }
  return 0;
}
