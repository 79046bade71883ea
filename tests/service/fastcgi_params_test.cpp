// FastCGI parameters (service/platform/fastcgi_params.hpp).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "platform/fastcgi_params.hpp"
#include "support.hpp"

namespace {

using namespace folio_service_test;

TEST(FastcgiParams, ReadsEachWantedNameOnceTheFirstEntryWinning) {
  // What nginx/folio.conf sends, in another order, among entries folio does not read.
  const char* const envp[] = {"HTTP_X_FOLIO_API_KEY_OLD=stale",  // a longer name that starts like a wanted one
                              "REQUEST_METHOD=POST",
                              "GATEWAY_INTERFACE=CGI/1.1",
                              "DOCUMENT_URI=/v2/crdt/get",
                              "SCRIPT_NAME=/ignored-when-DOCUMENT_URI-is-there",
                              "CONTENT_TYPE=application/json; charset=utf-8",
                              "CONTENT_LENGTH=42",
                              "HTTP_X_FOLIO_API=not the key",  // a shorter one
                              "HTTP_X_FOLIO_API_KEY=fk_1=with=equals",
                              "http_x_folio_auth_token=wrong case",
                              "HTTP_X_FOLIO_AUTH_TOKEN=ft_1",
                              "HTTP_X_FOLIO_API_KEY=fk_second",  // repeated: the first one counts
                              "HTTP_AUTHORIZATION",  // no '=': not an entry (taking it as empty would hide the next)
                              "HTTP_AUTHORIZATION=Bearer ct",
                              "QUERY_STRING=live",
                              "QUERY_STRING=ignored",
                              "FOLIO_REQUEST_ID=abc123",
                              "FOLIO_REQUEST_START=1764370000.123",
                              "FOLIO_CHANNEL=ch",
                              nullptr};
  svc::request r;
  const svc::request_params p = svc::read_params(envp, r);
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.path, "/v2/crdt/get");
  EXPECT_EQ(r.content_type, "application/json; charset=utf-8");
  EXPECT_EQ(p.content_length, "42");
  EXPECT_EQ(r.api_key, "fk_1=with=equals");
  EXPECT_EQ(r.auth_token, "ft_1");
  EXPECT_EQ(r.authorization, "Bearer ct");
  EXPECT_EQ(r.query, "live");
  EXPECT_EQ(r.request_id, "abc123");
  EXPECT_EQ(p.start, "1764370000.123");
  EXPECT_EQ(r.channel, "ch");
}

TEST(FastcgiParams, AbsentNamesReadAsEmptyAndThePathFallsBackToScriptName) {
  const char* const envp[] = {"SCRIPT_NAME=/healthz", "DOCUMENT_URI=", "QUERY_STRING=", nullptr};
  svc::request r;
  const svc::request_params p = svc::read_params(envp, r);
  EXPECT_EQ(r.path, "/healthz");
  EXPECT_EQ(r.query, "");  // present and empty
  EXPECT_EQ(r.method, "");
  EXPECT_EQ(r.api_key, "");
  EXPECT_EQ(p.start, "");
  EXPECT_EQ(p.content_length, "");
  svc::request none;
  svc::read_params(nullptr, none);  // libfcgi's list before any parameter
  EXPECT_EQ(none.path, "");
}

}  // namespace
