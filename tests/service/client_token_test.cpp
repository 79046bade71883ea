// Client tokens (service/platform/client_token.hpp): the format, the signature, expiry, the key ring and its
// rotation, and hostile input — every byte of a token changed, every truncation, signed claims that
// are not of the written form — refused without a crash. Then through the server: POST /v2/auth/token's
// fields, and a revoked API key's client tokens.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "wire/base64.hpp"
#include "platform/client_token.hpp"
#include "support.hpp"

namespace {

namespace svc = folio::service;

const std::string secret1(64, 'a'), secret2 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

svc::key_ring ring(const std::string& text) { return svc::key_ring::parse(text); }

svc::client_claims claims() {
  svc::client_claims c;
  c.tenant = "0123456789abcdef", c.org = "org 1", c.doc = "doc/ü+1", c.editor = "body", c.user = "ana", c.write = true;
  c.expires = 2000000000;  // 2033-05-18T03:33:20Z
  return c;
}

constexpr std::int64_t before_expiry = 1999999999999;  // ms: the last millisecond the token is valid

void expect_same(const svc::client_claims& a, const svc::client_claims& b) {
  EXPECT_EQ(a.tenant, b.tenant);
  EXPECT_EQ(a.org, b.org);
  EXPECT_EQ(a.doc, b.doc);
  EXPECT_EQ(a.editor, b.editor);
  EXPECT_EQ(a.user, b.user);
  EXPECT_EQ(a.write, b.write);
  EXPECT_EQ(a.expires, b.expires);
}

TEST(ClientToken, SignsAndVerifies) {
  const svc::key_ring r = ring("k1 " + secret1 + "\n");
  for (const bool write : {false, true})
    for (const bool with_editor : {false, true}) {
      svc::client_claims c = claims();
      c.write = write;
      if (!with_editor) c.editor.reset();
      const std::string t = svc::sign_client_token(c, r.signer());
      EXPECT_TRUE(t.starts_with("fct1.0123456789abcdef.k1.")) << t;
      EXPECT_EQ(t.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_."), std::string::npos) << t;
      const svc::token_check v = svc::verify_client_token(t, r, before_expiry);
      ASSERT_EQ(v.problem, svc::token_problem::none);
      expect_same(v.claims, c);
    }
}

TEST(ClientToken, ExpiresAtItsSecond) {
  const svc::key_ring r = ring("k1 " + secret1);
  const std::string t = svc::sign_client_token(claims(), r.signer());
  EXPECT_EQ(svc::verify_client_token(t, r, before_expiry).problem, svc::token_problem::none);
  EXPECT_EQ(svc::verify_client_token(t, r, before_expiry + 1).problem, svc::token_problem::expired);
  EXPECT_EQ(svc::verify_client_token(t, r, before_expiry + 86400000).problem, svc::token_problem::expired);
  EXPECT_EQ(svc::verify_client_token(t, r, before_expiry + 1).claims.expires, 2000000000);  // for the message
}

// POST /v2/auth/token's expiry: whole seconds, capped at the minter's expiry, and never one that the
// token would already be refused at (the credentials cache can hand over a minter that has expired).
TEST(ClientToken, MintedExpiryIsNeverPast) {
  const std::int64_t now = 1700000000500;  // ms, half-way through second 1700000000
  EXPECT_EQ(svc::client_token_expiry(now, 60, std::nullopt), 1700000060);
  EXPECT_EQ(svc::client_token_expiry(now, 60, 1700000030999), 1700000030);  // the minter's expiry, rounded down
  EXPECT_EQ(svc::client_token_expiry(now, 1, std::nullopt), 1700000001);
  EXPECT_EQ(svc::client_token_expiry(now, 60, 1700000001000), 1700000001);  // valid until the next second
  // The minter expires within this second, or expired before: no token.
  EXPECT_EQ(svc::client_token_expiry(now, 60, 1700000000999), std::nullopt);
  EXPECT_EQ(svc::client_token_expiry(now, 60, 1700000000000), std::nullopt);
  EXPECT_EQ(svc::client_token_expiry(now, 60, 1699999990000), std::nullopt);
  // Whatever is returned verifies at `now`.
  const svc::key_ring r = ring("k1 " + secret1);
  svc::client_claims c = claims();
  c.expires = *svc::client_token_expiry(now, 60, 1700000001000);
  EXPECT_EQ(svc::verify_client_token(svc::sign_client_token(c, r.signer()), r, now).problem, svc::token_problem::none);
}

TEST(ClientToken, EveryChangedByteIsRefused) {
  const svc::key_ring r = ring("k1 " + secret1);
  const std::string t = svc::sign_client_token(claims(), r.signer());
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/ \n";
  std::size_t refused = 0;
  for (std::size_t i = 0; i < t.size(); ++i)
    for (const char c : alphabet) {
      if (c == t[i]) continue;
      std::string bad = t;
      bad[i] = c;
      const svc::token_check v = svc::verify_client_token(bad, r, 0);
      ASSERT_NE(v.problem, svc::token_problem::none) << "byte " << i << " -> " << c;
      ASSERT_NE(v.problem, svc::token_problem::expired) << "byte " << i << " -> " << c;  // never past the signature
      ++refused;
    }
  EXPECT_GT(refused, t.size() * 60);
  // Every truncation, and every extension.
  for (std::size_t n = 0; n < t.size(); ++n) EXPECT_NE(svc::verify_client_token(t.substr(0, n), r, 0).problem, svc::token_problem::none) << n;
  EXPECT_EQ(svc::verify_client_token(t + "A", r, 0).problem, svc::token_problem::malformed);
  EXPECT_EQ(svc::verify_client_token(t + ".", r, 0).problem, svc::token_problem::malformed);
}

TEST(ClientToken, AnotherKeyOrAnUnknownOneIsRefused) {
  const std::string t = svc::sign_client_token(claims(), ring("k1 " + secret1).signer());
  EXPECT_EQ(svc::verify_client_token(t, ring("k1 " + secret2), 0).problem, svc::token_problem::bad_signature);
  EXPECT_EQ(svc::verify_client_token(t, ring("k2 " + secret1), 0).problem, svc::token_problem::unknown_key);
  // The key id is under the MAC: the same secret under another id does not verify a renamed token.
  std::string renamed = t;
  renamed.replace(renamed.find(".k1.") + 1, 2, "k2");
  EXPECT_EQ(svc::verify_client_token(renamed, ring("k1 " + secret1 + "\nk2 " + secret1), 0).problem, svc::token_problem::bad_signature);
}

TEST(ClientToken, RotatesWithTwoKeys) {
  const svc::key_ring before = ring("k1 " + secret1);
  const std::string old_token = svc::sign_client_token(claims(), before.signer());
  // Staged: the new key verifies but does not sign yet.
  const svc::key_ring staged = ring("k1 " + secret1 + "\nk2 " + secret2 + " verify-only\n");
  EXPECT_EQ(staged.signer().id, "k1");
  EXPECT_EQ(svc::verify_client_token(svc::sign_client_token(claims(), ring("k2 " + secret2).signer()), staged, 0).problem, svc::token_problem::none);
  // Promoted: it signs; the old key still verifies.
  const svc::key_ring both = ring("# rotation\nk1 " + secret1 + "\n\nk2 " + secret2 + "  # new\n");
  EXPECT_EQ(both.signer().id, "k2");
  const std::string new_token = svc::sign_client_token(claims(), both.signer());
  EXPECT_NE(new_token.find(".k2."), std::string::npos);
  EXPECT_EQ(svc::verify_client_token(old_token, both, 0).problem, svc::token_problem::none);
  EXPECT_EQ(svc::verify_client_token(new_token, both, 0).problem, svc::token_problem::none);
  // The old key removed: its tokens are refused.
  const svc::key_ring after = ring("k2 " + secret2);
  EXPECT_EQ(svc::verify_client_token(old_token, after, 0).problem, svc::token_problem::unknown_key);
  EXPECT_EQ(svc::verify_client_token(new_token, after, 0).problem, svc::token_problem::none);
}

TEST(ClientToken, KeyFilesAreChecked) {
  const std::pair<std::string, std::string> bad[] = {
      {"", "no key that signs (every key is verify-only, or there is none)"},
      {"# nothing\n\n", "no key that signs (every key is verify-only, or there is none)"},
      {"k1 " + secret1 + " verify-only", "no key that signs (every key is verify-only, or there is none)"},
      {"k1", "line 1: expected \"<id> <secret hex> [verify-only]\""},
      {"\nk1 " + secret1 + " sign", "line 2: expected \"<id> <secret hex> [verify-only]\""},
      {"k1 " + secret1 + " verify-only x", "line 1: expected \"<id> <secret hex> [verify-only]\""},
      {"k.1 " + secret1, "line 1: a key id is 1-32 characters of A-Z a-z 0-9 - _"},
      {std::string(33, 'k') + " " + secret1, "line 1: a key id is 1-32 characters of A-Z a-z 0-9 - _"},
      {"k1 " + secret1 + "\nk1 " + secret2, "line 2: key id k1 appears twice"},
      {"k1 " + secret1.substr(2), "line 1: a secret is at least 64 hex digits (32 bytes), an even number of them"},
      {"k1 " + secret1 + "a", "line 1: a secret is at least 64 hex digits (32 bytes), an even number of them"},
      {"k1 " + secret1.substr(2) + "zz", "line 1: a secret is hex digits"},
  };
  for (const auto& [text, message] : bad) {
    try {
      svc::key_ring::parse(text);
      ADD_FAILURE() << text;
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), message) << text;
    }
  }
  EXPECT_EQ(ring("k1 " + secret1 + "\r\n").signer().secret, std::string(32, '\xaa'));  // CRLF lines
  // A file other users can read is refused; 0600 and 0640 load.
  const std::filesystem::path path = std::filesystem::temp_directory_path() / ("folio-keys-" + std::to_string(::getpid()));
  std::ofstream(path) << "k1 " << secret1 << "\n";
  ::chmod(path.c_str(), 0644);
  EXPECT_THROW(svc::key_ring::load(path.string()), std::runtime_error);
  for (const mode_t mode : {0600, 0640}) {
    ::chmod(path.c_str(), mode);
    EXPECT_EQ(svc::key_ring::load(path.string()).signer().id, "k1");
  }
  std::filesystem::remove(path);
  EXPECT_THROW(svc::key_ring::load(path.string()), std::runtime_error);
}

TEST(ClientToken, SignedClaimsOfAnotherFormAreMalformed) {
  // A key of ours signing what encode_claims never writes (the token parser's last line of defence).
  const svc::key_ring r = ring("k1 " + secret1);
  const std::string bad[] = {
      "o\nd\n\nu\nw",                  // five fields
      "o\nd\n\nu\nw\n2000000000\n",    // seven
      "\nd\n\nu\nw\n2000000000",       // an empty organization
      "o\nd\n\n\nw\n2000000000",       // an empty user
      "o\nd\ne\tx\nu\nw\n2000000000",  // a control character
      "o\nd\n\nu\nrw\n2000000000",     // access
      "o\nd\n\nu\nW\n2000000000",
      "o\nd\n\nu\nw\n02000000000",     // not canonical decimal
      "o\nd\n\nu\nw\n-1",
      "o\nd\n\nu\nw\n+1",
      "o\nd\n\nu\nw\n1234567890123",   // 13 digits
      "o\nd\n\nu\nw\n",
      "o\nd\n\nu\nw\n1 ",
      std::string(257, 'o') + "\nd\n\nu\nw\n1",
  };
  for (const std::string& text : bad) EXPECT_EQ(svc::verify_client_token(svc::seal_client_token("0123456789abcdef", r.signer(), text), r, 0).problem,
                                                svc::token_problem::malformed)
                                          << text;
  EXPECT_EQ(svc::verify_client_token(svc::seal_client_token("0123456789abcdef", r.signer(), "o\nd\n\nu\nw\n1"), r, 0).problem, svc::token_problem::none);
  // The tenant: 16 lowercase hex digits.
  for (const char* tenant : {"0123456789ABCDEF", "0123456789abcde", "0123456789abcdef0", "0123456789abcdeg"})
    EXPECT_EQ(svc::verify_client_token(svc::seal_client_token(tenant, r.signer(), "o\nd\n\nu\nw\n1"), r, 0).problem, svc::token_problem::malformed)
        << tenant;
}

TEST(ClientToken, RandomInputNeverVerifies) {
  const svc::key_ring r = ring("k1 " + secret1);
  const std::string t = svc::sign_client_token(claims(), r.signer());
  std::mt19937 rng(20);
  for (int i = 0; i < 20000; ++i) {
    std::string s = i % 2 ? t : std::string();
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = s.empty() ? 0 : rng() % (s.size() + 1);
      switch (rng() % 3) {
        case 0: s.insert(at, 1, static_cast<char>(rng())); break;
        case 1: if (at < s.size()) s.erase(at, 1 + rng() % 8); break;
        default: if (at < s.size()) s[at] = static_cast<char>(rng()); break;
      }
    }
    if (s == t) continue;
    EXPECT_NE(svc::verify_client_token(s, r, 0).problem, svc::token_problem::none) << s;
  }
  EXPECT_EQ(svc::verify_client_token(std::string(svc::max_client_token_bytes + 1, 'a'), r, 0).problem, svc::token_problem::malformed);
}

// Through the server (the wire in tests/e2e/tokens_e2e.py).
struct minting : folio_service_test::fixture {
  void SetUp() override {
    fixture::SetUp();
    service.platform().set_client_keys(std::make_shared<const svc::key_ring>(svc::key_ring::parse("k1 " + secret1)));
    call("/v2/crdt/add", R"({"data":{"organizationId":"o","documentId":"d","editorId":"e","type":"text","data":"hi"}})");
  }
  svc::response mint(const std::string& data) { return call("/v2/auth/token", R"({"data":{"organizationId":"o","documentId":"d",)" + data + "}}"); }
  svc::response bearer(const std::string& path, const std::string& body, const std::string& client) {
    svc::request r{"POST", path, "application/json", {}, {}, body, body.size(), {}, {}, {}};
    r.authorization = "Bearer " + client;
    return service.handle(db, r);
  }
  static std::string error_of(const svc::response& r) { return svc::parse_json(r.body)["error"]["message"].GetString(); }
  static std::string token_of(const svc::response& r) { return svc::parse_json(r.body)["result"]["data"]["token"].GetString(); }
};

// A misspelt or null editorId read as absent minted a token for every editor of the document.
TEST_F(minting, UnknownFieldsAndNullsAreRefusedByName) {
  const std::pair<std::string, std::string> refused[] = {
      {R"("userId":"u","access":"read","editorID":"e")", R"(Unknown field "editorID"; a client token takes organizationId, documentId, editorId, userId, access and expiresInSeconds.)"},
      {R"("userId":"u","access":"read","editor_id":"e")", R"(Unknown field "editor_id"; a client token takes organizationId, documentId, editorId, userId, access and expiresInSeconds.)"},
      {R"("userId":"u","access":"read","editorId":null)", "editorId must not be null; leave it out for a token of every editor of the document."},
      {R"("userId":"u","access":"read","expiresInSeconds":null)", "expiresInSeconds must not be null."},
      {R"("userId":null,"access":"read")", "userId must not be null."},
      {R"("userId":"u","access":"read","a\"\\\u0001b":1)", R"(Unknown field "a???b"; a client token takes organizationId, documentId, editorId, userId, access and expiresInSeconds.)"},
  };
  for (const auto& [data, message] : refused) {
    const svc::response r = mint(data);
    EXPECT_EQ(r.http, 400) << data;
    EXPECT_EQ(error_of(r), message) << data;
    EXPECT_EQ(std::string(svc::parse_json(r.body)["error"]["status"].GetString()), "INVALID_ARGUMENT") << data;
  }
  // A long name is cut at a character's start: the answer stays UTF-8 (the parser would refuse it otherwise).
  const svc::response longer = mint(R"("userId":"u","access":"read",")" + std::string(63, 'x') + "\u00e9\":1");
  EXPECT_EQ(longer.http, 400);
  EXPECT_EQ(error_of(longer).substr(0, 16 + 63), "Unknown field \"" + std::string(63, 'x') + "\"");
  const svc::response ok = mint(R"("editorId":"e","userId":"u","access":"read","expiresInSeconds":60)");
  ASSERT_EQ(ok.http, 200) << ok.body;
  EXPECT_EQ(bearer("/v2/crdt/get", R"({"data":{"organizationId":"o","documentId":"d"}})", token_of(ok)).http, 403);  // one editor only
}

// A client token's stream is let in only once its channel is kept in crdt_token_streams (crdt/publish/token_streams.hpp):
// a write that fails refuses the subscriber with the storage failure's answer and remembers nothing (the
// next subscriber writes again), and the polls of a subscriber let in write nothing more.
TEST_F(minting, AClientTokensStreamIsLetInOnlyOnceItsChannelIsKept) {
  FOLIO_SQLITE_ONLY();  // the refusing trigger is SQLite's
  svc::config cfg;
  cfg.live = {"secret", (tmp.dir / "no-nginx.sock").string()};  // nothing listens: deletions fail, rows stay
  svc::responder node{cfg};
  node.platform().set_client_keys(service.platform().client_keys());
  svc::database node_db{tmp.path(), svc::responder::tables()};
  node.crdt().keep_token_streams(node_db, [&] { return std::make_unique<svc::database>(tmp.path(), svc::responder::tables()); });
  const svc::response minted = mint(R"("editorId":"e","userId":"u","access":"read")");
  ASSERT_EQ(minted.http, 200) << minted.body;
  svc::request r{"GET", "/v2/crdt/subscribe", {}, {}, {}, {}, 0, "organizationId=o&documentId=d&editorId=e",
                 svc::channel_id("secret", key.substr(3, 16), "o", "d", "e"), {}};
  r.authorization = "Bearer " + token_of(minted);
  const auto kept = [&] {
    svc::query q = db.sql("SELECT count(*) FROM crdt_token_streams");
    return q.step() ? q.integer(0) : -1;
  };
  db.exec("CREATE TRIGGER refuse_streams BEFORE INSERT ON crdt_token_streams BEGIN SELECT RAISE(ABORT, 'refused'); END");
  for (int i = 0; i < 2; ++i) {
    const svc::response refused = node.authorize_subscriber(node_db, r);
    EXPECT_EQ(refused.http, 500) << refused.body;
    EXPECT_EQ(kept(), 0);
  }
  db.exec("DROP TRIGGER refuse_streams");
  EXPECT_EQ(node.authorize_subscriber(node_db, r).http, 200);
  EXPECT_EQ(kept(), 1);
  db.exec("CREATE TRIGGER refuse_streams BEFORE INSERT ON crdt_token_streams BEGIN SELECT RAISE(ABORT, 'refused'); END");
  EXPECT_EQ(node.authorize_subscriber(node_db, r).http, 200);  // a poll of the same token: nothing to write
  EXPECT_EQ(kept(), 1);
}

// Client tokens carry no database row; the server refuses those of a revoked API key once its set of
// revoked keys is at most revocation_refresh old, re-reading it when older.
TEST_F(minting, ARevokedKeysClientTokensAreRefused) {
  const svc::response minted = mint(R"("editorId":"e","userId":"u","access":"write")");
  ASSERT_EQ(minted.http, 200) << minted.body;
  const std::string client = token_of(minted);
  const std::string get = R"({"data":{"organizationId":"o","documentId":"d","editorId":"e"}})";
  ASSERT_EQ(bearer("/v2/crdt/get", get, client).http, 200);  // the set is read now: nothing is revoked
  EXPECT_FALSE(service.platform().api_key_revoked(key.substr(3, 16)));
  ASSERT_TRUE(svc::revoke_key(db, key.substr(3, 16), svc::now_iso()));
  // Another node (its own responder and connection) with a revocation_refresh of 0 reads the set at each check.
  svc::config now_cfg;
  now_cfg.revocation_refresh = std::chrono::milliseconds(0);
  svc::responder node{now_cfg};
  node.platform().set_client_keys(service.platform().client_keys());
  svc::database node_db{tmp.path(), svc::responder::tables()};
  svc::request r{"POST", "/v2/crdt/get", "application/json", {}, {}, get, get.size(), {}, {}, {}};
  r.authorization = "Bearer " + client;
  const svc::response refused = node.handle(node_db, r);
  EXPECT_EQ(refused.http, 401) << refused.body;
  EXPECT_EQ(error_of(refused), "Invalid client token: the API key that minted it is revoked.");
  EXPECT_EQ(std::string(svc::parse_json(refused.body)["error"]["status"].GetString()), "UNAUTHENTICATED");
  // This node's set is re-read at the watch's tick (here by hand), or by a check once it is revocation_refresh old.
  EXPECT_EQ(service.platform().read_revoked_keys(db), std::vector<std::string>{key.substr(3, 16)});
  EXPECT_TRUE(service.platform().api_key_revoked(key.substr(3, 16)));
  EXPECT_EQ(bearer("/v2/crdt/get", get, client).http, 401);
  EXPECT_EQ(bearer("/v2/crdt/sync", R"({"data":{"organizationId":"o","documentId":"d","editorId":"e","version":"AA=="}})", client).http, 401);
  EXPECT_EQ(service.platform().read_revoked_keys(db), std::vector<std::string>{key.substr(3, 16)});
}

// Admission checks the credentials before the body is read (tenant_of) and hands the outcome to
// handle(): a client token's HMAC and revoked-key lookup, or an API key's check, run once per request,
// and a failing credential is answered as before. A request that waited revocation_refresh or more
// (here: a node whose refresh is 0) is checked again, so a revocation meanwhile is seen.
TEST_F(minting, ARequestsCredentialsAreCheckedOnce) {
  const svc::response minted = mint(R"("editorId":"e","userId":"u","access":"write")");
  ASSERT_EQ(minted.http, 200) << minted.body;
  const std::string get = R"({"data":{"organizationId":"o","documentId":"d","editorId":"e"}})";
  auto admitted_then_handled = [&](svc::responder& node, svc::database& on, svc::request r, const std::string& tenant) {
    const std::uint64_t before = node.platform().identifications();
    EXPECT_EQ(node.platform().tenant_of(on, r), tenant);
    const svc::response res = node.handle(on, r);
    return std::make_pair(res, node.platform().identifications() - before);
  };
  svc::request client{"POST", "/v2/crdt/get", "application/json", {}, {}, get, get.size(), {}, {}, {}};
  client.authorization = "Bearer " + token_of(minted);
  auto [answer, checks] = admitted_then_handled(service, db, client, key.substr(3, 16));
  EXPECT_EQ(answer.http, 200) << answer.body;
  EXPECT_EQ(checks, 1u);
  svc::request with_key{"POST", "/v2/crdt/get", "application/json", key, token, get, get.size(), {}, {}, {}};
  std::tie(answer, checks) = admitted_then_handled(service, db, with_key, key.substr(3, 16));
  EXPECT_EQ(answer.http, 200) << answer.body;
  EXPECT_EQ(checks, 1u);
  svc::request bad = client;
  bad.authorization = "Bearer fct1.x";
  std::tie(answer, checks) = admitted_then_handled(service, db, bad, "");
  EXPECT_EQ(answer.http, 401);
  EXPECT_EQ(error_of(answer), "Malformed client token: expected fct1.<tenant>.<key id>.<claims>.<signature>.");
  EXPECT_EQ(checks, 1u);
  // Checked at admission, revoked, then run: checked again (the node's refresh is 0: it waited long enough).
  svc::config now_cfg;
  now_cfg.revocation_refresh = std::chrono::milliseconds(0);
  svc::responder node{now_cfg};
  node.platform().set_client_keys(service.platform().client_keys());
  svc::database node_db{tmp.path(), svc::responder::tables()};
  svc::request late = client;
  EXPECT_EQ(node.platform().tenant_of(node_db, late), key.substr(3, 16));
  ASSERT_TRUE(svc::revoke_key(db, key.substr(3, 16), svc::now_iso()));
  const svc::response refused = node.handle(node_db, late);
  EXPECT_EQ(refused.http, 401) << refused.body;
  EXPECT_EQ(error_of(refused), "Invalid client token: the API key that minted it is revoked.");
}

// The watch re-reads the set every revocation_refresh / 4 and reports keys it has not seen revoked
// (folio-fcgi's publisher sweep) — also when a request's own read saw the revocation first; it stops
// when told.
TEST_F(minting, TheWatchReportsRevocations) {
  svc::config cfg;
  cfg.revocation_refresh = std::chrono::milliseconds(40);
  svc::responder node{cfg};
  ASSERT_TRUE(svc::revoke_key(db, key.substr(3, 16), svc::now_iso()));
  EXPECT_EQ(node.platform().read_revoked_keys(db), std::vector<std::string>{key.substr(3, 16)});  // a request's read, first
  std::atomic<bool> stop{false};
  std::promise<void> reported;
  std::atomic<int> reports{0};
  std::thread watch([&] {
    node.platform().watch_revoked_keys([&] { return std::make_unique<svc::database>(tmp.path(), svc::responder::tables()); },
                                       [&] { if (reports++ == 0) reported.set_value(); }, stop);
  });
  const std::future_status waited = reported.get_future().wait_for(std::chrono::seconds(30));
  stop = true;
  watch.join();
  EXPECT_EQ(waited, std::future_status::ready);
  EXPECT_EQ(reports.load(), 1);
  EXPECT_TRUE(node.platform().api_key_revoked(key.substr(3, 16)));
}

// The watch outlives its database: a connection that will not open (PostgreSQL still starting) and a
// read that fails later are tried again, on a new connection, until the stop — it reports the
// revocation after both.
TEST_F(minting, TheWatchRetriesItsDatabase) {
  svc::config cfg;
  cfg.revocation_refresh = std::chrono::milliseconds(40);
  svc::responder node{cfg};
  ASSERT_TRUE(svc::revoke_key(db, key.substr(3, 16), svc::now_iso()));
  std::atomic<int> opens{0}, reads{0};
  node.platform().set_revocation_hooks({[&] {
                                          if (reads++ == 0) throw svc::store_error(svc::failure::unavailable, "server closed the connection unexpectedly");
                                        },
                                        {}});
  std::atomic<bool> stop{false};
  std::promise<void> reported;
  std::thread watch([&] {
    node.platform().watch_revoked_keys(
        [&] {
          if (opens++ == 0) throw svc::store_error(svc::failure::unavailable, "the database system is starting up");
          return std::make_unique<svc::database>(tmp.path(), svc::responder::tables());
        },
        [&] { reported.set_value(); }, stop);
  });
  const std::future_status waited = reported.get_future().wait_for(std::chrono::seconds(30));
  stop = true;
  watch.join();
  EXPECT_EQ(waited, std::future_status::ready);
  EXPECT_EQ(opens.load(), 3);  // refused; opened, its read failed; opened again
  EXPECT_TRUE(node.platform().api_key_revoked(key.substr(3, 16)));
}

// With the database down, a read of the revoked keys waits (a reconnect timeout) and fails. The checks
// that need the set meanwhile wait for that one read, never past their deadline, and take its failure
// (503 UNAVAILABLE); until the next tick the others fail at once instead of reading again; the watch's
// tick reads again.
TEST_F(minting, OneFailedReadOfTheRevokedKeysAnswersEveryWaiter) {
  const svc::response minted = mint(R"("editorId":"e","userId":"u","access":"write")");
  ASSERT_EQ(minted.http, 200) << minted.body;
  svc::config cfg;
  cfg.revocation_refresh = std::chrono::hours(1);  // a tick of 15 minutes: a remembered failure outlasts the test
  svc::responder node{cfg};
  node.platform().set_client_keys(service.platform().client_keys());
  std::atomic<int> reads{0}, waits{0};
  std::atomic<bool> down{true};
  std::promise<void> first_read, second_waits, database_answers;
  std::shared_future<void> answers = database_answers.get_future().share();
  node.platform().set_revocation_hooks({[&] {
                                          if (reads++ == 0) first_read.set_value(), answers.wait();  // a reconnect timeout
                                          if (down) throw svc::store_error(svc::failure::unavailable, "connection to server failed: Connection refused");
                                        },
                                        [&] {
                                          if (waits++ == 0) second_waits.set_value();
                                        }});
  const std::string get = R"({"data":{"organizationId":"o","documentId":"d","editorId":"e"}})";
  auto check = [&](svc::deadline_clock::time_point deadline) {
    return std::async(std::launch::async, [&, deadline] {
      svc::database own{tmp.path(), svc::responder::tables()};
      svc::request r{"POST", "/v2/crdt/get", "application/json", {}, {}, get, get.size(), {}, {}, {}};
      r.authorization = "Bearer " + token_of(minted), r.deadline = deadline;
      return node.handle(own, r);
    });
  };
  const auto later = svc::deadline_clock::now() + std::chrono::hours(1);
  std::future<svc::response> reader = check(later);
  ASSERT_EQ(first_read.get_future().wait_for(std::chrono::seconds(30)), std::future_status::ready);
  std::future<svc::response> waiter = check(later);
  const std::future_status waiting = second_waits.get_future().wait_for(std::chrono::seconds(30));
  // A request whose deadline has passed does not wait for the read.
  std::future<svc::response> late = check(svc::deadline_clock::now());
  const std::future_status late_answered = late.wait_for(std::chrono::seconds(30));
  database_answers.set_value();
  EXPECT_EQ(waiting, std::future_status::ready);
  ASSERT_EQ(late_answered, std::future_status::ready);
  const svc::response late_r = late.get(), reader_r = reader.get(), waiter_r = waiter.get();
  EXPECT_EQ(late_r.http, 503) << late_r.body;
  EXPECT_EQ(error_of(late_r), "The request did not finish in time; nothing was changed. Retry it.");
  for (const svc::response& r : {reader_r, waiter_r}) {
    EXPECT_EQ(r.http, 503) << r.body;
    EXPECT_EQ(error_of(r), "The database is unavailable; retry the request.");
  }
  EXPECT_EQ(reads.load(), 1);
  // Until the next tick, the failure is the answer: no read.
  const svc::response remembered = check(later).get();
  EXPECT_EQ(remembered.http, 503) << remembered.body;
  EXPECT_EQ(reads.load(), 1);
  // The watch's tick reads again; the checks then use its set.
  down = false;
  EXPECT_EQ(node.platform().read_revoked_keys(db), std::vector<std::string>{});
  EXPECT_EQ(check(later).get().http, 200);
  EXPECT_EQ(reads.load(), 2);
}

}  // namespace
