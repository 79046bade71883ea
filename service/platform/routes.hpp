// service/platform/routes.hpp — the endpoints, each a function of (context) -> response body. The router
// (router.cpp) has already checked the path, method, credentials, content type, size and envelope.
// A handler answers its body, or streams it through c.out and answers the rest (c.out.take()).
#pragma once

#include <rapidjson/document.h>

#include <string>

#include "platform/auth.hpp"
#include "platform/server.hpp"

namespace folio::service {

struct context {
  database& db;
  service& svc;
  const principal& who;
  const rapidjson::Value& data;  ///< the request's `data` object
  body_output& out;              ///< where a large answer is streamed (body_output.hpp)
};

std::string crdt_add(context& c);
std::string crdt_update(context& c);
std::string crdt_get(context& c);
std::string crdt_delete(context& c);
std::string crdt_sync(context& c);
std::string annotations_get(context& c);
std::string annotations_get_page(context& c);
std::string annotations_add(context& c);
std::string annotations_update(context& c);
std::string annotations_delete(context& c);
std::string comments_add(context& c);
std::string comments_update(context& c);
std::string comments_delete(context& c);
std::string auth_token(context& c);

}  // namespace folio::service
