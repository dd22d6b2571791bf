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
// trie shares) and a backslash to the node's escape states: the short escapes (a child's to the
// child, any other to the tail) and \uXXXX, whose digits follow a child's spelling in states of
// the node and, once the digits read spell no child, continue in states the whole trie shares:
// "d more digits, then the tail" (and the same before a surrogate pair's low half). A word thus
// costs a handful of states per character, the escapes of other characters nothing per node,
// and a configuration inside the trie holds one head. (An earlier layout read the other escapes
// in a rule per set of children, called from every node: 17 states per set, a third of a median
// MaskBench schema's automaton, and a second head in every configuration inside a key.)
//
// Where a grammar's tries are large and their characters repeat (Automaton::Build counts their
// code points and characters), the \uXXXX of a node of one or two children is read instead by
// calls from its backslash state, made once the backslash is read: of a rule spelling each
// child's code point, returning to the child, and of a rule spelling any other character,
// returning to the tail (EscapeRule; each rule is made once per grammar and shared by every node
// of those children). The four or so escape states of each node become a few call edges, and a
// configuration holds more than one head only inside such an escape. Other tries keep their own
// escape states: the shared rules' states would outnumber what they save.
#include <algorithm>
#include <cstdio>
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

struct TrieNode {
  std::vector<std::pair<uint32_t, int32_t>> kids;  // (code point, node), sorted by code point
  bool word = false;
};

}  // namespace

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
  int runs = 0;
  for (int h = 1; h < 16; ++h) runs += h == 10 || targets[h] != targets[h - 1];
  bytes_[s].reserve(bytes_[s].size() + 2 * static_cast<size_t>(runs) + 2);
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

namespace {
// A node with at most this many children reads its \uXXXX escapes through calls of rules the
// grammar shares (EscapeRule): one per child, returning to it, and one for every other
// character, returning to the tail. More children would make as many parse heads after the
// backslash; such nodes keep escape states of their own.
constexpr size_t kCalledEscapeKids = 2;
}  // namespace

template <typename Fresh>
void Automaton::HexEscapes(int32_t u, const std::vector<std::pair<uint32_t, int32_t>>& kids, HexChains& chains,
                           Fresh&& fresh) {
  // The chains' states: hex_left[d], d more hex digits, then `free`; high_left[d], d more digits
  // of a high surrogate, then "\\u" and any low surrogate, then `free` (a pair whose character
  // is no child). Made when first needed.
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
  auto high_chain = [&](int d) {
    if (chains.high_left[0] < 0) {
      const int32_t d_digit = fresh(), third = fresh();
      const int32_t rest = chain(chains.hex_left, 2, chain);
      bytes_[d_digit].push_back({'D', 'D', third});
      bytes_[d_digit].push_back({'d', 'd', third});
      bytes_[third].push_back({'C', 'F', rest});
      bytes_[third].push_back({'c', 'f', rest});
      chains.high_left[0] = BackslashU(d_digit, fresh);
    }
    return chain(chains.high_left, d, chain);
  };
  // The digits' exits (HexDigits: -1 nothing is read, -2 tell the values apart digit by digit):
  // a child's target once the four digits spell it (-1 for a child that leads nowhere), kFree
  // when no value read so far spells a child, kHighFree for high surrogates of pairs that spell
  // none, and kHighKid - h for a high surrogate h of a pair that may spell one (its low half is
  // told apart here). kDFree: a first digit 'D' when no child is among D000-D7FF and the pairs
  // (read by states the chains share).
  constexpr int32_t kFree = -3, kHighFree = -4, kDFree = -5, kHighKid = -6;
  const std::vector<std::pair<uint32_t, int32_t>>* now = &kids;
  // Children among the code points [a, b]: kFree when none, a child's target for [a, a], -2
  // for a range that holds some.
  auto kid_in = [&](uint32_t a, uint32_t b) -> int32_t {
    auto it = std::lower_bound(now->begin(), now->end(), std::make_pair(a, INT32_MIN));
    if (it == now->end() || it->first > b) return kFree;
    return a == b ? it->second : -2;
  };
  auto exit = [&](uint32_t a, uint32_t b) -> int32_t {
    if (a >= kLowFirst && b <= kLowLast) return -1;  // lone low surrogates
    if (a >= kHighFirst && b <= kHighLast) {
      const int32_t hit =
          kid_in(0x10000 + ((a - kHighFirst) << 10), 0x10000 + ((b - kHighFirst) << 10) + 0x3FF);
      if (hit == kFree) return kHighFree;
      return a == b ? kHighKid - static_cast<int32_t>(a) : -2;
    }
    if (b >= kHighFirst && a <= kLowLast) {  // straddles a surrogate boundary
      const bool free = a == 0xD000 && b == 0xDFFF && kid_in(0xD000, 0xD7FF) == kFree &&
                        kid_in(0x10000, 0x10FFFF) == kFree;
      return free ? kDFree : -2;
    }
    return kid_in(a, b);
  };
  const std::vector<std::pair<uint32_t, int32_t>> no_kids;
  auto after = [&](int32_t e, int left, auto&& self) -> int32_t {
    if (e >= 0) return e;
    if (e == kFree) return chain(chains.hex_left, left, chain);
    if (e == kHighFree) return high_chain(left);
    if (e == kDFree) {
      if (chains.d_free < 0) {
        const auto* node_kids = now;
        now = &no_kids;
        chains.d_free = fresh();
        HexDigits(chains.d_free, 0xD000, 3, exit, [&](int32_t x, int l) { return self(x, l, self); });
        now = node_kids;
      }
      return chains.d_free;
    }
    // High surrogate `high` (left == 0) of pairs that may spell children: "\\u", then its low half.
    const auto high = static_cast<uint32_t>(kHighKid - e);
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
        [&](int32_t x, int l) { return self(x, l, self); });
    return slash;
  };
  HexDigits(u, 0, 4, exit, [&](int32_t e, int left) { return after(e, left, after); });
}

int32_t Automaton::EscapeRule(bool spells, std::vector<uint32_t> cps) {
  std::vector<uint32_t> key = cps;
  key.push_back(spells ? 1 : 0);
  auto it = escape_rules_.find(key);
  if (it != escape_rules_.end()) return it->second;
  const auto r = static_cast<int32_t>(rule_start_.size());
  auto fresh = [&] {
    const int32_t q = NewState();
    state_rule_[q] = r;
    return q;
  };
  const int32_t start = fresh(), end = fresh();
  final_[end] = true;
  rule_start_.push_back(start);
  rule_final_.push_back(end);
  std::string name = spells ? "<escape of" : "<escape of none of";
  for (uint32_t cp : cps) {
    char hex[16];
    std::snprintf(hex, sizeof hex, " U+%04X", static_cast<unsigned>(cp));
    name += hex;
  }
  rule_names_.push_back(name + ">");
  escape_rules_.emplace(std::move(key), r);
  const int32_t u = fresh();
  bytes_[start].push_back({'u', 'u', u});
  if (!spells) {
    std::vector<std::pair<uint32_t, int32_t>> kids;
    for (uint32_t cp : cps) kids.push_back({cp, -1});  // (sorted: cps are)
    HexChains chains(end);
    HexEscapes(u, kids, chains, fresh);
    return r;
  }
  // The four digits of the code point (HexDigits told to read that one value only), or of a
  // surrogate pair's halves with "\\u" between.
  auto one_value = [](uint32_t value, int32_t to) {
    return [value, to](uint32_t a, uint32_t b) -> int32_t {
      if (value < a || value > b) return -1;
      return a == b ? to : -2;
    };
  };
  auto state_itself = [](int32_t state, int) { return state; };
  const uint32_t cp = cps[0];
  if (cp < 0x10000) {
    HexDigits(u, 0, 4, one_value(cp, end), state_itself);
  } else {
    const int32_t low = fresh();
    HexDigits(low, 0, 4, one_value(kLowFirst + ((cp - 0x10000) & 0x3FF), end), state_itself);
    HexDigits(u, 0, 4, one_value(kHighFirst + ((cp - 0x10000) >> 10), BackslashU(low, fresh)), state_itself);
  }
  return r;
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
  // The escape states the whole trie shares ("d more digits, then the tail").
  HexChains chains(tail);
  std::vector<std::pair<uint32_t, int32_t>> kid_states;  // a node's children: (code point, state)
  std::vector<uint32_t> kid_cps;
  for (size_t k = 0; k < trie.size(); ++k) {
    const TrieNode& node = trie[k];
    const int32_t s = state[k];
    if (!node.word) eps_[s].push_back(end);
    // Its raw children, the other ASCII runs around them, the non-ASCII leads and '\\' (the
    // lists grow by doubling in the arena: sized once, no copy is left behind).
    bytes_[s].reserve(2 * node.kids.size() + 2 + non_ascii.size());
    bool other_raw[0x80] = {};  // the ASCII characters read raw to the tail
    for (int b = 0x20; b < 0x80; ++b) other_raw[b] = b != '"' && b != '\\';
    bool non_ascii_kid = false;
    for (const auto& [cp, child] : node.kids) {
      if (IsSurrogate(cp)) continue;  // no spelling reads it
      if (cp < 0x80) other_raw[cp] = false;
      // Raw, where JSON allows it (not '"', '\\' or a control), to the child.
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
        bytes_[q].push_back({utf8[n - 1], utf8[n - 1], state[static_cast<size_t>(child)]});
      }
    }
    // Every other raw character leaves the trie, read here (the walk's step sets then see one
    // successor, the tail, for every plain character but the children).
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
      for (const auto& kid : node.kids) {
        if (!IsSurrogate(kid.first)) excluded.push_back({kid.first, kid.first});
      }
      AddPlan(PlanUtf8(NormalizeCodePoints(std::move(excluded), true)), s, tail, fresh);
    }
    // Escapes: the short ones, then \uXXXX.
    const int32_t backslash = fresh();
    bytes_[backslash].reserve(std::size(kShortEscapes) + 1);
    bytes_[s].push_back({'\\', '\\', backslash});
    kid_states.clear();
    for (const auto& [cp, child] : node.kids) kid_states.push_back({cp, state[static_cast<size_t>(child)]});
    for (const auto& [byte, cp] : kShortEscapes) {
      auto it = std::lower_bound(kid_states.begin(), kid_states.end(), std::make_pair(cp, INT32_MIN));
      bytes_[backslash].push_back({byte, byte, it != kid_states.end() && it->first == cp ? it->second : tail});
    }
    if (called_escapes_ && node.kids.size() <= kCalledEscapeKids) {
      // A call per child of the rule spelling its code point, returning to the child, and one of
      // the rule spelling any other character, returning to the tail (each reads the 'u').
      kid_cps.clear();
      for (const auto& [cp, child] : kid_states) {
        if (IsSurrogate(cp)) continue;  // no spelling reads it
        const int32_t spelling = EscapeRule(true, {cp});  // (makes states: before calls_[...])
        calls_[backslash].push_back({spelling, child});
        kid_cps.push_back(cp);
      }
      const int32_t other = EscapeRule(false, kid_cps);
      calls_[backslash].push_back({other, tail});
    } else {
      const int32_t u = fresh();
      bytes_[backslash].push_back({'u', 'u', u});
      HexEscapes(u, kid_states, chains, fresh);
    }
  }
}

}  // namespace logitgate
