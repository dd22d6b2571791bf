#include "parser.h"

#include <algorithm>
#include <array>

#include "heap_bytes.h"
#include "plain_text.h"
#include "utf8_ranges.h"

namespace logitgate {

namespace {
inline uint64_t Pack(int32_t state, int32_t frame) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(frame)) << 32) | static_cast<uint32_t>(state);
}
inline int32_t StateOf(uint64_t head) { return static_cast<int32_t>(head & 0xFFFFFFFFu); }
inline int32_t FrameOf(uint64_t head) { return static_cast<int32_t>(head >> 32); }

}  // namespace

namespace {
inline uint64_t MixHead(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}
// Independent of the heads' order (a sum of their mixes), so that a closure's heads are
// looked up in the order the closure found them.
uint64_t HashHeads(const uint64_t* heads, uint32_t count, bool accepting) {
  uint64_t sum = 0;
  for (uint32_t i = 0; i < count; ++i) sum += MixHead(heads[i]);
  return MixHead(sum ^ (count * 2 + accepting) * 0x9e3779b97f4a7c15ull);
}
}  // namespace

Parser::Parser(std::shared_ptr<const Automaton> automaton, const CoreLimits& limits)
    : automaton_(std::move(automaton)),
      limits_(limits),
      num_classes_(automaton_->num_byte_classes()),
      last_safe_depth_(limits_.max_stack_depth - 1 - automaton_->stack_need_bound()) {
  max_blocks_ = (limits_.max_configurations + kBlockSize) / kBlockSize + 1;
  // Left uninitialized: ids are interned in order, so blocks [0, num_blocks_) are exactly the
  // ones allocated, and no other entry is read (the table is sized for max_configurations,
  // thousands of entries a small grammar never uses).
  blocks_.reset(new std::atomic<Block*>[max_blocks_]);
  frames_.push_back({-1, -1, 0});
  class_run_end_[255] = 255;
  for (int b = 254; b >= 0; --b) {
    const auto byte = static_cast<uint8_t>(b);
    const bool same = automaton_->byte_class(byte) == automaton_->byte_class(static_cast<uint8_t>(b + 1));
    class_run_end_[b] = same ? class_run_end_[b + 1] : byte;
  }
  std::lock_guard<std::mutex> lock(mu_);
  // Configuration 0 is dead: its own successor on every byte (rows start kDead).
  out_.clear();
  Intern(false, false);
  out_.clear();
  visited_.Clear();
  accepting_scratch_ = false;
  Closure(automaton_->root_start(), 0);
  initial_ = Intern(accepting_scratch_, true);
  if (initial_ == kDead) {
    throw CoreError::Limit("max_stack_depth", limits_.max_stack_depth,
                           "every output of this grammar nests rules " +
                               std::to_string(automaton_->stack_need()[automaton_->root_start()]) +
                               " deep, past max_stack_depth");
  }
}

Parser::~Parser() {
  for (int64_t i = 0; i < num_blocks_; ++i) {
    Block* b = blocks_[i].load(std::memory_order_relaxed);
    for (auto& m : b->masks) delete[] m.load(std::memory_order_relaxed);
    delete b;
  }
}

int64_t Parser::memory_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t per_block = static_cast<int64_t>(sizeof(Block)) + int64_t{kBlockSize} * num_classes_ * 4;
  int64_t n = static_cast<int64_t>(sizeof(*this)) + max_blocks_ * static_cast<int64_t>(sizeof(Block*));
  n += num_blocks_ * per_block + masks_stored_ * static_cast<int64_t>(sizeof(uint32_t)) * mask_words_hint_;
  n += HeapBytes(frames_) + HeapBytes(frame_shortest_) + frame_index_.memory_bytes() + heads_.memory_bytes() +
       configs_.memory_bytes() + index_.memory_bytes();
  n += HeapBytes(out_) + HeapBytes(work_) + HeapBytes(group_events_) + HeapBytes(group_active_);
  n += HeapBytes(group_position_) + HeapBytes(group_stamp_);
  n += HeapBytes(group_pairs_) + HeapBytes(group_hashes_) + HeapBytes(group_begin_) + HeapBytes(group_leaders_);
  n += HeapBytes(group_edge_pair_) + HeapBytes(group_edges_on_) + HeapBytes(group_target_slots_);
  n += HeapBytes(lead_targets_at_) + HeapBytes(lead_targets_) + HeapBytes(stand_in_of_state_) + HeapBytes(stand_in_path_);
  n += HeapBytes(token_next_) + HeapBytes(set_members_) + HeapBytes(merge_members_) + HeapBytes(stack_pending_);
  return n + visited_.memory_bytes() + merge_states_.memory_bytes() + stack_frames_.memory_bytes();
}

bool Parser::NearDepthLimitLocked(int64_t depth) {
  if (depth <= last_safe_depth_) return false;
  if (stack_need_ == nullptr) {
    stack_need_ = automaton_->stack_need().data();
    last_safe_depth_ = limits_.max_stack_depth - 1 - automaton_->max_stack_need();
  }
  return depth > last_safe_depth_;
}

std::pair<const uint64_t*, uint32_t> Parser::HeadsOf(int32_t config) const {
  const ConfigRecord& record = configs_[static_cast<size_t>(config)];
  return {record.heads, record.count};
}

int32_t Parser::PushFrame(int32_t ret, int32_t parent) {
  const uint64_t h = MixHead(Pack(ret, parent));
  const int32_t found =
      frame_index_.Find(h, [&](int32_t id) { return frames_[id].ret == ret && frames_[id].parent == parent; });
  if (found >= 0) return found;
  int32_t depth = frames_[parent].depth + 1;
  if (depth > limits_.max_stack_depth) {
    throw CoreError::Limit("max_stack_depth", limits_.max_stack_depth, "rules nest too deeply in the output");
  }
  int32_t id = static_cast<int32_t>(frames_.size());
  frames_.push_back({ret, parent, depth});
  if (dist_) frame_shortest_.push_back(std::min(kFar, (*dist_)[static_cast<size_t>(ret)] + frame_shortest_[parent]));
  frame_index_.Insert(id, h);
  return id;
}

int32_t Parser::FrameSetLocked(const std::vector<int32_t>& members) {
  uint64_t h = MixHead(static_cast<uint64_t>(members.size()) ^ 0x5e7f4a3e5e7f4a3eull);
  for (int32_t m : members) h = MixHead(h ^ static_cast<uint32_t>(m));
  const int32_t found = frame_index_.Find(h, [&](int32_t id) {
    if (frames_[id].ret != kFrameSet) return false;
    const int32_t* stored = &set_members_[static_cast<size_t>(frames_[id].parent)];
    return static_cast<size_t>(stored[0]) == members.size() && std::equal(members.begin(), members.end(), stored + 1);
  });
  if (found >= 0) return found;
  const auto id = static_cast<int32_t>(frames_.size());
  frames_.push_back({kFrameSet, static_cast<int32_t>(set_members_.size()), frames_[members[0]].depth});
  set_members_.push_back(static_cast<int32_t>(members.size()));
  set_members_.insert(set_members_.end(), members.begin(), members.end());
  if (dist_) {
    int64_t best = kFar;
    for (int32_t m : members) best = std::min(best, frame_shortest_[m]);
    frame_shortest_.push_back(best);
  }
  frame_index_.Insert(id, h);
  return id;
}

int32_t Parser::FrameOfMembersLocked(std::vector<int32_t>* members) {
  std::sort(members->begin(), members->end());
  members->erase(std::unique(members->begin(), members->end()), members->end());
  return members->size() == 1 ? (*members)[0] : FrameSetLocked(*members);
}

// Heads of one state continue alike until that state's rule ends, whatever their stacks: a
// head whose frame is the set of their frames stands for all of them, and its rule's end
// returns to each member (Closure). Where many alternatives reach one rule (the members of
// several object schemas that a key does not tell apart yet), a configuration keeps one head
// per state instead of one per state and stack, and its transitions close over that many.
// Frames are merged only at one depth, so the depth limit prunes exactly as for the heads
// apart. The language of a configuration is unchanged; its heads are not the same, so the
// two forms are different configurations (interned as they come).
bool Parser::MergeSameStateHeadsLocked() {
  if (out_.size() < 2) return false;
  merge_states_.Clear();
  bool repeated = false;
  for (uint64_t head : out_) {
    if (!merge_states_.Insert(static_cast<uint32_t>(StateOf(head)))) {
      repeated = true;
      break;
    }
  }
  if (!repeated) return false;
  auto depth_of = [this](uint64_t head) { return frames_[FrameOf(head)].depth; };
  std::sort(out_.begin(), out_.end(), [&](uint64_t a, uint64_t b) {
    if (StateOf(a) != StateOf(b)) return StateOf(a) < StateOf(b);
    if (depth_of(a) != depth_of(b)) return depth_of(a) < depth_of(b);
    return FrameOf(a) < FrameOf(b);
  });
  size_t kept = 0;
  bool merged = false;
  for (size_t i = 0; i < out_.size();) {
    size_t j = i + 1;
    while (j < out_.size() && StateOf(out_[j]) == StateOf(out_[i]) && depth_of(out_[j]) == depth_of(out_[i])) ++j;
    if (j - i == 1) {
      out_[kept++] = out_[i];
      i = j;
      continue;
    }
    merge_members_.clear();
    for (size_t k = i; k < j; ++k) {
      const int32_t f = FrameOf(out_[k]);
      const auto [first, last] = MembersOf(f);
      if (first != last) {
        merge_members_.insert(merge_members_.end(), first, last);
      } else {
        merge_members_.push_back(f);
      }
    }
    out_[kept++] = Pack(StateOf(out_[i]), FrameOfMembersLocked(&merge_members_));
    merged = true;
    i = j;
  }
  out_.resize(kept);
  return merged;
}

// Adds to out_ every head reachable from (state, frame) without consuming a byte: epsilon
// edges, rule calls (push) and rule ends (pop). Sets accepting_scratch_ when the root rule can
// end with an empty stack. Finite because the automaton has no left recursion.
//
// Only heads that can still complete within max_stack_depth are kept (Automaton::stack_need),
// so a configuration with a head is a viable prefix under the depth limit too: the mask
// never allows a byte that nests deeper than the limit. Invariant: every frame's return
// state can complete at its parent's depth, so a head's own need is all there is to check.
void Parser::Closure(int32_t state0, int32_t frame0) {
  const Automaton& a = *automaton_;
  work_.clear();
  work_.push_back(Pack(state0, frame0));
  while (!work_.empty()) {
    uint64_t item = work_.back();
    work_.pop_back();
    int32_t frame = FrameOf(item);
    const bool near = NearDepthLimitLocked(frames_[frame].depth);
    const int64_t room = limits_.max_stack_depth - frames_[frame].depth;  // frames it may still push
    const uint8_t* kind = a.kernel_kinds_begin(StateOf(item));
    for (const int32_t* k = a.kernel_begin(StateOf(item)); k != a.kernel_end(StateOf(item)); ++k, ++kind) {
      int32_t s = *k;
      if (near && stack_need_[s] > room) continue;  // every way to end s's rule nests too deep
      uint64_t head = Pack(s, frame);
      if (!visited_.Insert(head)) continue;
      if (*kind & Automaton::kHeadState) {
        out_.push_back(head);
        if (static_cast<int64_t>(out_.size()) > limits_.max_parse_heads) {
          throw CoreError::Limit("max_parse_heads", limits_.max_parse_heads,
                                 "the grammar is too ambiguous at this point of the output");
        }
      }
      if (*kind & Automaton::kCalls) {
        for (const CallEdge& c : a.calls(s)) {
          const int32_t start = a.rule_start(c.rule);
          if (c.tail) {
            work_.push_back(Pack(start, frame));
          } else if (!near || (stack_need_[c.ret] <= room && 1 + static_cast<int64_t>(stack_need_[start]) <= room)) {
            work_.push_back(Pack(start, PushFrame(c.ret, frame)));
          }
        }
      }
      if (*kind & Automaton::kFinal) {
        if (frame == 0) {
          accepting_scratch_ = true;
        } else if (const auto [first, last] = MembersOf(frame); first != last) {
          for (const int32_t* m = first; m != last; ++m) work_.push_back(Pack(frames_[*m].ret, frames_[*m].parent));
        } else {
          work_.push_back(Pack(frames_[frame].ret, frames_[frame].parent));
        }
      }
    }
  }
}

std::vector<int32_t> Parser::Adopt(const Parser& from, const std::vector<int32_t>& configs) {
  // Read from `from` into a store-free form: frames as (return state, parent index), or a
  // frame set's member indices, each after the frames it refers to, index 0 the empty stack;
  // each distinct configuration as its heads (state, frame index) and its accepting bit.
  struct PortableFrame {
    int32_t ret, parent;
    std::vector<int32_t> members;  // a frame set's (ret is kFrameSet)
  };
  std::vector<PortableFrame> frames(1, PortableFrame{-1, -1, {}});
  std::unordered_map<int32_t, int32_t> frame_index{{0, 0}}, config_index;
  std::vector<int32_t> which(configs.size());  // index of configs[i] among the distinct ones
  std::vector<uint64_t> heads;
  std::vector<size_t> heads_end;
  std::vector<uint8_t> accepting;
  {
    std::lock_guard<std::mutex> lock(from.mu_);
    std::vector<int32_t> pending;  // frames to index, each after those it refers to (no recursion)
    for (size_t i = 0; i < configs.size(); ++i) {
      const auto [it, fresh] = config_index.emplace(configs[i], static_cast<int32_t>(heads_end.size()));
      which[i] = it->second;
      if (!fresh) continue;
      const auto [from_heads, count] = from.HeadsOf(configs[i]);
      for (uint32_t k = 0; k < count; ++k) {
        const uint64_t head = from_heads[k];
        pending.assign(1, FrameOf(head));
        while (!pending.empty()) {
          const int32_t f = pending.back();
          if (frame_index.count(f) != 0) {
            pending.pop_back();
            continue;
          }
          const Frame& frame = from.frames_[f];
          PortableFrame portable{frame.ret, -1, {}};
          bool ready = true;
          if (const auto [first, last] = from.MembersOf(f); first != last) {
            for (const int32_t* m = first; m != last; ++m) {
              const int32_t member = *m;
              const auto known = frame_index.find(member);
              if (known == frame_index.end()) {
                pending.push_back(member);
                ready = false;
              } else {
                portable.members.push_back(known->second);
              }
            }
          } else if (const auto known = frame_index.find(frame.parent); known == frame_index.end()) {
            pending.push_back(frame.parent);
            ready = false;
          } else {
            portable.parent = known->second;
          }
          if (!ready) continue;
          pending.pop_back();
          frame_index.emplace(f, static_cast<int32_t>(frames.size()));
          frames.push_back(std::move(portable));
        }
        heads.push_back(Pack(StateOf(head), frame_index.at(FrameOf(head))));
      }
      heads_end.push_back(heads.size());
      accepting.push_back(from.accepting(configs[i]));
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int32_t> frame_id(frames.size(), 0);
  for (size_t j = 1; j < frames.size(); ++j) {
    if (frames[j].ret != kFrameSet) {
      frame_id[j] = PushFrame(frames[j].ret, frame_id[static_cast<size_t>(frames[j].parent)]);
      continue;
    }
    merge_members_.clear();
    for (int32_t m : frames[j].members) merge_members_.push_back(frame_id[static_cast<size_t>(m)]);
    frame_id[j] = FrameOfMembersLocked(&merge_members_);
  }
  std::vector<int32_t> config_id(heads_end.size());
  for (size_t d = 0; d < heads_end.size(); ++d) {
    out_.clear();
    for (size_t k = d == 0 ? 0 : heads_end[d - 1]; k < heads_end[d]; ++k) {
      out_.push_back(Pack(StateOf(heads[k]), frame_id[static_cast<size_t>(FrameOf(heads[k]))]));
    }
    config_id[d] = Intern(accepting[d] != 0, false);
  }
  std::vector<int32_t> ids(configs.size());
  for (size_t i = 0; i < configs.size(); ++i) ids[i] = config_id[static_cast<size_t>(which[i])];
  return ids;
}

int32_t Parser::Intern(bool accepting, bool closed) {
  if (MergeSameStateHeadsLocked()) closed = false;
  if (!closed) {
    std::sort(out_.begin(), out_.end());
    out_.erase(std::unique(out_.begin(), out_.end()), out_.end());
  }
  const int32_t existing = num_configs_.load(std::memory_order_relaxed);
  if (existing > 0 && out_.empty() && !accepting) return kDead;
  const auto count = static_cast<uint32_t>(out_.size());
  const uint64_t h = HashHeads(out_.data(), count, accepting);
  const int32_t found = index_.Find(h, [&](int32_t id) {
    const ConfigRecord& record = configs_[static_cast<size_t>(id)];
    if (record.hash != h || record.count != count || this->accepting(id) != accepting) return false;
    const uint64_t* heads = record.heads;
    return closed ? std::all_of(heads, heads + count, [this](uint64_t head) { return visited_.Contains(head); })
                  : std::equal(heads, heads + count, out_.data());
  });
  if (found >= 0) return found;
  // New: stored with its heads in order (Heads() and Adopt read them so).
  if (closed) std::sort(out_.begin(), out_.end());
  if (existing >= limits_.max_configurations) {
    throw StoreFull(CoreError::Limit("max_configurations", limits_.max_configurations,
                                     "one request needs more parser configurations than max_configurations"));
  }
  const int32_t id = existing;
  Block* block;
  if ((id >> kBlockBits) >= num_blocks_) {  // the first id of a block not allocated yet
    block = new Block();
    const size_t n = static_cast<size_t>(kBlockSize) * num_classes_;
    // Value-initialized: every slot starts kDead (0), so interning a configuration writes only
    // its live classes (a row has a slot per byte class: often a hundred or more).
    static_assert(kDead == 0, "transition rows are zero-initialized to kDead");
    block->transitions.reset(new std::atomic<int32_t>[n]());
    for (auto& f : block->flags) f.store(0, std::memory_order_relaxed);
    for (auto& m : block->masks) m.store(nullptr, std::memory_order_relaxed);
    for (auto& f : block->mask_fills) f.store(0, std::memory_order_relaxed);
    for (auto& l : block->steps) l.store(0, std::memory_order_relaxed);
    for (auto& l : block->step_successor) l.store(kDead, std::memory_order_relaxed);
    for (auto& r : block->steps_ready) r.store(0, std::memory_order_relaxed);
    for (auto& l : block->live) l.store(0, std::memory_order_relaxed);
    for (auto& c : block->capacity) c.store(0, std::memory_order_relaxed);
    for (auto& p : block->plain_successor) p.store(kUnknown, std::memory_order_relaxed);
    for (auto& d : block->shortest) d.store(-1, std::memory_order_relaxed);
    for (auto& x : block->stand_in) x.store(kUnknown, std::memory_order_relaxed);
    blocks_[id >> kBlockBits].store(block, std::memory_order_release);
    ++num_blocks_;  // (after the store: the destructor frees entries [0, num_blocks_))
  } else {
    block = blocks_[id >> kBlockBits].load(std::memory_order_relaxed);
  }
  int32_t capacity = 0;
  bool near_universal = false;
  // Heads at the starts of character rules (a string position's classes, each called): the
  // characters they read together, and the least capacity they return to.
  uint64_t class_ascii[2] = {0, 0};
  bool class_utf8 = false;
  int64_t class_least = -1;
  // Per head, and per member of a frame set (each as the head it stands for).
  auto add_head = [&](int32_t state, int32_t frame) {
    capacity = std::max(capacity, automaton_->plain_capacity(state));
    if (frame != 0 && automaton_->starts_plain_character(state)) {
      const int64_t through = 1 + static_cast<int64_t>(automaton_->plain_capacity(frames_[frame].ret));
      capacity = static_cast<int32_t>(std::max<int64_t>(capacity, std::min<int64_t>(through, Automaton::kUnbounded)));
    }
    if (const int32_t r = frame != 0 ? automaton_->char_rule_at(state) : -1; r >= 0) {
      const uint64_t* ascii = automaton_->char_ascii(r);
      class_ascii[0] |= ascii[0];
      class_ascii[1] |= ascii[1];
      class_utf8 = class_utf8 || automaton_->char_utf8(r);
      const int64_t after = automaton_->plain_capacity(frames_[frame].ret);
      class_least = class_least < 0 ? after : std::min(class_least, after);
    }
    near_universal = near_universal || automaton_->is_near_universal(state) ||
                     (frame != 0 && automaton_->starts_near_plain_character(state) &&
                      automaton_->is_near_universal(frames_[frame].ret));
  };
  bool near_limit = false;
  for (uint32_t i = 0; i < count; ++i) {
    const int32_t state = StateOf(out_[i]), frame = FrameOf(out_[i]);
    // The automaton's capacities assume that no head on the way is dropped for its depth:
    // near the limit the head guarantees nothing.
    if (NearDepthLimitLocked(frames_[frame].depth)) {
      near_limit = true;
      continue;
    }
    const auto [first, last] = MembersOf(frame);
    if (first == last) add_head(state, frame);
    for (const int32_t* m = first; m != last; ++m) add_head(state, *m);
  }
  if (class_least >= 0 && class_utf8 && HasAllPlainAscii(class_ascii)) {
    // Every plain character is read by one of those rules, each then returning to at least
    // class_least.
    capacity = static_cast<int32_t>(std::max<int64_t>(capacity, std::min<int64_t>(1 + class_least, Automaton::kUnbounded)));
  }
  near_universal = near_universal || capacity >= Automaton::kUnbounded;
  block->capacity[id & kBlockMask].store(capacity, std::memory_order_relaxed);
  if (dist_) block->shortest[id & kBlockMask].store(ShortestLocked(out_.data(), count), std::memory_order_relaxed);
  bool token_heads = false;
  if (automaton_->has_token_sets()) {
    for (uint32_t i = 0; i < count && !token_heads; ++i) token_heads = automaton_->token_set(StateOf(out_[i])) >= 0;
  }
  block->flags[id & kBlockMask].store(
      static_cast<uint8_t>((accepting ? kAccepting : 0) | (count ? kHasHeads : 0) | (token_heads ? kHasTokenHeads : 0) |
                           (near_universal ? kNearUniversal : 0) | (near_limit ? kNearDepthLimit : 0)),
      std::memory_order_relaxed);
  // Byte classes no head can consume are dead: store them now, so the mask walk never takes
  // the lock for them; the others are computed on first use.
  {
    const Automaton& a = *automaton_;
    uint64_t live[4] = {0, 0, 0, 0};
    std::atomic<int32_t>* row = &block->transitions[static_cast<size_t>(id & kBlockMask) * num_classes_];
    int32_t live_classes = 0;
    for (uint32_t i = 0; i < count; ++i) {
      for (const ByteEdge& e : a.bytes(StateOf(out_[i]))) {
        AddByteRange(e.lo, e.hi, live);
        // Byte classes are intervals that every edge's range is a union of (ComputeByteClasses).
        for (int32_t k = a.byte_class(e.lo), last = a.byte_class(e.hi); k <= last; ++k) {
          std::atomic<int32_t>& slot = row[k];
          if (slot.load(std::memory_order_relaxed) != kDead) continue;
          ++live_classes;
          slot.store(kUnknown, std::memory_order_relaxed);
        }
      }
    }
    for (int q = 0; q < 4; ++q) block->live[4 * (id & kBlockMask) + q].store(live[q], std::memory_order_relaxed);
    configs_.push_back(ConfigRecord{heads_.Append(out_.data(), count), count, static_cast<int16_t>(live_classes), kNoTransition, h});
  }
  index_.Insert(id, h);  // (after its record: Find reads it)
  num_configs_.store(id + 1, std::memory_order_release);
  return id;
}

int32_t Parser::ComputeLocked(int32_t config, uint8_t b) {
  std::lock_guard<std::mutex> lock(mu_);
  const Automaton& a = *automaton_;
  std::atomic<int32_t>& slot = Slot(config, a.byte_class(b));
  int32_t next = slot.load(std::memory_order_relaxed);
  if (next >= 0) return next;  // another thread computed it meanwhile
  bool first = false;  // the configuration's first transition, computed alone
  if (next == kUnknown) {
    ConfigRecord& record = configs_[static_cast<size_t>(config)];
    if (record.live_classes >= kGroupLiveClasses) {
      first = record.first_byte == kNoTransition;
      if (record.first_byte >= 0) {
        GroupClassesLocked(config, static_cast<uint8_t>(record.first_byte));
        record.first_byte = kGrouped;
        next = slot.load(std::memory_order_relaxed);
      }
    }
  }
  if (next <= kFirstPending) {
    // A pending class: its group's leader holds (or will hold) the transition.
    const uint8_t leader_byte = static_cast<uint8_t>(kFirstPending - next);
    std::atomic<int32_t>& leader = Slot(config, a.byte_class(leader_byte));
    next = leader.load(std::memory_order_relaxed);
    if (next < 0) {
      next = TransitionLocked(config, leader_byte);
      leader.store(next, std::memory_order_release);
    }
    slot.store(next, std::memory_order_release);
    return next;
  }
  next = TransitionLocked(config, b);
  slot.store(next, std::memory_order_release);
  if (first) configs_[static_cast<size_t>(config)].first_byte = b;  // (not before: TransitionLocked may throw StoreFull)
  return next;
}

// The closure of every head's edges on byte b, interned.
int32_t Parser::TransitionLocked(int32_t config, uint8_t b) {
  num_transitions_.store(num_transitions_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);  // under mu_
  out_.clear();
  visited_.Clear();
  accepting_scratch_ = false;
  const auto [heads, count] = HeadsOf(config);
  for (uint32_t i = 0; i < count; ++i) {
    const uint64_t head = heads[i];
    for (const ByteEdge& e : automaton_->bytes(StateOf(head))) {
      if (e.lo <= b && b <= e.hi) Closure(e.target, FrameOf(head));
    }
  }
  return Intern(accepting_scratch_, true);
}

// Groups `config`'s unknown live classes by the (head, target) pairs their bytes lead along
// (below): classes of one group reach the same configuration, so one closure and one
// interning serve them all (a string position's ~100 byte classes reach a handful of
// configurations). Each class's slot becomes pending on its group's leader (the group's first
// class, itself included); the transitions are computed on demand. The class of byte
// `computed` has its transition already: its group's leader takes it.
//
// A sweep over the bytes: the heads' edge ends cut them into intervals, each matched by one
// set of pairs (a byte class, a refinement of every edge, lies inside one interval). Adjacent
// intervals with the same set are one group; other intervals are told apart by a hash of
// their set, kept as pairs come and go, and compared in full when the hashes meet.
void Parser::GroupClassesLocked(int32_t config, uint8_t computed) {
  const Automaton& a = *automaton_;
  const auto [heads, count] = HeadsOf(config);
  std::atomic<int32_t>* const row = &Slot(config, 0);
  // A pair is a head and a target of its edges: edges of one head to one target add the same
  // closure, so bytes told apart only by which of those edges reads them are one group (a
  // class's ranges, `[0-9A-Za-z]` as three edges, one closure). group_edge_pair_ holds the
  // pair of each of the heads' edges, in order.
  group_edge_pair_.clear();
  uint32_t n_pairs = 0;
  for (uint32_t i = 0; i < count; ++i) {
    const auto& edges = a.bytes(StateOf(heads[i]));
    constexpr size_t kFewEdges = 16;
    if (edges.size() <= kFewEdges) {  // most heads: the targets seen so far, one by one
      int32_t seen[kFewEdges];
      const uint32_t pair0 = n_pairs;
      for (const ByteEdge& e : edges) {
        uint32_t k = 0;
        while (k < n_pairs - pair0 && seen[k] != e.target) ++k;
        if (k == n_pairs - pair0) seen[n_pairs++ - pair0] = e.target;
        group_edge_pair_.push_back(pair0 + k);
      }
      continue;
    }
    // A trie's node: by an open-addressing table of its targets.
    size_t size = 32;
    while (size < 2 * edges.size()) size <<= 1;
    group_target_slots_.assign(size, {-1, 0});
    for (const ByteEdge& e : edges) {
      size_t at = (static_cast<uint32_t>(e.target) * 0x9E3779B1u) & (size - 1);
      while (group_target_slots_[at].first >= 0 && group_target_slots_[at].first != e.target) at = (at + 1) & (size - 1);
      if (group_target_slots_[at].first < 0) group_target_slots_[at] = {e.target, n_pairs++};
      group_edge_pair_.push_back(group_target_slots_[at].second);
    }
  }
  // Edge events, bucketed by byte (a counting sort over the bytes where events happen): at
  // byte lo the edge's pair enters, after byte hi it leaves. After the fill, byte b's events
  // end at events_end[b] and number events_at[b].
  std::array<uint32_t, 256> events_at{}, events_end;
  uint64_t event_bytes[4] = {0, 0, 0, 0};  // the bytes where some pair enters or leaves
  for (uint32_t i = 0; i < count; ++i) {
    for (const ByteEdge& e : a.bytes(StateOf(heads[i]))) {
      ++events_at[e.lo];
      event_bytes[e.lo >> 6] |= 1ull << (e.lo & 63);
      if (e.hi < 255) {
        ++events_at[e.hi + 1];
        event_bytes[(e.hi + 1) >> 6] |= 1ull << ((e.hi + 1) & 63);
      }
    }
  }
  uint32_t n_events = 0;
  for (int q = 0; q < 4; ++q) {
    for (uint64_t w = event_bytes[q]; w != 0; w &= w - 1) {
      const int at = 64 * q + __builtin_ctzll(w);
      events_end[at] = n_events;  // its events' start, until the fill moves it to their end
      n_events += events_at[at];
    }
  }
  group_events_.resize(n_events);
  {
    size_t edge = 0;
    for (uint32_t i = 0; i < count; ++i) {
      for (const ByteEdge& e : a.bytes(StateOf(heads[i]))) {
        const uint32_t pair = group_edge_pair_[edge++];
        group_events_[events_end[e.lo]++] = {pair, true};
        if (e.hi < 255) group_events_[events_end[e.hi + 1]++] = {pair, false};
      }
    }
  }
  // The active pairs, each with its position in group_active_ (removal swaps in the last) and
  // the number of its edges that read the current byte (a pair is active while it is not 0:
  // an NFA state's edges to one target may overlap).
  group_active_.clear();
  group_position_.resize(n_pairs);
  group_edges_on_.assign(n_pairs, 0);
  if (group_stamp_.size() < n_pairs) group_stamp_.resize(n_pairs, 0);
  // (Stamps of earlier calls are below the current epoch; past its wrap they are reset.)
  if (group_epoch_ > UINT32_MAX - 256) {
    std::fill(group_stamp_.begin(), group_stamp_.end(), 0);
    group_epoch_ = 0;
  }
  group_leaders_.clear();  // per group: its leader's representative byte, the set's hash and pairs
  group_hashes_.clear();
  group_pairs_.clear();
  group_begin_.assign(1, 0);
  uint64_t hash = 0;  // sum of the active pairs' mixes: order-free, updated as pairs come and go
  auto mix = [](uint64_t pair) { return (pair + 0x9E3779B97F4A7C15ull) * 0xBF58476D1CE4E5B9ull ^ (pair >> 7); };
  int32_t current = -1;  // the group of the previous interval, while it is adjacent
  int computed_leader = -1;
  // The first byte at or after `from` where events happen (256: none).
  auto next_event = [&event_bytes](int from) {
    for (int q = from >> 6; q < 4; ++q) {
      const uint64_t w = event_bytes[q] & (q == from >> 6 ? ~0ull << (from & 63) : ~0ull);
      if (w != 0) return 64 * q + __builtin_ctzll(w);
    }
    return 256;
  };
  for (int lo = 0; lo < 256;) {
    if (event_bytes[lo >> 6] >> (lo & 63) & 1) {
      for (uint32_t k = events_end[lo] - events_at[lo]; k < events_end[lo]; ++k) {
        const Event& ev = group_events_[k];
        if (ev.enter) {
          if (group_edges_on_[ev.pair]++ > 0) continue;
          group_position_[ev.pair] = static_cast<uint32_t>(group_active_.size());
          group_active_.push_back(ev.pair);
          hash += mix(ev.pair);
        } else {
          if (--group_edges_on_[ev.pair] > 0) continue;
          const uint32_t at = group_position_[ev.pair];
          group_active_[at] = group_active_.back();
          group_position_[group_active_[at]] = at;
          group_active_.pop_back();
          hash -= mix(ev.pair);
        }
      }
      current = -1;
    }
    const int hi = lo < 255 ? next_event(lo + 1) - 1 : 255;
    if (!group_active_.empty()) {
      if (current < 0) {
        // A group whose set has this hash and size is compared pair by pair: the active pairs
        // are stamped, then the group's looked up.
        bool stamped = false;
        for (size_t g = 0; g < group_hashes_.size() && current < 0; ++g) {
          if (group_hashes_[g] != hash || group_begin_[g + 1] - group_begin_[g] != group_active_.size()) continue;
          if (!stamped) {
            ++group_epoch_;
            for (uint32_t pair : group_active_) group_stamp_[pair] = group_epoch_;
            stamped = true;
          }
          bool same = true;
          for (size_t k = group_begin_[g]; k < group_begin_[g + 1] && same; ++k) {
            same = group_stamp_[group_pairs_[k]] == group_epoch_;
          }
          if (same) current = static_cast<int32_t>(g);
        }
        if (current < 0) {
          current = static_cast<int32_t>(group_hashes_.size());
          group_hashes_.push_back(hash);
          group_leaders_.push_back(static_cast<size_t>(lo));
          group_pairs_.insert(group_pairs_.end(), group_active_.begin(), group_active_.end());
          group_begin_.push_back(group_pairs_.size());
        }
      }
      // The interval's classes, one run of equal bytes' classes at a time.
      const auto leader = static_cast<uint8_t>(group_leaders_[static_cast<size_t>(current)]);
      for (int b = lo; b <= hi; b = class_run_end_[b] + 1) {
        std::atomic<int32_t>& slot = row[a.byte_class(static_cast<uint8_t>(b))];
        if (slot.load(std::memory_order_relaxed) == kUnknown) slot.store(kFirstPending - leader, std::memory_order_relaxed);
      }
      if (lo <= computed && computed <= hi) computed_leader = leader;
    }
    lo = hi + 1;
  }
  if (computed_leader >= 0) {
    std::atomic<int32_t>& slot = row[a.byte_class(static_cast<uint8_t>(computed_leader))];
    const int32_t known = row[a.byte_class(computed)].load(std::memory_order_relaxed);
    if (known >= 0 && slot.load(std::memory_order_relaxed) <= kFirstPending) slot.store(known, std::memory_order_release);
  }
}

int32_t Parser::StandIn(int32_t config, int32_t bytes) {
  if (!automaton_->has_stand_ins()) return config;
  std::atomic<int32_t>& memo = BlockOf(config)->stand_in[config & kBlockMask];
  int32_t known = memo.load(std::memory_order_acquire);
  if (known == kUnknown) {
    std::lock_guard<std::mutex> lock(mu_);
    known = StandInLocked(config, bytes);
    memo.store(known, std::memory_order_release);
  }
  return known;
}

// Agreeing for `bytes` bytes is an equivalence, so a stand-in's own stand-in (the next position
// of a repetition) stands for the state too, as far as the links hold: the last state reached
// stands for every state on the way. A link back to a state on the way ends the walk there.
int32_t Parser::StandInOfStateLocked(int32_t s, int32_t bytes) {
  const Automaton& a = *automaton_;
  constexpr int32_t kOnTheWay = -2;
  if (const auto known = stand_in_of_state_.find(s); known != stand_in_of_state_.end()) return known->second;
  stand_in_path_.clear();
  int32_t at = s;
  for (;;) {
    const Automaton::StandIn in = a.stand_in(at);
    if (in.state < 0 || in.bytes < bytes) break;
    stand_in_path_.push_back(at);
    stand_in_of_state_[at] = kOnTheWay;
    const auto known = stand_in_of_state_.find(in.state);
    if (known != stand_in_of_state_.end()) {
      at = known->second != kOnTheWay ? known->second : in.state;
      break;
    }
    at = in.state;
  }
  for (int32_t p : stand_in_path_) stand_in_of_state_[p] = at;
  stand_in_of_state_[s] = at;
  return at;
}

int32_t Parser::StandInLocked(int32_t config, int32_t bytes) {
  if (bytes != stand_in_bytes_) {
    stand_in_of_state_.clear();
    stand_in_bytes_ = bytes;
  }
  auto moved = [&](int32_t s) { return StandInOfStateLocked(s, bytes); };
  const auto [heads, count] = HeadsOf(config);
  out_.assign(heads, heads + count);
  bool any = false;
  for (uint64_t& head : out_) {
    int32_t state = StateOf(head), frame = FrameOf(head);
    const int32_t to = moved(state);
    if (frame != 0 && frames_[frame].ret != kFrameSet) {
      const int32_t ret = moved(frames_[frame].ret);
      if (ret != frames_[frame].ret) frame = PushFrame(ret, frames_[frame].parent);
    }
    if (to != state || frame != FrameOf(head)) {
      head = Pack(to, frame);
      any = true;
    }
  }
  if (!any) return config;
  return Intern(accepting(config), false);
}

int32_t Parser::PlainAsciiSuccessor(int32_t config) {
  std::atomic<int32_t>& memo = BlockOf(config)->plain_successor[config & kBlockMask];
  // Release/acquire: a reader then also sees the successor configuration's own data.
  int32_t known = memo.load(std::memory_order_acquire);
  if (known == kUnknown) {
    known = ComputePlainAsciiSuccessor(config);
    memo.store(known, std::memory_order_release);  // racing threads store the same value
  }
  return known;
}

int32_t Parser::ComputePlainAsciiSuccessor(int32_t config) {
  const uint64_t* live = LiveBytes(config);
  if (!HasAllPlainAscii(live)) return kDead;
  const int32_t successor = Next(config, 'a');
  if (successor == kDead) return kDead;
  uint64_t seen[4] = {0, 0, 0, 0};  // classes checked (class ids are < 256)
  for (int b = 0x20; b <= 0x7E; ++b) {
    if (!IsPlainAscii(static_cast<uint8_t>(b))) continue;
    const int32_t cls = automaton_->byte_class(static_cast<uint8_t>(b));
    if (seen[cls >> 6] >> (cls & 63) & 1) continue;
    seen[cls >> 6] |= 1ull << (cls & 63);
    if (Next(config, static_cast<uint8_t>(b)) != successor) return kDead;  // (a pending class: its leader's)
  }
  return successor;
}

const int32_t* Parser::LeadTargetsLocked(int32_t state) {
  const auto [at, fresh] = lead_targets_at_.emplace(state, lead_targets_.size());
  if (fresh) {
    lead_targets_.resize(lead_targets_.size() + Automaton::kNumLeads);
    automaton_->LeadTargets(state, &lead_targets_[at->second]);
  }
  return &lead_targets_[at->second];
}

// Lead L is in the set (1) when every head reads the characters of L into the state it reads
// `rep`, an ASCII byte of the successor, into (Automaton::LeadTargets): the configurations
// after them are the successor, with no intermediate configuration interned (those would be
// per stack: one set per JSON property for a string value). Undecided (-1: Steps asks the
// configurations) where a head's answer is not one state. Out (0) where the one head that
// reads the lead reads only some of its characters (the others die), and where a head reads
// characters of the lead but not `rep`, or `rep` but only some of the lead's characters: what
// those characters reach has a head the successor lacks, or lacks one it has, unless other
// heads' closures happen to make up the difference. A clear bit only costs a shortcut (every
// use of a step set decides the tokens of its clear bits byte by byte), so the rare
// coincidence is not worth interning the characters' configurations for: a string position
// that excludes `\s` has them for five leads, at every position of a counted string.
void Parser::LeadVerdicts(int32_t config, int rep, int8_t* verdicts) {
  constexpr int kNumLeads = Automaton::kNumLeads;
  static_assert(kNumLeads <= 64, "one bit per lead");
  std::fill(verdicts, verdicts + kNumLeads, int8_t{-1});
  if (rep < 0) return;
  // Per lead (bit L - 0xC2): every head reads it to its `rep` target; some head reads only
  // part of it; some head's answer is not one state; a head reads it apart from `rep`; some
  // head reads it; exactly one does.
  uint64_t same = ~0ull, partial = 0, mixed = 0, apart = 0, readers = 0, one_reader = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto [heads, count] = HeadsOf(config);
    for (uint32_t i = 0; i < count; ++i) {
      const int32_t state = StateOf(heads[i]);
      const int32_t rep_target = automaton_->ByteTarget(state, static_cast<uint8_t>(rep));
      if (rep_target == Automaton::kMixedTarget) return;
      const bool reads_rep = rep_target != Automaton::kNoTarget;
      const int32_t* targets = LeadTargetsLocked(state);
      uint64_t reads = 0;
      for (int k = 0; k < kNumLeads; ++k) {
        const int32_t t = targets[k];
        const uint64_t bit = 1ull << k;
        if (t != Automaton::kNoTarget) reads |= bit;
        if (t == Automaton::kPartialTarget) partial |= bit;
        if (t == Automaton::kMixedTarget) mixed |= bit;
        if (t != rep_target) same &= ~bit;
        if (reads_rep ? t == Automaton::kPartialTarget : t != Automaton::kNoTarget) apart |= bit;
      }
      one_reader = (one_reader & ~reads) | (reads & ~readers);
      readers |= reads;
    }
  }
  for (int k = 0; k < kNumLeads; ++k) {
    const uint64_t bit = 1ull << k;
    if (apart & bit) {
      verdicts[k] = 0;
    } else if (partial & bit) {
      verdicts[k] = (one_reader & bit) ? 0 : -1;
    } else {
      verdicts[k] = (mixed & bit) ? -1 : (same & bit) != 0;
    }
  }
}

Parser::StepSet Parser::Steps(int32_t config, bool with_leads) {
  Block* block = BlockOf(config);
  const int32_t k = config & kBlockMask;
  const uint8_t want = with_leads ? kStepsLeads : kStepsAscii;
  const uint8_t ready = block->steps_ready[k].load(std::memory_order_acquire);
  if ((ready & want) == want) {
    StepSet memo{block->step_successor[k].load(std::memory_order_relaxed), {}};
    for (int q = 0; q < 4; ++q) memo.bytes[q] = block->steps[4 * k + q].load(std::memory_order_relaxed);
    return memo;
  }
  // The most common live successor on ASCII bytes; ties go to `config` itself. Only live
  // bytes are looked at, and bytes of one class share their transition (computed once).
  const uint64_t* live = LiveBytes(config);
  const std::atomic<int32_t>* const row = Row(config);
  int32_t class_next[256];
  uint64_t class_known[4] = {0, 0, 0, 0};
  auto next_of = [&](int b) {
    const int32_t cls = automaton_->byte_class(static_cast<uint8_t>(b));
    if (!(class_known[cls >> 6] >> (cls & 63) & 1)) {
      class_known[cls >> 6] |= 1ull << (cls & 63);
      class_next[cls] = NextInRow(row, config, static_cast<uint8_t>(b));
    }
    return class_next[cls];
  };
  struct Count {
    int32_t successor, bytes;
  };
  Count counts[128];  // distinct live successors (at most one per ASCII byte)
  int n_counts = 0;
  for (int q = 0; q < 2; ++q) {
    for (uint64_t w = live[q]; w != 0; w &= w - 1) {
      const int32_t next = next_of(64 * q + __builtin_ctzll(w));
      if (next == kDead) continue;
      int k = 0;
      while (k < n_counts && counts[k].successor != next) ++k;
      if (k == n_counts) counts[n_counts++] = {next, 0};
      ++counts[k].bytes;
    }
  }
  int32_t successor = kDead, best = 0;
  for (int k = 0; k < n_counts; ++k) {
    if (counts[k].bytes > best || (counts[k].bytes == best && counts[k].successor == config)) {
      successor = counts[k].successor, best = counts[k].bytes;
    }
  }
  uint64_t w[4] = {0, 0, 0, 0};
  if (successor != kDead) {
    for (int q = 0; q < 2; ++q) {
      for (uint64_t bits = live[q]; bits != 0; bits &= bits - 1) {
        const int b = 64 * q + __builtin_ctzll(bits);
        if (next_of(b) == successor) w[q] |= 1ull << (b & 63);
      }
    }
  }
  // The lead bytes cost far more (intermediate configurations of multi-byte characters):
  // computed only when a subtree with non-ASCII bytes asks for them.
  if (successor != kDead && with_leads) {
    // Lead byte L is in the set when every valid character starting with L ends at the
    // successor. First by the heads' states alone (LeadVerdicts); a lead they leave
    // undecided goes to the configuration-level check.
    int rep = -1;  // an ASCII byte that leads to the successor
    for (int q = 0; q < 2 && rep < 0; ++q) {
      for (uint64_t bits = live[q]; bits != 0 && rep < 0; bits &= bits - 1) {
        const int b = 64 * q + __builtin_ctzll(bits);
        if (next_of(b) == successor) rep = b;
      }
    }
    int8_t by_states[Automaton::kNumLeads];
    LeadVerdicts(config, rep, by_states);
    // Otherwise by configurations. Leads with the same continuation ranges usually reach the
    // same configuration, so the check runs once per distinct (configuration, ranges) pair,
    // following the few distinct configurations reached byte by byte rather than every
    // character.
    struct Memo {
      int32_t after_lead;
      int need;
      uint8_t lo, hi;
      bool reaches;
    };
    std::vector<Memo> memo;
    std::vector<int32_t> level, next_level;
    for (int lead = 0xC2; lead <= 0xF4; ++lead) {
      if (!(live[lead >> 6] >> (lead & 63) & 1)) continue;
      if (const int verdict = by_states[lead - 0xC2]; verdict >= 0) {
        if (verdict == 1) w[lead >> 6] |= 1ull << (lead & 63);
        continue;
      }
      const int32_t after = Next(config, static_cast<uint8_t>(lead));
      if (after == kDead) continue;
      const Utf8Lead shape = Utf8LeadOf(static_cast<uint8_t>(lead));
      const int need = shape.continuations;
      const uint8_t lo = shape.lo, hi = shape.hi;
      bool reaches = false, known = false;
      for (const Memo& m : memo) {
        if (m.after_lead == after && m.need == need && m.lo == lo && m.hi == hi) reaches = m.reaches, known = true;
      }
      if (!known) {
        level.assign(1, after);
        bool dies = false;
        for (int step = 0; step < need && !dies; ++step) {
          next_level.clear();
          for (int32_t c : level) {
            const int first = step == 0 ? lo : 0x80, last = step == 0 ? hi : 0xBF;
            // Bytes of one class share their transition: one byte per run of a class.
            for (int b = first; b <= last && !dies; b = class_run_end_[b] + 1) {
              const int32_t n = Next(c, static_cast<uint8_t>(b));
              dies = n == kDead;
              if (std::find(next_level.begin(), next_level.end(), n) == next_level.end()) next_level.push_back(n);
            }
            if (dies) break;
          }
          level.swap(next_level);
        }
        reaches = !dies && level.size() == 1 && level[0] == successor;
        memo.push_back({after, need, lo, hi, reaches});
      }
      if (reaches) w[lead >> 6] |= 1ull << (lead & 63);
    }
  }
  // Racing threads compute the same value; the ready flags are published last.
  for (int q = 0; q < 4; ++q) block->steps[4 * k + q].store(w[q], std::memory_order_relaxed);
  block->step_successor[k].store(successor, std::memory_order_relaxed);
  block->steps_ready[k].store(want | kStepsAscii, std::memory_order_release);
  return {successor, {w[0], w[1], w[2], w[3]}};
}

void Parser::StoreMask(int32_t config, const uint32_t* words, size_t n_words, bool expensive) {
  // A cheap walk is memoized on the configuration's second fill only: most configurations are
  // filled once, and copying a vocabulary-sized mask costs about as much as a small walk.
  Block* block = BlockOf(config);
  if (block->mask_fills[config & kBlockMask].exchange(1, std::memory_order_relaxed) == 0 && !expensive) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = block->masks[config & kBlockMask];
  if (slot.load(std::memory_order_relaxed) != nullptr || masks_stored_ >= limits_.mask_cache_entries) return;
  uint32_t* copy = new uint32_t[n_words];
  std::copy(words, words + n_words, copy);
  ++masks_stored_;
  mask_words_hint_ = static_cast<int64_t>(n_words);
  slot.store(copy, std::memory_order_release);
}

std::shared_ptr<Parser> Parser::Fresh() const {
  auto fresh = std::make_shared<Parser>(automaton_, limits_);
  std::shared_ptr<const std::vector<int64_t>> dist;
  {
    std::lock_guard<std::mutex> lock(mu_);
    dist = dist_;
  }
  if (dist) fresh->TrackShortest(std::move(dist));
  return fresh;
}

int64_t Parser::ShortestLocked(const uint64_t* heads, uint32_t count) const {
  int64_t best = kFar;
  for (uint32_t i = 0; i < count; ++i) {
    const int64_t through = (*dist_)[static_cast<size_t>(StateOf(heads[i]))] + frame_shortest_[FrameOf(heads[i])];
    best = std::min(best, through);
  }
  return std::min(best, kFar);
}

void Parser::TrackShortest(std::shared_ptr<const std::vector<int64_t>> dist) {
  std::lock_guard<std::mutex> lock(mu_);
  if (dist_) return;
  dist_ = std::move(dist);
  // Frames are pushed after their parents: one pass in id order.
  // (A frame set after its members, too.)
  frame_shortest_.assign(1, 0);
  for (size_t f = 1; f < frames_.size(); ++f) {
    const Frame& fr = frames_[f];
    if (const auto [first, last] = MembersOf(static_cast<int32_t>(f)); first != last) {
      int64_t best = kFar;
      for (const int32_t* m = first; m != last; ++m) best = std::min(best, frame_shortest_[*m]);
      frame_shortest_.push_back(best);
      continue;
    }
    frame_shortest_.push_back(std::min(kFar, (*dist_)[static_cast<size_t>(fr.ret)] + frame_shortest_[fr.parent]));
  }
  const int32_t n = num_configs_.load(std::memory_order_relaxed);
  for (int32_t c = 0; c < n; ++c) {
    const auto [heads, count] = HeadsOf(c);
    BlockOf(c)->shortest[c & kBlockMask].store(ShortestLocked(heads, count), std::memory_order_relaxed);
  }
  tracks_shortest_.store(true, std::memory_order_release);
}

void Parser::Heads(int32_t config, std::vector<std::pair<int32_t, int32_t>>* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto [heads, count] = HeadsOf(config);
  out->clear();
  for (uint32_t i = 0; i < count; ++i) out->push_back({StateOf(heads[i]), FrameOf(heads[i])});
}

std::pair<int32_t, int32_t> Parser::FrameLink(int32_t frame) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (frames_[frame].ret == kFrameSet) return {kFrameSet, -1};
  return {frames_[frame].ret, frames_[frame].parent};
}

void Parser::FrameSetMembers(int32_t frame, std::vector<int32_t>* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto [first, last] = MembersOf(frame);
  out->assign(first, last);
}

bool Parser::StacksWithin(int32_t config, const std::vector<uint8_t>& states) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto [heads, count] = HeadsOf(config);
  stack_frames_.Clear();
  stack_pending_.clear();
  auto visit = [&](int32_t frame) {
    if (frame != 0 && stack_frames_.Insert(static_cast<uint32_t>(frame))) stack_pending_.push_back(frame);
  };
  for (uint32_t i = 0; i < count; ++i) {
    if (!states[static_cast<size_t>(StateOf(heads[i]))]) return false;
    visit(FrameOf(heads[i]));
  }
  // Stacks are shared: each frame once.
  while (!stack_pending_.empty()) {
    const int32_t frame = stack_pending_.back();
    stack_pending_.pop_back();
    if (const auto [first, last] = MembersOf(frame); first != last) {
      for (const int32_t* m = first; m != last; ++m) visit(*m);
      continue;
    }
    if (!states[static_cast<size_t>(frames_[frame].ret)]) return false;
    visit(frames_[frame].parent);
  }
  return true;
}

std::vector<int32_t> Parser::TokenSets(int32_t config) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int32_t> sets;
  const auto [heads, count] = HeadsOf(config);
  for (uint32_t i = 0; i < count; ++i) {
    const int32_t set = automaton_->token_set(StateOf(heads[i]));
    if (set >= 0) sets.push_back(set);
  }
  std::sort(sets.begin(), sets.end());
  sets.erase(std::unique(sets.begin(), sets.end()), sets.end());
  return sets;
}

int32_t Parser::NextToken(int32_t config, int32_t token) {
  if (!has_token_heads(config)) return kDead;
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t key = static_cast<uint64_t>(config) << 32 | static_cast<uint32_t>(token);
  auto it = token_next_.find(key);
  if (it != token_next_.end()) return it->second;
  const Automaton& a = *automaton_;
  out_.clear();
  visited_.Clear();
  accepting_scratch_ = false;
  const auto [heads, count] = HeadsOf(config);
  for (uint32_t i = 0; i < count; ++i) {
    const uint64_t head = heads[i];
    const int32_t set = a.token_set(StateOf(head));
    if (set >= 0 && a.token_sets()[set].Contains(token)) Closure(a.token_target(StateOf(head)), FrameOf(head));
  }
  const int32_t next = Intern(accepting_scratch_, true);
  token_next_.emplace(key, next);
  return next;
}

int32_t Parser::Union(int32_t a, int32_t b) {
  if (a == b || b == kDead) return a;
  if (a == kDead) return b;
  std::lock_guard<std::mutex> lock(mu_);
  out_.clear();
  for (int32_t c : {a, b}) {
    const auto [heads, count] = HeadsOf(c);
    out_.insert(out_.end(), heads, heads + count);
  }
  return Intern(accepting(a) || accepting(b), false);
}

}  // namespace logitgate
