// folio/detail/util/hash.hpp — hashing of the ids that untrusted input chooses (replica ids, object names).
//
// std::hash of an integer is the integer itself, so a table's bucket is the id modulo the bucket
// count, which the standard library picks deterministically: a peer sending replica ids that are
// multiples of it puts them all in one bucket, and every lookup walks that one chain: integrating n
// such ids costs O(n^2). The ids are mixed here with a key drawn once
// per process from std::random_device, so which ids share a bucket cannot be known from outside.
// Nothing Folio writes depends on these hashes (no table is iterated to produce output).
// Thread-safety: the key is initialised once (a function-local static); hashing is pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>

namespace folio::detail {

/// splitmix64's finaliser: every input bit affects every output bit.
constexpr std::uint64_t mix64(std::uint64_t x) noexcept {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

struct hash_key {
  std::uint64_t a, b;
};
/// The process's key, drawn on first use.
inline const hash_key& process_hash_key() {
  static const hash_key k = [] {
    std::random_device rd;
    auto draw = [&] { return (std::uint64_t(rd()) << 32) ^ rd(); };
    const std::uint64_t a = draw();
    return hash_key{a, draw()};
  }();
  return k;
}

/// For std::unordered_map keyed by replica ids (std::uint64_t).
struct id_hash {
  std::size_t operator()(std::uint64_t id) const noexcept {
    const hash_key& k = process_hash_key();
    return static_cast<std::size_t>(mix64(mix64(id ^ k.a) + k.b));
  }
  /// Two numbers (a replica id and a value the id's owner chose), keyed before they are combined, so
  /// that no choice of both makes two pairs collide without the key.
  std::size_t operator()(std::uint64_t id, std::uint64_t v) const noexcept {
    const hash_key& k = process_hash_key();
    return static_cast<std::size_t>(mix64(mix64(id ^ k.a) ^ mix64(v + k.b)));
  }
};

}  // namespace folio::detail
