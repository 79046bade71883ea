// folio/error.hpp — how Folio reports failure.
//
// Two kinds, kept apart on purpose (STYLE.md 4 and 5):
//  * untrusted input (encoded bytes, remote operations) never throws: decoders and `apply` return a
//    result object with a status, a byte offset or operation index, and a description;
//  * local misuse by the embedding program (a position past the end, an invalid code point handed to
//    `insert`) throws `folio::error`, whose message starts with a stable id such as "[folio.range]".
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace folio {

/// Thrown for local misuse only. `what()` starts with a stable id in brackets.
class error : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

namespace detail {
/// The one helper through which local misuse is reported (id like "folio.range").
[[noreturn]] inline void fail(const char* id, const std::string& message) { throw error(std::string("[") + id + "] " + message); }
}  // namespace detail

/// Why a decoder refused its input.
enum class decode_status {
  ok = 0,
  truncated,        ///< input ended inside a field
  bad_magic,        ///< not a Folio encoding, or an unknown format version
  wrong_kind,       ///< a batch where a document was expected, text where an array was expected, ...
  overlong_varint,  ///< a varint longer than its type allows, or above the largest value of its field
  bad_reference,    ///< an index or id that points outside what the input declared
  inconsistent,     ///< fields that contradict each other (lengths, counts, invalid UTF-8, ...)
  too_large,        ///< a count beyond the decoder's limits
  trailing_bytes,   ///< bytes left over after a complete value
  out_of_range,     ///< fields that each fit but together leave a counter's range (an op's Lamport values or seqs)
};

/// Result of decoding untrusted bytes. `offset` is the byte where the problem was found.
struct decode_result {
  decode_status status = decode_status::ok;
  std::size_t offset = 0;
  const char* detail = "";  ///< static text naming the field or rule that failed

  explicit operator bool() const noexcept { return status == decode_status::ok; }

  /// A one-line human description, e.g. "truncated input at byte 17 (op length)". out_of_range reads
  /// "bad varint": HTTP answers carry these words (docs/API.md, `update is invalid: batch: <what> at
  /// byte N.`), and they did before out_of_range was told apart from overlong_varint.
  std::string description() const {
    static const char* const names[] = {"ok",           "truncated input", "not a Folio encoding", "wrong kind",     "bad varint", "bad reference",
                                        "inconsistent", "too large",       "trailing bytes",       "bad varint"};
    std::string s = names[static_cast<int>(status)];
    if (status != decode_status::ok) {
      s += " at byte " + std::to_string(offset);
      if (*detail != '\0') s += std::string(" (") + detail + ")";
    }
    return s;
  }
};

}  // namespace folio
