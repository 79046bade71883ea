// folio/error.hpp — how Folio reports failure.
//
// Two kinds, kept apart on purpose (STYLE.md 4 and 5):
//  * untrusted input (encoded bytes, remote operations) never throws: decoders and `apply` return a
//    result object with a status, a byte offset or operation index, and a description;
//  * local misuse by the embedding program (a position past the end, an invalid code point handed to
//    `insert`) throws `folio::error`, which carries an error_code and whose message starts with that
//    code's stable id, such as "[folio.range]".
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace folio {

/// What a folio::error reports. Each code has a stable id, the first word of the error's what() in
/// brackets ("[folio.range] ..."): the ids are part of the API (docs/INTERNALS.md, "Errors"), the
/// codes are how a program tells them apart without reading the text.
enum class error_code {
  range,      ///< "folio.range": a position or count past the end of a value
  value,      ///< "folio.value": a value the operation cannot hold (not a Unicode scalar value, ...)
  utf8,       ///< "folio.utf8": text given as UTF-8 that is not valid UTF-8
  type,       ///< "folio.type": an operation on a record of another type, or an unknown type
  replica,    ///< "folio.replica": a replica id the engine reserves (0)
  overflow,   ///< "folio.overflow": a record's operation counter would pass 2^31; nothing can be added
  zstd,       ///< "folio.zstd": the zstd library refused (out of memory, corrupt frame)
  invariant,  ///< "folio.invariant": a broken invariant of the engine's state (a defect, never input)
  internal,   ///< "folio.internal": an internal table misses an entry it must hold (a defect)
};

/// The stable id of `c`, e.g. "folio.range". O(1).
constexpr const char* error_id(error_code c) noexcept {
  switch (c) {
    case error_code::range: return "folio.range";
    case error_code::value: return "folio.value";
    case error_code::utf8: return "folio.utf8";
    case error_code::type: return "folio.type";
    case error_code::replica: return "folio.replica";
    case error_code::overflow: return "folio.overflow";
    case error_code::zstd: return "folio.zstd";
    case error_code::invariant: return "folio.invariant";
    case error_code::internal: return "folio.internal";
  }
  return "folio.internal";
}

/// Thrown for local misuse only. `what()` is "[<error_id(code())>] <message>".
class error : public std::logic_error {
 public:
  error(error_code code, const std::string& message) : std::logic_error(std::string("[") + error_id(code) + "] " + message), code_(code) {}
  error_code code() const noexcept { return code_; }

 private:
  error_code code_;
};

namespace detail {
/// The one helper through which the engine reports local misuse.
[[noreturn]] inline void fail(error_code code, const std::string& message) { throw error(code, message); }
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
  /// "bad varint", as overlong_varint does: HTTP answers carry these words (docs/API.md, `update is
  /// invalid: batch: <what> at byte N.`), which are part of the contract.
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
