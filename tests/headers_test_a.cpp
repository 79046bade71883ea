// Every public header, twice, in this and another translation unit (headers_test_b.cpp): each must be
// self-contained, guarded, and free of non-inline definitions.
#include <folio/array.hpp>
#include <folio/diff.hpp>
#include <folio/document.hpp>
#include <folio/encoding.hpp>
#include <folio/error.hpp>
#include <folio/folio.hpp>
#include <folio/fwd.hpp>
#include <folio/id.hpp>
#include <folio/markup.hpp>
#include <folio/ops.hpp>
#include <folio/record_type.hpp>
#include <folio/sequence.hpp>
#include <folio/sync.hpp>
#include <folio/text.hpp>
#include <folio/utf8.hpp>
#include <folio/version.hpp>
// second time
#include <gtest/gtest.h>

#include <folio/array.hpp>
#include <folio/diff.hpp>
#include <folio/document.hpp>
#include <folio/encoding.hpp>
#include <folio/error.hpp>
#include <folio/folio.hpp>
#include <folio/fwd.hpp>
#include <folio/id.hpp>
#include <folio/markup.hpp>
#include <folio/ops.hpp>
#include <folio/record_type.hpp>
#include <folio/sequence.hpp>
#include <folio/sync.hpp>
#include <folio/text.hpp>
#include <folio/utf8.hpp>
#include <folio/version.hpp>

std::string encoded_in_b();

TEST(Headers, UsableFromTwoTranslationUnits) {
  folio::text t(1);
  t.insert_utf8(0, "a");
  folio::text u(2);
  ASSERT_TRUE(folio::text::decode(encoded_in_b(), 2, u));
  EXPECT_EQ(u.to_string(), "from b");
}
