// Parser: run-time configurations of the pushdown automaton, interned and memoized, shared by
// every matcher of one compiled grammar (across requests and threads).
//
// A *frame* is one stack entry (the state to return to, and the frame below it); frames are
// hash-consed, so a whole stack is one int and equal stacks are equal ints. Frame 0 is the
// empty stack. A *head* is (automaton state with byte edges, frame). A *configuration* is the
// sorted set of heads after epsilon closure, plus whether the input so far is a complete
// sentence. Configurations are interned, and their transitions (per byte class, see
// Automaton::byte_class) are computed lazily and memoized: the parser is a lazily built DFA
// over configurations. Configuration 0 is dead: no heads, not accepting, its own successor.
//
// Concurrency: reads of transitions, flags and cached masks are lock-free (acquire loads of
// values published with release stores); computing a missing transition, interning, and
// publishing a mask take `mu_`. Storage is in fixed-size blocks that never move, so a
// published pointer stays valid for the parser's lifetime. All memory is bounded by
// CoreLimits (max_configurations, max_parse_heads, max_stack_depth, mask_cache_entries).
//
// A parser is one *store*: once it holds max_configurations configurations, interning one
// more throws StoreFull. A compiled grammar then starts a fresh store (SharedParser::Renew)
// and its matchers move their state over as they hit the full one (Adopt): the old store is
// freed with its last matcher, so what earlier requests built never starves later ones.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "automaton.h"
#include "chunked.h"
#include "hash_index.h"
#include "stamp_set.h"

namespace logitgate {

// The store is full: LimitExceeded(max_configurations) unless the matcher moves to a fresh one.
struct StoreFull : CoreError {
  explicit StoreFull(const CoreError& e) : CoreError(e) {}
};

class Parser {
 public:
  static constexpr int32_t kDead = 0;
  static constexpr int32_t kUnknown = -1;

  Parser(std::shared_ptr<const Automaton> automaton, const CoreLimits& limits);
  ~Parser();
  Parser(const Parser&) = delete;
  Parser& operator=(const Parser&) = delete;

  const Automaton& automaton() const { return *automaton_; }
  // An empty store for the same automaton and limits.
  // (Shortest completions tracked as in this store.)
  std::shared_ptr<Parser> Fresh() const;
  // Interns here the configurations `configs` of store `from` (the same automaton's): their
  // ids in this store, in order. Throws StoreFull when they do not fit. Thread-safe.
  std::vector<int32_t> Adopt(const Parser& from, const std::vector<int32_t>& configs);
  int32_t initial() const { return initial_; }
  bool accepting(int32_t config) const { return Flags(config) & kAccepting; }
  // True when some byte or token terminal can still be consumed.
  bool has_heads(int32_t config) const { return Flags(config) & kHasHeads; }
  // True when some head reads a token terminal (Automaton::token_set): then the mask has the
  // terminals' ids besides the text tokens, and no byte is forced.
  bool has_token_heads(int32_t config) const { return Flags(config) & kHasTokenHeads; }
  // True when some head keeps any plain text without the characters of Automaton::kNearLeads'
  // lead bytes viable (Automaton::is_near_universal; true where plain_capacity is unbounded).
  bool near_universal(int32_t config) const { return Flags(config) & kNearUniversal; }
  // The token sets the heads of `config` read (indices into Automaton::token_sets, sorted,
  // distinct). Thread-safe.
  std::vector<int32_t> TokenSets(int32_t config) const;
  // Successor of `config` on token terminal `token` (whole: its bytes play no part), kDead
  // when no head's set holds it; memoized. The caller checks that the id is one a grammar may
  // read (matcher.h). Thread-safe.
  int32_t NextToken(int32_t config, int32_t token);
  // The configuration holding the heads of both (accepting when either is): a text token
  // that a negated token set also reads goes both ways. Thread-safe.
  int32_t Union(int32_t a, int32_t b);
  // How many plain characters are viable from here, whatever they are: the largest
  // Automaton::plain_capacity of the heads' states (kUnbounded: every plain text).
  int32_t plain_capacity(int32_t config) const {
    return BlockOf(config)->capacity[config & kBlockMask].load(std::memory_order_relaxed);
  }

  // Successor of `config` on byte b (kDead when b is not allowed). Thread-safe.
  int32_t Next(int32_t config, uint8_t b) {
    std::atomic<int32_t>& slot = Slot(config, automaton_->byte_class(b));
    int32_t next = slot.load(std::memory_order_acquire);
    return next >= 0 ? next : Resolve(config, b, next);
  }

  // The transition row of `config` (one slot per byte class); with NextInRow it saves the
  // block lookup on the mask walk's hot path.
  const std::atomic<int32_t>* Row(int32_t config) const { return &Slot(config, 0); }
  int32_t NextInRow(const std::atomic<int32_t>* row, int32_t config, uint8_t b) {
    int32_t next = row[automaton_->byte_class(b)].load(std::memory_order_acquire);
    return next >= 0 ? next : Resolve(config, b, next);
  }
  // Whether Next(config, b) is a configuration (not kDead), for a walk that needs no more
  // than that (a token's last byte): a byte some head reads leads somewhere, so the transition
  // is computed only near the stack depth limit, where closures drop heads (Closure). Invariant
  // behind it: every automaton state can still reach its rule's end (dead states are pruned),
  // and every frame's return state can complete, so a closure from an edge's target has a head
  // or pops to an accepting end; Intern marks the live classes' slots, the others kDead.
  bool ViableInRow(const std::atomic<int32_t>* row, int32_t config, uint8_t b) {
    const int32_t next = row[automaton_->byte_class(b)].load(std::memory_order_acquire);
    if (next >= 0) return next != kDead;
    return !(Flags(config) & kNearDepthLimit) || Resolve(config, b, next) != kDead;
  }

  // The *step set* of `config`: its most common successor on ASCII bytes (itself for string
  // bodies and other loops, the next position for bounded repetitions), and the bytes that
  // lead there: ASCII bytes b with Next(config, b) == successor, and UTF-8 lead bytes L such
  // that every valid character starting with L ends at the successor (all but the rare such
  // lead that only a coincidence of heads' closures brings there: see Steps; a clear lead bit
  // costs a shortcut, never a wrong mask). 4 words, bit b of word b/64; continuation bytes are
  // never members. Computed once per configuration, then read
  // lock-free. Thread-safe.
  struct StepSet {
    int32_t successor;  // kDead when no ASCII byte is allowed
    // A copy: the memo's words are atomics that a racing thread may store (the same value)
    // while this one reads them.
    uint64_t bytes[4];
  };
  // With `with_leads` false only the ASCII part is guaranteed (lead bits may be clear).
  StepSet Steps(int32_t config, bool with_leads);
  // The configuration every plain ASCII byte (plain_text.h) leads to from `config`, or kDead
  // when some is not allowed or they lead to different ones. Where the classes were grouped
  // this costs one closure (a step set also pays for '"' and '\\'); memoized. Thread-safe.
  int32_t PlainAsciiSuccessor(int32_t config);
  // The configuration whose mask is `config`'s for tokens of at most `bytes` bytes, by the
  // automaton's stand-ins (Automaton::stand_in): each head at a state, and each head's frame
  // returning to a state, that has a stand-in agreeing for `bytes` bytes or more is moved
  // there (frame sets stay). `config` itself where none has. Memoized for the first `bytes`
  // asked (a grammar's matchers share one vocabulary, so one value); thread-safe.
  int32_t StandIn(int32_t config, int32_t bytes);
  // True when Steps(config, with_leads) is memoized (costs no transition).
  bool StepsReady(int32_t config, bool with_leads) const {
    const uint8_t want = with_leads ? kStepsLeads : kStepsAscii;
    return (BlockOf(config)->steps_ready[config & kBlockMask].load(std::memory_order_acquire) & want) == want;
  }
  // The step successor of `config` if its step set was already computed, else kUnknown.
  int32_t KnownStepSuccessor(int32_t config) const {
    Block* block = BlockOf(config);
    const int32_t k = config & kBlockMask;
    if (!block->steps_ready[k].load(std::memory_order_acquire)) return kUnknown;
    return block->step_successor[k].load(std::memory_order_relaxed);
  }

  // Bytes some head of `config` can consume (4 words, bit b of word b/64); a superset of the
  // bytes with a live successor. Set when the configuration is created. Thread-safe.
  const uint64_t* LiveBytes(int32_t config) const {
    return reinterpret_cast<const uint64_t*>(&BlockOf(config)->live[4 * (config & kBlockMask)]);
  }

  // The memoized mask of `config`, or nullptr. Thread-safe.
  const uint32_t* CachedMask(int32_t config) const {
    return BlockOf(config)->masks[config & kBlockMask].load(std::memory_order_acquire);
  }
  // Memoizes `words` (n_words) as the mask of `config` unless the cache is full: at once when
  // the walk was `expensive`, else from the configuration's second fill on. Thread-safe.
  void StoreMask(int32_t config, const uint32_t* words, size_t n_words, bool expensive);

  // Shortest completions, for budget.h: given each automaton state's shortest string to the
  // end of its rule (`dist`, kFar where there is none), every configuration records the
  // length in bytes of the shortest completion through its heads (a head's state's distance
  // plus its frames' return states' distances; the cheapest head), computed as it is interned
  // from the frames' sums kept as they are pushed; configurations interned before the call get
  // theirs then. So a budget reads it lock-free instead of walking the heads of every new
  // configuration. Once per store (later calls do nothing); fresh stores inherit it.
  static constexpr int64_t kFar = INT64_MAX / 4;
  void TrackShortest(std::shared_ptr<const std::vector<int64_t>> dist);
  bool tracks_shortest() const { return tracks_shortest_.load(std::memory_order_acquire); }
  // The shortest completion of `config` through its heads in bytes (kFar: none), or -1 when
  // not tracked (yet). Lock-free.
  int64_t shortest(int32_t config) const {
    return BlockOf(config)->shortest[config & kBlockMask].load(std::memory_order_relaxed);
  }

  // The heads of `config` as (automaton state, frame) pairs, and a frame's (return state,
  // parent frame); frame 0 is the empty stack. A *frame set* (heads of one state whose stacks
  // differ, merged: see MergeSameStateHeadsLocked) has no link of its own: FrameLink returns
  // kFrameSet and FrameSetMembers its members, plain frames of one depth. Thread-safe (take
  // mu_). For budget.h, which measures completions from the heads.
  static constexpr int32_t kFrameSet = -2;
  void Heads(int32_t config, std::vector<std::pair<int32_t, int32_t>>* out) const;  // replaces *out
  std::pair<int32_t, int32_t> FrameLink(int32_t frame) const;
  void FrameSetMembers(int32_t frame, std::vector<int32_t>* out) const;  // replaces *out
  // True when `states` (a flag per automaton state) holds every head's state of `config` and
  // every return state on the heads' stacks (a frame set's members' too): where any token may
  // lead, pops included. Thread-safe (takes mu_).
  bool StacksWithin(int32_t config, const std::vector<uint8_t>& states) const;

  int32_t num_configurations() const { return num_configs_.load(std::memory_order_acquire); }
  // Transitions computed so far (each one a closure and an interning); for profiling.
  int64_t num_transitions() const { return num_transitions_.load(std::memory_order_relaxed); }
  // Bytes held by the configurations, transitions, stacks, memoized masks and scratch.
  int64_t memory_bytes() const;

 private:
  static constexpr int32_t kBlockBits = 6;
  static constexpr int32_t kBlockSize = 1 << kBlockBits;
  static constexpr int32_t kBlockMask = kBlockSize - 1;
  static constexpr uint8_t kAccepting = 1;
  static constexpr uint8_t kHasHeads = 2;
  static constexpr uint8_t kHasTokenHeads = 4;
  static constexpr uint8_t kNearUniversal = 8;
  static constexpr uint8_t kNearDepthLimit = 16;  // some head's frames are near max_stack_depth
  static constexpr uint8_t kStepsAscii = 1;  // steps_ready bits
  static constexpr uint8_t kStepsLeads = 3;  // leads imply ASCII

  struct Block {
    std::unique_ptr<std::atomic<int32_t>[]> transitions;  // kBlockSize * num_classes
    std::atomic<uint8_t> flags[kBlockSize];
    std::atomic<const uint32_t*> masks[kBlockSize];
    std::atomic<uint8_t> mask_fills[kBlockSize];  // 1 once the configuration was walked
    std::atomic<uint64_t> steps[4 * kBlockSize];  // Steps(): valid once steps_ready is set
    std::atomic<int32_t> step_successor[kBlockSize];
    std::atomic<uint8_t> steps_ready[kBlockSize];
    std::atomic<uint64_t> live[4 * kBlockSize];  // LiveBytes, written before the id is published
    std::atomic<int32_t> capacity[kBlockSize];    // plain_capacity, likewise
    std::atomic<int32_t> plain_successor[kBlockSize];  // PlainAsciiSuccessor once known, else kUnknown
    std::atomic<int64_t> shortest[kBlockSize];         // shortest(), -1 until tracked
    std::atomic<int32_t> stand_in[kBlockSize];         // StandIn() once known, else kUnknown
  };
  // A frame: return state and parent frame; or, for a frame set, kFrameSet and the offset of
  // its members in set_members_ (their count, then their ids in order).
  struct Frame {
    int32_t ret;
    int32_t parent;
    int32_t depth;
  };

  Block* BlockOf(int32_t config) const { return blocks_[config >> kBlockBits].load(std::memory_order_acquire); }
  uint8_t Flags(int32_t config) const {
    return BlockOf(config)->flags[config & kBlockMask].load(std::memory_order_relaxed);
  }
  std::atomic<int32_t>& Slot(int32_t config, int32_t cls) const {
    return BlockOf(config)->transitions[static_cast<size_t>(config & kBlockMask) * num_classes_ + cls];
  }

  // A transition slot holds a configuration id (>= 0), kUnknown, or (for configurations
  // whose classes were grouped, see GroupClassesLocked) kFirstPending - b: not computed yet,
  // the same as the transition on byte b (the group leader's representative byte).
  static constexpr int32_t kFirstPending = -2;
  // Configurations with at least this many live byte classes group them on the second
  // transition computed (with fewer, grouping costs more than the closures it saves; many
  // configurations a walk makes never get a second one).
  static constexpr int32_t kGroupLiveClasses = 8;
  int32_t ComputeLocked(int32_t config, uint8_t b);
  // Next's slow path. A pending class whose group leader is computed takes the leader's
  // transition without the lock: a computed slot never changes, and a racing ComputeLocked
  // stores the same value.
  int32_t Resolve(int32_t config, uint8_t b, int32_t pending) {
    if (pending <= kFirstPending) {
      const auto leader_byte = static_cast<uint8_t>(kFirstPending - pending);
      const int32_t next = Slot(config, automaton_->byte_class(leader_byte)).load(std::memory_order_acquire);
      if (next >= 0) {
        Slot(config, automaton_->byte_class(b)).store(next, std::memory_order_release);
        return next;
      }
    }
    return ComputeLocked(config, b);
  }
  int32_t ComputePlainAsciiSuccessor(int32_t config);
  // Per lead byte 0xC2-0xF4, whether the heads' states alone put it in `config`'s step set
  // with ASCII byte `rep` (-1: none): 1 in, 0 out, -1 undecided. Takes mu_.
  void LeadVerdicts(int32_t config, int rep, int8_t* verdicts);
  // Automaton::LeadTargets(state), memoized per state (kNumLeads entries; valid while mu_ is
  // held: the store may move).
  const int32_t* LeadTargetsLocked(int32_t state);
  int32_t StandInLocked(int32_t config, int32_t bytes);
  // The state standing for state s where no token is longer than `bytes` (s itself where none
  // does), following stand-ins of stand-ins; memoized in stand_in_of_state_.
  int32_t StandInOfStateLocked(int32_t s, int32_t bytes);
  int32_t TransitionLocked(int32_t config, uint8_t b);
  void GroupClassesLocked(int32_t config, uint8_t computed);
  void Closure(int32_t state, int32_t frame);
  // Interns the configuration of the heads in out_ (sorted and deduplicated here). `closed`:
  // out_ is the closure just computed (distinct heads, each in visited_), so a configuration
  // of as many heads all in visited_ is the same one, and out_ is sorted only when it is new.
  int32_t Intern(bool accepting, bool closed);
  int32_t PushFrame(int32_t ret, int32_t parent);
  // The frame set of `members` (sorted, distinct, plain frames of one depth, at least two).
  int32_t FrameSetLocked(const std::vector<int32_t>& members);
  // The frame standing for the plain frames of one depth in `*members` (sorted and deduplicated
  // here): the one frame itself, or their frame set.
  int32_t FrameOfMembersLocked(std::vector<int32_t>* members);
  // A frame set's members [first, second) (plain frames); empty for a plain frame. Valid until
  // the next frame set is made.
  std::pair<const int32_t*, const int32_t*> MembersOf(int32_t frame) const {
    if (frames_[frame].ret != kFrameSet) return {nullptr, nullptr};
    const int32_t* at = set_members_.data() + frames_[frame].parent;
    return {at + 1, at + 1 + at[0]};
  }
  // Replaces heads of one state and one frame depth in out_ by one head whose frame is the set
  // of their frames; true when it merged any.
  bool MergeSameStateHeadsLocked();
  // A configuration's heads and their count (configs_; under mu_).
  std::pair<const uint64_t*, uint32_t> HeadsOf(int32_t config) const;
  // The shortest completion through `heads` (TrackShortest); dist_ is set.
  int64_t ShortestLocked(const uint64_t* heads, uint32_t count) const;
  // True when a head at this frame depth may be unable to complete within max_stack_depth
  // (depth + 1 + the automaton's largest stack need passes it: the 1 for a character rule's
  // frame, see Intern): then Closure checks each head's stack need (stack_need_, loaded here
  // on first use). Far from the limit nothing is checked.
  bool NearDepthLimitLocked(int64_t depth);

  std::shared_ptr<const Automaton> automaton_;
  CoreLimits limits_;
  int32_t num_classes_;
  uint8_t class_run_end_[256];  // the last byte of the run of b's class that starts at byte b
  std::unique_ptr<std::atomic<Block*>[]> blocks_;
  int64_t max_blocks_;
  std::atomic<int32_t> num_configs_{0};
  std::atomic<int64_t> num_transitions_{0};
  int32_t initial_ = 0;

  // Everything below is guarded by mu_.
  mutable std::mutex mu_;
  int64_t last_safe_depth_;  // NearDepthLimitLocked: the deepest frame depth known to be far
  const int32_t* stack_need_ = nullptr;  // the automaton's, once a head came near the limit
  std::vector<Frame> frames_;
  std::vector<int32_t> set_members_;  // frame sets' members (Frame)
  // TrackShortest: the states' distances, and per frame the sum of its return states'.
  std::shared_ptr<const std::vector<int64_t>> dist_;
  std::vector<int64_t> frame_shortest_;
  std::atomic<bool> tracks_shortest_{false};
  HashIndex frame_index_;  // of frames_ by (return state, parent)
  // Per configuration: its heads (sorted, stored in heads_), its hash, and the byte classes
  // some head consumes. Chunked, so that no store growth copies them (chunked.h).
  struct ConfigRecord {
    const uint64_t* heads;
    uint32_t count;
    int16_t live_classes;
    // Where its classes are to be grouped: kNoTransition, then the byte of its first
    // transition (computed alone), then kGrouped from the second on.
    int16_t first_byte;
    uint64_t hash;
  };
  static constexpr int16_t kNoTransition = -1, kGrouped = -2;
  ChunkedVector<ConfigRecord> configs_;
  ChunkedRuns<uint64_t> heads_;
  // The interning index, keyed by a configuration's heads and accepting bit. No allocation per
  // configuration: interning is on the path of every first-visit walk.
  HashIndex index_;
  int64_t num_blocks_ = 0;  // blocks allocated
  int64_t masks_stored_ = 0;
  int64_t mask_words_hint_ = 0;
  std::vector<uint64_t> out_, work_;
  // GroupClassesLocked scratch.
  struct Event {
    uint32_t pair;  // the edge's (head, target) pair
    bool enter;     // at its first byte, else after its last
  };
  std::unordered_map<uint64_t, int32_t> token_next_;  // NextToken's memo: config << 32 | token
  std::unordered_map<int32_t, size_t> lead_targets_at_;  // LeadTargetsLocked's offsets into lead_targets_
  std::vector<int32_t> lead_targets_;
  // StandInOfStateLocked's memo, for stand_in_bytes_ (a store serves one vocabulary), and its
  // scratch.
  std::unordered_map<int32_t, int32_t> stand_in_of_state_;
  int32_t stand_in_bytes_ = -1;
  std::vector<int32_t> stand_in_path_;
  std::vector<Event> group_events_;  // by byte
  std::vector<uint32_t> group_edge_pair_, group_edges_on_, group_active_, group_position_, group_stamp_, group_pairs_;
  std::vector<std::pair<int32_t, uint32_t>> group_target_slots_;  // (target state, pair)
  std::vector<uint64_t> group_hashes_;
  std::vector<size_t> group_begin_, group_leaders_;
  uint32_t group_epoch_ = 0;  // group_stamp_'s current stamp
  StampSet visited_;
  // StacksWithin's frames seen and pending (under mu_).
  mutable StampSet stack_frames_;
  mutable std::vector<int32_t> stack_pending_;
  // MergeSameStateHeadsLocked scratch.
  StampSet merge_states_;
  std::vector<int32_t> merge_members_;
  bool accepting_scratch_ = false;
};

// The store a compiled grammar's new matchers start on. Renew replaces a full store by a
// fresh one, once per full store (whoever asks first); matchers still on the old one keep it
// alive until they move over or end. Thread-safe.
class SharedParser {
 public:
  SharedParser& operator=(std::shared_ptr<Parser> parser) {
    std::lock_guard<std::mutex> lock(mu_);
    current_ = std::move(parser);
    return *this;
  }
  std::shared_ptr<Parser> get() const {
    std::lock_guard<std::mutex> lock(mu_);
    return current_;
  }
  // `grammar.parser->num_configurations()`: the current store, kept alive for the call.
  std::shared_ptr<Parser> operator->() const { return get(); }
  // The store to move to from the full store `full`. (Const: compiled grammars are shared as
  // const, and which store is current is not part of what a grammar means.)
  std::shared_ptr<Parser> Renew(const Parser* full) const {
    std::lock_guard<std::mutex> lock(mu_);
    if (current_.get() == full) current_ = full->Fresh();
    return current_;
  }

 private:
  mutable std::mutex mu_;
  mutable std::shared_ptr<Parser> current_;
};

}  // namespace logitgate
