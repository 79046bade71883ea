// tests/support/documents.hpp — helpers shared by the document tests (document_*_test.cpp).
#pragma once

#include <gtest/gtest.h>

#include <folio/document.hpp>
#include <optional>
#include <stdexcept>

namespace folio::testing {

/// `d` encoded and decoded again as replica `self`, its invariants checked (a failed decode fails the test).
inline document round_trip(const document& d, replica_id self) {
  std::optional<document> out;
  const decode_result r = document::decode(d.encode(), self, out);
  EXPECT_TRUE(r) << r.description();
  if (!out) throw std::runtime_error("decode failed");
  out->check_invariants();
  return std::move(*out);
}

}  // namespace folio::testing
