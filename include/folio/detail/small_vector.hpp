// folio/detail/small_vector.hpp — a vector that keeps its first N elements inline and moves to the
// heap past them: the per-batch scratch tables of decoding and integration (a batch's replicas, their
// next seqs, their seq order) hold one or two entries for a typical batch — one client's keystroke —
// and any number for a large one, so the common case allocates nothing.
//
// T is trivially copyable. Growth past N copies the inline elements once; from then on it is a
// std::vector's amortised O(1). Thread-safety: none.
#pragma once

#include <array>
#include <cstddef>
#include <type_traits>
#include <vector>

namespace folio::detail {

template <class T, std::size_t N>
class small_vector {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  std::size_t size() const noexcept { return heap_used_ ? heap_.size() : size_; }
  T* data() noexcept { return heap_used_ ? heap_.data() : inline_.data(); }
  const T* data() const noexcept { return heap_used_ ? heap_.data() : inline_.data(); }
  T& operator[](std::size_t i) noexcept { return data()[i]; }
  const T& operator[](std::size_t i) const noexcept { return data()[i]; }
  T& back() noexcept { return data()[size() - 1]; }

  void clear() noexcept {
    heap_.clear();
    heap_used_ = false;
    size_ = 0;
  }
  void reserve(std::size_t n) {
    if (n > N) spill(n);
  }
  void push_back(const T& v) {
    if (!heap_used_ && size_ < N) {
      inline_[size_++] = v;
      return;
    }
    spill(2 * N);
    heap_.push_back(v);
  }
  void pop_back() noexcept {
    if (heap_used_) heap_.pop_back();
    else --size_;
  }
  void resize(std::size_t n, const T& v) {
    clear();
    if (n > N) return spill(n), heap_.assign(n, v);
    for (std::size_t i = 0; i < n; ++i) inline_[i] = v;
    size_ = n;
  }

 private:
  void spill(std::size_t capacity) {
    if (heap_used_) return heap_.reserve(capacity);
    heap_.reserve(capacity > size_ ? capacity : size_);
    heap_.assign(inline_.begin(), inline_.begin() + static_cast<std::ptrdiff_t>(size_));
    heap_used_ = true;
  }

  std::array<T, N> inline_;  ///< not value-initialised: a batch's tables are made per batch, and zeroing
                             ///< them cost more than filling them (elements below size_ are written first)
  std::size_t size_ = 0;  ///< elements inline (while !heap_used_)
  bool heap_used_ = false;
  std::vector<T> heap_;
};

}  // namespace folio::detail
