// The JSON string contents that spell anything but a few words (kOpStringExcept): the
// unlisted keys of a JSON object, strings excluded by `not: {enum: [...]}`.
//
// A trie over the words' code points, read one character at a time in any JSON spelling:
// raw UTF-8 where JSON allows it (not '"', '\\' or a control), a short escape (\" \\ \/ \b
// \f \n \r \t), \uXXXX in either case, or a \uXXXX\uXXXX surrogate pair. A character the
// current trie node has no child for leaves the trie: the tail (any string content, for the
// JSON frontend) follows. The contents may end at a trie node that is no word. Lone surrogate
// escapes are never read.
//
// Layout: one state per trie node, with byte edges for every raw character (its children's
// to the children; every other one to the tail, non-ASCII ones through continuation states the
// trie shares) and for its children's escapes (a backslash state and the \u digits that spell
// a child, a few states per node). Every other escape leaves the trie through a rule the whole
// grammar shares, one per set K of a node's children: "the escape of one character but those
// of K" (returning to the tail). A node reads the raw characters that leave the trie itself so
// that the mask walk's step sets see them all reach one state, the tail; the escapes, which
// are no plain text, go through the shared rule, which keeps a node's edges few (a rule that
// held the raw characters too cost ~24 states per set K, most of a median MaskBench schema's
// automaton; escapes in every node, ~25 more edges per node, doubled large schemas' compile).
// A word thus costs a handful of states per character and a configuration inside the trie
// two heads, whatever the number of children.
#include <algorithm>
#include <string>

#include "automaton.h"
#include "utf8_ranges.h"

namespace logitgate {

namespace {

constexpr uint32_t kHighFirst = 0xD800, kHighLast = 0xDBFF, kLowFirst = 0xDC00, kLowLast = 0xDFFF;

// The short escapes: the byte after the backslash, and the character it stands for.
constexpr std::pair<uint8_t, uint32_t> kShortEscapes[] = {{'"', 0x22}, {'\\', 0x5C}, {'/', 0x2F}, {'b', 0x08},
                                                           {'f', 0x0C}, {'n', 0x0A}, {'r', 0x0D}, {'t', 0x09}};

bool IsSurrogate(uint32_t cp) { return cp >= kHighFirst && cp <= kLowLast; }

std::string Hex(uint32_t cp) {
  static const char* kDigits = "0123456789ABCDEF";
  std::string out;
  for (int shift = cp > 0xFFFF ? 20 : 12; shift >= 0; shift -= 4) out += kDigits[(cp >> shift) & 0xF];
  return out;
}

struct TrieNode {
  std::vector<std::pair<uint32_t, int32_t>> kids;  // (code point, node), sorted by code point
  bool word = false;
};

}  // namespace

int32_t Automaton::NewRule(const std::string& name) {
  const auto r = static_cast<int32_t>(rule_start_.size());
  rule_names_.push_back(name);
  rule_start_.push_back(-1);
  rule_final_.push_back(-1);
  const int32_t start = NewState(), end = NewState();
  state_rule_[start] = state_rule_[end] = r;
  final_[end] = true;
  rule_start_[r] = start;
  rule_final_[r] = end;
  return r;
}

// A new state that reads "\\u" and goes on at `to` (where a surrogate pair's second half is read).
template <typename Fresh>
int32_t Automaton::BackslashU(int32_t to, Fresh&& fresh) {
  const int32_t slash = fresh(), u = fresh();
  bytes_[slash].push_back({'\\', '\\', u});
  bytes_[u].push_back({'u', 'u', to});
  return slash;
}

// Edges from `s` that read the hex digits of a code point with value in [lo, lo + 16^left)
// so far. `exit(a, b)` classifies the values [a, b] the next digit leaves possible: a state
// -1 when none is allowed, -2 to tell them apart digit by digit, or any other value, which
// `after(value, digits left)` turns into the state that reads the rest. Depth <= 4.
template <typename Exit, typename After>
void Automaton::HexDigits(int32_t s, uint32_t lo, int left, Exit&& exit, After&& after) {
  const int32_t rule = state_rule_[s];
  const uint32_t span = 1u << (4 * (left - 1));  // code points per value of the next digit
  int32_t targets[16];
  for (int h = 0; h < 16; ++h) {
    const uint32_t a = lo + static_cast<uint32_t>(h) * span, b = a + span - 1;
    const int32_t e = exit(a, b);
    if (e == -2) {
      targets[h] = NewState();
      state_rule_[targets[h]] = rule;
      HexDigits(targets[h], a, left - 1, exit, after);
    } else {
      targets[h] = e == -1 ? -1 : after(e, left - 1);
    }
  }
  // Digits with one target share edges: [0-9], [A-F], [a-f] at most per run of targets.
  for (int h = 0; h < 16;) {
    int e = h;
    while (e + 1 < 16 && e + 1 != 10 && targets[e + 1] == targets[h]) ++e;
    if (targets[h] >= 0) {
      if (h < 10) {
        bytes_[s].push_back({static_cast<uint8_t>('0' + h), static_cast<uint8_t>('0' + e), targets[h]});
      } else {
        bytes_[s].push_back({static_cast<uint8_t>('A' + h - 10), static_cast<uint8_t>('A' + e - 10), targets[h]});
        bytes_[s].push_back({static_cast<uint8_t>('a' + h - 10), static_cast<uint8_t>('a' + e - 10), targets[h]});
      }
    }
    h = e + 1;
  }
}

// The rule that reads the escape of one character but those of `kids` (sorted), one per set
// per grammar. The hex digits left after a decided prefix share one chain per count.
int32_t Automaton::EscapeOtherThan(const std::vector<uint32_t>& kids) {
  auto it = escape_other_than_.find(kids);
  if (it != escape_other_than_.end()) return it->second;
  std::string name = "<escape but";
  for (uint32_t cp : kids) name += " U+" + Hex(cp);
  const int32_t r = NewRule(name + ">");
  escape_other_than_.emplace(kids, r);
  const int32_t start = rule_start_[r], end = rule_final_[r];
  auto fresh = [&] {
    const int32_t q = NewState();
    state_rule_[q] = r;
    return q;
  };
  auto kid_in = [&](uint32_t a, uint32_t b) {
    auto k = std::lower_bound(kids.begin(), kids.end(), a);
    return k != kids.end() && *k <= b;
  };
  // hex_left[d]: d hex digits, then the end; high_left[d]: d hex digits, then the \uXXXX of
  // any low surrogate, then the end (a pair whose character is no kid).
  std::vector<int32_t> hex_left(5, -1), high_left(5, -1);
  hex_left[0] = end;
  auto chain = [&](std::vector<int32_t>& c, int d, auto&& self) -> int32_t {
    if (c[d] < 0) {
      const int32_t next = self(c, d - 1, self);
      c[d] = fresh();
      bytes_[c[d]].push_back({'0', '9', next});
      bytes_[c[d]].push_back({'A', 'F', next});
      bytes_[c[d]].push_back({'a', 'f', next});
    }
    return c[d];
  };
  auto any_low = [&] {
    if (high_left[0] < 0) {
      const int32_t d_digit = fresh(), third = fresh();
      const int32_t slash = BackslashU(d_digit, fresh);
      bytes_[d_digit].push_back({'D', 'D', third});
      bytes_[d_digit].push_back({'d', 'd', third});
      const int32_t rest = chain(hex_left, 2, chain);  // (may add states: computed first)
      bytes_[third].push_back({'C', 'F', rest});
      bytes_[third].push_back({'c', 'f', rest});
      high_left[0] = slash;
    }
  };
  const int32_t backslash = fresh();
  bytes_[start].push_back({'\\', '\\', backslash});
  for (const auto& [byte, c] : kShortEscapes) {
    if (!std::binary_search(kids.begin(), kids.end(), c)) bytes_[backslash].push_back({byte, byte, end});
  }
  const int32_t u = fresh();
  bytes_[backslash].push_back({'u', 'u', u});
  // Exits: 0 = the values read are all allowed (no kid among them; the chain reads the rest),
  // 1 = all high surrogates of pairs without kids (the rest, then any low surrogate).
  constexpr int32_t kFree = 0, kHighFree = 1;
  auto after = [&](int32_t exit, int left) {
    if (exit == kFree) return chain(hex_left, left, chain);
    any_low();
    return chain(high_left, left, chain);
  };
  HexDigits(
      u, 0, 4,
      [&](uint32_t a, uint32_t b) -> int32_t {
        if (a >= kLowFirst && b <= kLowLast) return -1;  // lone low surrogates
        if (a >= kHighFirst && b <= kHighLast) {
          const uint32_t first = 0x10000 + ((a - kHighFirst) << 10), last = 0x10000 + ((b - kHighFirst) << 10) + 0x3FF;
          if (!kid_in(first, last)) return kHighFree;
          if (a != b) return -2;
          return -3 - static_cast<int32_t>(a);  // a high surrogate with kids: its low half decided below
        }
        if (b >= kHighFirst && a <= kLowLast) return -2;  // straddles a surrogate boundary
        if (!kid_in(a, b)) return kFree;
        return a == b ? -1 : -2;  // a kid itself is not read here
      },
      [&](int32_t exit, int left) -> int32_t {
        if (exit >= 0) return after(exit, left);
        // High surrogate `high` (left == 0): "\u", then the low surrogates of non-kid pairs.
        const auto high = static_cast<uint32_t>(-3 - exit);
        const int32_t low = fresh();
        const int32_t slash = BackslashU(low, fresh);
        const uint32_t base = 0x10000 + ((high - kHighFirst) << 10);
        HexDigits(
            low, 0, 4,
            [&](uint32_t a, uint32_t b) -> int32_t {
              if (b < kLowFirst || a > kLowLast) return -1;
              if (a < kLowFirst || b > kLowLast) return -2;
              const uint32_t ca = base + (a - kLowFirst), cb = base + (b - kLowFirst);
              if (!kid_in(ca, cb)) return kFree;
              return ca == cb ? -1 : -2;
            },
            after);
        return slash;
      });
  return r;
}

// The escape spellings of a trie node's children from state s: '\\' then a short escape
// or \uXXXX (either case) or a surrogate pair, each to its child's state. The escapes of other
// characters are not read here (the node's EscapeOtherThan call reads them).
template <typename Fresh>
void Automaton::EscapedChildren(const std::vector<std::pair<uint32_t, int32_t>>& kids, const std::vector<int32_t>& state,
                                int32_t s, Fresh&& fresh) {
  auto child_of = [&](uint32_t cp) -> int32_t {
    auto it = std::lower_bound(kids.begin(), kids.end(), std::make_pair(cp, INT32_MIN));
    return it != kids.end() && it->first == cp ? state[it->second] : -1;
  };
  // Children among the code points [a, b]: one (a == b) gives its state, more -2, none -1.
  auto kid_in = [&](uint32_t a, uint32_t b) -> int32_t {
    auto it = std::lower_bound(kids.begin(), kids.end(), std::make_pair(a, INT32_MIN));
    if (it == kids.end() || it->first > b) return -1;
    return a == b ? state[it->second] : -2;
  };
  const int32_t backslash = fresh();
  bytes_[s].push_back({'\\', '\\', backslash});
  for (const auto& [byte, cp] : kShortEscapes) {
    const int32_t c = child_of(cp);
    if (c >= 0) bytes_[backslash].push_back({byte, byte, c});
  }
  const int32_t u = fresh();
  bytes_[backslash].push_back({'u', 'u', u});
  // The digits' exits: a child's state (>= 0, once all four are read), or -3 - h for high
  // surrogate h of a pair that spells a child (its low half is told apart below).
  auto exit = [&](uint32_t a, uint32_t b) -> int32_t {
    if (a >= kLowFirst && b <= kLowLast) return -1;  // lone low surrogates
    if (a >= kHighFirst && b <= kHighLast) {
      const int32_t hit = kid_in(0x10000 + ((a - kHighFirst) << 10), 0x10000 + ((b - kHighFirst) << 10) + 0x3FF);
      if (hit == -1) return -1;
      return a == b ? -3 - static_cast<int32_t>(a) : -2;
    }
    if (b >= kHighFirst && a <= kLowLast) return -2;  // straddles a surrogate boundary
    return kid_in(a, b);
  };
  auto after = [&](int32_t e, int) -> int32_t {
    if (e >= 0) return e;
    const auto high = static_cast<uint32_t>(-3 - e);
    const uint32_t base = 0x10000 + ((high - kHighFirst) << 10);
    const int32_t low = fresh();
    const int32_t slash = BackslashU(low, fresh);
    HexDigits(
        low, 0, 4,
        [&](uint32_t a, uint32_t b) -> int32_t {
          if (b < kLowFirst || a > kLowLast) return -1;
          if (a < kLowFirst || b > kLowLast) return -2;
          return kid_in(base + (a - kLowFirst), base + (b - kLowFirst));
        },
        [](int32_t target, int) { return target; });
    return slash;
  };
  HexDigits(u, 0, 4, exit, after);
}

void Automaton::BuildStringExcept(const std::vector<std::vector<uint32_t>>& words, int32_t from, int32_t end,
                                  int32_t tail) {
  std::vector<TrieNode> trie(1);
  for (const std::vector<uint32_t>& w : words) {
    int32_t at = 0;
    for (uint32_t cp : w) {
      auto& kids = trie[at].kids;
      auto it = std::lower_bound(kids.begin(), kids.end(), std::make_pair(cp, INT32_MIN));
      if (it != kids.end() && it->first == cp) {
        at = it->second;
        continue;
      }
      const auto id = static_cast<int32_t>(trie.size());
      kids.insert(it, {cp, id});
      trie.emplace_back();  // `kids` is not used past this point
      at = id;
    }
    trie[at].word = true;
  }
  const int32_t rule = state_rule_[from];
  auto fresh = [&] {
    const int32_t q = NewState();
    state_rule_[q] = rule;
    return q;
  };
  std::vector<int32_t> state(trie.size());
  state[0] = from;
  for (size_t k = 1; k < trie.size(); ++k) state[k] = fresh();
  // The first-byte edges of "any non-ASCII character, then the tail", for nodes without a
  // non-ASCII child (the continuation states are the trie's).
  std::vector<ByteEdge> non_ascii;
  {
    const Utf8Plan plan = PlanUtf8(NormalizeCodePoints({{0x80, 0x10FFFF}}, false));
    std::vector<int32_t> at{-1, tail};
    for (int32_t k = 0; k < plan.inner_states; ++k) at.push_back(fresh());
    for (const Utf8Plan::Edge& e : plan.edges) {
      const int32_t to = at[static_cast<size_t>(e.to)];
      if (e.from == 0) {
        non_ascii.push_back({e.lo, e.hi, to});
      } else {
        bytes_[at[static_cast<size_t>(e.from)]].push_back({e.lo, e.hi, to});
      }
    }
  }
  std::vector<uint32_t> kid_cps;
  for (size_t k = 0; k < trie.size(); ++k) {
    const TrieNode& node = trie[k];
    const int32_t s = state[k];
    if (!node.word) eps_[s].push_back(end);
    kid_cps.clear();
    bool other_raw[0x80] = {};  // the ASCII characters read raw to the tail
    for (int b = 0x20; b < 0x80; ++b) other_raw[b] = b != '"' && b != '\\';
    bool non_ascii_kid = false;
    for (const auto& [cp, child] : node.kids) {
      if (IsSurrogate(cp)) continue;  // no spelling reads it
      kid_cps.push_back(cp);
      if (cp < 0x80) other_raw[cp] = false;
      // Raw (where JSON allows it: not '"', '\\' or a control) and escaped, to the child.
      if (cp >= 0x20 && cp != '"' && cp != '\\') {
        uint8_t utf8[4];
        const int n = EncodeUtf8(cp, utf8);
        non_ascii_kid = non_ascii_kid || n > 1;
        int32_t q = s;
        for (int j = 0; j + 1 < n; ++j) {
          const int32_t r = fresh();
          bytes_[q].push_back({utf8[j], utf8[j], r});
          q = r;
        }
        bytes_[q].push_back({utf8[n - 1], utf8[n - 1], state[child]});
      }
    }
    // Every other raw character leaves the trie, read here (not in a shared rule: the walk's
    // step sets then see one successor, the tail, for every plain character but the kids).
    for (int b = 0x20; b < 0x80; ++b) {
      if (!other_raw[b]) continue;
      int e = b;
      while (e + 1 < 0x80 && other_raw[e + 1]) ++e;
      bytes_[s].push_back({static_cast<uint8_t>(b), static_cast<uint8_t>(e), tail});
      b = e;
    }
    if (!non_ascii_kid) {
      bytes_[s].insert(bytes_[s].end(), non_ascii.begin(), non_ascii.end());
    } else {
      CodePointRanges excluded{{0x00, 0x7F}};
      for (uint32_t cp : kid_cps) excluded.push_back({cp, cp});
      AddPlan(PlanUtf8(NormalizeCodePoints(std::move(excluded), true)), s, tail, fresh);
    }
    if (!kid_cps.empty()) EscapedChildren(node.kids, state, s, fresh);
    // Every other escape, through the rule the grammar shares for this set of children (made
    // before calls_[s] is looked up: making it adds states, which moves the lists).
    const int32_t other = EscapeOtherThan(kid_cps);
    calls_[s].push_back({other, tail});
  }
}

}  // namespace logitgate
