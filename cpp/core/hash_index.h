// HashIndex: the parser's interning indexes (configurations, frames), from a key's hash to
// the id of the key held, its equality decided by the caller.
//
// Open addressing with linear probing; a slot holds an id and the low half of its key's hash
// (ids are int32, so the table never has 2^32 slots and the position comes from the slot
// alone). It grows without a pause: once half full, a table of twice the slots takes the
// inserts, and each insert moves a few slots of the old table over: a whole rehash (or a
// node-based map's) would land in one mask fill, whose cost grows with the store. Until the
// old table is drained a lookup probes both (an entry is in the new table, or still in the old
// one, whose slots are never cleared, so its probe sequences stay whole). Tables come from
// calloc, where a zero slot is empty: pages no insert reaches are never touched.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

namespace logitgate {

class HashIndex {
 public:
  HashIndex() : current_(kInitialSlots) {}

  // The id whose hash is h and for which `same(id)` holds, or -1.
  template <typename Same>
  int32_t Find(uint64_t h, Same&& same) const {
    const auto tag = static_cast<uint32_t>(h);
    const int32_t id = current_.Find(tag, same);
    return id >= 0 || old_.size == 0 ? id : old_.Find(tag, same);
  }

  // Adds `id`, which Find does not hold, under hash h.
  void Insert(int32_t id, uint64_t h) {
    if (2 * (count_ + 1) > current_.size) Grow();
    current_.Place(static_cast<uint32_t>(id) + 1, static_cast<uint32_t>(h));
    ++count_;
    Drain(kMovesPerInsert);
  }

  int64_t memory_bytes() const { return static_cast<int64_t>((current_.size + old_.size) * sizeof(Slot)); }

 private:
  static constexpr size_t kInitialSlots = 64;
  // Old slots moved per insert: the old table (s slots, s/2 ids) must be drained within the s/2
  // inserts that fill the new one (2s slots) to half, so at least 2.
  static constexpr size_t kMovesPerInsert = 4;

  struct Slot {
    uint32_t id_plus1;  // 0: empty
    uint32_t tag;       // the hash's low half
  };
  struct Table {
    explicit Table(size_t n = 0) : slots(n ? static_cast<Slot*>(std::calloc(n, sizeof(Slot))) : nullptr), size(n) {
      if (n != 0 && slots == nullptr) throw std::bad_alloc();
    }
    Table(Table&& o) noexcept : slots(std::move(o.slots)), size(o.size) { o.size = 0; }
    Table& operator=(Table&& o) noexcept {
      slots = std::move(o.slots);
      size = o.size;
      o.size = 0;
      return *this;
    }
    template <typename Same>
    int32_t Find(uint32_t tag, Same& same) const {
      const size_t mask = size - 1;
      for (size_t i = tag & mask;; i = (i + 1) & mask) {
        const Slot s = slots.get()[i];
        if (s.id_plus1 == 0) return -1;
        if (s.tag == tag && same(static_cast<int32_t>(s.id_plus1 - 1))) return static_cast<int32_t>(s.id_plus1 - 1);
      }
    }
    void Place(uint32_t id_plus1, uint32_t tag) {
      const size_t mask = size - 1;
      size_t i = tag & mask;
      while (slots.get()[i].id_plus1 != 0) i = (i + 1) & mask;
      slots.get()[i] = Slot{id_plus1, tag};
    }
    struct Free {
      void operator()(Slot* p) const { std::free(p); }
    };
    std::unique_ptr<Slot, Free> slots;
    size_t size;
  };

  void Grow() {
    Drain(old_.size);  // (already drained unless kMovesPerInsert is too small)
    Table bigger(2 * current_.size);
    old_ = std::move(current_);
    current_ = std::move(bigger);
    drained_ = 0;
  }
  void Drain(size_t moves) {
    if (old_.size == 0) return;
    const size_t end = drained_ + moves < old_.size ? drained_ + moves : old_.size;
    for (; drained_ < end; ++drained_) {
      const Slot s = old_.slots.get()[drained_];
      if (s.id_plus1 != 0) current_.Place(s.id_plus1, s.tag);
    }
    if (drained_ == old_.size) old_ = Table();
  }

  Table current_, old_;  // old_.size == 0: no table is being drained
  size_t drained_ = 0;   // old_'s slots before this one are in current_
  size_t count_ = 0;     // ids held
};

}  // namespace logitgate
