// folio/detail/sequence/content_log.hpp — the values a replica inserted, one slot per insert unit, in seq order.
//
// One log per replica. Remove units hold no slot (rga's replica_state::slot maps an insert's seq to its
// slot), so memory is linear in the values inserted, whatever the removes. Text uses an adaptive width (1, 2 or 4 bytes a code point, widened on the first
// value that needs it), which keeps ASCII documents at one byte per inserted character.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "../../utf8.hpp"

namespace folio::detail {

/// Generic log: one T per insert unit.
template <class T>
class content_log {
 public:
  std::size_t size() const noexcept { return values_.size(); }
  const T& operator[](std::size_t i) const noexcept { return values_[i]; }
  void append(const T* v, std::size_t n) { values_.insert(values_.end(), v, v + n); }
  void push_placeholders(std::size_t n) { values_.resize(values_.size() + n); }
  /// Overwrites slots [at, at + n).
  void assign(std::size_t at, const T* v, std::size_t n) { std::copy(v, v + n, values_.begin() + std::ptrdiff_t(at)); }
  std::size_t memory_usage() const noexcept {
    std::size_t bytes = values_.capacity() * sizeof(T);
    if constexpr (std::is_same_v<T, std::string>)
      for (const T& v : values_)
        if (v.capacity() > 15) bytes += v.capacity() + 1;
    return bytes;
  }

 private:
  std::vector<T> values_;
};

/// Code points, stored 1, 2 or 4 bytes wide (`1 << shift_`).
template <>
class content_log<char32_t> {
 public:
  std::size_t size() const noexcept { return bytes_.size() >> shift_; }

  char32_t operator[](std::size_t i) const noexcept {
    if (shift_ == 0) return bytes_[i];
    if (shift_ == 1) {
      std::uint16_t v;
      std::memcpy(&v, &bytes_[i * 2], 2);
      return v;
    }
    char32_t v;
    std::memcpy(&v, &bytes_[i * 4], 4);
    return v;
  }

  /// Appends n values (a one-byte log takes them converted as they are copied: one growth check for
  /// the whole range, no zero-filled room first).
  void append(const char32_t* v, std::size_t n) {
    if (n == 1 && shift_ == 0 && v[0] < 0x100) return bytes_.push_back(static_cast<std::uint8_t>(v[0]));  // a keystroke
    widen_for(widest(v, n));
    if (shift_ == 0) {
      bytes_.insert(bytes_.end(), v, v + n);  // each value < 0x100 (widen_for)
      return;
    }
    const std::size_t at = size();
    push_placeholders(n);
    write(at, v, n);
  }
  void push_placeholders(std::size_t n) { bytes_.resize(bytes_.size() + (n << shift_)); }
  /// Overwrites slots [at, at + n).
  void assign(std::size_t at, const char32_t* v, std::size_t n) {
    widen_for(widest(v, n));
    write(at, v, n);
  }
  /// Appends slots [at, at + n) to `out` as UTF-8; in a one-byte log, stretches of ASCII are copied
  /// whole.
  void append_as_utf8(std::string& out, std::size_t at, std::size_t n) const {
    if (shift_ != 0) {
      for (std::size_t i = 0; i < n; ++i) append_utf8(out, (*this)[at + i]);
      return;
    }
    const std::uint8_t* p = bytes_.data() + at;
    const std::uint8_t* const end = p + n;
    while (p != end) {
      if (*p >= 0x80) {
        append_utf8(out, *p++);
        continue;
      }
      const std::size_t run = ascii_run(p, static_cast<std::size_t>(end - p));
      out.append(reinterpret_cast<const char*>(p), run);
      p += run;
    }
  }
  std::size_t memory_usage() const noexcept { return bytes_.capacity(); }

 private:
  static char32_t widest(const char32_t* v, std::size_t n) noexcept {
    char32_t w = 0;
    for (std::size_t i = 0; i < n; ++i) w = std::max(w, v[i]);
    return w;
  }
  /// Writes n values into slots [at, at + n), which exist, at the log's width (wide enough for them).
  void write(std::size_t at, const char32_t* v, std::size_t n) {
    if (shift_ == 0) {
      for (std::size_t i = 0; i < n; ++i) bytes_[at + i] = static_cast<std::uint8_t>(v[i]);
    } else if (shift_ == 1) {
      for (std::size_t i = 0; i < n; ++i) {
        const auto w = static_cast<std::uint16_t>(v[i]);
        std::memcpy(&bytes_[(at + i) * 2], &w, 2);
      }
    } else if (n != 0) {
      std::memcpy(&bytes_[at * 4], v, n * 4);
    }
  }
  void widen_for(char32_t c) {
    const unsigned need = c < 0x100 ? 0 : c < 0x10000 ? 1 : 2;  // the shift c needs
    if (need <= shift_) return;
    const std::size_t n = size();
    std::vector<std::uint8_t> wider(n << need);
    for (std::size_t i = 0; i < n; ++i) {
      const char32_t v = (*this)[i];
      if (need == 1) {
        const auto w = static_cast<std::uint16_t>(v);
        std::memcpy(&wider[i * 2], &w, 2);
      } else
        std::memcpy(&wider[i * 4], &v, 4);
    }
    bytes_.swap(wider);
    shift_ = need;
  }

  std::vector<std::uint8_t> bytes_;
  unsigned shift_ = 0;  ///< log2 of the bytes a value takes: 0, 1 or 2
};

}  // namespace folio::detail
