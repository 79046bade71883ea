// service/platform/routes.hpp — the route table: each family (crdt/, annotations/, the platform's own
// /v2/auth/token) registers its endpoints at start (docs/SERVICE.md, "Adding a route"). A handler is a
// function of (context) -> response body; the server (server.cpp) has already checked the path, method,
// credentials, content type, size and envelope, and whether the caller may use the route (`writes`,
// `client`). A handler answers its body, or streams it through c.out and answers the rest
// (c.out.take()). Thread-safety: filled before the first request, then only read.
#pragma once

#include <rapidjson/document.h>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "platform/auth.hpp"
#include "storage/database.hpp"
#include "wire/body_output.hpp"

namespace folio::service {

class server;

struct context {
  database& db;
  server& svc;
  const principal& who;
  const rapidjson::Value& data;  ///< the request's `data` object
  body_output& out;              ///< where a large answer is streamed (body_output.hpp)
};

struct route {
  std::string_view path;
  std::function<std::string(context&)> handler;
  bool writes;          ///< a read-only token is refused before the body is parsed
  bool client = false;  ///< a client token may call it (within its scope; the handler checks the ids)
};

class route_table {
 public:
  /// Adds an endpoint; a path registered twice is a programming error (std::logic_error).
  void add(route r);
  /// The route at exactly `path`, or null. O(routes).
  const route* find(std::string_view path) const;

 private:
  std::vector<route> routes_;
};

}  // namespace folio::service
