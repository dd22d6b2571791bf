// Arena: a bump allocator for the automaton's edge lists, and an allocator type over it.
//
// An automaton has a few short lists per state, built by appending and freed all at once with
// the automaton. Allocating them from an arena costs a pointer bump instead of a heap call;
// the allocation is inline (std::pmr's memory resources allocate through a virtual call,
// which was a twentieth of a compile's instructions). Memory a list gives back when it grows
// is not reused: lists are short, and the arena is freed as a whole.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>
#include <vector>

namespace logitgate {

class Arena {
 public:
  explicit Arena(size_t first_block = 4096) : next_block_(first_block) {}
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  // Takes `other`'s blocks (which then holds none): what was allocated from `other` now lives
  // as long as this arena.
  Arena(Arena&& other) noexcept
      : cur_(other.cur_), end_(other.end_), next_block_(other.next_block_), reserved_(other.reserved_),
        blocks_(std::move(other.blocks_)) {
    other.blocks_.clear();
    other.cur_ = other.end_ = 0;
    other.reserved_ = 0;
  }
  ~Arena() {
    for (void* block : blocks_) ::operator delete(block);
  }

  // `bytes` bytes aligned to `align` (a power of two, at most alignof(std::max_align_t)).
  void* Allocate(size_t bytes, size_t align) {
    const uintptr_t p = (cur_ + align - 1) & ~static_cast<uintptr_t>(align - 1);
    if (p > end_ || bytes > end_ - p) return Grow(bytes);
    cur_ = p + bytes;
    return reinterpret_cast<void*>(p);
  }

  // Bytes of the blocks allocated so far (what the arena holds, used or not).
  size_t reserved_bytes() const { return reserved_; }

 private:
  // A new block that holds `bytes` (blocks are max-aligned); later blocks double in size.
  void* Grow(size_t bytes) {
    size_t size = next_block_;
    if (size < bytes) size = bytes;
    if (next_block_ < kMaxBlock) next_block_ *= 2;
    void* block = ::operator new(size);
    blocks_.push_back(block);
    reserved_ += size;
    cur_ = reinterpret_cast<uintptr_t>(block) + bytes;
    end_ = reinterpret_cast<uintptr_t>(block) + size;
    return block;
  }

  static constexpr size_t kMaxBlock = size_t{1} << 24;
  uintptr_t cur_ = 0, end_ = 0;
  size_t next_block_;
  size_t reserved_ = 0;
  std::vector<void*> blocks_;
};

// A standard allocator drawing from an Arena (deallocation is a no-op). Implicit from Arena*
// so that `lists.emplace_back(&arena)` makes an empty list on that arena.
template <typename T>
class ArenaAllocator {
 public:
  using value_type = T;
  ArenaAllocator(Arena* arena) noexcept : arena_(arena) {}  // NOLINT(google-explicit-constructor)
  template <typename U>
  ArenaAllocator(const ArenaAllocator<U>& other) noexcept : arena_(other.arena()) {}

  T* allocate(size_t n) {
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_alloc();
    return static_cast<T*>(arena_->Allocate(n * sizeof(T), alignof(T)));
  }
  void deallocate(T*, size_t) noexcept {}
  Arena* arena() const { return arena_; }

  friend bool operator==(const ArenaAllocator& a, const ArenaAllocator& b) { return a.arena_ == b.arena_; }
  friend bool operator!=(const ArenaAllocator& a, const ArenaAllocator& b) { return a.arena_ != b.arena_; }

 private:
  Arena* arena_;
};

}  // namespace logitgate
