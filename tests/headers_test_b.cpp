// Every public header, twice; the other half of headers_test_a.cpp: each must be
// self-contained, guarded, and free of non-inline definitions.
// fwd.hpp first: its declarations must agree with the definitions that follow.
#include <folio/fwd.hpp>
#include <folio/array.hpp>
#include <folio/diff.hpp>
#include <folio/document.hpp>
#include <folio/encoding.hpp>
#include <folio/error.hpp>
#include <folio/folio.hpp>
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

std::string encoded_in_b() {
  folio::text t(7);
  folio::replace_text_utf8(t, "from b");
  return t.encode();
}
