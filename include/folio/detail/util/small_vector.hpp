// folio/detail/util/small_vector.hpp — a vector that keeps its first N elements inline and moves to the
// heap past them: the per-batch scratch tables of decoding (a batch's replicas, their next seqs) hold
// one or two entries for a typical batch — one client's keystroke — and any number for a large one,
// so the common case allocates nothing.
//
// Model: `data_` points at the inline array or at a heap block of `cap_` elements; `size_` elements
// from it are set. Access is one pointer away whichever it is (no branch per element). T is
// trivially copyable, and the inline elements are not value-initialised: a batch's tables are made
// per batch and filled before they are read (elements below size_ are written first).
// Growth doubles the capacity (amortised O(1) push_back). Not copyable or movable: data_ may point
// into the object itself. Thread-safety: none.
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <type_traits>

namespace folio::detail {

template <class T, std::size_t N>
class small_vector {
  static_assert(std::is_trivially_copyable_v<T> && N > 0);

 public:
  small_vector() noexcept = default;
  small_vector(const small_vector&) = delete;
  small_vector& operator=(const small_vector&) = delete;

  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  T& operator[](std::size_t i) noexcept { return data_[i]; }
  const T& operator[](std::size_t i) const noexcept { return data_[i]; }
  T& back() noexcept { return data_[size_ - 1]; }

  /// Empties it; a heap block is kept for the next use.
  void clear() noexcept { size_ = 0; }
  void reserve(std::size_t n) {
    if (n > cap_) grow(n);
  }
  void push_back(const T& v) {
    if (size_ == cap_) grow(2 * cap_);
    data_[size_++] = v;
  }
  void pop_back() noexcept { --size_; }
  /// `n` copies of `v` (what was there before is dropped).
  void resize(std::size_t n, const T& v) {
    size_ = 0;
    reserve(n);
    for (std::size_t i = 0; i < n; ++i) data_[i] = v;
    size_ = n;
  }

 private:
  void grow(std::size_t capacity) {
    std::unique_ptr<T[]> block(new T[capacity]);
    if (size_ != 0) std::memcpy(block.get(), data_, size_ * sizeof(T));
    heap_ = std::move(block);
    data_ = heap_.get(), cap_ = capacity;
  }

  T inline_[N];
  T* data_ = inline_;
  std::size_t size_ = 0;
  std::size_t cap_ = N;
  std::unique_ptr<T[]> heap_;  ///< the block data_ points at once past N
};

}  // namespace folio::detail
