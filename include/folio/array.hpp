// folio/array.hpp — a collaborative array of values.
//
// The engine does not parse values: each element is an opaque byte string, normally the canonical JSON
// serialisation of one value (the service canonicalises), so that equal values have equal bytes and the
// array diff can compare elements by bytes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sequence.hpp"

namespace folio {

class array : public sequence<std::string> {
 public:
  using sequence::insert;
  using sequence::sequence;

  /// Inserts one value before `pos`. Throws "[folio.range]".
  local_change insert(std::size_t pos, std::string_view value) {
    const std::string v(value);
    return sequence::insert(pos, &v, 1);
  }

  static decode_result decode(std::string_view bytes, replica_id self, array& out, std::size_t max_ops = default_max_ops,
                              std::string* content_key = nullptr) {
    return sequence::decode(bytes, self, out, max_ops, content_key);
  }
};

}  // namespace folio
