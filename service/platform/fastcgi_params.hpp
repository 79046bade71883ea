// service/platform/fastcgi_params.hpp — the parameters nginx hands folio-fcgi with each request, read
// from the FastCGI request's "NAME=value" list into a `request`. nginx/folio.conf's API location sends
// only those the API reads; its /healthz location and the authorization hop (authorize.conf) send
// nginx's stock set and every header, QUERY_STRING and FOLIO_CHANNEL among them (docs/SERVICE.md).
// main.cpp passes libfcgi's list; tests pass their own. Nothing else of FastCGI here.
// Complexity: one pass over the list, each entry's name compared with the dozen wanted ones:
// O(entries x wanted), no allocation beyond the values' copies (libfcgi's FCGX_GetParam walks the
// whole list once per name asked, strncmp each).
// Thread-safety: a free function.
#pragma once

#include <string>

#include "platform/request.hpp"

namespace folio::service {

/// What the parameters give besides `request`'s own fields, as text.
struct request_params {
  std::string start;           ///< FOLIO_REQUEST_START: when nginx sent the request ($msec)
  std::string content_length;  ///< CONTENT_LENGTH
};

/// Fills `r`'s method, path (DOCUMENT_URI, else SCRIPT_NAME), content_type, api_key, auth_token,
/// authorization, query, request_id and channel (FOLIO_CHANNEL) from `envp`, a list of "NAME=value"
/// strings ending with nullptr (or nullptr itself). As with FCGX_GetParam, the first entry of a
/// repeated name wins, names compare exactly (case and all), and an absent parameter reads as "".
/// Entries without '=' are skipped.
request_params read_params(const char* const* envp, request& r);

}  // namespace folio::service
