// StampSet: an open-addressing set of uint64 keys whose Clear() is O(1) (an epoch counter
// invalidates every slot), for the parser's per-closure "visited" sets, which are cleared
// thousands of times per mask fill and usually hold a handful of keys.
#pragma once

#include <cstdint>
#include <vector>

namespace logitgate {

class StampSet {
 public:
  StampSet() { Reset(64); }

  void Clear() {
    if (++epoch_ == 0) Reset(keys_.size());  // the epoch wrapped: really clear once
    size_ = 0;
  }

  // Bytes of the table.
  int64_t memory_bytes() const {
    return static_cast<int64_t>(keys_.capacity() * sizeof(uint64_t) + stamps_.capacity() * sizeof(uint32_t));
  }

  bool Contains(uint64_t key) const {
    const size_t mask = keys_.size() - 1;
    for (size_t i = Hash(key) & mask;; i = (i + 1) & mask) {
      if (stamps_[i] != epoch_) return false;
      if (keys_[i] == key) return true;
    }
  }

  // Inserts `key`; returns false when it was already present.
  bool Insert(uint64_t key) {
    if ((size_ + 1) * 2 > keys_.size()) Grow();
    size_t mask = keys_.size() - 1;
    for (size_t i = Hash(key) & mask;; i = (i + 1) & mask) {
      if (stamps_[i] != epoch_) {
        stamps_[i] = epoch_;
        keys_[i] = key;
        ++size_;
        return true;
      }
      if (keys_[i] == key) return false;
    }
  }

 private:
  static size_t Hash(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return static_cast<size_t>(x);
  }

  void Reset(size_t capacity) {
    keys_.assign(capacity, 0);
    stamps_.assign(capacity, 0);
    epoch_ = 1;
    size_ = 0;
  }

  void Grow() {
    std::vector<uint64_t> live;
    for (size_t i = 0; i < keys_.size(); ++i) {
      if (stamps_[i] == epoch_) live.push_back(keys_[i]);
    }
    Reset(keys_.size() * 2);
    for (uint64_t k : live) Insert(k);
  }

  std::vector<uint64_t> keys_;
  std::vector<uint32_t> stamps_;
  uint32_t epoch_ = 1;
  size_t size_ = 0;
};

}  // namespace logitgate
