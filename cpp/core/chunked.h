// Storage that grows in chunks and never moves what it holds, for the parser's per-configuration
// records: a std::vector that doubles copies everything it holds at once, inside whichever mask
// fill crosses the power of two, at a cost that grows with the store. Here growing costs one
// chunk's allocation, and a pointer to an element stays valid.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace logitgate {

// An array indexed 0..size()-1, grown by push_back. Chunk k holds kFirst << k elements, so a
// small store allocates little and a large one few chunks.
template <typename T>
class ChunkedVector {
 public:
  static constexpr size_t kFirstBits = 6;
  static constexpr size_t kFirst = size_t{1} << kFirstBits;

  T& operator[](size_t i) { return *At(i); }
  const T& operator[](size_t i) const { return *At(i); }
  size_t size() const { return size_; }
  void push_back(const T& value) {
    if (size_ == held_) {
      const size_t n = kFirst << chunks_.size();
      chunks_.emplace_back(new T[n]);
      held_ += n;
    }
    *At(size_++) = value;
  }
  int64_t memory_bytes() const {
    return static_cast<int64_t>(held_ * sizeof(T) + chunks_.capacity() * sizeof(chunks_[0]));
  }

 private:
  // Element i is in chunk k = floor(log2(i / kFirst + 1)), which starts at kFirst * (2^k - 1).
  T* At(size_t i) const {
    const size_t q = (i >> kFirstBits) + 1;
    const int k = 63 - __builtin_clzll(q);
    return chunks_[static_cast<size_t>(k)].get() + (i - ((size_t{1} << k) - 1) * kFirst);
  }

  std::vector<std::unique_ptr<T[]>> chunks_;
  size_t size_ = 0;
  size_t held_ = 0;  // elements allocated in all chunks
};

// Runs of elements appended one run at a time, each run contiguous (a configuration's heads).
// Chunks double from kFirst elements up to kLargest (or one run's length, when longer).
template <typename T>
class ChunkedRuns {
 public:
  static constexpr size_t kFirst = 256;
  static constexpr size_t kLargest = size_t{1} << 16;

  // A copy of [data, data + n), where it will stay (nullptr for an empty run).
  const T* Append(const T* data, size_t n) {
    if (n == 0) return nullptr;
    if (used_ + n > capacity_) {
      const size_t next = capacity_ == 0 ? kFirst : std::min(2 * capacity_, kLargest);
      capacity_ = std::max(n, next);
      chunks_.emplace_back(new T[capacity_]);
      used_ = 0;
      held_ += capacity_;
    }
    T* run = chunks_.back().get() + used_;
    std::copy(data, data + n, run);
    used_ += n;
    return run;
  }
  int64_t memory_bytes() const {
    return static_cast<int64_t>(held_ * sizeof(T) + chunks_.capacity() * sizeof(chunks_[0]));
  }

 private:
  std::vector<std::unique_ptr<T[]>> chunks_;
  size_t used_ = 0, capacity_ = 0;  // of the last chunk
  size_t held_ = 0;                 // elements allocated in all chunks
};

}  // namespace logitgate
