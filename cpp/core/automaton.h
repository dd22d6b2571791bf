// Automaton: the compiled form of a grammar. Each rule is a Thompson-style NFA over bytes with
// epsilon edges and *call* edges (call rule R, then continue at a return state); together with
// a stack of return states this is a pushdown automaton over bytes.
//
// Built from the flat int32 program that python/logitgate/grammar/program.py writes (opcodes
// below). After construction:
// - every state that survives can reach its rule's final state (dead states are pruned, calls
//   to rules with an empty language removed), so any parse configuration with a head can still
//   be completed: "viable prefix" equals "configuration non-empty";
// - no rule can reach a call of itself without consuming a byte (left recursion is rejected),
//   so the closure of any configuration is finite;
// - each rule is determinized (subset construction, calls as symbols) unless that would grow it
//   past a budget: alternatives that share a prefix share states, and calls of one rule from
//   several alternatives become one call that returns to the union of their continuations,
//   so a configuration holds one head per rule and frame where the NFA held many;
// - kernel(s) lists the states reachable from s by epsilon edges that matter at run time:
//   states with byte edges, call edges, or the final flag;
// - a call whose return state can only end the rule is a tail call (no frame is pushed), so
//   right recursion and chains of rules in tail position do not deepen the stack.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "arena.h"
#include "error.h"
#include "utf8_ranges.h"

namespace logitgate {

// Program opcodes (keep in sync with python/logitgate/grammar/program.py).
enum Op : int32_t {
  kOpLiteral = 1,    // [1, n, b0 .. b(n-1)]
  kOpCharClass = 2,  // [2, negated, n, lo0, hi0, ...]  Unicode scalar values
  kOpByteClass = 3,  // [3, negated, n, lo0, hi0, ...]
  kOpSeq = 4,        // [4, n, child0 .. child(n-1)]
  kOpAlt = 5,        // [5, n, child0 .. ]
  kOpRepeat = 6,     // [6, min, max (-1: unbounded), child]
  kOpRef = 7,        // [7, rule index]
  // JSON string contents spelling anything but the words, then `tail` (string_except.cc):
  // [8, n_words, (n, code point 0 .. n-1) per word, tail node]
  kOpStringExcept = 8,
  // One whole token whose id is in the set, or (negated) any token whose id is not:
  // [9, negated, n, id0 .. id(n-1)]. Special tokens are read only this way (never as bytes).
  kOpTokenSet = 9,
};

// A token terminal's set of ids (sorted, distinct); `negated`: every id but those.
struct TokenSet {
  bool negated = false;
  std::vector<int32_t> ids;
  bool Contains(int32_t id) const { return std::binary_search(ids.begin(), ids.end(), id) != negated; }
  bool operator<(const TokenSet& o) const { return negated != o.negated ? negated < o.negated : ids < o.ids; }
};

struct ByteEdge {
  uint8_t lo, hi;
  int32_t target;
};

struct CallEdge {
  int32_t rule;
  int32_t ret;        // state to continue at once the rule finishes
  bool tail = false;  // nothing but the caller's end can follow: call without pushing a frame
};

// Per-state and per-rule flags, a byte each: std::vector<bool>'s bit arithmetic was about a
// tenth of a compile's instructions.
using Flags = std::vector<uint8_t>;

// A state's edges. Automata have up to millions of states with a few edges each, built by
// appending: one arena per automaton (Automaton::arena_) serves every list, so growing one
// costs a pointer bump rather than a heap allocation, and the automaton frees them at once.
template <typename T>
using EdgeList = std::vector<T, ArenaAllocator<T>>;

class Automaton {
 public:
  // program: [n_rules, root, then per rule its body in prefix form, then optionally the
  // stand-in claims: n, then n pairs (rule a, rule b)]
  Automaton(const std::vector<int32_t>& program, std::vector<std::string> rule_names, const CoreLimits& limits);

  int32_t num_states() const { return static_cast<int32_t>(bytes_.size()); }
  // Bytes the automaton holds (states, edges, kernels, flags, names).
  int64_t memory_bytes() const;
  int32_t root_start() const { return rule_start_[root_]; }
  int32_t rule_start(int32_t r) const { return rule_start_[r]; }
  int32_t num_rules() const { return static_cast<int32_t>(rule_start_.size()); }
  const EdgeList<ByteEdge>& bytes(int32_t s) const { return bytes_[s]; }
  const EdgeList<CallEdge>& calls(int32_t s) const { return calls_[s]; }
  bool is_final(int32_t s) const { return final_[s]; }
  // True when from s every string of *plain* bytes (printable ASCII but '"' and '\', and
  // valid UTF-8 characters) is read within s's rule, or rules it calls in tail position, ending
  // at such a state again: a head at s keeps any plain text viable (string bodies, free text).
  bool is_universal(int32_t s) const { return universal_[s]; }
  // The lead bytes of U+0085 (0xC2) and U+2028/U+2029 (0xE2), as bits (bit b - 192 for lead b):
  // a class such as a pattern's `.` leaves out those characters, so it reads neither lead's
  // characters all and nothing that loops on it is universal.
  static constexpr uint64_t kNearLeads = (1ull << (0xC2 - 192)) | (1ull << (0xE2 - 192));
  // True when s is universal for plain text without the characters of the kNearLeads lead bytes
  // (every universal state is): the mask walk takes it as universal and decides every token
  // holding one of those bytes by its bytes (Matcher::Walk, RestWalk).
  bool is_near_universal(int32_t s) const { return near_universal_[s]; }
  // How many plain characters are viable from s at least, whatever they are: kUnbounded for a
  // universal state; for the positions of a bounded repetition of characters (a `maxLength`
  // string) the characters left. A lower bound (0: no guarantee).
  static constexpr int32_t kUnbounded = 1 << 20;
  int32_t plain_capacity(int32_t s) const { return capacity_[s]; }
  // True when s starts a rule that reads any one plain character and may then end (a string's
  // character rule): a head there with return state r has capacity 1 + plain_capacity(r).
  bool starts_plain_character(int32_t s) const { return single_start_[s]; }
  // Likewise for every plain character but those of the kNearLeads lead bytes.
  bool starts_near_plain_character(int32_t s) const { return near_single_start_[s]; }
  // The rule s starts when that rule reads one character of a class and may then end (a
  // pattern's class, or the others' class beside it, in a JSON string), else -1; which
  // characters: char_ascii (plain ASCII bytes, 2 words) and char_utf8 (every valid UTF-8
  // character). Heads at such starts that together read every plain character give their
  // configuration a capacity of 1 + the least of their return states' (Parser).
  int32_t char_rule_at(int32_t s) const { return char_rule_at_[s]; }
  const uint64_t* char_ascii(int32_t r) const { return char_ascii_[r].data(); }
  bool char_utf8(int32_t r) const { return char_utf8_[r]; }
  // Per state s, the fewest frames a run from s must push, at the deepest point, to end s's
  // rule (0 when it can end without calling a rule that pushes a frame); kNoStackNeed for
  // states no run lands on. A head at s whose frame is at depth d can complete within
  // max_stack_depth iff d + need(s) <= max_stack_depth (and its frames' return states can, in
  // turn). Never more than stack_need_bound(), so only outputs within that of the limit need
  // it: computed on first use. Thread-safe.
  static constexpr int32_t kNoStackNeed = INT32_MAX;
  const std::vector<int32_t>& stack_need() const {
    std::call_once(stack_need_once_, [this] { ComputeStackNeed(); });
    return stack_need_;
  }
  // The largest need of any state.
  int32_t max_stack_need() const {
    stack_need();
    return max_stack_need_;
  }
  // An upper bound of every stack need, known without computing them: one more than the
  // number of rules some call pushes a frame for.
  int32_t stack_need_bound() const { return stack_need_bound_; }
  // Kernel states of the epsilon closure of s (s itself included when it is a kernel state).
  const int32_t* kernel_begin(int32_t s) const { return kernel_.data() + kernel_offset_[s]; }
  const int32_t* kernel_end(int32_t s) const { return kernel_.data() + kernel_offset_[s + 1]; }
  // What each of those states does in a closure (kHeadState | kCalls | kFinal bits), beside
  // them: the parser's closure reads this byte instead of the state's edge lists and flags.
  static constexpr uint8_t kHeadState = 1;  // byte edges or a token read: a parse head
  static constexpr uint8_t kCalls = 2;
  static constexpr uint8_t kFinal = 4;
  const uint8_t* kernel_kinds_begin(int32_t s) const { return kernel_kinds_.data() + kernel_offset_[s]; }
  const std::vector<std::string>& rule_names() const { return rule_names_; }
  // The rule whose states s is one of (for diagnostics: walk_bench --configs).
  int32_t rule_of_state(int32_t s) const { return state_rule_[static_cast<size_t>(s)]; }
  // Token terminals (kOpTokenSet). Each distinct set is a rule of its own, two states: its
  // start *reads a token* of the set to its final state, and has no other edge. Such a start
  // is a kernel state and a parse head like a state with byte edges, but bytes never move it:
  // text never produces a token terminal and a token terminal never matches text.
  // token_set(s): the set state s reads (index into token_sets()), or -1; token_target(s):
  // where reading one leads.
  const std::vector<TokenSet>& token_sets() const { return token_sets_; }
  bool has_token_sets() const { return !token_sets_.empty(); }
  int32_t token_set(int32_t s) const { return token_read_.empty() ? -1 : token_read_[s].set; }
  int32_t token_target(int32_t s) const { return token_read_[s].target; }
  // What reading from state s does, by state alone (no stack): for byte b, and for every valid
  // UTF-8 character that starts with lead byte `lead`. The answer is the one state reached
  // (for a character: through states without calls that cannot end their rule, so no frame
  // moves on the way), kNoTarget when nothing is read, and kMixedTarget when it is not one
  // state (s not determinized, or characters of the lead that end apart or only some read).
  // LeadTargets tells one case apart: kPartialTarget where some but not every character of
  // the lead is read (from a determinized state, the others having no edge on the way).
  static constexpr int32_t kNoTarget = -1, kMixedTarget = -2, kPartialTarget = -3;
  int32_t ByteTarget(int32_t s, uint8_t b) const;
  // The same for every ASCII byte of `set` (2 words) at once: the one state all of them reach,
  // kNoTarget when none is read, kMixedTarget otherwise (some are not read, or reach apart).
  int32_t SetTarget(int32_t s, const uint64_t* set) const;
  // For each lead byte 0xC2-0xF4 at once, the answer for the characters it starts:
  // out[lead - 0xC2] (kNumLeads entries).
  static constexpr int kNumLeads = 0xF4 - 0xC2 + 1;
  void LeadTargets(int32_t s, int32_t* out) const;
  // Bytes that no byte edge tells apart share a class; transitions are stored per class.
  int32_t byte_class(uint8_t b) const { return byte_class_[b]; }
  int32_t num_byte_classes() const { return num_byte_classes_; }
  // Bytes some edge reads (4 words, bit b of word b/64): a token with any other byte is never
  // allowed. `full_alphabet()`: every byte is read somewhere.
  const uint64_t* alphabet() const { return alphabet_; }
  bool full_alphabet() const { return (alphabet_[0] & alphabet_[1] & alphabet_[2] & alphabet_[3]) == ~0ull; }

  // *Coarse classes*: a partition of the bytes such that every *covered* state (reachable from
  // the start without reading kCoarseExcluded) reads all bytes of a class to one state, or none
  // of them. From a configuration whose heads and return states are all covered, tokens that
  // spell the same string of classes and hold no excluded byte go alike: each step reads a
  // covered state, or pops to a covered return state (Vocabulary::ClassTrie, Matcher::ClassWalk).
  // The excluded byte is the backslash: a JSON string's escapes sit behind it, and their hex
  // digits and letters would tell most letters apart. count 0: no partition worth a class
  // trie (token terminals, or more than kMaxCoarseClasses classes). Computed on first use and
  // kept (a few bytes per state); thread-safe.
  static constexpr uint8_t kCoarseExcluded = '\\';
  static constexpr int32_t kMaxCoarseClasses = 32;
  struct CoarseClasses {
    int32_t count = 0;
    std::array<uint8_t, 256> of_byte{};
    Flags covered;  // per state
  };
  const CoarseClasses& coarse_classes() const {
    std::call_once(coarse_once_, [this] { ComputeCoarseClasses(); });
    return coarse_;
  }

  // A state's *character step* (character_step.cc): from s, every valid UTF-8 multi-byte
  // character s reads ends at one state `end`, through states that read continuation bytes only
  // (no call, no end); `chars` are those characters and the ASCII bytes s reads to `end` too (a
  // class read once: `[\p{L} ]` in a pattern). ASCII bytes s reads elsewhere (a JSON string's
  // backslash) are not in it: they are `exits`, with the closing quote of a JSON string. A chain of such positions that reads only some characters of a
  // lead byte (`partial_leads`) is one that the step sets and plain shortcuts do not serve:
  // Matcher::CharacterChainWalk does, from Vocabulary::char_split(chars). nullptr where s is not
  // determinized, calls a rule, reads no multi-byte character, reads a byte that starts none, or
  // reads characters that end apart. Computed on first use per state and kept; thread-safe.
  struct CharacterStep {
    CodePointRanges chars;  // sorted, merged
    int32_t end = -1;
    uint64_t first[4] = {0, 0, 0, 0};  // the first bytes of chars' members (bit b of word b/64)
    uint64_t exits[2] = {0, 0};        // '"' and the ASCII bytes s reads elsewhere
    uint64_t partial_leads = 0;        // leads some but not all of whose characters are members (bit b - 0xC0)
    uint8_t probe[4] = {0, 0, 0, 0};   // a member's UTF-8 bytes
    int probe_length = 0;
  };
  const CharacterStep* character_step(int32_t s) const;

  // *Stand-ins* (stand_ins.cc). A program may end with claims (rule a, rule b): b reads what a
  // reads, as far as a token reaches (the lowering pairs a counted string position with its
  // pattern's uncounted loop, whose walks repeat configurations where the counted ones never
  // do). Claims are checked here, not trusted: from each claim's pair of rule starts, pairs of
  // states are followed along equal byte edges, calls of one rule and tail calls, and a pair
  // *agrees for d bytes* when every text of at most d bytes leads both ways alike (read, end
  // the rule, or neither) — up to the nearest pair that differs in its final flag, its edges or
  // its kernel. stand_in(s) is the state standing for s and for how many bytes (state -1 and 0:
  // none); it is given for the states of checked pairs (kernel states and call return states)
  // when s != state. A head at s, or a frame returning to s, may be replaced by one at the
  // stand-in wherever no token is longer than that: the masks are the same (Parser::StandIn).
  // Computed with the automaton.
  struct StandIn {
    int32_t state = -1;
    int32_t bytes = 0;
  };
  // True when some claim holds for a byte or more.
  bool has_stand_ins() const { return !stand_ins_.empty(); }
  StandIn stand_in(int32_t s) const {
    return stand_ins_.empty() ? StandIn{} : stand_ins_[static_cast<size_t>(s)];
  }
  // The claims as the program gave them: rule a, rule b, ...
  const std::vector<int32_t>& stand_in_claims() const { return stand_in_claims_; }

  // The automaton as bytes, and back (automaton_image.cc): what a compile built, for the
  // compiler's on-disk cache. LoadImage checks every length and index it reads and throws
  // CoreError::CacheFile for a truncated, foreign-version or inconsistent image (never reads
  // out of bounds); the image must have been saved under the same `limits`.
  // Bumped whenever the image layout, or the meaning of anything stored, changes.
  static constexpr uint32_t kImageVersion = 3;
  std::string SaveImage() const;
  static std::shared_ptr<const Automaton> LoadImage(const uint8_t* data, size_t size, const CoreLimits& limits);

 private:
  // An empty automaton that LoadImage fills.
  explicit Automaton(const CoreLimits& limits) : limits_(limits) {}
  // Where a character of `shape` ends from t, the state its lead byte led to (as LeadTargets).
  int32_t CharEnd(int32_t t, Utf8Lead shape) const;
  int32_t NewState();
  void Build(const std::vector<int32_t>& program);
  // Adds the states and edges of a kOpStringExcept node in `from`'s rule (string_except.cc):
  // the trie of `words` starts at `from`, a node that is no word may continue at `end`, and
  // every character that leaves the trie continues at `tail` (where the tail node starts).
  void BuildStringExcept(const std::vector<std::vector<uint32_t>>& words, int32_t from, int32_t end, int32_t tail);
  // Adds a UTF-8 plan's edges from `from` to `to` (which may be the same state: a loop), its
  // inner states made by `fresh`.
  template <typename Fresh>
  void AddPlan(const Utf8Plan& plan, int32_t from, int32_t to, Fresh&& fresh) {
    plan_states_.assign({from, to});
    for (int32_t k = 0; k < plan.inner_states; ++k) plan_states_.push_back(fresh());
    for (const Utf8Plan::Edge& e : plan.edges) bytes_[plan_states_[e.from]].push_back({e.lo, e.hi, plan_states_[e.to]});
  }
  // StringExcept's escapes (string_except.cc): a state that reads "\\u" to `to`; the hex
  // digits of a \uXXXX from s, split by what the values read so far leave possible.
  template <typename Fresh>
  int32_t BackslashU(int32_t to, Fresh&& fresh);
  template <typename Exit, typename After>
  void HexDigits(int32_t s, uint32_t lo, int left, Exit&& exit, After&& after);
  // The states "d more hex digits (of a high surrogate, then \\u and a low one), then `free`"
  // that escapes leaving to `free` share.
  struct HexChains {
    explicit HexChains(int32_t free) : hex_left(5, -1), high_left(5, -1) { hex_left[0] = free; }
    std::vector<int32_t> hex_left, high_left;
    int32_t d_free = -1;
  };
  // From `u` (after "\\u"): the hex digits of a \uXXXX or a surrogate pair, to the target of each
  // of `kids` (code point, state or -1 for none; sorted) that they spell, else to the chains' end.
  template <typename Fresh>
  void HexEscapes(int32_t u, const std::vector<std::pair<uint32_t, int32_t>>& kids, HexChains& chains,
                  Fresh&& fresh);
  // The rule that reads the rest of an escape after its backslash ("u" and hex digits) spelling
  // cps[0] (`spells`), or spelling any character but `cps` (sorted), never a lone surrogate
  // (made on first use, shared by the grammar's StringExcept nodes).
  int32_t EscapeRule(bool spells, std::vector<uint32_t> cps);
  void CheckLeftRecursion();
  void PruneDead();
  bool EveryStateLive() const;
  void Determinize();
  void ComputeKernels();
  // What state t does in a closure (kHeadState | kCalls | kFinal); 0: it is no kernel state.
  uint8_t KernelKind(int32_t t) const;
  void ComputeKernelKinds();  // kernel_kinds_, from kernel_ and the states' edges (after a load too)
  void MarkTailCalls();
  void ComputeStackNeedBound();  // from the calls' tail flags
  void IndexCharacterRules();    // char_rule_at_, from rule_start_, char_ascii_ and char_utf8_
  bool ReadsSomeCharacter(int32_t r) const;  // rule r reads some character whole (char_ascii_, char_utf8_)
  void ComputeStackNeed() const;
  void ComputeCoarseClasses() const;
  std::unique_ptr<const CharacterStep> ComputeCharacterStep(int32_t s) const;
  void ComputeCharacterRules();
  void ComputeUniversal();
  void ComputePlainCapacity();
  // The plain multi-byte characters: all of them, or one of two parts: all but those of
  // kNearLeads' leads, and those.
  enum class Utf8Part { kAll, kNear, kNearLeads };
  // True when every plain multi-byte character of `part` read from determinized state s is
  // covered by its edges and ends at a state t with leaf(t).
  template <typename Leaf>
  bool EveryPlainUtf8(int32_t s, Leaf&& leaf, Utf8Part part) const;
  // True when the rules whose (determinized) start states are `starts` together read every
  // plain multi-byte character: each read whole by one of them, which then ends.
  bool UnionReadsPlainUtf8(const std::vector<int32_t>& starts) const;
  // True when some edge of s is on a UTF-8 lead byte.
  bool ReadsLeadBytes(int32_t s) const;
  // True when rule r's start reads every plain character as a whole (r may end after it).
  bool ReadsOnePlainCharacter(int32_t r) const;
  void ComputeStandIns();
  void ComputeChainStandIns();  // (ComputeStandIns's first part)
  // True when rule r reads a byte before it can end or call: a call of it moves at least one
  // byte (the stand-ins' distances count such calls as a byte).
  bool ReadsByteFirst(int32_t r) const;
  void ComputeByteClasses();
  // After an interrupt: hands the states built so far to a thread that frees them (interrupt.h).
  void DiscardStatesLater();

  CoreLimits limits_;
  std::vector<std::string> rule_names_;
  struct TokenRead {
    int32_t set = -1, target = -1;
  };
  std::vector<TokenSet> token_sets_;
  // Per state (empty when the grammar has no token terminal); Determinize renumbers it.
  std::vector<TokenRead> token_read_;
  std::map<TokenSet, int32_t> token_rules_;  // set -> its rule (while building)
  std::map<std::vector<uint32_t>, int32_t> escape_rules_;  // EscapeRule's (cps, spells) -> rule (while building)
  bool called_escapes_ = false;  // StringExcept nodes of few children call EscapeRule's rules
  bool reads_token(int32_t s) const { return !token_read_.empty() && token_read_[s].set >= 0; }
  // The rule reading one token of `set` (made on first use).
  int32_t TokenRule(TokenSet set);
  int32_t root_ = 0;
  std::vector<int32_t> rule_start_, rule_final_;
  std::vector<int32_t> state_rule_;
  // Declared before the edge lists it backs, so that it outlives them.
  Arena arena_{size_t{1} << 16};
  std::vector<EdgeList<ByteEdge>> bytes_;
  std::vector<EdgeList<int32_t>> eps_;
  std::vector<EdgeList<CallEdge>> calls_;
  Flags final_;
  Flags deterministic_;  // the state's rule was determinized
  Flags universal_;
  Flags near_universal_;
  std::vector<int32_t> capacity_;
  Flags single_start_;
  Flags near_single_start_;
  // Per rule (ComputeCharacterRules): the plain ASCII bytes its start reads as a whole
  // character (bit b of word b/64; the rule may end right after), and whether every valid
  // UTF-8 character is read so. A call of such a rule covers those characters.
  std::vector<std::array<uint64_t, 2>> char_ascii_;
  Flags char_utf8_;
  Flags char_utf8_near_;  // every one but those of kNearLeads' leads
  std::vector<int32_t> char_rule_at_;  // derived from the above (IndexCharacterRules)
  std::vector<int32_t> kernel_offset_, kernel_;
  Flags kernel_kinds_;  // per kernel_ entry (ComputeKernelKinds)
  int32_t stack_need_bound_ = 0;
  mutable std::once_flag stack_need_once_;
  mutable std::vector<int32_t> stack_need_;
  mutable int32_t max_stack_need_ = 0;
  mutable std::once_flag coarse_once_;
  mutable CoarseClasses coarse_;
  mutable std::mutex character_steps_mu_;
  mutable std::unordered_map<int32_t, std::unique_ptr<const CharacterStep>> character_steps_;  // nullptr: none
  std::vector<int32_t> stand_in_claims_;  // (rule a, rule b) pairs, flat
  std::vector<StandIn> stand_ins_;  // per state (empty: no claim holds)
  // Chains of positions shorter than this are not looked for (ComputeChainStandIns).
  static constexpr int32_t kMinChainPositions = 32;
  // False where the program repeats nothing kMinChainPositions times or more, so no chain is
  // looked for; true after an image load (the image does not say).
  bool long_repetitions_ = true;
  std::vector<int32_t> plan_states_;                           // AddPlan's scratch
  int32_t byte_class_[256] = {};
  int32_t num_byte_classes_ = 1;
  uint64_t alphabet_[4] = {0, 0, 0, 0};
};

}  // namespace logitgate
