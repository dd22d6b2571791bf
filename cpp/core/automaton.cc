#include "automaton.h"
#include "interrupt.h"

#include <algorithm>
#include <array>
#include <map>
#include <unordered_map>

#include "heap_bytes.h"
#include "plain_text.h"
#include "utf8_ranges.h"

namespace logitgate {

namespace {

// Bounds-checked reader over the program; every malformed program is a GrammarError, never UB.
struct ProgramReader {
  const std::vector<int32_t>& p;
  int32_t At(size_t i) const {
    if (i >= p.size()) throw CoreError::Grammar("bad-program", "grammar program is truncated");
    return p[i];
  }
};

// Ints of a program, compared as a sequence with the vectors they are keys of (map lookups
// without copying them).
struct IntsView {
  const int32_t *first, *last;
  const int32_t* begin() const { return first; }
  const int32_t* end() const { return last; }
};
struct IntsLess {
  using is_transparent = void;
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
  }
};
// Character classes' UTF-8 plans, by their program ints.
using ClassPlans = std::map<std::vector<int32_t>, Utf8Plan, IntsLess>;

// Marks of PostOrder: a node not reached yet, on the current path, or finished.
constexpr uint8_t kUnvisited = 0, kOnPath = 1, kFinished = 2;
constexpr int32_t kNoMoreEdges = INT32_MIN;

// Iterative depth-first search over nodes [0, n) (graphs that user grammars shape: no
// recursion). edge(v, k) is v's k-th successor, or kNoMoreEdges after the last; successors
// outside [0, n) are skipped. on_cycle(path, w) is called for an edge into w, a node on the
// current path (path: the stack of (node, next edge index), root first); on_finish(v) once
// every successor of v is finished or on the path, just before v is marked finished.
// `mark` (n entries, kUnvisited where a search may start) holds the marks.
template <typename Edge, typename OnCycle, typename OnFinish>
void PostOrder(int32_t n, std::vector<uint8_t>& mark, Edge edge, OnCycle on_cycle, OnFinish on_finish) {
  std::vector<std::pair<int32_t, size_t>> stack;
  for (int32_t v0 = 0; v0 < n; ++v0) {
    if (mark[v0] != kUnvisited) continue;
    stack.push_back({v0, 0});
    mark[v0] = kOnPath;
    while (!stack.empty()) {
      PollInterrupt();
      const int32_t v = stack.back().first;
      const int32_t w = edge(v, stack.back().second);
      if (w != kNoMoreEdges) {
        ++stack.back().second;
        if (w < 0 || w >= n) continue;
        if (mark[w] == kUnvisited) {
          mark[w] = kOnPath;
          stack.push_back({w, 0});
        } else if (mark[w] == kOnPath) {
          on_cycle(stack, w);
        }
        continue;
      }
      on_finish(v);
      mark[v] = kFinished;
      stack.pop_back();
    }
  }
}

// n empty lists backed by `arena` (per-state scratch of a pass: no heap allocation per state).
std::vector<EdgeList<int32_t>> ArenaLists(size_t n, Arena* arena) {
  std::vector<EdgeList<int32_t>> lists;
  lists.reserve(n);
  for (size_t i = 0; i < n; ++i) lists.emplace_back(arena);
  return lists;
}

}  // namespace

Automaton::Automaton(const std::vector<int32_t>& program, std::vector<std::string> rule_names,
                     const CoreLimits& limits)
    : limits_(limits), rule_names_(std::move(rule_names)) {
  // Between phases, and inside the ones whose work grows faster than the states (building,
  // determinizing), the compile's interrupt is polled (interrupt.h).
  try {
    Build(program);
    CheckInterrupt();
    CheckLeftRecursion();
    CheckInterrupt();
    Determinize();
    CheckInterrupt();
    PruneDead();
    CheckInterrupt();
    ComputeKernels();
    MarkTailCalls();
    CheckInterrupt();
    ComputeCharacterRules();
    ComputeUniversal();
    CheckInterrupt();
    ComputePlainCapacity();
    IndexCharacterRules();
    ComputeByteClasses();
    CheckInterrupt();
    ComputeStandIns();
  } catch (const CoreError& e) {
    if (e.kind == ErrorKind::kInterrupted) DiscardStatesLater();
    throw;
  }
}

void Automaton::DiscardStatesLater() {
  // The per-state tables and the arena behind their edge lists, moved out (members are
  // destroyed in reverse order: the lists before the arena, as in Automaton). The lists'
  // allocators still name this automaton's arena, but freeing through them does nothing.
  struct States {
    Arena arena;
    std::vector<EdgeList<ByteEdge>> bytes;
    std::vector<EdgeList<int32_t>> eps;
    std::vector<EdgeList<CallEdge>> calls;
    Flags final_flags, deterministic;
    std::vector<int32_t> state_rule, kernel_offset, kernel;
  };
  DiscardLater(std::unique_ptr<States>(new States{std::move(arena_), std::move(bytes_), std::move(eps_),
                                                  std::move(calls_), std::move(final_), std::move(deterministic_),
                                                  std::move(state_rule_), std::move(kernel_offset_),
                                                  std::move(kernel_)}));
}

void Automaton::ComputeByteClasses() {
  // A class boundary sits before every byte where some edge range starts or after one ends.
  // opened[b]: ranges starting at b less those ending just before; their running sum is the
  // number of ranges covering b (a byte some edge reads is in the alphabet).
  bool boundary[257] = {};
  int32_t opened[257] = {};
  for (const auto& edges : bytes_) {
    for (const ByteEdge& e : edges) {
      boundary[e.lo] = true;
      boundary[e.hi + 1] = true;
      ++opened[e.lo];
      --opened[e.hi + 1];
    }
  }
  int32_t cls = 0, depth = 0;
  for (int b = 0; b < 256; ++b) {
    if (b > 0 && boundary[b]) ++cls;
    byte_class_[b] = cls;
    depth += opened[b];
    if (depth > 0) alphabet_[b >> 6] |= 1ull << (b & 63);
  }
  num_byte_classes_ = cls + 1;
}

int32_t Automaton::NewState() {
  PollInterrupt();
  if (static_cast<int64_t>(bytes_.size()) >= limits_.max_automaton_states) {
    throw CoreError::Limit("max_automaton_states", limits_.max_automaton_states,
                           "the grammar needs more automaton states (about one per byte of its literals, "
                           "enum values and unrolled repetitions)");
  }
  bytes_.emplace_back(&arena_);
  eps_.emplace_back(&arena_);
  calls_.emplace_back(&arena_);
  final_.push_back(false);
  state_rule_.push_back(-1);
  return static_cast<int32_t>(bytes_.size() - 1);
}

void Automaton::Build(const std::vector<int32_t>& program) {
  ProgramReader rd{program};
  const int32_t n_rules = rd.At(0);
  root_ = rd.At(1);
  if (n_rules <= 0 || n_rules != static_cast<int32_t>(rule_names_.size()) || root_ < 0 || root_ >= n_rules) {
    throw CoreError::Grammar("bad-program", "grammar program header does not match its rules");
  }
  rule_start_.assign(n_rules, -1);
  rule_final_.assign(n_rules, -1);
  long_repetitions_ = false;
  // About one state per program int (JSON Schema grammars: 1.0-1.1): growing five vectors by
  // doubling from empty cost more than the states' edges.
  const int64_t cap = std::min<int64_t>(limits_.max_automaton_states, 1 << 20);
  const size_t expected = std::min<size_t>(program.size(), static_cast<size_t>(cap));
  bytes_.reserve(expected);
  eps_.reserve(expected);
  calls_.reserve(expected);
  final_.reserve(expected);
  state_rule_.reserve(expected);

  // Skips one node in prefix form, iteratively; returns the position after it.
  auto skip = [&](size_t pos) {
    int64_t pending = 1;
    while (pending > 0) {
      --pending;
      switch (rd.At(pos)) {
        case kOpLiteral: pos += 2 + static_cast<size_t>(std::max(0, rd.At(pos + 1))); break;
        case kOpCharClass:
        case kOpByteClass: pos += 3 + 2 * static_cast<size_t>(std::max(0, rd.At(pos + 2))); break;
        case kOpSeq:
        case kOpAlt: pending += std::max(0, rd.At(pos + 1)); pos += 2; break;
        case kOpRepeat: pending += 1; pos += 3; break;
        case kOpRef: pos += 2; break;
        case kOpTokenSet: pos += 3 + static_cast<size_t>(std::max(0, rd.At(pos + 2))); break;
        case kOpStringExcept: {
          const int32_t n_words = std::max(0, rd.At(pos + 1));
          pos += 2;
          for (int32_t w = 0; w < n_words; ++w) pos += 1 + static_cast<size_t>(std::max(0, rd.At(pos)));
          pending += 1;  // the tail
          break;
        }
        default: throw CoreError::Grammar("bad-program", "unknown opcode in grammar program");
      }
      rd.At(pos - 1);  // bounds check of the node just skipped
    }
    return pos;
  };

  // Emits the node at `pos` starting from state `from`; returns its end state. Recursion depth
  // is the IR nesting depth, bounded by limits_.max_nesting (checked before descending).
  // Small rules without calls of their own (after inlining theirs) are inlined at their call
  // sites instead of called: no frame push and pop per use (a string's character rule is used
  // once per character), and the caller's determinized DFA reads them directly.
  struct RuleShape {
    size_t pos = 0;
    int64_t size = 0;         // estimated automaton states of the body
    int64_t depth = 0;        // IR nesting depth of the body
    std::vector<int32_t> refs;
    bool inlinable = false;
    int64_t inlined_size = 0;   // with inlinable callees expanded
    int64_t inlined_depth = 0;
  };
  std::vector<RuleShape> shapes(static_cast<size_t>(n_rules));
  std::vector<int32_t> except_code_points;  // of the words of every StringExcept node
  {
    size_t pos = 2;
    for (int32_t r = 0; r < n_rules; ++r) {
      RuleShape& sh = shapes[r];
      sh.pos = pos;
      // Prefix-order scan of the body: per open node, the children still to read and how many
      // copies of them the automaton will hold (bounded repetitions multiply). `size` estimates
      // the rule's automaton states.
      struct Open {
        int64_t left, copies;
      };
      std::vector<Open> open(1, {1, 1});
      size_t p = pos;
      auto add = [&](int64_t n, int64_t copies) { sh.size = std::min<int64_t>(sh.size + n * copies, 1 << 30); };
      while (!open.empty()) {
        if (open.back().left == 0) {
          open.pop_back();
          continue;
        }
        --open.back().left;
        const int64_t copies = open.back().copies;
        sh.depth = std::max<int64_t>(sh.depth, static_cast<int64_t>(open.size()));
        switch (rd.At(p)) {
          case kOpLiteral:
            add(std::max(0, rd.At(p + 1)), copies);
            p += 2 + static_cast<size_t>(std::max(0, rd.At(p + 1)));
            break;
          case kOpCharClass:
          case kOpByteClass:
            add(1 + int64_t{std::max(0, rd.At(p + 2))}, copies);
            p += 3 + 2 * static_cast<size_t>(std::max(0, rd.At(p + 2)));
            break;
          case kOpSeq:
          case kOpAlt:
            add(1, copies);
            open.push_back({std::max(0, rd.At(p + 1)), copies});
            p += 2;
            break;
          case kOpRepeat: {
            const int32_t lo = std::max(0, rd.At(p + 1)), hi = rd.At(p + 2);
            add(1, copies);
            open.push_back({1, std::min<int64_t>(copies * (hi < 0 ? int64_t{lo} + 1 : std::max(hi, 1)), 1 << 30)});
            p += 3;
            break;
          }
          case kOpRef:
            add(1, copies);
            sh.refs.push_back(rd.At(p + 1));
            p += 2;
            break;
          case kOpTokenSet:
            add(1, copies);
            p += 3 + static_cast<size_t>(std::max(0, rd.At(p + 2)));
            break;
          case kOpStringExcept: {
            // A few states per trie node (code point), and the shared exits.
            const int32_t n_words = std::max(0, rd.At(p + 1));
            p += 2;
            int64_t cps = 0;
            for (int32_t w = 0; w < n_words; ++w) {
              const int32_t n = std::max(0, rd.At(p));
              cps += n;
              for (int32_t k = 1; k <= n; ++k) except_code_points.push_back(rd.At(p + static_cast<size_t>(k)));
              p += 1 + static_cast<size_t>(n);
            }
            add(8 * cps + 48, copies);
            open.push_back({1, copies});  // the tail
            break;
          }
          default: throw CoreError::Grammar("bad-program", "unknown opcode in grammar program");
        }
      }
      pos = skip(pos);
    }
    // Post-order over the reference graph (iterative): a rule is inlinable when it is small,
    // on no cycle, and every rule it references is inlinable.
    constexpr int64_t kInlineMaxSize = 512;  // estimated states
    std::vector<uint8_t> mark(static_cast<size_t>(n_rules), kUnvisited);
    PostOrder(
        n_rules, mark,
        [&](int32_t r, size_t k) { return k < shapes[r].refs.size() ? shapes[r].refs[k] : kNoMoreEdges; },
        [](const auto&, int32_t) {},
        [&](int32_t r) {
          RuleShape& sh = shapes[r];
          bool ok = true;
          int64_t size = sh.size, depth = 0;
          for (int32_t callee : sh.refs) {
            // On the current path: a cycle; out of range: Emit reports it.
            if (callee < 0 || callee >= n_rules || mark[callee] != kFinished || !shapes[callee].inlinable) {
              ok = false;
              break;
            }
            size += shapes[callee].inlined_size;
            depth = std::max(depth, shapes[callee].inlined_depth);
          }
          sh.inlinable = ok && size <= kInlineMaxSize;
          sh.inlined_size = size;
          sh.inlined_depth = sh.depth + depth;
        });
  }
  // Tries of many code points in all (keys of many objects) read most escapes through rules they
  // share (EscapeRule, string_except.cc): four states per trie node fewer, a few dozen per
  // distinct character more. Worth it where the characters repeat: many code points, each
  // character used often (English keys: a few dozen characters; keys in a large script: about
  // as many characters as code points, which keep their escapes per node).
  constexpr size_t kCalledEscapesMinCodePoints = 256, kCalledEscapesMinUses = 8;
  const size_t total_code_points = except_code_points.size();
  std::sort(except_code_points.begin(), except_code_points.end());
  const auto distinct = static_cast<size_t>(
      std::unique(except_code_points.begin(), except_code_points.end()) - except_code_points.begin());
  called_escapes_ = total_code_points >= kCalledEscapesMinCodePoints &&
                    total_code_points >= kCalledEscapesMinUses * distinct;
  // Inlining adds at most about as many states as the program has ints (64k for small grammars).
  int64_t inline_budget = std::max<int64_t>(static_cast<int64_t>(program.size()), 1 << 16);
  // Estimated states per call site, copies included. Inlined into each copy of a bounded
  // repetition, an encoded class brings its escape paths along (a dozen states where a call
  // takes one): a string pattern or format counted to its maxLength holds hundreds of copies.
  static constexpr int64_t kInlineMaxExpansion = 256;
  static constexpr int64_t kInlineTiny = 16;

  ClassPlans class_plans;

  struct Emitter {
    Automaton* a;
    ProgramReader rd;
    decltype(skip)& skip_fn;
    int32_t rule;
    const std::vector<RuleShape>& shapes;
    int64_t& inline_budget;
    const std::vector<int32_t>& program_;
    ClassPlans& class_plans;
    std::vector<std::pair<size_t, int32_t>> entry_scan_{};  // EntryFree's scratch
    size_t next_ = 0;  // the position after the node the latest Emit call emitted

    Utf8Plan PlanClass(size_t pos) {
      const bool negated = rd.At(pos + 1) != 0;
      const int32_t n = rd.At(pos + 2);
      CodePointRanges ranges;
      for (int32_t i = 0; i < n; ++i) {
        int32_t lo = rd.At(pos + 3 + 2 * i), hi = rd.At(pos + 4 + 2 * i);
        if (lo < 0 || hi > 0x10FFFF || lo > hi) throw CoreError::Grammar("bad-program", "bad code point range");
        ranges.push_back({static_cast<uint32_t>(lo), static_cast<uint32_t>(hi)});
      }
      return PlanUtf8(NormalizeCodePoints(std::move(ranges), negated));
    }

    // The edges of the class node at `pos` (kOpByteClass or kOpCharClass) from `from` to `to`,
    // which may be the same state (a loop). A character class's UTF-8 automaton is planned once
    // per distinct class (grammars repeat a few classes thousands of times: a JSON string's
    // characters, digits) and copied.
    void ClassEdges(size_t pos, int32_t from, int32_t to) {
      const int32_t n = rd.At(pos + 2);
      rd.At(pos + 2 + 2 * static_cast<size_t>(std::max(0, n)));  // bounds check of the class
      if (rd.At(pos) == kOpByteClass) {
        const bool negated = rd.At(pos + 1) != 0;
        uint64_t in[4] = {0, 0, 0, 0};
        for (int32_t i = 0; i < n; ++i) {
          const int32_t lo = rd.At(pos + 3 + 2 * i), hi = rd.At(pos + 4 + 2 * i);
          if (lo < 0 || hi > 255 || lo > hi) throw CoreError::Grammar("bad-program", "bad byte range");
          AddByteRange(lo, hi, in);
        }
        for (int32_t b = 0; b < 256;) {
          auto member = [&](int32_t x) { return (in[x >> 6] >> (x & 63) & 1) != (negated ? 1u : 0u); };
          if (!member(b)) {
            ++b;
            continue;
          }
          int32_t e = b;
          while (e + 1 < 256 && member(e + 1)) ++e;
          a->bytes_[from].push_back({static_cast<uint8_t>(b), static_cast<uint8_t>(e), to});
          b = e + 1;
        }
        return;
      }
      const int32_t* ints = program_.data() + pos;  // the class's ints are in range: checked above
      const IntsView key{ints + 1, ints + 3 + 2 * std::max(0, n)};
      auto it = class_plans.find(key);
      if (it == class_plans.end()) {
        it = class_plans.emplace(std::vector<int32_t>(key.first, key.last), PlanClass(pos)).first;
      }
      a->AddPlan(it->second, from, to, [&] { return New(); });
    }

    int32_t New() {
      int32_t s = a->NewState();
      a->state_rule_[s] = rule;
      return s;
    }

    // True when emitting the node at `pos` from a state adds no edge back into that state:
    // then it may start at a state other edges leave from (an alternative's branch at the
    // alternative's start, a bounded repetition's copy where the previous one ended) instead of
    // at an entry state of its own, which would only be a state and an epsilon edge more. A
    // repetition may loop back to where it starts (a repetition of one class does, below), so
    // it keeps its entry; so does a sequence whose first items emit nothing (an empty literal,
    // an inlined empty rule) before one: the repetition starts at the sequence's state. An
    // inlined rule's body is looked through.
    bool EntryFree(size_t pos) {
      // The sequences open around `pos`: each one's current item and how many items are left
      // from it (one per level of nesting, bounded as Emit's recursion is).
      std::vector<std::pair<size_t, int32_t>>& open = entry_scan_;
      open.clear();
      for (;;) {
        switch (rd.At(pos)) {
          case kOpSeq:
            if (rd.At(pos + 1) > 0) {
              open.push_back({pos + 2, rd.At(pos + 1)});
              pos += 2;  // its first item
              continue;
            }
            break;  // emits nothing
          case kOpLiteral:
            if (rd.At(pos + 1) > 0) return true;
            break;  // emits nothing
          case kOpRef: {
            const int32_t r = rd.At(pos + 1);
            if (r < 0 || r >= static_cast<int32_t>(shapes.size()) || !shapes[r].inlinable) return true;
            pos = shapes[r].pos;  // inlinable rules form no cycle: this ends
            continue;
          }
          case kOpRepeat: return false;
          default: return true;
        }
        // The node at `pos` emits nothing: the next item of the innermost open sequence starts
        // at the same state (a sequence whose items are all done emits nothing either).
        for (;;) {
          if (open.empty()) return true;
          auto& [item, left] = open.back();
          if (--left > 0) {
            item = skip_fn(item);
            pos = item;
            break;
          }
          open.pop_back();
        }
      }
    }

    // `copies`: how many times this node is emitted (bounded repetitions above it multiply);
    // `looped`: the node is under a repetition. Sets next_ to the position after the node: a
    // leaf's end by skip_fn (one step), a composite's from its last child's, so a sequence's
    // items are not skipped over again.
    int32_t Emit(size_t pos, int32_t from, int64_t depth, int64_t copies = 1, bool looped = false) {
      if (depth > a->limits_.max_nesting) {
        throw CoreError::Limit("max_nesting", a->limits_.max_nesting, "grammar nesting is too deep");
      }
      switch (rd.At(pos)) {
        case kOpLiteral: {
          int32_t n = rd.At(pos + 1);
          int32_t cur = from;
          for (int32_t i = 0; i < n; ++i) {
            int32_t b = rd.At(pos + 2 + i);
            if (b < 0 || b > 255) throw CoreError::Grammar("bad-program", "literal byte out of range");
            int32_t next = New();
            a->bytes_[cur].push_back({static_cast<uint8_t>(b), static_cast<uint8_t>(b), next});
            cur = next;
          }
          next_ = skip_fn(pos);
          return cur;
        }
        case kOpByteClass:
        case kOpCharClass: {
          const int32_t end = New();
          ClassEdges(pos, from, end);
          next_ = skip_fn(pos);
          return end;
        }
        case kOpSeq: {
          int32_t n = rd.At(pos + 1);
          size_t child = pos + 2;
          int32_t cur = from;
          for (int32_t i = 0; i < n; ++i) {
            cur = Emit(child, cur, depth + 1, copies, looped);
            child = next_;
          }
          next_ = child;
          return cur;
        }
        case kOpAlt: {
          int32_t n = rd.At(pos + 1);
          size_t child = pos + 2;
          int32_t end = New();
          for (int32_t i = 0; i < n; ++i) {
            int32_t s = from;
            if (!EntryFree(child)) {
              s = New();
              a->eps_[from].push_back(s);
            }
            a->eps_[Emit(child, s, depth + 1, copies, looped)].push_back(end);
            child = next_;
          }
          next_ = child;
          return end;
        }
        case kOpRepeat: {
          int32_t lo = rd.At(pos + 1), hi = rd.At(pos + 2);
          size_t child = pos + 3;
          if (lo < 0 || hi < -1 || (hi >= 0 && hi < lo)) throw CoreError::Grammar("bad-program", "bad repetition");
          if (lo > a->limits_.max_repeat || hi > a->limits_.max_repeat) {
            throw CoreError::Limit("max_repeat", a->limits_.max_repeat, "repetition bound too large");
          }
          const int64_t child_copies = std::min<int64_t>(copies * (hi < 0 ? int64_t{lo} + 1 : std::max(hi, 1)), 1 << 30);
          a->long_repetitions_ = a->long_repetitions_ || std::max(lo, hi) >= kMinChainPositions;
          int32_t cur = from;
          // x{lo,} with lo >= 1 is x{lo-1} then one copy of x with a way back to its entry:
          // the last mandatory copy is also the loop, so the states after one x and after
          // several share their successors (a `[...]+` body and its first character read into
          // the same states).
          const int32_t copies_before_loop = hi < 0 && lo > 0 ? lo - 1 : lo;
          if (hi < 0 && (rd.At(child) == kOpCharClass || rd.At(child) == kOpByteClass)) {
            // An unbounded repetition of one class: its copies need no entries of their own
            // (a class holds no loop), and the loop is the class's edges back to one state:
            // `[ \t\n]*`, `[a-z]+` are a state each.
            for (int32_t i = 0; i < copies_before_loop; ++i) {
              const int32_t next = New();
              ClassEdges(child, cur, next);
              cur = next;
            }
            int32_t loop = cur;
            if (lo > 0) {  // the last mandatory copy is the loop's entry
              loop = New();
              ClassEdges(child, cur, loop);
            } else if (!a->bytes_[cur].empty() || !a->eps_[cur].empty() || !a->calls_[cur].empty()) {
              loop = New();  // `cur` leads elsewhere already: the loop needs a state of its own
              a->eps_[cur].push_back(loop);
            }
            ClassEdges(child, loop, loop);
            next_ = skip_fn(child);
            return loop;
          }
          // A fresh entry per copy keeps each copy's loops local to it (when it has any).
          const bool entry_free = EntryFree(child);
          auto copy_start = [&](int32_t at) {
            if (entry_free) return at;
            const int32_t s = New();
            a->eps_[at].push_back(s);
            return s;
          };
          for (int32_t i = 0; i < copies_before_loop; ++i) {
            cur = Emit(child, copy_start(cur), depth + 1, child_copies, true);
          }
          if (hi < 0 && lo > 0) {
            int32_t entry = New();
            a->eps_[cur].push_back(entry);
            int32_t exit = Emit(child, entry, depth + 1, child_copies, true);
            a->eps_[exit].push_back(entry);
            return exit;
          }
          if (hi < 0) {
            int32_t loop = New();
            a->eps_[cur].push_back(loop);
            a->eps_[Emit(child, copy_start(loop), depth + 1, child_copies, true)].push_back(loop);
            return loop;
          }
          int32_t end = New();
          for (int32_t i = lo; i < hi; ++i) {
            a->eps_[cur].push_back(end);
            cur = Emit(child, copy_start(cur), depth + 1, child_copies, true);
          }
          a->eps_[cur].push_back(end);
          if (hi == 0) next_ = skip_fn(child);  // x{0}: the child was never emitted
          return end;
        }
        case kOpStringExcept: {
          const int32_t n_words = rd.At(pos + 1);
          if (n_words < 0) throw CoreError::Grammar("bad-program", "bad word count");
          std::vector<std::vector<uint32_t>> words(static_cast<size_t>(n_words));
          size_t p = pos + 2;
          for (auto& w : words) {
            const int32_t n = rd.At(p);
            if (n < 0) throw CoreError::Grammar("bad-program", "bad word length");
            w.resize(static_cast<size_t>(n));
            for (int32_t k = 0; k < n; ++k) {
              const int32_t cp = rd.At(p + 1 + static_cast<size_t>(k));
              if (cp < 0 || cp > 0x10FFFF) throw CoreError::Grammar("bad-program", "bad code point");
              w[static_cast<size_t>(k)] = static_cast<uint32_t>(cp);
            }
            p += 1 + static_cast<size_t>(n);
          }
          const int32_t end = New();
          const int32_t tail = New();
          a->eps_[Emit(p, tail, depth + 1, copies, looped)].push_back(end);
          a->BuildStringExcept(words, from, end, tail);
          return end;
        }
        case kOpRef: {
          int32_t r = rd.At(pos + 1);
          if (r < 0 || r >= static_cast<int32_t>(shapes.size())) {
            throw CoreError::Grammar("bad-program", "rule reference out of range");
          }
          const RuleShape& callee = shapes[r];
          // Tiny rules everywhere; small ones where they repeat (a string's characters), so that
          // the loop is one DFA; never where a bounded repetition would copy them many times.
          if (callee.inlinable && (callee.inlined_size <= kInlineTiny || looped) &&
              callee.inlined_size <= inline_budget && callee.inlined_size * copies <= kInlineMaxExpansion &&
              depth + 1 + callee.inlined_depth <= a->limits_.max_nesting) {
            inline_budget -= callee.inlined_size;
            const int32_t end = Emit(callee.pos, from, depth + 1, copies, looped);
            next_ = skip_fn(pos);
            return end;
          }
          int32_t ret = New();
          a->calls_[from].push_back({r, ret});
          next_ = skip_fn(pos);
          return ret;
        }
        case kOpTokenSet: {
          TokenSet set;
          set.negated = rd.At(pos + 1) != 0;
          const int32_t n = rd.At(pos + 2);
          if (n < 0) throw CoreError::Grammar("bad-program", "bad token set size");
          for (int32_t i = 0; i < n; ++i) {
            const int32_t id = rd.At(pos + 3 + static_cast<size_t>(i));
            if (id < 0) throw CoreError::Grammar("bad-program", "negative token id");
            set.ids.push_back(id);
          }
          std::sort(set.ids.begin(), set.ids.end());
          set.ids.erase(std::unique(set.ids.begin(), set.ids.end()), set.ids.end());
          const int32_t ret = New();
          a->calls_[from].push_back({a->TokenRule(std::move(set)), ret});
          next_ = skip_fn(pos);
          return ret;
        }
        default:
          throw CoreError::Grammar("bad-program", "unknown opcode in grammar program");
      }
    }
  };

  size_t pos = 2;
  for (int32_t r = 0; r < n_rules; ++r) {
    Emitter em{this, rd, skip, r, shapes, inline_budget, program, class_plans};
    rule_start_[r] = em.New();
    int32_t end = em.Emit(pos, rule_start_[r], 0);
    final_[end] = true;
    rule_final_[r] = end;
    pos = em.next_;
  }
  if (pos != program.size()) {
    const int32_t n_claims = rd.At(pos);
    if (n_claims <= 0 || pos + 1 + 2 * static_cast<size_t>(n_claims) != program.size()) {
      throw CoreError::Grammar("bad-program", "trailing data after grammar program");
    }
    stand_in_claims_.assign(program.begin() + static_cast<std::ptrdiff_t>(pos) + 1, program.end());
    for (int32_t r : stand_in_claims_) {
      if (r < 0 || r >= n_rules) throw CoreError::Grammar("bad-program", "stand-in claim names no rule");
    }
  }
  if (!token_read_.empty()) token_read_.resize(bytes_.size());
  token_rules_.clear();
  escape_rules_.clear();
}

int32_t Automaton::TokenRule(TokenSet set) {
  auto it = token_rules_.find(set);
  if (it != token_rules_.end()) return it->second;
  const auto r = static_cast<int32_t>(rule_start_.size());
  const auto index = static_cast<int32_t>(token_sets_.size());
  std::string name = "<token set " + std::to_string(index) + ">";
  const int32_t start = NewState(), end = NewState();
  state_rule_[start] = state_rule_[end] = r;
  final_[end] = true;
  rule_start_.push_back(start);
  rule_final_.push_back(end);
  rule_names_.push_back(std::move(name));
  token_sets_.push_back(set);
  token_rules_.emplace(std::move(set), r);
  if (token_read_.size() < bytes_.size()) token_read_.resize(bytes_.size());
  token_read_[start] = {index, end};
  return r;
}

void Automaton::CheckLeftRecursion() {
  const int32_t n = num_states();
  const int32_t n_rules = static_cast<int32_t>(rule_start_.size());
  // States reachable from their rule's start without consuming a byte (epsilon edges and calls
  // of nullable rules), found in one worklist pass: a call of a rule not yet known nullable
  // waits until that rule's final state is reached.
  Flags nullable(n_rules, false), seen(n, false);
  std::vector<std::vector<int32_t>> waiting(n_rules);
  std::vector<int32_t> work;
  auto visit = [&](int32_t s) {
    if (!seen[s]) {
      seen[s] = true;
      work.push_back(s);
    }
  };
  for (int32_t r = 0; r < n_rules; ++r) visit(rule_start_[r]);
  while (!work.empty()) {
    PollInterrupt();
    int32_t s = work.back();
    work.pop_back();
    for (int32_t t : eps_[s]) visit(t);
    for (const CallEdge& c : calls_[s]) {
      if (nullable[c.rule]) {
        visit(c.ret);
      } else {
        waiting[c.rule].push_back(c.ret);
      }
    }
    if (final_[s]) {
      int32_t r = state_rule_[s];
      if (!nullable[r]) {
        nullable[r] = true;
        for (int32_t ret : waiting[r]) visit(ret);
        waiting[r].clear();
      }
    }
  }
  // Left-call graph: rule A -> rule B when A can call B before consuming anything.
  std::vector<std::vector<int32_t>> left_calls(n_rules);
  for (int32_t s = 0; s < n; ++s) {
    PollInterrupt();
    if (!seen[s]) continue;
    for (const CallEdge& c : calls_[s]) left_calls[state_rule_[s]].push_back(c.rule);
  }
  // A cycle of left calls is left recursion: report it with its path.
  std::vector<uint8_t> mark(n_rules, kUnvisited);
  PostOrder(
      n_rules, mark, [&](int32_t r, size_t k) { return k < left_calls[r].size() ? left_calls[r][k] : kNoMoreEdges; },
      [&](const std::vector<std::pair<int32_t, size_t>>& path, int32_t next) {
        std::string cycle;
        bool in = false;
        for (const auto& [rr, unused] : path) {
          if (rr == next) in = true;
          if (in) cycle += rule_names_[rr] + " -> ";
        }
        cycle += rule_names_[next];
        throw CoreError::Grammar("left-recursion",
                                 "left recursion is not supported: " + cycle +
                                     " (rewrite it as repetition, e.g. `a ::= b (op b)*`)",
                                 rule_names_[next]);
      },
      [](int32_t) {});
}

namespace {
// Adjacency lists in one array (compressed rows): rows[r] is items[offset[r] .. offset[r+1]).
template <typename T>
struct Rows {
  std::vector<int32_t> offset;
  std::vector<T> items;
  // Two passes over the same edges: count(row), then add(row, item).
  explicit Rows(size_t n) : offset(n + 1, 0) {}
  void Count(int32_t r) { ++offset[static_cast<size_t>(r) + 1]; }
  void Allocate() {
    for (size_t i = 1; i < offset.size(); ++i) offset[i] += offset[i - 1];
    items.resize(static_cast<size_t>(offset.back()));
    fill_ = std::vector<int32_t>(offset.begin(), offset.end() - 1);
  }
  void Add(int32_t r, const T& item) { items[static_cast<size_t>(fill_[r]++)] = item; }
  const T* begin(int32_t r) const { return items.data() + offset[r]; }
  const T* end(int32_t r) const { return items.data() + offset[static_cast<size_t>(r) + 1]; }

 private:
  std::vector<int32_t> fill_;
};
}  // namespace

// True when every state can end its rule (then every rule is productive and PruneDead has
// nothing to drop), found without the reverse edges PruneDead's exact pass builds. A state is
// live when it is final, an edge leads to a live state, or it calls a rule whose start is live
// and returns to a live state. A sweep from the last state to the first settles the states whose
// edges lead to later, settled ones; those it leaves (loops back into a string's body, calls of
// earlier rules) are swept again while some settle, within 4n visits in all. False where a sweep
// settles none (a dead state, or a rule no text ends) or the visits run out.
bool Automaton::EveryStateLive() const {
  const int32_t n = num_states();
  Flags live(final_);
  auto settles = [&](int32_t s) {
    for (const ByteEdge& e : bytes_[s]) {
      if (live[e.target]) return true;
    }
    for (int32_t t : eps_[s]) {
      if (live[t]) return true;
    }
    if (reads_token(s) && live[token_read_[s].target]) return true;
    for (const CallEdge& c : calls_[s]) {
      if (live[rule_start_[c.rule]] && live[c.ret]) return true;
    }
    return false;
  };
  std::vector<int32_t> left;
  for (int32_t s = n - 1; s >= 0; --s) {
    PollInterrupt();
    if (live[s]) continue;
    if (settles(s)) {
      live[s] = true;
    } else {
      left.push_back(s);
    }
  }
  int64_t visits = 4 * static_cast<int64_t>(n);
  while (!left.empty()) {
    visits -= static_cast<int64_t>(left.size());
    if (visits < 0) return false;
    size_t kept = 0;
    for (int32_t s : left) {
      PollInterrupt();
      if (settles(s)) {
        live[s] = true;
      } else {
        left[kept++] = s;
      }
    }
    if (kept == left.size()) return false;
    left.resize(kept);
  }
  return true;
}

// Keeps only what can end its rule: drops calls of rules with an empty language and edges into
// states from which no final state is reachable (with calls of nonempty rules). Runs on the
// determinized automaton, which has fewer states and no epsilon edges but in rules kept as
// NFAs; a DFA state is live exactly when one of its NFA members is, so pruning there gives the
// language pruning the NFA would. Throws empty-language when the root rule has none.
void Automaton::PruneDead() {
  if (EveryStateLive()) return;  // usually: then nothing is pruned and the root is productive
  const int32_t n = num_states();
  const int32_t n_rules = static_cast<int32_t>(rule_start_.size());
  Rows<int32_t> rev(n);                                 // predecessors by byte or epsilon edge
  Rows<std::pair<int32_t, int32_t>> by_callee(n_rules);  // (caller state, return state)
  Rows<std::pair<int32_t, int32_t>> by_ret(n);           // (caller state, callee)
  std::vector<int32_t> start_rule(n, -1);
  for (int32_t r = 0; r < n_rules; ++r) start_rule[rule_start_[r]] = r;
  for (int pass = 0; pass < 2; ++pass) {
    for (int32_t s = 0; s < n; ++s) {
      PollInterrupt();
      for (const ByteEdge& e : bytes_[s]) pass ? rev.Add(e.target, s) : rev.Count(e.target);
      for (int32_t t : eps_[s]) pass ? rev.Add(t, s) : rev.Count(t);
      if (reads_token(s)) pass ? rev.Add(token_read_[s].target, s) : rev.Count(token_read_[s].target);
      for (const CallEdge& c : calls_[s]) {
        if (pass) {
          by_callee.Add(c.rule, {s, c.ret});
          by_ret.Add(c.ret, {s, c.rule});
        } else {
          by_callee.Count(c.rule);
          by_ret.Count(c.ret);
        }
      }
    }
    if (pass == 0) {
      rev.Allocate();
      by_callee.Allocate();
      by_ret.Allocate();
    }
  }
  Flags live(n, false), productive(n_rules, false);
  std::vector<int32_t> work;
  auto mark = [&](int32_t s) {
    if (!live[s]) {
      live[s] = true;
      work.push_back(s);
    }
  };
  for (int32_t s = 0; s < n; ++s) {
    if (final_[s]) mark(s);
  }
  while (!work.empty()) {
    PollInterrupt();
    int32_t t = work.back();
    work.pop_back();
    for (const int32_t* s = rev.begin(t); s != rev.end(t); ++s) mark(*s);
    for (const auto* p = by_ret.begin(t); p != by_ret.end(t); ++p) {
      if (productive[p->second]) mark(p->first);
    }
    int32_t r = start_rule[t];
    if (r >= 0 && !productive[r]) {
      productive[r] = true;
      for (const auto* p = by_callee.begin(r); p != by_callee.end(r); ++p) {
        if (live[p->second]) mark(p->first);
      }
    }
  }
  if (!productive[root_]) {
    throw CoreError::Grammar("empty-language", "the grammar matches no string at all", rule_names_[root_]);
  }
  // Usually nothing is dead: then no edge list changes.
  if (std::all_of(live.begin(), live.end(), [](auto f) { return f; }) &&
      std::all_of(productive.begin(), productive.end(), [](auto f) { return f; })) {
    return;
  }
  for (int32_t s = 0; s < n; ++s) {
    PollInterrupt();
    auto& b = bytes_[s];
    b.erase(std::remove_if(b.begin(), b.end(), [&](const ByteEdge& e) { return !live[e.target]; }), b.end());
    auto& e = eps_[s];
    e.erase(std::remove_if(e.begin(), e.end(), [&](int32_t t) { return !live[t]; }), e.end());
    auto& c = calls_[s];
    c.erase(std::remove_if(c.begin(), c.end(), [&](const CallEdge& x) { return !productive[x.rule] || !live[x.ret]; }),
            c.end());
  }
}

void Automaton::ComputeKernels() {
  const int32_t n = num_states();
  // Only states where a run can land need a kernel: byte-edge targets, rule starts, returns.
  Flags entry(n, false);
  for (int32_t s = 0; s < n; ++s) {
    PollInterrupt();
    for (const ByteEdge& e : bytes_[s]) entry[e.target] = true;
    for (const CallEdge& c : calls_[s]) entry[c.ret] = true;
    if (reads_token(s)) entry[token_read_[s].target] = true;
  }
  for (int32_t r : rule_start_) entry[r] = true;
  kernel_offset_.assign(n + 1, 0);
  std::vector<int32_t> stamp(n, -1), work;
  for (int32_t s = 0; s < n; ++s) {
    PollInterrupt();
    kernel_offset_[s] = static_cast<int32_t>(kernel_.size());
    if (!entry[s]) continue;
    if (eps_[s].empty()) {  // every determinized state: its kernel is itself, or nothing
      if (KernelKind(s) != 0) kernel_.push_back(s);
      continue;
    }
    work.assign(1, s);
    stamp[s] = s;
    while (!work.empty()) {
      PollInterrupt();
      int32_t t = work.back();
      work.pop_back();
      if (KernelKind(t) != 0) kernel_.push_back(t);
      for (int32_t u : eps_[t]) {
        if (stamp[u] != s) {
          stamp[u] = s;
          work.push_back(u);
        }
      }
    }
  }
  kernel_offset_[n] = static_cast<int32_t>(kernel_.size());
  eps_.clear();
  eps_.shrink_to_fit();
  ComputeKernelKinds();
}

uint8_t Automaton::KernelKind(int32_t t) const {
  return static_cast<uint8_t>((!bytes_[t].empty() || reads_token(t) ? kHeadState : 0) |
                              (calls_[t].empty() ? 0 : kCalls) | (final_[t] ? kFinal : 0));
}

void Automaton::ComputeKernelKinds() {
  kernel_kinds_.resize(kernel_.size());
  for (size_t k = 0; k < kernel_.size(); ++k) kernel_kinds_[k] = KernelKind(kernel_[k]);
}

void Automaton::MarkTailCalls() {
  for (auto& calls : calls_) {
    PollInterrupt();
    for (CallEdge& c : calls) {
      bool only_end = true;
      for (const int32_t* k = kernel_begin(c.ret); k != kernel_end(c.ret); ++k) {
        only_end = only_end && bytes_[*k].empty() && calls_[*k].empty() && !reads_token(*k);
      }
      c.tail = only_end;
    }
  }
  ComputeStackNeedBound();
}

void Automaton::ComputeStackNeedBound() {
  Flags pushed(rule_start_.size(), false);
  int32_t n_pushed = 0;
  for (const auto& calls : calls_) {
    for (const CallEdge& c : calls) {
      if (!c.tail && !pushed[c.rule]) {
        pushed[c.rule] = true;
        ++n_pushed;
      }
    }
  }
  // A rule whose start needs h > 0 frames calls, with a push, a rule that needs h - 1 (or
  // tail-calls one that needs h, which does): each level below the largest holds a rule
  // called with a push, and a state needs at most one frame more than any rule start.
  stack_need_bound_ = 1 + n_pushed;
}

void Automaton::ComputeCoarseClasses() const {
  if (has_token_sets()) return;
  const auto n_intervals = static_cast<size_t>(num_byte_classes_);
  Flags covered(static_cast<size_t>(num_states()), 0);
  std::vector<int32_t> stack;
  auto reach = [&](int32_t s) {
    if (!covered[s]) {
      covered[s] = 1;
      stack.push_back(s);
    }
  };
  // Refined over the byte classes (bytes no edge tells apart) one covered state at a time, in
  // the order they are reached, so that a grammar whose classes pass the bound stops early:
  // part[k] is byte class k's coarse class, label[k] what the state does with it (0: no edge,
  // r + 1: its r-th distinct target).
  std::vector<int32_t> part(n_intervals, 0), label(n_intervals), targets, touched;
  std::vector<int32_t> class_of_key(static_cast<size_t>(kMaxCoarseClasses + 1) * (n_intervals + 1), -1);
  int32_t count = 1;
  reach(root_start());
  while (!stack.empty()) {
    const int32_t s = stack.back();
    stack.pop_back();
    for (const int32_t* k = kernel_begin(s); k != kernel_end(s); ++k) reach(*k);
    for (const CallEdge& c : calls_[s]) {
      reach(rule_start_[c.rule]);
      reach(c.ret);
    }
    std::fill(label.begin(), label.end(), 0);
    targets.clear();
    for (const ByteEdge& e : bytes_[s]) {
      if (e.lo == kCoarseExcluded && e.hi == kCoarseExcluded) continue;  // an escape: not covered
      reach(e.target);
      const auto r = static_cast<int32_t>(std::find(targets.begin(), targets.end(), e.target) - targets.begin());
      if (r == static_cast<int32_t>(targets.size())) targets.push_back(e.target);
      for (int32_t k = byte_class_[e.lo]; k <= byte_class_[e.hi]; ++k) label[static_cast<size_t>(k)] = r + 1;
    }
    if (targets.empty()) continue;
    int32_t next = 0;
    touched.clear();
    for (size_t k = 0; k < n_intervals; ++k) {
      const size_t key = static_cast<size_t>(part[k]) * (n_intervals + 1) + static_cast<size_t>(label[k]);
      if (class_of_key[key] < 0) {
        class_of_key[key] = next++;
        touched.push_back(static_cast<int32_t>(key));
      }
      part[k] = class_of_key[key];
    }
    for (int32_t key : touched) class_of_key[static_cast<size_t>(key)] = -1;
    count = next;
    if (count > kMaxCoarseClasses) return;
  }
  for (int b = 0; b < 256; ++b) coarse_.of_byte[b] = static_cast<uint8_t>(part[static_cast<size_t>(byte_class_[b])]);
  coarse_.covered = std::move(covered);
  coarse_.count = count;
}

// Stack need (Knuth's generalization of Dijkstra's algorithm, values settled in increasing
// order from a bucket queue): need(s) is the least, over the ways to end s's rule, of the
// largest number of frames pushed on the way. need(s) = 0 when s is final; need(t) through a
// byte edge to t or a kernel state t; need(start(R)) through a tail call of R;
// max(1 + need(start(R)), need(ret)) through a call of R returning to ret. Each of these is
// at least each of its arguments, so a value settled from settled arguments is final. States
// no run lands on (not entries, not kernel states) keep kNoStackNeed.
void Automaton::ComputeStackNeed() const {
  const int32_t n = num_states();
  struct Call {
    int32_t state, start, ret;
    int32_t unsettled;  // arguments not settled yet
  };
  std::vector<Call> calls;
  // rev(t): what depends on t's need: a state s (>= 0: need(s) <= need(t)) or a call (~index).
  Rows<int32_t> rev(static_cast<size_t>(n));
  for (int pass = 0; pass < 2; ++pass) {
    auto depends = [&](int32_t t, int32_t on) { pass ? rev.Add(t, on) : rev.Count(t); };
    for (int32_t s = 0; s < n; ++s) {
      PollInterrupt();
      for (const ByteEdge& e : bytes_[s]) depends(e.target, s);
      if (reads_token(s)) depends(token_read_[s].target, s);
      for (const int32_t* k = kernel_begin(s); k != kernel_end(s); ++k) {
        if (*k != s) depends(*k, s);
      }
      for (const CallEdge& c : calls_[s]) {
        const int32_t start = rule_start_[c.rule];
        if (c.tail) {
          depends(start, s);
          continue;
        }
        const auto id = static_cast<int32_t>(calls.size());
        if (pass) calls.push_back({s, start, c.ret, start == c.ret ? 1 : 2});
        depends(start, ~id);
        if (c.ret != start) depends(c.ret, ~id);
      }
    }
    if (pass == 0) rev.Allocate();
  }
  stack_need_.assign(static_cast<size_t>(n), kNoStackNeed);
  std::vector<std::vector<int32_t>> buckets(1);
  auto offer = [&](int32_t s, int32_t need) {
    if (need >= stack_need_[s]) return;
    stack_need_[s] = need;
    if (buckets.size() <= static_cast<size_t>(need)) buckets.resize(static_cast<size_t>(need) + 1);
    buckets[static_cast<size_t>(need)].push_back(s);
  };
  for (int32_t s = 0; s < n; ++s) {
    PollInterrupt();
    if (final_[s]) offer(s, 0);
  }
  Flags settled(static_cast<size_t>(n), false);
  max_stack_need_ = 0;
  for (size_t level = 0; level < buckets.size(); ++level) {
    // (Offers at this level append to this bucket: index it, never hold a reference.)
    for (size_t i = 0; i < buckets[level].size(); ++i) {
      const int32_t t = buckets[level][i];
      if (settled[t] || stack_need_[t] != static_cast<int32_t>(level)) continue;
      settled[t] = true;
      max_stack_need_ = static_cast<int32_t>(level);
      for (const int32_t* d = rev.begin(t); d != rev.end(t); ++d) {
        if (*d >= 0) {
          offer(*d, static_cast<int32_t>(level));
          continue;
        }
        Call& c = calls[static_cast<size_t>(~*d)];
        if (--c.unsettled == 0) offer(c.state, std::max(1 + stack_need_[c.start], stack_need_[c.ret]));
      }
    }
  }
}

namespace {
struct IntVecHash {
  size_t operator()(const std::vector<int32_t>& v) const {
    uint64_t h = 0xcbf29ce484222325ull ^ v.size();
    for (int32_t x : v) h = (h ^ static_cast<uint32_t>(x)) * 0x100000001b3ull;
    return static_cast<size_t>(h ^ (h >> 29));
  }
};
}  // namespace

// Subset construction per rule over its epsilon-free kernel states. A DFA state is the sorted
// set of NFA states with byte edges, calls or the final flag reached by epsilon edges; its
// byte edges go, per maximal byte interval, to the closure of every member's targets; its
// calls are grouped by callee, returning to the closure of the members' return states. Dead
// states are pruned afterwards, from the DFA (PruneDead). A rule whose DFA would outgrow
// 4x its NFA (+64) states, or 64x (+4096; past 20k NFA states, 16x + 1M) NFA states summed
// over its sets, is copied unchanged; the parser handles both forms alike. (A searched
// counted repetition, `.*[0-9a-f]{40}`, has sets of every count up to the one reached: the
// sum grows with the square of the count, and only a DFA has the universal states its masks
// need.)
void Automaton::Determinize() {
  const int32_t n = num_states();
  const int32_t n_rules = static_cast<int32_t>(rule_start_.size());
  Arena scratch;
  std::vector<EdgeList<int32_t>> states_of = ArenaLists(static_cast<size_t>(n_rules), &scratch);
  for (int32_t s = 0; s < n; ++s) {
    PollInterrupt();
    if (state_rule_[s] >= 0) states_of[state_rule_[s]].push_back(s);
  }
  std::vector<EdgeList<ByteEdge>> out_bytes;
  std::vector<EdgeList<int32_t>> out_eps;
  std::vector<EdgeList<CallEdge>> out_calls;
  Flags out_final, out_det;
  std::vector<int32_t> out_rule, out_start(n_rules, -1);
  // DFAs have fewer states than their NFAs, mostly (0.75x on JSON Schema grammars).
  out_bytes.reserve(static_cast<size_t>(n));
  out_eps.reserve(static_cast<size_t>(n));
  out_calls.reserve(static_cast<size_t>(n));
  out_final.reserve(static_cast<size_t>(n));
  out_det.reserve(static_cast<size_t>(n));
  out_rule.reserve(static_cast<size_t>(n));
  auto relevant = [&](int32_t s) { return !bytes_[s].empty() || !calls_[s].empty() || final_[s]; };

  std::vector<int32_t> stamp(n, -1), work, remap(n, -1);
  // The DFA state of one NFA state's closure, valid where single_rule[t] is the rule being
  // built: most byte intervals and returns go to one NFA state, whose closure and set are then
  // found once per rule.
  constexpr int32_t kEmptyClosure = -2;
  std::vector<int32_t> single_rule(n, -1), single_dfa(n, -1);
  int32_t epoch = 0;
  // Adds the kernel states of the epsilon closure of s to `acc` (visited: stamp == epoch).
  auto closure_into = [&](int32_t s, std::vector<int32_t>& acc) {
    if (stamp[s] == epoch) return;
    stamp[s] = epoch;
    if (eps_[s].empty()) {  // the common case: the closure is s alone
      if (relevant(s)) acc.push_back(s);
      return;
    }
    work.assign(1, s);
    while (!work.empty()) {
      PollInterrupt();
      const int32_t t = work.back();
      work.pop_back();
      if (relevant(t)) acc.push_back(t);
      for (int32_t u : eps_[t]) {
        if (stamp[u] != epoch) {
          stamp[u] = epoch;
          work.push_back(u);
        }
      }
    }
  };
  auto new_out = [&](int32_t rule) {
    out_det.push_back(true);
    out_bytes.emplace_back(&arena_);
    out_eps.emplace_back(&arena_);
    out_calls.emplace_back(&arena_);
    out_final.push_back(false);
    out_rule.push_back(rule);
    return static_cast<int32_t>(out_bytes.size() - 1);
  };

  // DFA states of the current rule: their member sets end to end in `pool` (set k is
  // pool[span[k] .. span[k+1])), found by an open-addressing table of set ids.
  std::vector<int32_t> pool, span, table;
  std::vector<uint64_t> set_hash;
  std::vector<int32_t> set, points, members;
  struct Span {
    int lo, hi;
    int32_t target;
  };
  std::vector<Span> spans, active;
  std::vector<int32_t> targets, prev_targets;
  std::vector<std::pair<int32_t, int32_t>> calls;
  // Copies rule r's states unchanged, as a DFA (`deterministic`: its epsilon edges lead only
  // to states that end the rule, so they become final flags) or as the NFA it is.
  auto copy_rule = [&](int32_t r, bool deterministic) {
    const size_t base = out_bytes.size();
    if (static_cast<int64_t>(base + states_of[r].size()) > limits_.max_automaton_states) {
      throw CoreError::Limit("max_automaton_states", limits_.max_automaton_states,
                             "the grammar needs more automaton states (about one per byte of its literals, "
                             "enum values and unrolled repetitions)");
    }
    for (size_t k = 0; k < states_of[r].size(); ++k) remap[states_of[r][k]] = static_cast<int32_t>(base + k);
    // Each NFA state's lists move to its one copy (the same arena backs both), renumbered in
    // place: nothing reads a rule's NFA states once the rule is done.
    for (int32_t s : states_of[r]) {
      PollInterrupt();  // a rule can hold millions of states
      const int32_t d = new_out(r);
      out_det[d] = deterministic;
      out_final[d] = final_[s] || (deterministic && !eps_[s].empty());
      out_bytes[d] = std::move(bytes_[s]);
      for (ByteEdge& e : out_bytes[d]) e.target = remap[e.target];
      out_calls[d] = std::move(calls_[s]);
      for (CallEdge& c : out_calls[d]) c.ret = remap[c.ret];
      if (!deterministic) {
        out_eps[d] = std::move(eps_[s]);
        for (int32_t& t : out_eps[d]) t = remap[t];
      }
    }
    out_start[r] = remap[rule_start_[r]];
  };
  // A rule whose NFA is a DFA already (no epsilon edges but to states that only end the rule,
  // disjoint byte edges, one call per callee: sequences of literals, classes and calls, the
  // natively built StringExcept tries) is copied as it is, its states one DFA state each:
  // what the subset construction would build, without its cost.
  auto pure_end = [&](int32_t t) { return final_[t] && bytes_[t].empty() && calls_[t].empty() && eps_[t].empty(); };
  auto copy_if_deterministic = [&](int32_t r) {
    for (int32_t s : states_of[r]) {
      PollInterrupt();
      for (int32_t t : eps_[s]) {
        if (!pure_end(t)) return false;
      }
      EdgeList<ByteEdge>& b = bytes_[s];
      std::sort(b.begin(), b.end(), [](const ByteEdge& x, const ByteEdge& y) { return x.lo < y.lo; });
      for (size_t k = 1; k < b.size(); ++k) {
        if (b[k].lo <= b[k - 1].hi) return false;
      }
      const EdgeList<CallEdge>& c = calls_[s];
      for (size_t i = 0; i < c.size(); ++i) {
        for (size_t j = i + 1; j < c.size(); ++j) {
          if (c[i].rule == c[j].rule) return false;
        }
      }
    }
    copy_rule(r, true);
    return true;
  };
  for (int32_t r = 0; r < n_rules; ++r) {
    if (copy_if_deterministic(r)) continue;
    const size_t base = out_bytes.size();
    const int64_t room = limits_.max_automaton_states - static_cast<int64_t>(base);
    const int64_t cap = std::min<int64_t>(4 * static_cast<int64_t>(states_of[r].size()) + 64, room);
    const auto nfa_states = static_cast<int64_t>(states_of[r].size());
    const int64_t pool_cap = std::min(64 * nfa_states + 4096, 16 * nfa_states + (int64_t{1} << 20));
    pool.clear();
    span.assign(1, 0);
    set_hash.clear();
    table.assign(64, -1);
    bool overflow = false;
    auto n_sets = [&] { return span.size() - 1; };
    // Interns `set` (sorted here) as a DFA state of rule r; -1 once over the cap.
    auto intern = [&](std::vector<int32_t>& v) -> int32_t {
      std::sort(v.begin(), v.end());
      const uint64_t h = IntVecHash()(v);
      size_t mask = table.size() - 1;
      size_t slot = h & mask;
      for (; table[slot] >= 0; slot = (slot + 1) & mask) {
        const int32_t k = table[slot];
        if (set_hash[k] == h && span[k + 1] - span[k] == static_cast<int32_t>(v.size()) &&
            std::equal(v.begin(), v.end(), pool.begin() + span[k])) {
          return static_cast<int32_t>(base + k);
        }
      }
      // Bounded in states and in total set size (sets of thousands of NFA states, as nested
      // bounded repetitions make, would take quadratic time).
      if (static_cast<int64_t>(n_sets()) >= cap || static_cast<int64_t>(pool.size() + v.size()) > pool_cap) {
        overflow = true;
        return -1;
      }
      const int32_t k = static_cast<int32_t>(n_sets());
      table[slot] = k;
      set_hash.push_back(h);
      pool.insert(pool.end(), v.begin(), v.end());
      span.push_back(static_cast<int32_t>(pool.size()));
      if (2 * n_sets() > table.size()) {  // grow: rehash every set
        table.assign(2 * table.size(), -1);
        mask = table.size() - 1;
        for (size_t j = 0; j < n_sets(); ++j) {
          size_t t = set_hash[j] & mask;
          while (table[t] >= 0) t = (t + 1) & mask;
          table[t] = static_cast<int32_t>(j);
        }
      }
      const int32_t id = new_out(r);
      return id;
    };
    // The DFA state of t's closure, interned (-1 once over the cap); kEmptyClosure, with `set`
    // empty, where the closure has no kernel state (not kept: an interval then has no edge, a
    // return or a start interns the empty set).
    auto dfa_of = [&](int32_t t) -> int32_t {
      if (single_rule[t] == r) return single_dfa[t];
      ++epoch;
      set.clear();
      closure_into(t, set);
      if (set.empty()) return kEmptyClosure;
      const int32_t d = intern(set);
      if (d >= 0) single_rule[t] = r, single_dfa[t] = d;
      return d;
    };
    auto dfa_or_empty = [&](int32_t t) {
      const int32_t d = dfa_of(t);
      return d == kEmptyClosure ? intern(set) : d;
    };
    out_start[r] = dfa_or_empty(rule_start_[r]);
    // Appends DFA state d's edge on [lo, hi] to t, merged into its last edge where that one
    // ends just before lo and goes to t. (A reference into out_bytes is taken only here, after
    // the interning that found t, which may grow out_bytes.)
    auto add_edge = [&](int32_t d, int lo, int hi, int32_t t) {
      auto& edges = out_bytes[d];
      if (!edges.empty() && edges.back().target == t && edges.back().hi + 1 == lo) {
        edges.back().hi = static_cast<uint8_t>(hi);
      } else {
        edges.push_back({static_cast<uint8_t>(lo), static_cast<uint8_t>(hi), t});
      }
    };
    for (size_t i = 0; i < n_sets() && !overflow; ++i) {
      PollInterrupt();
      const int32_t d = static_cast<int32_t>(base + i);
      members.assign(pool.begin() + span[i], pool.begin() + span[i + 1]);  // `pool` grows below
      bool fin = false;
      calls.clear();
      spans.clear();
      points.clear();
      for (int32_t s : members) {
        fin = fin || final_[s];
        for (const CallEdge& c : calls_[s]) calls.push_back({c.rule, c.ret});
      }
      out_final[d] = fin;
      std::sort(calls.begin(), calls.end());
      for (size_t k = 0; k < calls.size() && !overflow;) {
        const int32_t callee = calls[k].first;
        int32_t ret;
        if (k + 1 == calls.size() || calls[k + 1].first != callee) {
          ret = dfa_or_empty(calls[k++].second);
        } else {
          ++epoch;
          set.clear();
          for (; k < calls.size() && calls[k].first == callee; ++k) closure_into(calls[k].second, set);
          ret = intern(set);
        }
        if (ret >= 0) out_calls[d].push_back({callee, ret});
      }
      // One member whose edges are in order and disjoint (three DFA states in four): each edge
      // is one interval of the sweep below, to its target's DFA state.
      if (members.size() == 1) {
        const EdgeList<ByteEdge>& own = bytes_[members[0]];
        bool in_order = true;
        for (size_t k = 1; k < own.size() && in_order; ++k) in_order = own[k - 1].hi < own[k].lo;
        if (in_order) {
          for (const ByteEdge& e : own) {
            const int32_t t = dfa_of(e.target);
            if (t == kEmptyClosure) continue;
            if (t < 0) break;
            add_edge(d, e.lo, e.hi, t);
          }
          continue;
        }
      }
      for (int32_t s : members) {
        for (const ByteEdge& e : bytes_[s]) {
          spans.push_back({e.lo, e.hi, e.target});
          points.push_back(e.lo);
          points.push_back(e.hi + 1);
        }
      }
      std::sort(points.begin(), points.end());
      points.erase(std::unique(points.begin(), points.end()), points.end());
      // Sweep the elementary intervals between points in order, keeping the spans that cover
      // the current one (a span covers an interval wholly or not at all): spans sorted by lo
      // enter as the sweep reaches them and leave once past their hi.
      std::sort(spans.begin(), spans.end(), [](const Span& x, const Span& y) { return x.lo < y.lo; });
      active.clear();
      size_t next_span = 0;
      // Consecutive intervals covered by the same NFA targets (a class's ranges, split only by
      // other edges' boundaries) reach the same DFA state: reuse it.
      prev_targets.clear();
      int32_t prev_t = -1;
      for (size_t k = 0; k + 1 < points.size() && !overflow; ++k) {
        const int lo = points[k], hi = points[k + 1] - 1;
        while (next_span < spans.size() && spans[next_span].lo <= lo) active.push_back(spans[next_span++]);
        active.erase(std::remove_if(active.begin(), active.end(), [&](const Span& sp) { return sp.hi < lo; }),
                     active.end());
        if (active.empty()) continue;
        targets.clear();
        for (const Span& sp : active) targets.push_back(sp.target);
        std::sort(targets.begin(), targets.end());
        int32_t t = prev_t;
        if (t < 0 || targets != prev_targets) {
          if (targets.size() == 1) {
            t = dfa_of(targets[0]);
            if (t == kEmptyClosure) continue;
          } else {
            ++epoch;
            set.clear();
            for (int32_t target : targets) closure_into(target, set);
            if (set.empty()) continue;
            t = intern(set);
          }
          if (t < 0) break;
          prev_targets.swap(targets);
          prev_t = t;
        }
        add_edge(d, lo, hi, t);
      }
    }
    if (!overflow) continue;
    // Too big as a DFA: copy the rule's NFA states unchanged (epsilon edges included).
    const auto from = static_cast<std::ptrdiff_t>(base);
    out_bytes.erase(out_bytes.begin() + from, out_bytes.end());  // (lists have no default allocator)
    out_eps.erase(out_eps.begin() + from, out_eps.end());
    out_calls.erase(out_calls.begin() + from, out_calls.end());
    out_final.resize(base);
    out_rule.resize(base);
    out_det.resize(base);
    copy_rule(r, false);
  }
  if (!token_read_.empty()) {
    // Token rules are copied (their two states form a DFA already), so `remap` holds theirs.
    std::vector<TokenRead> moved(out_bytes.size());
    for (int32_t s = 0; s < n; ++s) {
      PollInterrupt();
      if (token_read_[s].set >= 0) moved[remap[s]] = {token_read_[s].set, remap[token_read_[s].target]};
    }
    token_read_ = std::move(moved);
  }
  bytes_ = std::move(out_bytes);
  eps_ = std::move(out_eps);
  calls_ = std::move(out_calls);
  final_ = std::move(out_final);
  deterministic_ = std::move(out_det);
  state_rule_ = std::move(out_rule);
  rule_start_ = std::move(out_start);
  rule_final_.clear();  // a determinized rule may have several final states
}

namespace {
struct Range {
  int lo, hi;
};
// Plain characters (plain_text.h): the plain ASCII bytes, then the valid UTF-8 sequences, as
// byte ranges, in two parts: those of the kNearLeads leads 0xC2 and 0xE2, and all the others.
// Every plain multi-byte character is in exactly one part.
const Range kPlainAscii[] = {{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0x7E}};
const std::vector<std::vector<Range>> kNearLeadsUtf8 = {
    {{0xC2, 0xC2}, {0x80, 0xBF}},
    {{0xE2, 0xE2}, {0x80, 0xBF}, {0x80, 0xBF}},
};
const std::vector<std::vector<Range>> kNearPlainUtf8 = {
    {{0xC3, 0xDF}, {0x80, 0xBF}},
    {{0xE0, 0xE0}, {0xA0, 0xBF}, {0x80, 0xBF}},
    {{0xE1, 0xE1}, {0x80, 0xBF}, {0x80, 0xBF}},
    {{0xE3, 0xEC}, {0x80, 0xBF}, {0x80, 0xBF}},
    {{0xED, 0xED}, {0x80, 0x9F}, {0x80, 0xBF}},
    {{0xEE, 0xEF}, {0x80, 0xBF}, {0x80, 0xBF}},
    {{0xF0, 0xF0}, {0x90, 0xBF}, {0x80, 0xBF}, {0x80, 0xBF}},
    {{0xF1, 0xF3}, {0x80, 0xBF}, {0x80, 0xBF}, {0x80, 0xBF}},
    {{0xF4, 0xF4}, {0x80, 0x8F}, {0x80, 0xBF}, {0x80, 0xBF}},
};

// True when the edges of s (sorted, disjoint) cover r and every target of a covering edge
// satisfies `ok`.
template <typename Ok>
bool Covers(const EdgeList<ByteEdge>& edges, const Range& r, Ok&& ok) {
  int next = r.lo;
  for (const ByteEdge& e : edges) {
    if (e.hi < next) continue;
    if (e.lo > next || !ok(e.target)) return false;
    next = e.hi + 1;
    if (next > r.hi) return true;
  }
  return false;
}
}  // namespace

template <typename Leaf>
bool Automaton::EveryPlainUtf8(int32_t s, Leaf&& leaf, Utf8Part part) const {
  // Each pattern is at most 4 ranges deep.
  auto follow = [&](auto&& self, int32_t q, const std::vector<Range>& p, size_t k) -> bool {
    if (k == p.size()) return leaf(q);
    if (!deterministic_[q]) return false;
    return Covers(bytes_[q], p[k], [&](int32_t t) { return self(self, t, p, k + 1); });
  };
  auto every = [&](const std::vector<std::vector<Range>>& patterns) {
    for (const std::vector<Range>& p : patterns) {
      if (!follow(follow, s, p, 0)) return false;
    }
    return true;
  };
  return (part == Utf8Part::kNearLeads || every(kNearPlainUtf8)) && (part == Utf8Part::kNear || every(kNearLeadsUtf8));
}

bool Automaton::UnionReadsPlainUtf8(const std::vector<int32_t>& starts) const {
  // On each piece of a pattern's byte range, the members' targets (each member's edges are
  // sorted and disjoint: one target or none); a character is read when some member ends.
  auto follow = [&](auto&& self, const std::vector<int32_t>& members, const std::vector<Range>& p, size_t k) -> bool {
    if (k == p.size()) {
      return std::any_of(members.begin(), members.end(), [&](int32_t t) { return final_[t] != 0; });
    }
    std::vector<int> cuts{p[k].lo, p[k].hi + 1};
    for (int32_t q : members) {
      for (const ByteEdge& e : bytes_[q]) {
        if (e.hi >= p[k].lo && e.lo <= p[k].hi) {
          cuts.push_back(std::max<int>(e.lo, p[k].lo));
          cuts.push_back(std::min<int>(e.hi, p[k].hi) + 1);
        }
      }
    }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    std::vector<int32_t> next;
    for (size_t i = 0; i + 1 < cuts.size(); ++i) {
      next.clear();
      for (int32_t q : members) {
        for (const ByteEdge& e : bytes_[q]) {
          if (e.lo <= cuts[i] && cuts[i] <= e.hi && deterministic_[e.target]) next.push_back(e.target);
        }
      }
      if (next.empty() || !self(self, next, p, k + 1)) return false;
    }
    return true;
  };
  for (const auto* patterns : {&kNearPlainUtf8, &kNearLeadsUtf8}) {
    for (const std::vector<Range>& p : *patterns) {
      if (!follow(follow, starts, p, 0)) return false;
    }
  }
  return true;
}

void Automaton::ComputeCharacterRules() {
  const int32_t n_rules = static_cast<int32_t>(rule_start_.size());
  char_ascii_.assign(static_cast<size_t>(n_rules), {0, 0});
  char_utf8_.assign(static_cast<size_t>(n_rules), false);
  char_utf8_near_.assign(static_cast<size_t>(n_rules), false);
  auto ends = [&](int32_t t) { return static_cast<bool>(final_[t]); };
  for (int32_t r = 0; r < n_rules; ++r) {
    const int32_t s0 = rule_start_[r];
    if (!deterministic_[s0]) continue;
    for (const ByteEdge& e : bytes_[s0]) {
      if (!final_[e.target]) continue;
      if (e.hi >= 0x20 && e.lo <= 0x7E) AddByteRange(std::max<int>(e.lo, 0x20), std::min<int>(e.hi, 0x7E), char_ascii_[r].data());
    }
    char_utf8_near_[r] = EveryPlainUtf8(s0, ends, Utf8Part::kNear);
    char_utf8_[r] = char_utf8_near_[r] && EveryPlainUtf8(s0, ends, Utf8Part::kNearLeads);
  }
}

bool Automaton::ReadsLeadBytes(int32_t s) const {
  for (const ByteEdge& e : bytes_[s]) {
    if (e.hi >= 0xC2 && e.lo <= 0xF4) return true;
  }
  return false;
}

bool Automaton::ReadsSomeCharacter(int32_t r) const {
  return (char_ascii_[r][0] | char_ascii_[r][1]) != 0 || char_utf8_[r];
}

void Automaton::IndexCharacterRules() {
  char_rule_at_.assign(static_cast<size_t>(num_states()), -1);
  for (int32_t r = 0; r < static_cast<int32_t>(rule_start_.size()); ++r) {
    if (ReadsSomeCharacter(r)) char_rule_at_[rule_start_[r]] = r;
  }
}

bool Automaton::ReadsOnePlainCharacter(int32_t r) const {
  return HasAllPlainAscii(char_ascii_[r].data()) && char_utf8_[r];
}

// Greatest fixpoint over determinized states (their byte edges are sorted and disjoint):
// start from every state with byte edges, drop a state when some plain byte or character does
// not lead to a state still in the set, and recheck its predecessors. Two rounds: the second
// also counts a target that calls a rule whose start the first round found universal (the
// closure puts that rule's start among the heads), e.g. a key-complement trie whose every
// exit calls one shared string-tail rule. The same two rounds again for near universal
// states, where the characters of kNearLeads' leads need not be read.
//
// The four rounds share their candidates, predecessors and per-candidate character leaves.
// Invariant: a round's test is monotone in the set, and a round that assumes less (the first
// against the second; universal against near universal) tests more, so its result is a subset
// of the other's greatest fixpoint. That subset is pinned: a state of the greatest fixpoint
// passes its test against every superset of it, which each round's set stays, so pinned states
// are never tested and the result is the one a round without pins computes.
void Automaton::ComputeUniversal() {
  const int32_t n = num_states();
  // A call of a rule that reads one character and may then end (an encoded character class,
  // as JSON string contents use; a class of non-ASCII characters only) covers that character
  // too (char_ascii_, and char_utf8_ or, for near universal states, char_utf8_near_).
  auto reads_one = [&](const CallEdge& c, const Flags& char_utf8) {
    return (char_ascii_[c.rule][0] | char_ascii_[c.rule][1]) != 0 || char_utf8[c.rule];
  };
  // True when the byte edges of s and its character calls that lead to states `keep` accepts
  // cover every plain ASCII byte; `utf8` is set when such a call reads every UTF-8 character.
  auto covers_plain_ascii = [&](int32_t s, auto&& keep, const Flags& char_utf8, bool* utf8) {
    uint64_t ascii[2] = {0, 0};
    for (const ByteEdge& e : bytes_[s]) {
      if (e.lo > 0x7E || e.hi < 0x20 || !keep(e.target)) continue;
      AddByteRange(std::max<int>(e.lo, 0x20), std::min<int>(e.hi, 0x7E), ascii);
    }
    for (const CallEdge& c : calls_[s]) {
      if (!reads_one(c, char_utf8) || !keep(c.ret)) continue;
      ascii[0] |= char_ascii_[c.rule][0];
      ascii[1] |= char_ascii_[c.rule][1];
      *utf8 = *utf8 || char_utf8[c.rule];
    }
    return HasAllPlainAscii(ascii);
  };

  // Candidates: states whose edges and character calls cover every plain ASCII byte, whatever
  // they lead to (a necessary condition; the same for near universal states, as a call adds
  // ASCII bytes by char_ascii_ alone). Most states (literals, digits, punctuation) are not,
  // and never enter the fixpoints.
  Flags candidate(n, false);
  std::vector<int32_t> candidates;
  for (int32_t s = 0; s < n; ++s) {
    PollInterrupt();
    bool utf8 = false;
    if (!deterministic_[s] || !covers_plain_ascii(s, [](int32_t) { return true; }, char_utf8_, &utf8)) continue;
    candidate[s] = true;
    candidates.push_back(s);
  }
  // Per candidate, the states its plain multi-byte characters lead to, found once (their
  // paths do not depend on the set): utf8_leaves[begin .. near_end) for all but those of
  // kNearLeads' leads, [begin .. end) for all; near_end or end is -1 when some character of
  // its part is not read by the candidate's own deterministic edges. Predecessors are those of
  // near universal states (their character calls are a superset): a needless recheck of a
  // universal state changes nothing.
  struct LeafSpan {
    int32_t begin = 0, near_end = -1, end = -1;
  };
  std::vector<int32_t> utf8_leaves;
  std::vector<LeafSpan> leaf_span(static_cast<size_t>(n));
  Arena scratch;
  std::vector<EdgeList<int32_t>> preds = ArenaLists(static_cast<size_t>(n), &scratch);
  // Candidates whose edges on lead bytes are the same (every node of a key trie holds one copy
  // of "any other non-ASCII character, then the tail") follow the same paths: their leaves are
  // found once, and their spans share them.
  std::unordered_map<std::vector<int32_t>, LeafSpan, IntVecHash> span_by_leads;
  std::vector<int32_t> leads;
  for (int32_t s : candidates) {
    for (const ByteEdge& e : bytes_[s]) preds[e.target].push_back(s);
    for (const CallEdge& c : calls_[s]) {
      if (reads_one(c, char_utf8_near_)) preds[c.ret].push_back(s);
    }
    leads.clear();
    for (const ByteEdge& e : bytes_[s]) {
      if (e.hi < 0xC2) continue;
      leads.push_back(e.lo << 8 | e.hi);
      leads.push_back(e.target);
    }
    LeafSpan& span = leaf_span[s];
    auto known = span_by_leads.find(leads);
    if (known != span_by_leads.end()) {
      span = known->second;
    } else {
      span.begin = static_cast<int32_t>(utf8_leaves.size());
      auto add_leaf = [&](int32_t t) {
        if (std::find(utf8_leaves.begin() + span.begin, utf8_leaves.end(), t) == utf8_leaves.end()) {
          utf8_leaves.push_back(t);
        }
        return true;
      };
      // Both sets need every character of the kNear part: a candidate that misses one is
      // neither, and the kNearLeads part is not looked at.
      if (EveryPlainUtf8(s, add_leaf, Utf8Part::kNear)) {
        span.near_end = static_cast<int32_t>(utf8_leaves.size());
        if (EveryPlainUtf8(s, add_leaf, Utf8Part::kNearLeads)) span.end = static_cast<int32_t>(utf8_leaves.size());
      }
      utf8_leaves.resize(static_cast<size_t>(std::max({span.begin, span.near_end, span.end})));
      span_by_leads.emplace(leads, span);
    }
    const int32_t kept = std::max({span.begin, span.near_end, span.end});
    for (int32_t k = span.begin; k < kept; ++k) {
      if (utf8_leaves[k] != s) preds[utf8_leaves[k]].push_back(s);  // a leaf's drop rechecks s
    }
  }
  // A state that tail-calls a rule whose start is in the set is as good as a member (the call
  // pushes no frame: whatever the callee's start keeps viable, it does), within one round: a
  // DFA times a length counter lowered to a rule per (state, count), each reading a character
  // and tail-calling the next (a pattern searched for under `minLength`), is a cycle of such
  // calls. tail_callers[r]: the states that tail-call rule r, kept for the rules whose start is
  // a candidate (no other start is ever in the set); when that start leaves the set, their
  // predecessors are checked again.
  std::vector<int32_t> rule_at_start(static_cast<size_t>(n), -1);
  for (int32_t r = 0; r < static_cast<int32_t>(rule_start_.size()); ++r) {
    if (candidate[rule_start_[r]]) rule_at_start[rule_start_[r]] = r;
  }
  std::vector<EdgeList<int32_t>> tail_callers = ArenaLists(rule_start_.size(), &scratch);
  for (int32_t t = 0; t < n; ++t) {
    for (const CallEdge& c : calls_[t]) {
      if (c.tail && candidate[rule_start_[c.rule]]) tail_callers[c.rule].push_back(t);
    }
  }
  // One round: `near` for near universal states; `callees`, the first round's result (in a
  // second round); `pinned`, a subset of the result known beforehand.
  auto fixpoint = [&](bool near, const Flags* callees, const Flags& pinned) {
    const Flags& char_utf8 = near ? char_utf8_near_ : char_utf8_;
    Flags in = candidate;
    std::vector<int32_t> work;
    for (int32_t s : candidates) {
      if (!pinned[s]) work.push_back(s);
    }
    auto member = [&](int32_t t) {
      if (in[t]) return true;
      for (const CallEdge& c : calls_[t]) {
        if ((c.tail && in[rule_start_[c.rule]]) || (callees != nullptr && (*callees)[rule_start_[c.rule]])) {
          return true;
        }
      }
      return false;
    };
    auto leaves_member = [&](int32_t s) {
      const LeafSpan& span = leaf_span[s];
      const int32_t end = near ? span.near_end : span.end;
      for (int32_t k = span.begin; k < end; ++k) {
        if (!member(utf8_leaves[k])) return false;
      }
      return end >= 0;
    };
    while (!work.empty()) {
      PollInterrupt();
      const int32_t s = work.back();
      work.pop_back();
      if (!in[s]) continue;
      // Plain ASCII bytes covered by an edge to a member or a character call returning to one.
      bool utf8 = false;
      if (covers_plain_ascii(s, member, char_utf8, &utf8) && (utf8 || leaves_member(s))) continue;
      in[s] = false;
      for (int32_t p : preds[s]) {
        if (in[p] && !pinned[p]) work.push_back(p);
      }
      if (const int32_t r = rule_at_start[s]; r >= 0) {
        for (int32_t t : tail_callers[r]) {
          for (int32_t p : preds[t]) {
            if (in[p] && !pinned[p]) work.push_back(p);
          }
        }
      }
    }
    return in;
  };
  const Flags first = fixpoint(false, nullptr, Flags(n, false));
  universal_ = fixpoint(false, &first, first);
  // Where every candidate is universal, so is every near universal state (a subset of them).
  bool all = true;
  for (int32_t s : candidates) all = all && universal_[s];
  if (all) {
    near_universal_ = universal_;
    return;
  }
  const Flags near_first = fixpoint(true, nullptr, first);
  Flags pinned = near_first;
  for (int32_t s : candidates) pinned[s] = pinned[s] || universal_[s];
  near_universal_ = fixpoint(true, &near_first, pinned);
}

// Capacity: universal states are unbounded. Otherwise a determinized state that reads every
// plain character gets 1 + the least capacity among the states those characters lead to, and
// a state that calls a rule reading any one plain character and then able to end (a string's
// character rule) gets 1 + the capacity of the return state; the larger of the two. Computed
// in post-order of an iterative depth-first search; a state met again on the current path
// counts 0 (a lower bound stays sound).
void Automaton::ComputePlainCapacity() {
  const int32_t n = num_states();
  const int32_t n_rules = static_cast<int32_t>(rule_start_.size());
  Flags single(n_rules, false);
  for (int32_t r = 0; r < n_rules; ++r) single[r] = ReadsOnePlainCharacter(r);
  single_start_.assign(n, false);
  near_single_start_.assign(n, false);
  for (int32_t r = 0; r < n_rules; ++r) {
    if (single[r]) single_start_[rule_start_[r]] = true;
    if (HasAllPlainAscii(char_ascii_[r].data()) && char_utf8_near_[r]) near_single_start_[rule_start_[r]] = true;
  }
  // succ[s]: the states after one plain character (all of them, when s reads every plain
  // character), and full[s] says whether it does; via[s]: return states of single-rule calls;
  // tails[s]: the start states of the rules s tail-calls (what is viable from a callee's start
  // is from s: the call pushes no frame, so the stack limit does not cut it short).
  Arena scratch;
  std::vector<EdgeList<int32_t>> succ = ArenaLists(static_cast<size_t>(n), &scratch);
  std::vector<EdgeList<int32_t>> via = ArenaLists(static_cast<size_t>(n), &scratch);
  std::vector<EdgeList<int32_t>> tails = ArenaLists(static_cast<size_t>(n), &scratch);
  Flags full(n, false);
  std::map<std::vector<int32_t>, bool> union_utf8_memo;  // called rules -> UnionReadsPlainUtf8
  // A successor on the current path (a cycle through positions that read nothing plain) counts
  // as capacity 0 while its own is computed. A state with no successor of any kind (most) is
  // settled as it is met, so the search below passes it by.
  capacity_.assign(n, 0);
  std::vector<uint8_t> mark(n, kUnvisited);
  auto settle_if_leaf = [&](int32_t s) {
    if (succ[s].empty() && via[s].empty() && tails[s].empty()) {
      capacity_[s] = universal_[s] ? kUnbounded : 0;
      mark[s] = kFinished;
    }
  };
  for (int32_t s = 0; s < n; ++s) {
    PollInterrupt();
    // Calls of rules that read one character of a class and may then end (a pattern's class in
    // a JSON string: its characters, and the others' class beside it): together with the
    // state's own edges they may read every plain character.
    uint64_t call_ascii[2] = {0, 0};
    bool call_utf8 = false;
    bool char_calls = false;
    for (const CallEdge& c : calls_[s]) {
      if (single[c.rule]) via[s].push_back(c.ret);
      if (c.tail) tails[s].push_back(rule_start_[c.rule]);
      if (!single[c.rule] && ReadsSomeCharacter(c.rule)) {
        call_ascii[0] |= char_ascii_[c.rule][0];
        call_ascii[1] |= char_ascii_[c.rule][1];
        call_utf8 = call_utf8 || char_utf8_[c.rule];
        char_calls = true;
      }
    }
    if (universal_[s] || !deterministic_[s] || (bytes_[s].empty() && !char_calls)) {
      settle_if_leaf(s);
      continue;
    }
    EdgeList<int32_t>& out = succ[s];
    auto collect = [&](int32_t t) {
      out.push_back(t);
      return true;
    };
    bool ok = true;
    if (!char_calls) {
      for (const Range& range : kPlainAscii) ok = ok && Covers(bytes_[s], range, collect);
      ok = ok && EveryPlainUtf8(s, collect, Utf8Part::kAll);
    } else {
      // Each plain ASCII byte no call reads must have an edge; the characters past 0x7F are
      // read by a call, all by the edges, or by several calls together. The calls' return
      // states are successors too.
      for (const Range& range : kPlainAscii) {
        for (int b = range.lo; b <= range.hi && ok; ++b) {
          if (call_ascii[b >> 6] >> (b & 63) & 1) continue;
          const int32_t t = ByteTarget(s, static_cast<uint8_t>(b));
          ok = t >= 0;
          if (ok) out.push_back(t);
        }
      }
      // Or several calls read them together (a DFA state's classes, one per target), with no
      // edge of s's own past 0x7F: then every call's return state is a successor.
      bool union_utf8 = false;
      const bool utf8 = ok && (call_utf8 || EveryPlainUtf8(s, collect, Utf8Part::kAll));
      if (ok && !utf8 && !ReadsLeadBytes(s)) {
        std::vector<int32_t> rules;
        for (const CallEdge& c : calls_[s]) rules.push_back(c.rule);
        std::sort(rules.begin(), rules.end());
        rules.erase(std::unique(rules.begin(), rules.end()), rules.end());
        auto known = union_utf8_memo.find(rules);
        if (known == union_utf8_memo.end()) {
          std::vector<int32_t> starts;
          for (int32_t r : rules) {
            if (deterministic_[rule_start_[r]]) starts.push_back(rule_start_[r]);
          }
          known = union_utf8_memo.emplace(rules, UnionReadsPlainUtf8(starts)).first;
        }
        union_utf8 = known->second;
      }
      ok = utf8 || union_utf8;
      for (const CallEdge& c : calls_[s]) {
        if (union_utf8 || ReadsSomeCharacter(c.rule)) out.push_back(c.ret);
      }
    }
    full[s] = ok;
    if (!ok) {
      out.clear();
    } else {
      std::sort(out.begin(), out.end());
      out.erase(std::unique(out.begin(), out.end()), out.end());
    }
    settle_if_leaf(s);
  }
  PostOrder(
      n, mark,
      [&](int32_t s, size_t k) {
        const size_t n_succ = succ[s].size(), n_via = via[s].size();
        if (k < n_succ) return succ[s][k];
        if (k < n_succ + n_via) return via[s][k - n_succ];
        return k < n_succ + n_via + tails[s].size() ? tails[s][k - n_succ - n_via] : kNoMoreEdges;
      },
      [](const auto&, int32_t) {},
      [&](int32_t s) {
        int64_t cap = 0;
        if (universal_[s]) {
          cap = kUnbounded;
        } else {
          if (full[s]) {
            int64_t least = kUnbounded;
            for (int32_t t : succ[s]) least = std::min<int64_t>(least, capacity_[t]);
            cap = std::max<int64_t>(cap, 1 + least);
          }
          for (int32_t t : via[s]) cap = std::max<int64_t>(cap, 1 + capacity_[t]);
          for (int32_t t : tails[s]) cap = std::max<int64_t>(cap, capacity_[t]);
        }
        capacity_[s] = static_cast<int32_t>(std::min<int64_t>(cap, kUnbounded));
      });
}

int32_t Automaton::ByteTarget(int32_t s, uint8_t b) const {
  if (!deterministic_[s]) return kMixedTarget;
  for (const ByteEdge& e : bytes_[s]) {
    if (e.lo <= b && b <= e.hi) return e.target;
  }
  return kNoTarget;
}

int32_t Automaton::SetTarget(int32_t s, const uint64_t* set) const {
  if (!deterministic_[s]) return kMixedTarget;
  const int total = __builtin_popcountll(set[0]) + __builtin_popcountll(set[1]);
  int covered = 0;
  int32_t target = kNoTarget;
  for (const ByteEdge& e : bytes_[s]) {
    if (e.lo > 0x7F) break;  // (edges are sorted)
    uint64_t range[2] = {0, 0};
    AddByteRange(e.lo, std::min<int>(e.hi, 0x7F), range);
    const int in = __builtin_popcountll(range[0] & set[0]) + __builtin_popcountll(range[1] & set[1]);
    if (in == 0) continue;
    if (target != kNoTarget && target != e.target) return kMixedTarget;
    target = e.target;
    covered += in;
  }
  return covered == 0 ? kNoTarget : covered == total ? target : kMixedTarget;
}

void Automaton::LeadTargets(int32_t s, int32_t* out) const {
  if (!deterministic_[s]) {
    std::fill(out, out + kNumLeads, kMixedTarget);
    return;
  }
  // The lead bytes' targets in one pass over the edges (sorted, disjoint), then the rest of
  // each character once per distinct (target, shape): most leads share both.
  std::fill(out, out + kNumLeads, kNoTarget);
  for (const ByteEdge& e : bytes_[s]) {
    for (int b = std::max<int>(e.lo, 0xC2); b <= std::min<int>(e.hi, 0xF4); ++b) out[b - 0xC2] = e.target;
  }
  struct Known {
    int32_t after_lead, end;
    Utf8Lead shape;
  };
  Known known[8];
  int n_known = 0;
  for (int k = 0; k < kNumLeads; ++k) {
    if (out[k] < 0) continue;
    const Utf8Lead shape = Utf8LeadOf(static_cast<uint8_t>(0xC2 + k));
    int32_t end = INT32_MIN;  // not known yet
    for (int j = 0; j < n_known; ++j) {
      const Known& m = known[j];
      if (m.after_lead == out[k] && m.shape.continuations == shape.continuations && m.shape.lo == shape.lo &&
          m.shape.hi == shape.hi) {
        end = m.end;
      }
    }
    if (end == INT32_MIN) {
      end = CharEnd(out[k], shape);
      if (n_known < 8) known[n_known++] = {out[k], end, shape};
    }
    out[k] = end;
  }
}

int32_t Automaton::CharEnd(int32_t t, Utf8Lead shape) const {
  int lo = shape.lo, hi = shape.hi;
  for (int step = 0; step < shape.continuations && t >= 0; ++step) {
    // Mid-character: the state must only read bytes (no call to push, no end to pop).
    if (!deterministic_[t] || final_[t] || !calls_[t].empty()) return kMixedTarget;
    // One edge (sorted, disjoint: determinized) covers the continuation range, or none meets
    // it; edges that leave some of it uncovered read only some of the characters.
    int32_t next = kNoTarget;
    int covered = lo - 1;  // the range is covered up to here, without a gap
    bool gap = false, apart = false;
    for (const ByteEdge& e : bytes_[t]) {
      if (e.hi < lo || e.lo > hi) continue;
      gap = gap || e.lo > covered + 1;
      covered = std::max<int>(covered, e.hi);
      apart = apart || (next != kNoTarget && next != e.target);
      next = e.target;
    }
    if (next != kNoTarget && (gap || covered < hi)) return kPartialTarget;
    if (apart) return kMixedTarget;
    t = next;
    lo = 0x80, hi = 0xBF;
  }
  return t;
}

int64_t Automaton::memory_bytes() const {
  // Edge lists keep their elements in arena_ (the lists they outgrew too).
  int64_t n = static_cast<int64_t>(sizeof(*this) + arena_.reserved_bytes());
  n += HeapBytes(rule_names_) + HeapBytes(rule_start_) + HeapBytes(rule_final_) + HeapBytes(state_rule_);
  n += HeapBytes(bytes_) + HeapBytes(eps_) + HeapBytes(calls_);
  n += HeapBytes(final_) + HeapBytes(deterministic_) + HeapBytes(universal_) + HeapBytes(capacity_);
  n += HeapBytes(single_start_) + HeapBytes(char_ascii_) + HeapBytes(char_utf8_) + HeapBytes(char_rule_at_);
  n += HeapBytes(near_universal_) + HeapBytes(near_single_start_) + HeapBytes(char_utf8_near_);
  n += HeapBytes(kernel_offset_) + HeapBytes(kernel_) + HeapBytes(kernel_kinds_) + HeapBytes(plan_states_) + HeapBytes(token_read_);
  n += HeapBytes(stand_in_claims_) + HeapBytes(stand_ins_);
  for (const TokenSet& t : token_sets_) n += static_cast<int64_t>(sizeof(t)) + HeapBytes(t.ids);
  std::lock_guard<std::mutex> lock(character_steps_mu_);
  for (const auto& [state, step] : character_steps_) {
    n += static_cast<int64_t>(sizeof(state) + sizeof(step));
    if (step != nullptr) n += static_cast<int64_t>(sizeof(*step)) + HeapBytes(step->chars);
  }
  return n;
}

}  // namespace logitgate
