#include "matcher.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "plain_text.h"
#include "utf8_ranges.h"

namespace logitgate {

namespace {
// SubtreeAllowed follows chains of at most this many positions (each new position costs
// transitions); loops end the chain at once, so they are unaffected.
constexpr int32_t kMaxChain = 16;
// ClosedRegion gives up past this many configurations.
constexpr int32_t kMaxRegion = 128;
// The mask walk visits only the children a configuration can follow (instead of every child)
// at trie depths below this; each such node nests one call.
constexpr int32_t kMaxSparseDepth = 8;

// Word-wise mask updates (vectorizable: the arrays never overlap).
void Or(uint32_t* __restrict dst, const uint32_t* __restrict src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] |= src[i];
}
void OrAnd(uint32_t* __restrict dst, const uint32_t* __restrict a, const uint32_t* __restrict b, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] |= a[i] & b[i];
}
void AndNot(uint32_t* __restrict dst, const uint32_t* __restrict src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] &= ~src[i];
}
// The paths below node i are valid UTF-8 as far as `below` (the bytes that matter) goes.
bool Utf8Below(const Vocabulary& v, int32_t i, const uint64_t* below) {
  return (below[2] | below[3]) == 0 || v.trie_utf8_below(i);
}
// Sets the bits of the tokens toks[begin, end).
void SetBits(const int32_t* toks, int32_t begin, int32_t end, uint32_t* words) {
  for (int32_t k = begin; k < end; ++k) words[toks[k] >> 5] |= 1u << (toks[k] & 31);
}
// Clears the bits of the tokens toks[begin, end).
void ClearBits(const int32_t* toks, int32_t begin, int32_t end, uint32_t* words) {
  for (int32_t k = begin; k < end; ++k) words[toks[k] >> 5] &= ~(1u << (toks[k] & 31));
}
// Sets (clears) the bit of every token in trie node i's subtree; returns how many tokens.
int32_t SetSubtreeBits(const Vocabulary& v, int32_t i, uint32_t* words) {
  const int32_t begin = v.trie_token_begin(i), end = v.trie_token_begin(v.trie_nodes()[i].subtree_end);
  SetBits(v.trie_tokens().data(), begin, end, words);
  return end - begin;
}
int32_t ClearSubtreeBits(const Vocabulary& v, int32_t i, uint32_t* words) {
  const int32_t begin = v.trie_token_begin(i), end = v.trie_token_begin(v.trie_nodes()[i].subtree_end);
  ClearBits(v.trie_tokens().data(), begin, end, words);
  return end - begin;
}
// Clears the bits of every token whose first byte is b (`root`: its depth-1 node), word by word
// from the byte's mask where the vocabulary keeps one; returns how many tokens were cleared
// one by one (0 for the mask).
int32_t ClearFirstByteBits(const Vocabulary& v, uint8_t b, int32_t root, uint32_t* words) {
  if (const uint32_t* m = v.first_byte_mask(b)) {
    AndNot(words, m, static_cast<size_t>(v.mask_words()));
    return 0;
  }
  return ClearSubtreeBits(v, root, words);
}
// True when `bytes` are ASCII bytes of `set` (2 words) and valid UTF-8 characters of `leads`
// (bit b - 0xC0 for lead b), the last one possibly partial.
bool WithinRegion(std::string_view bytes, const uint64_t* set, uint64_t leads) {
  for (size_t i = 0; i < bytes.size();) {
    const auto b = static_cast<uint8_t>(bytes[i]);
    if (b < 0x80) {
      if (!(set[b >> 6] >> (b & 63) & 1)) return false;
      ++i;
      continue;
    }
    const Utf8Lead shape = Utf8LeadOf(b);
    if (shape.continuations == 0 || !(leads >> (b - 0xC0) & 1)) return false;
    const size_t n = 1 + static_cast<size_t>(shape.continuations);
    for (size_t c = 1; c < n && i + c < bytes.size(); ++c) {
      const auto x = static_cast<uint8_t>(bytes[i + c]);
      if (c == 1 ? x < shape.lo || x > shape.hi : x < 0x80 || x > 0xBF) return false;
    }
    i += n;
  }
  return true;
}
// Sets the bits of the tokens whose bytes end at trie node i (`at`).
void SetNodeBits(const Vocabulary& v, const Vocabulary::TrieNode& at, int32_t i, uint32_t* words) {
  if (at.token >= 0) words[at.token >> 5] |= 1u << (at.token & 31);
  if (at.flags & Vocabulary::kMoreTokens) {
    SetBits(v.trie_tokens().data(), v.trie_token_begin(i) + 1, v.trie_token_begin(i + 1), words);
  }
}
// Writes `mask`'s tokens of at most `length` bytes into `words` (ORs them in where `add`).
// False (nothing written) for a length under 1.
bool SetSplitMaskUpTo(const Vocabulary& v, const uint32_t* mask, int32_t length, bool add, uint32_t* words) {
  const size_t n_words = static_cast<size_t>(v.mask_words());
  if (length < 1) return false;
  if (const uint32_t* fits = v.length_mask(length)) {
    if (add) {
      OrAnd(words, mask, fits, n_words);
    } else {
      for (size_t k = 0; k < n_words; ++k) words[k] = mask[k] & fits[k];
    }
    return true;
  }
  if (add) {
    Or(words, mask, n_words);
  } else {
    std::memcpy(words, mask, n_words * sizeof(uint32_t));
  }
  // Past the length masks: the few longer tokens of the mask, one by one (they are set by it
  // alone: `words` held none of its tokens).
  const auto& long_tokens = v.long_tokens();
  for (auto it = long_tokens.rbegin(); it != long_tokens.rend() && it->first > length; ++it) {
    const int32_t id = it->second;
    if (mask[id >> 5] >> (id & 31) & 1) words[id >> 5] &= ~(1u << (id & 31));
  }
  return true;
}
// The tokens holding the ASCII bytes of `except` (2 words), counted once per byte
// (Vocabulary::ascii_tokens); -1 when some byte's are not kept.
int64_t ExceptionTokens(const Vocabulary& v, const uint64_t* except) {
  int64_t tokens = 0;
  for (int q = 0; q < 2; ++q) {
    for (uint64_t w = except[q]; w != 0; w &= w - 1) {
      const int32_t n = v.num_ascii_tokens(static_cast<uint8_t>(64 * q + __builtin_ctzll(w)));
      if (n < 0) return -1;
      tokens += n;
    }
  }
  return tokens;
}
// Every plain ASCII byte but a few (at most 8) in the set: a loop over plain text that reads a
// few of them elsewhere or not at all (PlainLoopWithExceptions).
bool MostPlainAscii(const uint64_t* bytes) {
  return __builtin_popcountll(kPlainBits0 & ~bytes[0]) + __builtin_popcountll(kPlainBits1 & ~bytes[1]) <= 8;
}
// Only plain bytes in the set (plain_text.h), and continuation bytes (UTF-8 validity is
// checked separately).
bool PlainOnly(const uint64_t* bytes) {
  return (bytes[0] & ~kPlainBits0) == 0 && (bytes[1] & ~kPlainBits1) == 0 && (bytes[3] & ~kPlainLeadBits3) == 0;
}
// Node i's subtree is allowed whole from a parent that keeps any `capacity` plain characters
// viable: its byte and every path below it are plain text, no longer than the capacity (a
// path of h bytes holds at most h characters). The summary is read only past the cheap checks.
bool PlainWithin(const Vocabulary& v, const Vocabulary::TrieNode& at, int32_t i, int32_t capacity) {
  if (capacity <= 0 || !IsPlainAscii(at.byte) || capacity <= v.trie_height(i)) return false;
  const uint64_t* below = v.trie_descendant_bytes(i);
  return below == nullptr || (PlainOnly(below) && v.trie_utf8_below(i));
}
// ORs into `wide` (4 words) the bytes past 0x7F that some position of `chain` reads.
void WideBytesRead(const Parser& parser, const std::vector<int32_t>& chain, uint64_t* wide) {
  for (int32_t c : chain) {
    wide[2] |= parser.LiveBytes(c)[2];
    wide[3] |= parser.LiveBytes(c)[3];
  }
}
// Calls visit(j) for each of `split`'s boundary nodes j on byte b, in node order. They are far
// apart in the trie (a cache miss each, most of a walk's time where little is walked below
// them): their records are asked for a few nodes ahead.
template <class Visit>
void ForEachBoundaryNode(const Vocabulary::LoopSplit& split, const Vocabulary::TrieNode* node, int b, Visit&& visit) {
  constexpr int32_t kAhead = 8;
  const int32_t begin = split.begin[b], end = split.begin[b + 1];
  for (int32_t k = begin; k < std::min(begin + kAhead, end); ++k) __builtin_prefetch(&node[split.boundary[k]]);
  for (int32_t k = begin; k < end; ++k) {
    if (k + kAhead < end) __builtin_prefetch(&node[split.boundary[k + kAhead]]);
    visit(split.boundary[k]);
  }
}
}  // namespace

std::atomic<int64_t> Matcher::split_walk_budget_{Matcher::kSplitWalkBudget};
std::atomic<bool> Matcher::region_walks_{true};
std::atomic<bool> Matcher::stand_ins_{true};

namespace {
std::atomic<int32_t> class_trie_min_states{kClassTrieMinStates};
}  // namespace

int32_t SetClassTrieMinStates(int32_t states) { return class_trie_min_states.exchange(states); }

std::unordered_map<int32_t, CompiledGrammar::CharacterChain> CharacterChainsFor(const Vocabulary& vocab,
                                                                              const Automaton& automaton) {
  std::unordered_map<int32_t, CompiledGrammar::CharacterChain> chains;
  // The rules reading one character of such a class, with their steps.
  std::vector<std::pair<int32_t, const Automaton::CharacterStep*>> classes;
  for (int32_t r = 0; r < automaton.num_rules(); ++r) {
    const int32_t start = automaton.rule_start(r);
    if (automaton.char_rule_at(start) != r) continue;
    const Automaton::CharacterStep* step = automaton.character_step(start);
    if (step != nullptr && step->partial_leads != 0) classes.emplace_back(r, step);
  }
  if (classes.empty()) return chains;  // (most grammars: no pass over the calls)
  std::vector<int32_t> calls(static_cast<size_t>(automaton.num_rules()), 0);  // call sites per rule
  for (int32_t t = 0; t < automaton.num_states(); ++t) {
    for (const CallEdge& c : automaton.calls(t)) ++calls[static_cast<size_t>(c.rule)];
  }
  for (const auto& [r, step] : classes) {
    if (calls[static_cast<size_t>(r)] < kCharacterChainMinCalls) continue;
    chains.emplace(automaton.rule_start(r),
                   CompiledGrammar::CharacterChain{step, vocab.char_split(step->chars, step->exits)});
  }
  return chains;
}

std::shared_ptr<const Vocabulary::ClassTrie> ClassTrieFor(const Vocabulary& vocab, const Automaton& automaton) {
  const int32_t min_states = class_trie_min_states.load(std::memory_order_relaxed);
  if (automaton.num_states() < min_states) return nullptr;
  const Automaton::CoarseClasses& classes = automaton.coarse_classes();
  if (classes.count == 0) return nullptr;
  const int32_t max_nodes = min_states == 0 ? vocab.trie_size() : vocab.trie_size() / 4;
  return vocab.class_trie(classes.of_byte, classes.count, Automaton::kCoarseExcluded, max_nodes);
}

Matcher::Matcher(std::shared_ptr<const CompiledGrammar> grammar)
    : grammar_(std::move(grammar)), store_(grammar_->parser.get()), parser_(store_.get()) {
  history_.push_back({parser_->initial(), false});
}

template <typename StepFn>
auto Matcher::WithRoom(StepFn&& step) -> decltype(step()) {
  for (int attempt = 0;; ++attempt) {
    try {
      if (attempt == 1) MoveTo(grammar_->parser.Renew(parser_));  // the grammar's fresh store
      if (attempt == 2) MoveTo(parser_->Fresh());  // one of its own: other requests filled that one
      return step();
    } catch (const StoreFull&) {
      if (attempt == 2) throw;  // this request alone needs more than a store holds
    }
  }
}

void Matcher::MoveTo(std::shared_ptr<Parser> store) {
  std::vector<int32_t> configs(history_.size());
  for (size_t i = 0; i < history_.size(); ++i) configs[i] = history_[i].config;
  const std::vector<int32_t> moved = store->Adopt(*parser_, configs);  // (throws: nothing changed)
  for (size_t i = 0; i < history_.size(); ++i) history_[i].config = moved[i];
  store_ = std::move(store);
  parser_ = store_.get();
}

int32_t Matcher::Advance(int32_t config, std::string_view data) {
  for (unsigned char b : data) {
    config = parser_->Next(config, b);
    if (config == Parser::kDead) return Parser::kDead;
  }
  return config;
}

bool Matcher::Accept(int32_t token) {
  const Vocabulary& v = *grammar_->vocab;
  if (terminated()) {
    // Only EOS is allowed once terminated (finished rows of a batch keep sampling it).
    if (!v.is_eos(token)) return false;
    history_.push_back(history_.back());
    return true;
  }
  if (v.is_eos(token)) {
    if (!parser_->accepting(current())) return false;
    history_.push_back({current(), true});
    return true;
  }
  const bool text = v.is_text(token);
  if (!text && !v.is_special(token)) return false;
  const int32_t next = WithRoom([&] {
    const int32_t config = current();
    const int32_t by_bytes = text ? Advance(config, v.bytes(token)) : Parser::kDead;
    if (!parser_->has_token_heads(config)) return by_bytes;
    return parser_->Union(by_bytes, parser_->NextToken(config, token));
  });
  if (next == Parser::kDead) return false;
  history_.push_back({next, false});
  return true;
}

bool Matcher::AcceptBytes(const std::string& data) {
  if (terminated()) return data.empty();
  const int32_t next = WithRoom([&] { return Advance(current(), data); });
  if (next == Parser::kDead) return false;
  history_.push_back({next, false});
  return true;
}

void Matcher::Rollback(int64_t n) {
  if (n < 0 || n > num_accepted()) {
    throw CoreError::Usage("cannot roll back " + std::to_string(n) + " tokens: only " +
                           std::to_string(num_accepted()) + " accepted",
                           "rollback");
  }
  history_.resize(history_.size() - static_cast<size_t>(n));
}

std::string Matcher::ForcedBytes(int64_t max_bytes) {
  if (terminated()) return {};
  return WithRoom([&] { return ForcedBytesInStore(max_bytes); });
}

std::string Matcher::ForcedBytesInStore(int64_t max_bytes) {
  std::string out;
  int32_t config = current();
  while (static_cast<int64_t>(out.size()) < max_bytes && !parser_->accepting(config) &&
         !parser_->has_token_heads(config)) {
    int32_t only = -1, next = Parser::kDead;
    for (int b = 0; b < 256; ++b) {
      int32_t c = parser_->Next(config, static_cast<uint8_t>(b));
      if (c == Parser::kDead) continue;
      if (only >= 0) {
        only = -2;
        break;
      }
      only = b;
      next = c;
    }
    if (only < 0) break;
    out.push_back(static_cast<char>(only));
    config = next;
  }
  return out;
}

// Walks the vocabulary trie in depth-first order, advancing the parser one byte per trie
// node; a dead node skips its whole subtree, and only first bytes some parse head can consume
// are visited. Shortcut (SubtreeAllowed): when every byte below a node keeps the parse on its
// chain of step successors (a loop such as a string body, or the positions of a bounded
// repetition) and the paths below are valid UTF-8, every token in the subtree is allowed:
// such subtrees cost one bit per token instead of one transition per trie node. Where most of
// the vocabulary is allowed the bits are not set one by one: the walk starts from every text
// token (or, per first byte that starts many tokens, from that byte's precomputed mask) and
// clears dead subtrees, so shortcut subtrees cost nothing at all. Configurations that loop on
// plain text, walk a chain of plain positions or loop on (or step down a chain of) a wide
// ASCII set are decided from the vocabulary's precomputed splits first (PlainLoop,
// PlainChain, PlainStepWithExceptions, SplitWalk); one that reads part of what its step
// successor reads and then goes on as it does, from the successor's mask (NarrowedWalk).
// Writes text tokens only.
void Matcher::Walk(int32_t config, uint32_t* words) {
  const Vocabulary& v = *grammar_->vocab;
  // Slot d holds the configuration after the walk's current node at depth d; a slot is
  // written before it is read, so it needs no reset between walks.
  // (One more than the trie's depth: the suffix trie has its bucket level on top.)
  const size_t levels = static_cast<size_t>(v.max_token_length()) + 2;
  if (walk_config_.size() < levels) {
    walk_config_.resize(levels);
    walk_row_.resize(levels);
    walk_capacity_.resize(levels);
    walk_reference_.resize(levels);
  }
  walk_nodes_ = 0;
  StartWalk(config);
  if (ShortcutWalk(config, words)) return;
  // A narrowed position (NarrowedPlan) gives its split walk or trie walk a budget: past it,
  // the wider position's mask is cheaper. A set whose split is not computed yet is walked
  // without it while that stays cheap (many such walks are: their subtrees are shortcuts),
  // then the split is computed (once per set and vocabulary) and its boundary nodes walked.
  narrow_plan_ = -1;
  const bool narrowed = NarrowedPlan(config);
  if (!narrowed && RegionWalk(config, words)) return;
  walk_budget_ = narrowed ? kNarrowWalkBudget : kNoBudget;
  SplitUse split = SplitWalk(config, words, false);
  if (split == SplitUse::kNotComputed) {
    walk_budget_ = std::min(walk_budget_, split_walk_budget_.load(std::memory_order_relaxed));
    GeneralWalk(config, words);
    if (walk_nodes_ <= walk_budget_) {
      walk_budget_ = kNoBudget;
      return;
    }
    walk_budget_ = kNoBudget;
    if (narrowed && NarrowedWalk(config, words)) return;
    split = SplitWalk(config, words, true);
  }
  if (split == SplitUse::kNotApplicable) GeneralWalk(config, words);
  const bool complete = split != SplitUse::kNotComputed && walk_nodes_ <= walk_budget_;
  walk_budget_ = kNoBudget;
  if (complete || (narrowed && NarrowedWalk(config, words))) return;
  // The split walk past its budget, whole after all (the wider mask was not to be had).
  if (split == SplitUse::kDone && SplitWalk(config, words, false) == SplitUse::kDone) return;
  GeneralWalk(config, words);
}

void Matcher::StartWalk(int32_t config) {
  walk_config_[0] = config;
  walk_row_[0] = parser_->Row(config);
  walk_capacity_[0] = parser_->plain_capacity(config);
  root_successor_ = Parser::kUnknown;  // computed when a shortcut asks for it
  clear_from_alphabet_ = false;
}

bool Matcher::LoopShortcutWalk(int32_t config, uint32_t* words) {
  const Vocabulary& v = *grammar_->vocab;
  const size_t n_words = static_cast<size_t>(v.mask_words());
  // (A plain loop's capacity is unbounded unless it misses some lead bytes' characters.)
  except_leads_ = 0;
  const bool loop_candidate = walk_capacity_[0] >= Automaton::kUnbounded ||
                              (walk_capacity_[0] == 0 && HasAllPlainAscii(parser_->LiveBytes(config)));
  if (loop_candidate && PlainLoop(config)) {
    // A string body, free text: every plain token is allowed, the others are decided by
    // their suffixes (Vocabulary::plain_mask).
    std::memcpy(words, v.plain_mask(), n_words * sizeof(uint32_t));
    WalkSuffixes(words, false);
    DecideLeadTokens(config, words);
    return true;
  }
  except_leads_ = 0;
  if (PlainLoopWithExceptions(config, words)) {
    DecideLeadTokens(config, words);
    return true;
  }
  return false;
}

bool Matcher::ShortcutWalk(int32_t config, uint32_t* words) {
  const Vocabulary& v = *grammar_->vocab;
  Parser& parser = *parser_;
  if (LoopShortcutWalk(config, words)) return true;
  except_leads_ = 0;
  if (walk_capacity_[0] > 0 && walk_capacity_[0] < Automaton::kUnbounded && PlainChain(config)) {
    // A position of a bounded string: the plain tokens of at most chain_len_ characters are
    // allowed, the others by their suffixes.
    chain_shift_ = 0;
    SetPlainTokensUpTo(chain_len_, words);
    WalkSuffixes(words, true);
    DecideLeadTokens(config, words);
    return true;
  }
  except_leads_ = 0;
  if (PlainChainWithExceptions(config, words)) {
    DecideLeadTokens(config, words);
    return true;
  }
  except_leads_ = 0;
  if (PlainStepWithExceptions(config, words) || PlainFirstStep(config, words)) {
    DecideLeadTokens(config, words);
    return true;
  }
  except_leads_ = 0;
  // Any plain token viable (a universal configuration, or a capacity past every plain token's
  // characters) without looping on plain text.
  if (walk_capacity_[0] > 0 && walk_capacity_[0] >= v.max_plain_chars()) {
    RestWalk(config, words);
    return true;
  }
  // (Before the shortcuts that decide tokens one by one: a character chain takes most tokens by
  // their counts, and a class trie's walk reaches the same configurations along each class
  // string once.)
  if (CharacterChainWalk(config, words) || ClassWalk(config, words) || FirstCharWalk(config, words) ||
      CapacityWalk(config, words)) {
    return true;
  }
  // Universal but for the characters of a few lead bytes (a pattern's `.` leaves out U+2028 and
  // U+2029): as if universal, then every token holding one of those bytes decided by its bytes.
  if (parser.near_universal(config) && 32 * v.num_tokens_with_leads(Automaton::kNearLeads) <= v.num_text_tokens()) {
    except_leads_ = Automaton::kNearLeads;
    RestWalk(config, words);
    DecideLeadTokens(config, words);
    return true;
  }
  return false;
}

bool Matcher::ClassWalk(int32_t config, uint32_t* words) {
  const Vocabulary::ClassTrie* trie = grammar_->class_trie.get();
  if (trie == nullptr || !parser_->StacksWithin(config, parser_->automaton().coarse_classes().covered)) return false;
  const Vocabulary& v = *grammar_->vocab;
  Parser& parser = *parser_;
  std::memset(words, 0, static_cast<size_t>(v.mask_words()) * sizeof(uint32_t));
  const int32_t* tokens = trie->tokens.data();
  auto set_tokens = [&](int32_t from, int32_t to) {
    for (int32_t t = from; t < to; ++t) words[tokens[t] >> 5] |= 1u << (tokens[t] & 31);
  };
  for (int32_t i = 0; i < trie->size(); ++walk_nodes_) {
    const auto u = static_cast<size_t>(i);
    const int32_t d = trie->depth[u];
    // The parent keeps any plain text of this length viable: a subtree of plain tokens no longer
    // than that is allowed whole, without the transitions into it (as in WalkSubtree).
    if (trie->plain[u] && walk_capacity_[d - 1] > trie->height[u]) {
      set_tokens(trie->token_begin[u], trie->token_begin[static_cast<size_t>(trie->subtree_end[u])]);
      i = trie->subtree_end[u];
      continue;
    }
    if (trie->subtree_end[u] == i + 1) {  // a leaf: its viability only (Parser::ViableInRow)
      if (parser.ViableInRow(walk_row_[d - 1], walk_config_[d - 1], trie->byte[u])) {
        set_tokens(trie->token_begin[u], trie->token_begin[u + 1]);
      }
      ++i;
      continue;
    }
    const int32_t c = parser.NextInRow(walk_row_[d - 1], walk_config_[d - 1], trie->byte[u]);
    if (c == Parser::kDead) {
      i = trie->subtree_end[u];
      continue;
    }
    set_tokens(trie->token_begin[u], trie->token_begin[u + 1]);
    walk_config_[d] = c;
    walk_row_[d] = parser.Row(c);
    walk_capacity_[d] = parser.plain_capacity(c);
    ++i;
  }
  DecideTokens(config, trie->excluded.data(), static_cast<int32_t>(trie->excluded.size()), words);
  return true;
}

bool Matcher::CharacterChainWalk(int32_t config, uint32_t* words) {
  const auto& chains = grammar_->character_chains;
  if (chains.empty() || (parser_->LiveBytes(config)[3] & kPlainLeadBits3) == 0) return false;
  parser_->Heads(config, &char_heads_);
  const CompiledGrammar::CharacterChain* chain = nullptr;
  for (const auto& head : char_heads_) {
    if (auto it = chains.find(head.first); it != chains.end()) {
      chain = &it->second;
      break;
    }
  }
  if (chain == nullptr || !CharacterPosition(*chain->step)) return false;
  const Automaton::CharacterStep* step = chain->step;
  const Vocabulary::CharSplit* split = chain->split.get();
  // char_chain_[m]: after m members. Positions [0, n) are checked; the chain stops where a
  // position is not one, or where no token has more characters.
  char_chain_.assign(1, config);
  int32_t n = 0;
  for (; n < split->max_chars; ++n) {
    const int32_t at = char_chain_.back();
    if (n > 0) {
      parser_->Heads(at, &char_heads_);
      if (!CharacterPosition(*step)) break;
    }
    int32_t next = at;
    for (int k = 0; k < step->probe_length; ++k) next = parser_->Next(next, step->probe[k]);
    char_chain_.push_back(next);
  }
  if (n < split->max_chars) {
    // The tokens of more members, or of as many and a partial one, are dead at char_chain_[n]
    // only if it reads no member's first byte.
    const uint64_t* live = parser_->LiveBytes(char_chain_.back());
    for (int q = 0; q < 4; ++q) {
      if ((live[q] & step->first[q]) != 0) return false;
    }
  }
  const Vocabulary& v = *grammar_->vocab;
  // The inside tokens of at most n characters: the split's mask less the longer ones, or set
  // one by one, whichever touches fewer.
  const size_t n_words = static_cast<size_t>(v.mask_words());
  const int32_t fits = split->inside_begin[static_cast<size_t>(n) + 1];
  const auto all = static_cast<int32_t>(split->inside.size());
  if (2 * fits >= all) {
    std::memcpy(words, split->mask.data(), n_words * sizeof(uint32_t));
    ClearBits(split->inside.data(), fits, all, words);
  } else {
    std::memset(words, 0, n_words * sizeof(uint32_t));
    SetBits(split->inside.data(), 0, fits, words);
  }
  walk_nodes_ += static_cast<int64_t>(n_words) / 8 + std::min(fits, all - fits);
  for (int b = 0; b < 128; ++b) {
    for (int32_t j = split->exit_begin[b], end = split->exit_begin[b + 1]; j < end;) {
      const int32_t m = split->exit_chars[static_cast<size_t>(j)];
      if (m > n) break;  // a member where the chain reads none
      int32_t run = j;
      while (run < end && split->exit_chars[static_cast<size_t>(run)] == m) ++run;
      const int32_t at = char_chain_[static_cast<size_t>(m)];
      if (parser_->LiveBytes(at)[b >> 6] >> (b & 63) & 1) {
        const int32_t* ids = split->exit_ids.data() + j;
        const int32_t* offsets = split->exit_offset.data() + j;
        DecideEach(
            at, ids, run - j,
            [&](int32_t k) { return std::string_view(v.bytes(ids[k])).substr(static_cast<size_t>(offsets[k])); },
            words);
      }
      j = run;
    }
  }
  return true;
}

bool Matcher::CharacterPosition(const Automaton::CharacterStep& step) {
  const Automaton& a = parser_->automaton();
  int32_t reader = -1;  // the state of the heads that read the members
  for (const auto& head : char_heads_) {
    const int32_t state = head.first;
    if (state == reader) continue;
    // Any other head reads exit bytes only.
    uint64_t reads[4] = {0, 0, 0, 0};
    for (const ByteEdge& e : a.bytes(state)) AddByteRange(e.lo, e.hi, reads);
    if ((reads[0] & ~step.exits[0]) == 0 && (reads[1] & ~step.exits[1]) == 0 && (reads[2] | reads[3]) == 0) continue;
    if (reader >= 0) return false;
    const auto it = grammar_->character_chains.find(state);
    if (it == grammar_->character_chains.end()) return false;
    const Automaton::CharacterStep* own = it->second.step;
    if (own != &step && (own->chars != step.chars || own->exits[0] != step.exits[0] || own->exits[1] != step.exits[1])) {
      return false;
    }
    reader = state;
  }
  return reader >= 0;
}

bool Matcher::SameContinuations(int32_t a, int32_t b, int depth) {
  if (a == b) return true;
  if (depth == 0 || a == Parser::kDead || b == Parser::kDead) return false;
  for (const auto& pair : same_pairs_) {
    if (pair.first == a && pair.second == b) return true;
  }
  const uint64_t* live_a = parser_->LiveBytes(a);
  const uint64_t* live_b = parser_->LiveBytes(b);
  for (int q = 0; q < 4; ++q) {
    for (uint64_t w = live_a[q] | live_b[q]; w != 0; w &= w - 1) {
      const auto x = static_cast<uint8_t>(64 * q + __builtin_ctzll(w));
      if (!SameContinuations(parser_->Next(a, x), parser_->Next(b, x), depth - 1)) return false;
    }
  }
  same_pairs_.push_back({a, b});
  return true;
}

// A first byte of `config` either dies or leads where it leads from `wider` (the step
// successor), so each token goes on from there as it would from `wider`: config's mask is
// wider's less the tokens of the first bytes that die here. First bytes leading elsewhere (an
// escape whose character the narrower position excludes) are walked from `config` when their
// tokens are few.
bool Matcher::NarrowedPlan(int32_t config) {
  if (narrow_plan_ >= 0) return narrow_plan_ == 1;
  narrow_plan_ = 0;
  const Vocabulary& v = *grammar_->vocab;
  Parser& parser = *parser_;
  const uint64_t* live = parser.LiveBytes(config);
  // Many first bytes (as for StepSuccessor: a narrow position's step set is never computed,
  // the walk's subtree shortcuts would then try it) starting a good part of the vocabulary.
  if (__builtin_popcountll(live[0]) + __builtin_popcountll(live[1]) < 16 ||
      4 * v.tokens_with_first_byte_in(live, 4) < v.num_text_tokens()) {
    return false;
  }
  const int32_t wider = parser.Steps(config, false).successor;
  if (wider == Parser::kDead || wider == config) return false;
  const uint64_t* wider_live = parser.LiveBytes(wider);
  // Its mask must be cheap: memoized, or a plain loop's (LoopShortcutWalk: its exception
  // bytes' tokens are kept and few).
  const bool text_only = !parser.has_token_heads(wider) && !parser.accepting(wider);
  if (!(text_only && parser.CachedMask(wider) != nullptr)) {
    if (!MostPlainAscii(wider_live)) return false;
    const Parser::StepSet step = parser.Steps(wider, true);
    if (step.successor != wider) return false;
    const uint64_t except[2] = {kPlainBits0 & ~step.bytes[0], kPlainBits1 & ~step.bytes[1]};
    const int64_t n_except = ExceptionTokens(v, except);
    if (n_except < 0 || 32 * n_except > v.num_text_tokens()) return false;
  }
  // A lead byte's characters are compared (SameContinuations: transitions of both positions
  // on their continuation bytes) only where it starts many tokens; the others are walked.
  constexpr int32_t kFewTokens = 256;
  int64_t same_tokens = 0, differ_tokens = 0;
  same_pairs_.clear();
  for (int q = 0; q < 4; ++q) narrow_dies_[q] = narrow_differs_[q] = 0;
  for (int b = 0; b < 256; ++b) {
    const auto byte = static_cast<uint8_t>(b);
    if (v.trie_root_child(byte) < 0) continue;
    const uint64_t bit = uint64_t{1} << (b & 63);
    const int32_t here = (live[b >> 6] & bit) ? parser.Next(config, byte) : Parser::kDead;
    const int depth = b >= 0xC0 && v.tokens_with_first_byte(byte) > kFewTokens ? 3 : 0;
    if (here == Parser::kDead) {
      narrow_dies_[b >> 6] |= wider_live[b >> 6] & bit;
    } else if ((wider_live[b >> 6] & bit) && SameContinuations(here, parser.Next(wider, byte), depth)) {
      same_tokens += v.tokens_with_first_byte(byte);
    } else {
      narrow_differs_[b >> 6] |= bit;
      differ_tokens += v.tokens_with_first_byte(byte);
    }
  }
  narrow_wider_ = wider;
  // Worth it where the tokens going on as from `wider` are a good part of the vocabulary (a
  // walk from `config` would visit their subtrees) and the others few, or where the others'
  // subtrees are walked against `wider`'s mask only a byte deep for most of their tokens: up to
  // a quarter of the vocabulary whose first bytes lead apart, but whose second bytes lead the two
  // positions to the same configuration but for a sixteenth (a hex digit that may start a hash
  // or any text before a colon: the first other character leads both to that text).
  const int64_t n = v.num_text_tokens();
  if (4 * same_tokens < n || 4 * differ_tokens > n) return false;
  int64_t apart_tokens = 0;
  if (16 * differ_tokens > n) {
    for (int q = 0; q < 4 && 16 * apart_tokens <= n; ++q) {
      for (uint64_t w = narrow_differs_[q]; w != 0 && 16 * apart_tokens <= n; w &= w - 1) {
        const auto b = static_cast<uint8_t>(64 * q + __builtin_ctzll(w));
        const int32_t here = parser.Next(config, b), there = parser.Next(wider, b);
        const uint64_t* live_here = parser.LiveBytes(here);
        const uint64_t* live_there = parser.LiveBytes(there);
        for (int k = 0; k < 4; ++k) {
          for (uint64_t x = live_here[k] | live_there[k]; x != 0; x &= x - 1) {
            const auto second = static_cast<uint8_t>(64 * k + __builtin_ctzll(x));
            if (v.tokens_with_first_bytes(b, second) > 0 && parser.Next(here, second) != parser.Next(there, second)) {
              apart_tokens += v.tokens_with_first_bytes(b, second);
            }
          }
        }
      }
    }
  }
  narrow_plan_ = 16 * apart_tokens <= n ? 1 : 0;
  return narrow_plan_ == 1;
}

bool Matcher::NarrowedWalk(int32_t config, uint32_t* words) {
  const Vocabulary& v = *grammar_->vocab;
  Parser& parser = *parser_;
  const int32_t wider = narrow_wider_;
  const size_t n_words = static_cast<size_t>(v.mask_words());
  // A memoized mask holds exactly the walk's tokens where no token terminal or EOS adds ids.
  const bool text_only = !parser.has_token_heads(wider) && !parser.accepting(wider);
  const uint32_t* memo = text_only ? parser.CachedMask(wider) : nullptr;
  if (memo != nullptr) {
    std::memcpy(words, memo, n_words * sizeof(uint32_t));
    walk_nodes_ += static_cast<int64_t>(n_words) / 16;
  } else {
    StartWalk(wider);
    const bool served = LoopShortcutWalk(wider, words);
    except_leads_ = 0;
    StartWalk(config);
    if (!served) return false;
    // The next fill is often at `wider` itself (the loop after its first character).
    if (text_only) parser.StoreMask(wider, words, n_words, true);
  }
  for (int q = 0; q < 4; ++q) {
    for (uint64_t w = narrow_dies_[q]; w != 0; w &= w - 1) {
      const auto b = static_cast<uint8_t>(64 * q + __builtin_ctzll(w));
      walk_nodes_ += ClearFirstByteBits(v, b, v.trie_root_child(b), words);
    }
  }
  for (int q = 0; q < 4; ++q) {
    for (uint64_t w = narrow_differs_[q]; w != 0; w &= w - 1) {
      const auto b = static_cast<uint8_t>(64 * q + __builtin_ctzll(w));
      const int32_t root = v.trie_root_child(b);
      if (root < 0 || DiffWalkSubtree(root, wider, words)) continue;
      // The two positions stay apart on much of the subtree (no shortcut serves that walk):
      // walked from here instead.
      walk_nodes_ += ClearFirstByteBits(v, b, root, words);
      WalkFirstByte(b, words);
    }
  }
  return true;
}

bool Matcher::DiffWalkSubtree(int32_t root, int32_t wider, uint32_t* words) {
  const Vocabulary& v = *grammar_->vocab;
  const Vocabulary::TrieNode* node = v.trie_nodes();
  Parser& parser = *parser_;
  walk_reference_[0] = wider;
  constexpr int32_t kMinBudget = 256;
  const int32_t end = node[root].subtree_end;
  const int64_t budget = walk_nodes_ + std::max(kMinBudget, (end - root) / 4);
  for (int32_t i = root; i < end; ++walk_nodes_) {
    if (walk_nodes_ > budget) return false;
    const Vocabulary::TrieNode& at = node[i];
    const int32_t d = at.depth;
    // Both keep any plain text of this length viable: a plain subtree is allowed whole by
    // each (as in WalkSubtree), so `wider`'s decision stands, without the transitions into it.
    if (PlainWithin(v, at, i, std::min(walk_capacity_[d - 1], parser.plain_capacity(walk_reference_[d - 1])))) {
      i = at.subtree_end;
      continue;
    }
    if (at.inner < 0) {  // a leaf: its viability decides it, whatever `wider` did
      if (parser.ViableInRow(walk_row_[d - 1], walk_config_[d - 1], at.byte)) {
        SetNodeBits(v, at, i, words);
      } else {
        walk_nodes_ += ClearSubtreeBits(v, i, words);
      }
      ++i;
      continue;
    }
    const int32_t c = parser.NextInRow(walk_row_[d - 1], walk_config_[d - 1], at.byte);
    const int32_t r = parser.Next(walk_reference_[d - 1], at.byte);
    if (c == r) {  // goes on as from `wider`, whose mask decided the subtree
      i = at.subtree_end;
      continue;
    }
    if (c == Parser::kDead) {
      walk_nodes_ += ClearSubtreeBits(v, i, words);  // the bits cost like nodes
      i = at.subtree_end;
      continue;
    }
    SetNodeBits(v, at, i, words);
    walk_config_[d] = c;
    walk_row_[d] = parser.Row(c);
    walk_capacity_[d] = parser.plain_capacity(c);
    if (r == Parser::kDead) {
      // `wider` allowed none of the subtree: walked from here as any walk would.
      if (at.inner >= 0) WalkSubtree<false>(i + 1, at.subtree_end, walk_config_[0], words);
      i = at.subtree_end;
      continue;
    }
    walk_reference_[d] = r;
    ++i;
  }
  return true;
}

// Walk's trie walk proper, from the first bytes.
void Matcher::GeneralWalk(int32_t config, uint32_t* words) {
  const Vocabulary& v = *grammar_->vocab;
  Parser& parser = *parser_;
  const size_t n_words = static_cast<size_t>(v.mask_words());
  const uint64_t* live = parser.LiveBytes(config);
  // Tokens whose first byte some head consumes.
  const int64_t reachable = v.tokens_with_first_byte_in(live, 4);
  const int64_t unreachable = v.num_text_tokens() - reachable;
  if (8 * unreachable < v.num_text_tokens() && 2 * ReachableEstimate(config) > v.num_text_tokens()) {
    // Most of the vocabulary is allowed: start from every text token and clear (from every
    // token over the grammar's alphabet: subtrees under other bytes are then skipped unseen).
    const Automaton& a = parser.automaton();
    const uint32_t* start = a.full_alphabet() ? nullptr : v.alphabet_mask(a.alphabet());
    clear_from_alphabet_ = start != nullptr;
    std::memcpy(words, start != nullptr ? start : v.text_mask(), n_words * sizeof(uint32_t));
    for (int first = 0; first < 256; ++first) {
      const int32_t root = v.trie_root_child(static_cast<uint8_t>(first));
      if (root < 0 || (clear_from_alphabet_ && !(a.alphabet()[first >> 6] >> (first & 63) & 1))) continue;
      if (live[first >> 6] >> (first & 63) & 1) {
        if (!FirstByteSplit(static_cast<uint8_t>(first), true, words)) {
          WalkSubtree<true>(root, v.trie_nodes()[root].subtree_end, config, words);
        }
      } else {
        ClearFirstByteBits(v, static_cast<uint8_t>(first), root, words);
      }
    }
    return;
  }
  // Otherwise subtree by subtree: a first byte that starts many tokens is set word by word
  // from its precomputed mask and walked in clearing mode, the others walked in setting mode.
  // (Over a partial alphabet the byte's mask is narrowed to the alphabet's, so the clearing
  // walks skip unread bytes unseen.)
  std::memset(words, 0, n_words * sizeof(uint32_t));
  for (int q = 0; q < 4; ++q) {
    for (uint64_t bits = live[q]; bits != 0; bits &= bits - 1) {
      WalkFirstByte(static_cast<uint8_t>(64 * q + __builtin_ctzll(bits)), words);
    }
  }
}

void Matcher::WalkFirstByte(uint8_t first, uint32_t* words) {
  const Vocabulary& v = *grammar_->vocab;
  const int32_t root = v.trie_root_child(first);
  if (root < 0) return;
  const int32_t config = walk_config_[0];
  if (FirstByteSplit(first, false, words)) return;
  const uint32_t* m = v.first_byte_mask(first);
  if (m != nullptr && 2 * ReachableWithFirstByte(config, first) > v.tokens_with_first_byte(first)) {
    const size_t n_words = static_cast<size_t>(v.mask_words());
    // Over a partial alphabet the byte's mask is narrowed to the alphabet's, so the clearing
    // walk skips subtrees under unread bytes unseen (their tokens are then clear already).
    const Automaton& a = parser_->automaton();
    const uint32_t* readable = a.full_alphabet() ? nullptr : v.alphabet_mask(a.alphabet());
    clear_from_alphabet_ = readable != nullptr;
    if (clear_from_alphabet_) {
      OrAnd(words, m, readable, n_words);
    } else {
      Or(words, m, n_words);
    }
    WalkSubtree<true>(root, v.trie_nodes()[root].subtree_end, config, words);
  } else {
    WalkSubtree<false>(root, v.trie_nodes()[root].subtree_end, config, words);
  }
}

bool Matcher::FirstByteSplit(uint8_t first, bool clear, uint32_t* words) {
  const Vocabulary& v = *grammar_->vocab;
  Parser& parser = *parser_;
  // Only where the subtree is a good part of the vocabulary (a leading space's), and the
  // configuration after its byte loops on (or starts a chain over) a wide ASCII set and reads
  // no multi-byte character (as for SplitWalk).
  const int32_t tokens = v.tokens_with_first_byte(first);
  if (16 * static_cast<int64_t>(tokens) < v.num_text_tokens()) return false;
  const int32_t c = parser.Next(walk_config_[0], first);
  if (c == Parser::kDead) return false;
  uint64_t set[2];
  const bool ascii = SplitSet(c, set);
  if (!ascii && !SplitSet(c, set, true)) return false;
  // The split is worth computing for a large subtree (a walk of it would visit most of it),
  // but not in a walk on a budget: that walk gives up past a few hundred nodes for a split of
  // the whole position (Walk), which the first byte's split would then only have delayed.
  const bool compute = walk_budget_ == kNoBudget && 8 * static_cast<int64_t>(tokens) >= v.num_text_tokens();
  const Vocabulary::LoopSplit* split = ascii ? v.loop_split(set, compute, first) : nullptr;
  // Its own chain: SplitWalk's boundary walk (which may lead here) is still reading split_chain_.
  if (ascii && split == nullptr) return false;
  if (!ascii || !SetChain(c, set, split->max_depth - 1, first_chain_, first_end_)) {
    // A chain that reads bytes past 0x7F (a name's letters, then `\s`) takes the split that
    // keeps the boundary nodes on the bytes it reads as far as any token reaches: a few lead
    // bytes only (`\s` reads five; `[^:]` reads them all, and its boundary nodes would be most
    // of the subtree, whose walk takes plain subtrees whole).
    if (!SetChain(c, set, v.max_token_length(), first_chain_, first_end_, true)) return false;
    uint64_t wide[4] = {0, 0, 0, 0};
    WideBytesRead(parser, first_chain_, wide);
    constexpr int kFewLeads = 8;
    if (wide[2] != 0 || __builtin_popcountll(wide[3]) > kFewLeads) return false;
    split = v.loop_split(set, compute, first, wide + 2);
    if (split == nullptr || !SetChain(c, set, split->max_depth - 1, first_chain_, first_end_, true) ||
        !FewBoundaryNodes(*split, wide, first_end_, 2)) {
      return false;
    }
  }
  // The subtree's tokens of the first byte then bytes of the set: allowed (within the chain:
  // a path of more of the set's bytes after the first byte than the chain has steps dies).
  // (A byte that starts this many tokens has its mask kept: the subtree is set word by word.)
  const uint32_t* m = v.first_byte_mask(first);
  if (m == nullptr) return false;
  const size_t n_words = static_cast<size_t>(v.mask_words());
  if (clear) AndNot(words, m, n_words);
  if (first_end_ < split->max_token - 1) {
    SetSplitMaskUpTo(v, split->mask.data(), first_end_ + 1, true, words);
  } else {
    Or(words, split->mask.data(), n_words);
  }
  walk_nodes_ += static_cast<int64_t>(n_words) / 16;
  // The boundary nodes (all in the subtree): a node at depth d has the first byte and d - 2 of
  // the set's bytes above it.
  WalkBoundaries(*split, set, first_chain_, first_end_, 2, words);
  return true;
}

Matcher::SplitUse Matcher::SplitWalk(int32_t config, uint32_t* words, bool may_compute) {
  const Vocabulary& v = *grammar_->vocab;
  uint64_t set[2];
  // (WideSplitWalk and QuoteLoopWalk serve configurations that read ASCII bytes only.)
  const bool ascii_reads = SplitSet(config, set);
  if (!ascii_reads && !SplitSet(config, set, true)) return SplitUse::kNotApplicable;
  // Worth a split only where the set's bytes start a fair part of the vocabulary (else the
  // walk below them is short anyway). Hex digits start a 12th to a 16th: walked, each position of
  // a hex chain visits hundreds of nodes; a split, kept per vocabulary, serves them all.
  if (32 * v.tokens_with_first_byte_in(set, 2) < v.num_text_tokens()) return SplitUse::kNotApplicable;
  if (ascii_reads) {
    const SplitUse wide = WideSplitWalk(config, set, words, may_compute);
    if (wide != SplitUse::kNotApplicable) return wide;
  }
  const Vocabulary::LoopSplit* split = v.loop_split(set, false);
  if (split == nullptr && ascii_reads && QuoteLoopWalk(config, set, words)) return SplitUse::kDone;
  if (split == nullptr && may_compute && !ascii_reads && ManyWideBoundaries(config, set)) {
    return SplitUse::kNotApplicable;
  }
  if (split == nullptr && may_compute) split = v.loop_split(set, true);
  // (Once the vocabulary keeps no more splits, a walk would give up only to walk again.)
  if (split == nullptr) return may_compute || v.loop_splits_full() ? SplitUse::kNotApplicable : SplitUse::kNotComputed;
  // A later position may step only part of the set along (an e-mail address's local part reads
  // `@` as its first character, then as the separator): the set narrowed to the bytes that
  // position steps along, and its own split, at most twice. Where that position reads only a
  // few of the set's bytes (the `-` after a date's year), the set less those: the chain then
  // ends there, and their nodes are boundary nodes.
  // A configuration that reads ASCII bytes only may still step into positions that read
  // multi-byte characters (a name's letters, then `\s`): its chain then reads them too.
  bool wide_chain = !ascii_reads;
  auto chain_fits = [&] {
    if (SetChain(config, set, split->max_depth, split_chain_, split_end_, wide_chain)) return true;
    if (wide_chain || !SetChain(config, set, split->max_depth, split_chain_, split_end_, true)) return false;
    wide_chain = true;
    return true;
  };
  for (int narrowed = 0; !chain_fits(); ++narrowed) {
    const int32_t at = split_chain_.back();
    const Parser::StepSet step = parser_->Steps(at, false);
    uint64_t narrow[2] = {set[0] & step.bytes[0], set[1] & step.bytes[1]};
    if (__builtin_popcountll(narrow[0]) + __builtin_popcountll(narrow[1]) < 8) {
      const uint64_t* reads = parser_->LiveBytes(at);
      const uint64_t excluded[2] = {set[0] & reads[0], set[1] & reads[1]};
      constexpr int kFewExcluded = 4;
      if (__builtin_popcountll(excluded[0]) + __builtin_popcountll(excluded[1]) <= kFewExcluded &&
          (ascii_reads || FewExcludedNodes(config, excluded, static_cast<int32_t>(split_chain_.size())))) {
        narrow[0] = set[0] & ~excluded[0];
        narrow[1] = set[1] & ~excluded[1];
      }
    }
    if (narrowed == 2 || (narrow[0] == set[0] && narrow[1] == set[1]) ||
        __builtin_popcountll(narrow[0]) + __builtin_popcountll(narrow[1]) < 8) {
      return SplitUse::kNotApplicable;
    }
    set[0] = narrow[0];
    set[1] = narrow[1];
    split = v.loop_split(set, may_compute);
    if (split == nullptr) return may_compute || v.loop_splits_full() ? SplitUse::kNotApplicable : SplitUse::kNotComputed;
  }
  if (wide_chain) {
    // The boundary nodes on the ASCII bytes `config` reads outside the set; where `config` reads
    // ASCII bytes only, also those on the bytes past 0x7F that the chain reads.
    const uint64_t* live = parser_->LiveBytes(config);
    const uint64_t outside[4] = {live[0] & ~set[0], live[1] & ~set[1], 0, 0};
    uint64_t wide[4] = {0, 0, 0, 0};
    if (ascii_reads) WideBytesRead(*parser_, split_chain_, wide);
    if (!FewBoundaryNodes(*split, outside, split_end_, 1) || !FewBoundaryNodes(*split, wide, split_end_, 1)) {
      return SplitUse::kNotApplicable;
    }
  }
  const size_t n_words = static_cast<size_t>(v.mask_words());
  if (split_end_ >= split->max_token) {
    std::memcpy(words, split->mask.data(), n_words * sizeof(uint32_t));
  } else if (!SetSplitMaskUpTo(v, split->mask.data(), split_end_, false, words)) {
    // (A path of more of the set's bytes than the chain has steps dies at its end.)
    return SplitUse::kNotApplicable;
  }
  walk_nodes_ += static_cast<int64_t>(n_words) / 16;  // bits cost like nodes, a word at a time
  // A boundary node at depth d has d - 1 of the set's bytes above it.
  WalkBoundaries(*split, set, split_chain_, split_end_, 1, words);
  return SplitUse::kDone;
}

bool Matcher::ClosedRegion(int32_t config, uint64_t* set) {
  Parser& parser = *parser_;
  const Automaton& automaton = parser.automaton();
  // (Not '"' and '\\': a string's end and its escapes, after which few bytes are read: their
  // tokens are boundary nodes.)
  const uint64_t* live = parser.LiveBytes(config);
  set[0] = live[0] & ~(1ull << '"');
  set[1] = live[1] & ~(1ull << ('\\' - 64));
  region_.assign(1, config);
  in_region_.Clear();
  in_region_.Insert(static_cast<uint64_t>(config));
  // Every configuration of the region reads every byte of the set into the region: the set
  // shrinks by the classes some configuration cannot read, the region grows by where the
  // others lead, until a pass over the region changes neither.
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t k = 0; k < region_.size(); ++k) {
      const int32_t at = region_[k];
      const std::atomic<int32_t>* row = parser.Row(at);
      for (int q = 0, last = -1; q < 2; ++q) {
        for (uint64_t w = set[q]; w != 0; w &= w - 1) {
          const auto b = static_cast<uint8_t>(64 * q + __builtin_ctzll(w));
          const int32_t cls = automaton.byte_class(b);
          if (cls == last) continue;
          last = cls;
          const int32_t to = parser.NextInRow(row, at, b);
          if (to != Parser::kDead && in_region_.Contains(static_cast<uint64_t>(to))) continue;
          // A byte into a configuration that reads few of the set's bytes (the searched word's
          // first letter after any character: `.gov` after a space) leaves the set.
          const uint64_t* reads = to == Parser::kDead ? nullptr : parser.LiveBytes(to);
          if (reads == nullptr || __builtin_popcountll(reads[0] & set[0]) + __builtin_popcountll(reads[1] & set[1]) < 32) {
            for (int x = b; x < 128 && automaton.byte_class(static_cast<uint8_t>(x)) == cls; ++x) {
              set[x >> 6] &= ~(1ull << (x & 63));
            }
          } else {
            if (static_cast<int32_t>(region_.size()) == kMaxRegion) return false;
            region_.push_back(to);
            in_region_.Insert(static_cast<uint64_t>(to));
          }
          changed = true;
        }
      }
      if (__builtin_popcountll(set[0]) + __builtin_popcountll(set[1]) < 32) return false;
    }
  }
  return true;
}

bool Matcher::RegionWalk(int32_t config, uint32_t* words) {
  if (!region_walks_.load(std::memory_order_relaxed)) return false;
  const Vocabulary& v = *grammar_->vocab;
  Parser& parser = *parser_;
  const uint64_t* live = parser.LiveBytes(config);
  if (__builtin_popcountll(live[0]) + __builtin_popcountll(live[1]) < 32) return false;
  // Only where the step successors reach a loop within a few steps, and that loop reads ASCII
  // bytes besides its own set, '"' and '\\' (a searched word's letters): elsewhere the split
  // walk serves, and the positions of a bounded text never close a region.
  constexpr uint64_t kQuote = 1ull << '"', kBackslash = 1ull << ('\\' - 64);
  int32_t at = config;
  Parser::StepSet step = parser.Steps(at, false);
  for (int k = 0; k < 3 && step.successor != at; ++k) {
    if (step.successor == Parser::kDead) return false;
    at = step.successor;
    step = parser.Steps(at, false);
  }
  if (step.successor != at) return false;
  const uint64_t* loop_reads = parser.LiveBytes(at);
  if (((loop_reads[0] & ~step.bytes[0] & ~kQuote) | (loop_reads[1] & ~step.bytes[1] & ~kBackslash)) == 0) return false;
  const uint64_t loop_set[2] = {step.bytes[0], step.bytes[1]};
  uint64_t set[2];
  if (!ClosedRegion(config, set) || region_.size() < 2) return false;
  if (8 * v.tokens_with_first_byte_in(set, 2) < v.num_text_tokens()) return false;
  // Worth it where the loop's split has many boundary nodes on the region's other bytes (the
  // word's letters): where they are rare (a separator), that split's walk costs the same.
  const uint64_t extra[2] = {set[0] & ~loop_set[0], set[1] & ~loop_set[1]};
  if (v.FewRootBoundaries(loop_set, extra, INT32_MAX, v.trie_size() / 256)) return false;
  const Vocabulary::LoopSplit* split = v.loop_split(set, true);
  if (split == nullptr) return false;
  // The bytes some configuration of the region reads: a boundary node on another byte is dead
  // (its prefix of the set's bytes leads into the region). Where it reads multi-byte
  // characters, the lead bytes whose every character every configuration reads back into the
  // region (to its step successor, one of the region's).
  uint64_t reads[4] = {0, 0, 0, 0};
  for (int32_t r : region_) {
    const uint64_t* l = parser.LiveBytes(r);
    for (int q = 0; q < 4; ++q) reads[q] |= l[q];
  }
  uint64_t leads = reads[3] != 0 ? ~0ull : 0;
  for (size_t k = 0; k < region_.size() && leads != 0; ++k) {
    const Parser::StepSet s = parser.Steps(region_[k], true);
    leads &= in_region_.Contains(static_cast<uint64_t>(s.successor)) ? s.bytes[3] : 0;
  }
  const size_t n_words = static_cast<size_t>(v.mask_words());
  std::memcpy(words, split->mask.data(), n_words * sizeof(uint32_t));
  walk_nodes_ += static_cast<int64_t>(n_words) / 16;  // bits cost like nodes, a word at a time
  const Vocabulary::TrieNode* node = v.trie_nodes();
  for (int q = 0; q < 4; ++q) {
    for (uint64_t w = reads[q] & ~(q < 2 ? set[q] : 0); w != 0; w &= w - 1) {
      const auto b = static_cast<uint8_t>(64 * q + __builtin_ctzll(w));
      const bool along = q == 3 && (leads >> (b & 63) & 1);
      ForEachBoundaryNode(*split, node, b, [&](int32_t j) {
        ++walk_nodes_;
        const int32_t d = node[j].depth;
        if (d == 1) {
          if (!(live[q] >> (b & 63) & 1)) return;
          if (!along || !RegionWideTokens(v.wide_tokens(b), set, leads, config, words)) WalkFirstByte(b, words);
          return;
        }
        // (Every configuration of the region reads the characters of `leads`.)
        if (along && RegionWideTokens(v.wide_tail_tokens(j), set, leads, config, words)) return;
        // Below d - 1 of the set's bytes: somewhere in the region, found by reading them.
        const int32_t token = v.trie_tokens()[static_cast<size_t>(v.trie_token_begin(j))];
        const int32_t parent = Advance(config, std::string_view(v.bytes(token)).substr(0, static_cast<size_t>(d - 1)));
        walk_nodes_ += d - 1;
        if (parent == Parser::kDead || !(parser.LiveBytes(parent)[q] >> (b & 63) & 1)) return;
        walk_config_[d - 1] = parent;
        walk_row_[d - 1] = parser.Row(parent);
        walk_capacity_[d - 1] = parser.plain_capacity(parent);
        WalkSubtree<false>(j, node[j].subtree_end, config, words);
      });
    }
  }
  return true;
}

bool Matcher::RegionWideTokens(const Vocabulary::WideList& tokens, const uint64_t* set, uint64_t leads,
                               int32_t config, uint32_t* words) {
  if (tokens.size == 0) return false;
  for (int32_t k = 0; k < tokens.size; ++k) {
    const Vocabulary::WideToken& t = tokens.tokens[k];
    const int32_t b0 = tokens.text_begin[k], b1 = tokens.text_begin[k + 1];
    if (t.chars > 0 ? (t.leads & ~leads) == 0
                    : b1 > b0 && WithinRegion(std::string_view(tokens.text + b0, static_cast<size_t>(b1 - b0)), set, leads)) {
      words[t.id >> 5] |= 1u << (t.id & 31);
      continue;
    }
    // Read whole from the walk's start (its prefix above the list's node is the set's bytes).
    const std::string& bytes = grammar_->vocab->bytes(t.id);
    if (Advance(config, bytes) != Parser::kDead) words[t.id >> 5] |= 1u << (t.id & 31);
    walk_nodes_ += static_cast<int64_t>(bytes.size());
  }
  walk_nodes_ += tokens.size / 16;  // bits cost like nodes, a word at a time
  return true;
}

bool Matcher::ManyWideBoundaries(int32_t config, const uint64_t* set) {
  const Vocabulary& v = *grammar_->vocab;
  // A short look along the chain: where it ends or loops within it, the boundary nodes the
  // split's chain would walk are known without the split.
  constexpr int32_t kLook = 16;
  if (!SetChain(config, set, kLook, split_chain_, split_end_, true)) return false;
  const bool loops = split_end_ == kLook && static_cast<int32_t>(split_chain_.size()) <= kLook;
  if (split_end_ == kLook && !loops) return false;
  const uint64_t* live = parser_->LiveBytes(config);
  const uint64_t outside[2] = {live[0] & ~set[0], live[1] & ~set[1]};
  // (A boundary node below a path of d - 1 of the set's bytes is walked from the chain's
  // (d - 1)-th position: within a chain of `split_end_` positions; all of them along a loop.)
  const int32_t depth = loops ? INT32_MAX : split_end_ + 1;
  return !v.FewRootBoundaries(set, outside, depth, v.trie_size() / 64);
}

bool Matcher::FewExcludedNodes(int32_t config, const uint64_t* excluded, int32_t depth) {
  const Vocabulary& v = *grammar_->vocab;
  const uint64_t* live = parser_->LiveBytes(config);
  // Their boundary nodes are at most their tokens (known for rare bytes only), and at most their
  // trie nodes within the chain's reach. (A chain of one position before them, as a searched
  // word's letters after a dot make, ends where a walk of it ends too: the split's computation,
  // once per set, would not pay.)
  const uint64_t read[2] = {excluded[0] & live[0], excluded[1] & live[1]};
  const int64_t tokens = ExceptionTokens(v, read);
  if (tokens >= 0 && 64 * tokens <= v.trie_size()) return true;
  if (depth < 3) return false;
  int64_t nodes = 0;
  for (int q = 0; q < 2; ++q) {
    for (uint64_t w = read[q]; w != 0; w &= w - 1) {
      nodes += v.nodes_on_byte_within(static_cast<uint8_t>(64 * q + __builtin_ctzll(w)), depth);
    }
  }
  return 64 * nodes <= v.trie_size();
}

bool Matcher::FewBoundaryNodes(const Vocabulary::LoopSplit& split, const uint64_t* bytes, int32_t end,
                               int32_t shift) {
  const Vocabulary& v = *grammar_->vocab;
  const Vocabulary::TrieNode* node = v.trie_nodes();
  // Each a walk's start, against a 64th of the trie; of a chain, only those within its reach.
  const int64_t most = v.trie_size() / 64;
  int64_t walks = 0;
  for (int q = 0; q < 4; ++q) {
    for (uint64_t w = bytes[q]; w != 0; w &= w - 1) {
      const int b = 64 * q + __builtin_ctzll(w);
      if (end >= split.max_depth) {
        walks += split.begin[b + 1] - split.begin[b];
      } else {
        for (int32_t k = split.begin[b]; k < split.begin[b + 1] && walks <= most; ++k) {
          walks += node[split.boundary[k]].depth - shift <= end ? 1 : 0;
        }
      }
      if (walks > most) return false;
    }
  }
  return true;
}

Matcher::SplitUse Matcher::WideSplitWalk(int32_t config, const uint64_t* set, uint32_t* words, bool may_compute) {
  const Vocabulary& v = *grammar_->vocab;
  Parser& parser = *parser_;
  const int32_t next = parser.Steps(config, false).successor;
  if (next == config) return SplitUse::kNotApplicable;
  const uint64_t* reads = parser.LiveBytes(next);
  if ((reads[2] | reads[3]) != 0) return SplitUse::kNotApplicable;
  const Parser::StepSet step = parser.Steps(next, false);
  const uint64_t wide[2] = {step.bytes[0], step.bytes[1]};
  // `next` must read every byte of `set` along (back into itself, or on to the next position
  // of a chain), and more besides.
  if (step.successor == Parser::kDead || (set[0] & ~wide[0]) != 0 || (set[1] & ~wide[1]) != 0 ||
      (wide[0] == set[0] && wide[1] == set[1])) {
    return SplitUse::kNotApplicable;
  }
  const Vocabulary::LoopSplit* split = v.loop_split(wide, may_compute);
  if (split == nullptr) return may_compute || v.loop_splits_full() ? SplitUse::kNotApplicable : SplitUse::kNotComputed;
  // The chain: `config`, then from `next` on (a loop, or the positions of a bounded repetition
  // of the wide set: a key pattern's characters after its first).
  int32_t end = 0;
  if (!SetChain(next, wide, split->max_depth - 1, wide_chain_, end)) return SplitUse::kNotApplicable;
  split_chain_.assign(1, config);
  split_chain_.insert(split_chain_.end(), wide_chain_.begin(), wide_chain_.end());
  split_end_ = end + 1;
  const size_t n_words = static_cast<size_t>(v.mask_words());
  // Tokens of the wide set's bytes only are allowed (as far as the chain reaches), but for those
  // whose first byte is not `set`'s (it leads elsewhere from `config`, or nowhere): their
  // subtrees are cleared, then walked from `config` where it reads the byte.
  if (split_end_ >= split->max_token) {
    std::memcpy(words, split->mask.data(), n_words * sizeof(uint32_t));
  } else if (!SetSplitMaskUpTo(v, split->mask.data(), split_end_, false, words)) {
    return SplitUse::kNotApplicable;
  }
  walk_nodes_ += static_cast<int64_t>(n_words) / 16;
  wide_skip_.clear();
  for (int q = 0; q < 2; ++q) {
    for (uint64_t w = wide[q] & ~set[q]; w != 0; w &= w - 1) {
      const auto b = static_cast<uint8_t>(64 * q + __builtin_ctzll(w));
      const int32_t root = v.trie_root_child(b);
      if (root < 0) continue;
      walk_nodes_ += ClearFirstByteBits(v, b, root, words);
      wide_skip_.push_back(root);
    }
  }
  // Boundary nodes below another first byte (those just cleared) are skipped; their subtrees
  // are walked whole below.
  WalkBoundaries(*split, wide, split_chain_, split_end_, 1, words);
  wide_skip_.clear();
  const uint64_t* first = parser.LiveBytes(config);
  for (int q = 0; q < 2; ++q) {
    for (uint64_t w = wide[q] & ~set[q] & first[q]; w != 0; w &= w - 1) {
      WalkFirstByte(static_cast<uint8_t>(64 * q + __builtin_ctzll(w)), words);
    }
  }
  return SplitUse::kDone;
}

bool Matcher::SplitSet(int32_t config, uint64_t* set, bool wide_reads) {
  Parser& parser = *parser_;
  const uint64_t* live = parser.LiveBytes(config);
  // Unless `wide_reads`, only configurations that read no multi-byte character: every token
  // holding one is then dead at its first non-ASCII byte, a boundary node skipped unvisited.
  if (!wide_reads && (live[2] | live[3]) != 0) return false;
  if (__builtin_popcountll(live[0]) + __builtin_popcountll(live[1]) < 16) return false;
  const Parser::StepSet step = parser.Steps(config, false);
  if (step.successor == Parser::kDead) return false;
  set[0] = step.bytes[0];  // ASCII bytes b: Next(config, b) == successor
  set[1] = step.bytes[1];
  return __builtin_popcountll(set[0]) + __builtin_popcountll(set[1]) >= 8;
}

void Matcher::WalkBoundaries(const Vocabulary::LoopSplit& split, const uint64_t* set, const std::vector<int32_t>& chain,
                             int32_t end, int32_t shift, uint32_t* words) {
  const Vocabulary& v = *grammar_->vocab;
  Parser& parser = *parser_;
  wide_steps_known_ = 0;  // WideTokensAlong's, per chain
  // The bytes outside the set that some position of the chain reads.
  uint64_t others[4] = {0, 0, 0, 0};
  for (int32_t c : chain) {
    const uint64_t* reads = parser.LiveBytes(c);
    for (int q = 0; q < 4; ++q) others[q] |= reads[q];
  }
  others[0] &= ~set[0];
  others[1] &= ~set[1];
  // A boundary node at depth d is below d - shift of the set's bytes, which lead to that
  // position of the chain (past a loop's position: the loop): its subtree is walked as if from
  // a child of that configuration.
  const Vocabulary::TrieNode* node = v.trie_nodes();
  const int32_t last = static_cast<int32_t>(chain.size()) - 1;
  for (int q = 0; q < 4; ++q) {
    for (uint64_t w = others[q]; w != 0; w &= w - 1) {
      const int b = 64 * q + __builtin_ctzll(w);
      const bool lead = b >= 0xC2 && b <= 0xF4;
      ForEachBoundaryNode(split, node, b, [&](int32_t j) {
        const int32_t d = node[j].depth;
        if (d - shift > end) return;
        if (!wide_skip_.empty() && d > 1 && SkippedBelow(j)) return;
        const int32_t parent = chain[std::min(d - shift, last)];
        if (!(parser.LiveBytes(parent)[q] >> (b & 63) & 1)) return;
        if (d == 1) {  // a root split's first byte outside its set
          const auto first = static_cast<uint8_t>(b);
          if (!lead || !WideTokensAlong(v.wide_tokens(first), first, 0, chain, end, words)) {
            WalkFirstByte(first, words);
          }
          return;
        }
        if (lead && shift == 1) {  // below a root split's ASCII path of the set's bytes
          const Vocabulary::WideList tail = v.wide_tail_tokens(j);
          if (tail.size > 0 && WideTokensAlong(tail, static_cast<uint8_t>(b), d - 1, chain, end, words)) return;
        }
        walk_config_[d - 1] = parent;
        walk_row_[d - 1] = parser.Row(parent);
        walk_capacity_[d - 1] = parser.plain_capacity(parent);
        WalkSubtree<false>(j, node[j].subtree_end, walk_config_[0], words);
      });
    }
  }
}

bool Matcher::WideTokensAlong(const Vocabulary::WideList& tokens, uint8_t lead, int32_t at,
                              const std::vector<int32_t>& chain, int32_t end, uint32_t* words) {
  Parser& parser = *parser_;
  const auto last = static_cast<int32_t>(chain.size()) - 1;
  // Past its last position (a loop's), the chain's last step set again; the step sets of
  // multi-byte characters cost far more than the ASCII ones: each computed once per chain.
  auto steps = [&](int32_t m) {
    if (!(wide_steps_known_ >> m & 1)) {
      const int32_t c = chain[static_cast<size_t>(std::min(m, last))];
      wide_steps_[static_cast<size_t>(m)] = parser.Steps(c, true).bytes[3];
      wide_steps_known_ |= 1u << m;
    }
    return wide_steps_[static_cast<size_t>(m)];
  };
  const int32_t reach = std::min(end, Vocabulary::kMultibytePlainReach);
  // Not even the first character steps along: walk.
  if (at >= reach || !(steps(at) >> (lead - 0xC0) & 1)) return false;
  // along[c]: the leads whose every character steps along positions at .. at + c - 1.
  const int32_t room = reach - at;
  std::array<uint64_t, Vocabulary::kMultibytePlainReach + 1> along{};
  along[0] = ~0ull;
  for (int32_t c = 1; c <= room; ++c) {
    along[static_cast<size_t>(c)] = along[static_cast<size_t>(c - 1)] & steps(at + c - 1);
  }
  // Where the chain ends within that reach at a position that reads no multi-byte character,
  // a token of more whole characters, whose leads all step along, dies at its character past it.
  const bool hard_end = reach == end && end <= last && parser.LiveBytes(chain[static_cast<size_t>(end)])[3] == 0;
  // A token of whole characters of those leads, no more of them than the chain steps, is
  // allowed; every other token is decided by its bytes, from the position above the node.
  const int32_t from = chain[static_cast<size_t>(std::min(at, last))];
  for (int32_t k = 0; k < tokens.size; ++k) {
    const Vocabulary::WideToken& t = tokens.tokens[k];
    const bool allowed = t.chars > 0 && t.chars <= room && (t.leads & ~along[static_cast<size_t>(t.chars)]) == 0;
    const bool dies = !allowed && hard_end && t.chars > room && (t.leads & ~along[static_cast<size_t>(room)]) == 0;
    if (allowed || dies) {
      if (allowed) words[t.id >> 5] |= 1u << (t.id & 31);
      continue;
    }
    // (The list keeps no bytes for a token of whole characters: those few are read from the
    // vocabulary.)
    const int32_t b0 = tokens.text_begin[k], b1 = tokens.text_begin[k + 1];
    const std::string_view bytes =
        b1 > b0 ? std::string_view(tokens.text + b0, static_cast<size_t>(b1 - b0))
                : std::string_view(grammar_->vocab->bytes(t.id)).substr(static_cast<size_t>(at));
    if (Advance(from, bytes) != Parser::kDead) words[t.id >> 5] |= 1u << (t.id & 31);
    walk_nodes_ += t.chars + 1;
  }
  walk_nodes_ += tokens.size / 16;  // bits cost like nodes, a word at a time
  return true;
}

bool Matcher::QuoteLoopWalk(int32_t config, const uint64_t* set, uint32_t* words) {
  const Vocabulary& v = *grammar_->vocab;
  Parser& parser = *parser_;
  const uint64_t* live = parser.LiveBytes(config);  // ASCII only (SplitSet)
  constexpr uint64_t kQuote = 1ull << '"';
  constexpr uint64_t kBackslash = 1ull << ('\\' - 64);
  if ((live[0] & ~set[0] & ~kQuote) != 0 || (live[1] & ~set[1] & ~kBackslash) != 0) return false;
  const Parser::StepSet step = parser.Steps(config, false);
  if (step.successor != config) return false;  // a loop only: a chain needs its length's cut
  const uint64_t alphabet[4] = {set[0], set[1], 0, 0};
  const uint32_t* mask = v.alphabet_mask(alphabet);
  if (mask == nullptr) return false;
  const size_t n_words = static_cast<size_t>(v.mask_words());
  std::memcpy(words, mask, n_words * sizeof(uint32_t));
  walk_nodes_ += static_cast<int64_t>(n_words) / 16;  // bits cost like nodes, a word at a time
  const bool quote = (live[0] & kQuote) != 0, backslash = (live[1] & kBackslash) != 0;
  const Vocabulary::TrieNode* node = v.trie_nodes();
  for (const Vocabulary::QuoteNode& q : v.quote_nodes()) {
    ++walk_nodes_;
    const Vocabulary::TrieNode& at = node[q.node];
    if (!(at.byte == '"' ? quote : backslash) || (q.above[0] & ~set[0]) != 0 || (q.above[1] & ~set[1]) != 0) continue;
    if (at.depth == 1) {
      WalkFirstByte(at.byte, words);
      continue;
    }
    // Below a path of the set's bytes, which led back to the loop.
    walk_config_[at.depth - 1] = config;
    walk_row_[at.depth - 1] = parser.Row(config);
    walk_capacity_[at.depth - 1] = parser.plain_capacity(config);
    WalkSubtree<false>(q.node, at.subtree_end, walk_config_[0], words);
  }
  return true;
}

bool Matcher::SkippedBelow(int32_t j) const {
  const Vocabulary::TrieNode* node = grammar_->vocab->trie_nodes();
  for (int32_t root : wide_skip_) {
    if (j > root && j < node[root].subtree_end) return true;
  }
  return false;
}

bool Matcher::SetChain(int32_t config, const uint64_t* set, int32_t reach, std::vector<int32_t>& chain, int32_t& end,
                       bool wide_reads) {
  Parser& parser = *parser_;
  // Unless `wide_reads`, every position must read ASCII bytes only: a first byte's split
  // keeps no boundary node past 0x7F.
  auto ascii_only = [&parser, wide_reads](int32_t c) {
    if (wide_reads) return true;
    const uint64_t* live = parser.LiveBytes(c);
    return (live[2] | live[3]) == 0;
  };
  if (!ascii_only(config)) return false;
  chain.assign(1, config);
  end = reach;
  for (int32_t m = 0; m < reach; ++m) {
    const int32_t at = chain.back();
    const uint64_t* live = parser.LiveBytes(at);
    if ((live[0] & set[0]) == 0 && (live[1] & set[1]) == 0) {
      end = m;  // no byte of the set is read here
      return true;
    }
    // Where every head reads all of the set's bytes into one state (or none of them), one
    // transition finds the next position: a bounded string's chain is followed as deep as the
    // split's longest path (a hundred positions, each a configuration of its own), and a step
    // set would cost a transition per byte class at each.
    const int32_t uniform = SetSuccessor(at, set);
    if (uniform != Parser::kUnknown) {
      if (uniform == Parser::kDead) {
        end = m;
        return true;
      }
      if (uniform == at) return true;
      if (!ascii_only(uniform)) return false;
      chain.push_back(uniform);
      continue;
    }
    const Parser::StepSet step = parser.Steps(at, false);
    if (step.successor != Parser::kDead && (set[0] & ~step.bytes[0]) == 0 && (set[1] & ~step.bytes[1]) == 0) {
      if (step.successor == at) return true;  // a loop: the same step from here on
      if (!ascii_only(step.successor)) return false;
      chain.push_back(step.successor);
      continue;
    }
    // Not a step of the chain: its end only when every byte of the set dies here.
    for (int q = 0; q < 2; ++q) {
      for (uint64_t w = set[q]; w != 0; w &= w - 1) {
        if (parser.Next(at, static_cast<uint8_t>(64 * q + __builtin_ctzll(w))) != Parser::kDead) return false;
      }
    }
    end = m;
    return true;
  }
  return true;
}

int32_t Matcher::SetSuccessor(int32_t config, const uint64_t* set) {
  const Automaton& a = parser_->automaton();
  parser_->Heads(config, &set_heads_);
  int32_t rep = -1;
  for (int q = 0; q < 2 && rep < 0; ++q) {
    if (set[q] != 0) rep = 64 * q + __builtin_ctzll(set[q]);
  }
  if (rep < 0) return Parser::kUnknown;
  for (const auto& [state, frame] : set_heads_) {
    if (a.SetTarget(state, set) == Automaton::kMixedTarget) return Parser::kUnknown;
  }
  return parser_->Next(config, static_cast<uint8_t>(rep));
}

// True when `config` returns to itself on every plain character (each plain byte and each
// multi-byte character leads back to it), so that any plain text keeps it unchanged.
bool Matcher::PlainLoop(int32_t config) {
  const Parser::StepSet step = parser_->Steps(config, true);
  return step.successor == config && HasAllPlainAscii(step.bytes) && AllowMissingLeads(step.bytes);
}

bool Matcher::PlainLoopWithExceptions(int32_t config, uint32_t* words) {
  const Vocabulary& v = *grammar_->vocab;
  if (!MostPlainAscii(parser_->LiveBytes(config))) return false;
  const Parser::StepSet step = parser_->Steps(config, true);
  if (step.successor != config) return false;
  const uint64_t except[2] = {kPlainBits0 & ~step.bytes[0], kPlainBits1 & ~step.bytes[1]};
  const int64_t n_except = ExceptionTokens(v, except);
  if (n_except < 0) return false;
  // Worth it while those tokens are few: each costs a transition per byte.
  if (n_except == 0 || 32 * n_except > v.num_text_tokens() || !AllowMissingLeads(step.bytes)) return false;
  // As a plain loop: a plain token without an exception byte keeps `config`, a suffix token
  // whose plain prefix holds none goes on from it; every token holding one is decided below,
  // whatever this wrote.
  const size_t n_words = static_cast<size_t>(v.mask_words());
  std::memcpy(words, v.plain_mask(), n_words * sizeof(uint32_t));
  WalkSuffixes(words, false);
  DecideByteTokens(config, except, words);
  return true;
}

bool Matcher::PlainChainWithExceptions(int32_t config, uint32_t* words) {
  const Vocabulary& v = *grammar_->vocab;
  if (walk_capacity_[0] >= Automaton::kUnbounded || !MostPlainAscii(parser_->LiveBytes(config))) return false;
  uint64_t except[2] = {0, 0};
  if (!PlainChain(config, except)) return false;
  // A chain that ends in a loop (the first character of `[^/]+`) is a narrowed position's:
  // its suffix walk per chain position costs more than the loop's mask (NarrowedWalk).
  const size_t n = chain_.size();
  if (n >= 3 && chain_[n - 1] == chain_[n - 2]) return false;
  const int64_t n_except = ExceptionTokens(v, except);
  if (n_except < 0) return false;
  // Worth it while those tokens are few: each costs a transition per byte.
  if (__builtin_popcountll(except[0]) + __builtin_popcountll(except[1]) > 8 || 64 * n_except > v.num_text_tokens()) {
    return false;
  }
  // As a plain chain (plain tokens that fit, suffix tokens from where their plain prefix
  // leads), then every token holding an exception byte decided by its bytes, whatever that
  // wrote (its prefix may not lead down the chain).
  chain_shift_ = 0;
  SetPlainTokensUpTo(chain_len_, words);
  WalkSuffixes(words, true);
  DecideByteTokens(config, except, words);
  return true;
}

bool Matcher::PlainFirstStep(int32_t config, uint32_t* words) {
  const Vocabulary& v = *grammar_->vocab;
  const uint64_t* live = parser_->LiveBytes(config);
  if ((live[2] | live[3]) != 0 || (live[0] & ~kPlainBits0) != 0 || (live[1] & ~kPlainBits1) != 0) return false;
  if (16 * v.tokens_with_first_byte_in(live, 2) < v.num_text_tokens()) return false;
  const Parser::StepSet step = parser_->Steps(config, false);
  if (step.successor == Parser::kDead || step.bytes[0] != live[0] || step.bytes[1] != live[1]) return false;
  // Every first byte it reads needs its mask kept (the cut below is word by word).
  for (int q = 0; q < 2; ++q) {
    for (uint64_t w = live[q]; w != 0; w &= w - 1) {
      if (v.first_byte_mask(static_cast<uint8_t>(64 * q + __builtin_ctzll(w))) == nullptr) return false;
    }
  }
  except_leads_ = 0;
  if (!PlainChain(step.successor)) return false;
  // As in PlainStepWithExceptions (every plain first byte stepping to the chain's head),
  // then only the tokens of the bytes read here: a plain token of another first byte, or a
  // suffix token whose prefix starts with one, was decided as if that byte were read too.
  chain_shift_ = 1;
  SetPlainTokensUpTo(chain_len_ + 1, words);
  WalkSuffixes(words, true);
  const size_t n_words = static_cast<size_t>(v.mask_words());
  first_bytes_mask_.assign(n_words, 0);
  for (int q = 0; q < 2; ++q) {
    for (uint64_t w = live[q]; w != 0; w &= w - 1) {
      Or(first_bytes_mask_.data(), v.first_byte_mask(static_cast<uint8_t>(64 * q + __builtin_ctzll(w))), n_words);
    }
  }
  for (size_t k = 0; k < n_words; ++k) words[k] &= first_bytes_mask_[k];
  walk_nodes_ += static_cast<int64_t>(n_words) / 8;
  return true;
}

bool Matcher::AllowMissingLeads(const uint64_t* step_bytes) {
  const uint64_t missing = kPlainLeadBits3 & ~step_bytes[3];
  if (missing == 0) return true;
  const uint64_t leads = except_leads_ | missing;
  const Vocabulary& v = *grammar_->vocab;
  // Worth it while those tokens are few: each costs a transition per byte.
  if (__builtin_popcountll(leads) > 4 || 32 * v.num_tokens_with_leads(leads) > v.num_text_tokens()) return false;
  except_leads_ = leads;
  return true;
}

void Matcher::DecideLeadTokens(int32_t config, uint32_t* words) {
  if (except_leads_ == 0) return;
  const Vocabulary& v = *grammar_->vocab;
  for (uint64_t w = except_leads_; w != 0; w &= w - 1) {
    const auto lead = static_cast<uint8_t>(0xC0 + __builtin_ctzll(w));
    DecideTokens(config, v.lead_tokens(lead), v.num_lead_tokens(lead), words);
  }
}

void Matcher::DecideByteTokens(int32_t config, const uint64_t* except, uint32_t* words) {
  const Vocabulary& v = *grammar_->vocab;
  for (int q = 0; q < 2; ++q) {
    for (uint64_t w = except[q]; w != 0; w &= w - 1) {
      const auto b = static_cast<uint8_t>(64 * q + __builtin_ctzll(w));
      DecideTokens(config, v.ascii_tokens(b), v.num_ascii_tokens(b), words);
    }
  }
}

void Matcher::DecideTokens(int32_t config, const int32_t* ids, int32_t n, uint32_t* words) {
  const Vocabulary& v = *grammar_->vocab;
  // The tokens' records are scattered (ids apart): each is asked for well before it is read,
  // and a long token's bytes (stored apart from its record) a few tokens later, so that the
  // cache misses overlap instead of each stalling its token's transitions.
  constexpr int32_t kRecordAhead = 16, kBytesAhead = 8;
  for (int32_t k = 0; k < std::min(n, kRecordAhead); ++k) __builtin_prefetch(&v.bytes(ids[k]));
  DecideEach(
      config, ids, n,
      [&](int32_t k) {
        if (k + kRecordAhead < n) __builtin_prefetch(&v.bytes(ids[k + kRecordAhead]));
        if (k + kBytesAhead < n) __builtin_prefetch(v.bytes(ids[k + kBytesAhead]).data());
        return std::string_view(v.bytes(ids[k]));
      },
      words);
}

void Matcher::DecidePlainTokens(int32_t config, int32_t first, int32_t last, uint32_t* words) {
  const Vocabulary& v = *grammar_->vocab;
  DecideEach(
      config, v.plain_by_chars().data() + first, last - first, [&](int32_t k) { return v.plain_text(first + k); },
      words);
}

template <typename BytesOf>
void Matcher::DecideEach(int32_t config, const int32_t* ids, int32_t n, BytesOf&& bytes_of, uint32_t* words) {
  const Vocabulary& v = *grammar_->vocab;
  // A token goes on from the configuration the one before reached after their common prefix
  // (lists in byte order share long ones): decide_configs_[j] is the configuration after j bytes
  // of the previous token, for j < alive (after `alive` bytes it died; alive = its length + 1
  // when it did not).
  if (decide_configs_.size() < static_cast<size_t>(v.max_token_length()) + 1) {
    decide_configs_.resize(static_cast<size_t>(v.max_token_length()) + 1);
  }
  decide_configs_[0] = config;
  std::string_view previous;
  size_t alive = 1;
  for (int32_t k = 0; k < n; ++k) {
    const int32_t id = ids[k];
    const std::string_view bytes = bytes_of(k);
    size_t common = 0;
    const size_t most = std::min(bytes.size(), previous.size());
    while (common < most && bytes[common] == previous[common]) ++common;
    bool allowed = false;  // (a shared prefix that died kills this token too)
    if (common < alive) {
      size_t j = common;
      int32_t c = decide_configs_[j];
      while (j < bytes.size()) {
        c = parser_->Next(c, static_cast<uint8_t>(bytes[j]));
        ++j;
        if (c == Parser::kDead) break;
        decide_configs_[j] = c;
      }
      alive = c == Parser::kDead ? j : j + 1;
      allowed = c != Parser::kDead;
    }
    previous = bytes;
    if (allowed) {
      words[id >> 5] |= 1u << (id & 31);
    } else {
      words[id >> 5] &= ~(1u << (id & 31));
    }
  }
  walk_nodes_ += n;
}

// Sets exactly the plain tokens of at most `chars` characters in `words` (all of it), by
// copying the plain mask and clearing the longer ones or by setting the shorter ones,
// whichever touches fewer tokens.
void Matcher::SetPlainTokensUpTo(int32_t chars, uint32_t* words) {
  const Vocabulary& v = *grammar_->vocab;
  const size_t n_words = static_cast<size_t>(v.mask_words());
  const std::vector<int32_t>& plain = v.plain_by_chars();
  const int32_t fits = v.plain_chars_begin(std::min(chars, v.max_plain_chars()) + 1);
  if (2 * fits >= static_cast<int32_t>(plain.size())) {
    std::memcpy(words, v.plain_mask(), n_words * sizeof(uint32_t));
    ClearBits(plain.data(), fits, static_cast<int32_t>(plain.size()), words);
  } else {
    std::memset(words, 0, n_words * sizeof(uint32_t));
    SetBits(plain.data(), 0, fits, words);
  }
  walk_nodes_ += static_cast<int64_t>(plain.size()) / 16;  // bits cost like nodes, a word at a time
}

// A position where every plain character but a few ASCII ones (the exceptions) leads to one
// configuration that starts a plain loop or chain: a JSON key's start or a prefix of listed
// keys, where other keys are allowed too (the exceptions continue listed keys). Tokens are
// decided as in a chain one position longer, except those starting with an exception, whose
// subtrees are walked from `config` (in step with the successor, or in clearing mode). False
// (nothing written) when that does not apply or would walk too much of the vocabulary.
bool Matcher::PlainStepWithExceptions(int32_t config, uint32_t* words) {
  const Vocabulary& v = *grammar_->vocab;
  const uint64_t* live = parser_->LiveBytes(config);
  if (!HasAllPlainAscii(live)) return false;
  const Parser::StepSet step = parser_->Steps(config, true);
  if (step.successor == Parser::kDead || !AllowMissingLeads(step.bytes)) return false;
  const uint64_t except[2] = {kPlainBits0 & ~step.bytes[0], kPlainBits1 & ~step.bytes[1]};
  if (4 * v.tokens_with_first_byte_in(except, 2) > v.num_text_tokens() || !PlainChain(step.successor)) return false;
  chain_shift_ = 1;
  SetPlainTokensUpTo(chain_len_ + 1, words);
  WalkSuffixes(words, true);
  // Every token now stands as if its first character led to the successor. Where the
  // successor loops on an exception byte (a listed key's next character; a key's string tail),
  // that is as the successor allows the byte's tokens, and the position goes apart from it
  // only along the listed keys' prefixes: walked in step with it, down only where they differ.
  const size_t n_words = static_cast<size_t>(v.mask_words());
  for (int q = 0; q < 2; ++q) {
    for (uint64_t w = except[q]; w != 0; w &= w - 1) {
      const auto first = static_cast<uint8_t>(64 * q + __builtin_ctzll(w));
      const int32_t root = v.trie_root_child(first);
      if (root < 0) continue;
      if (parser_->Next(step.successor, first) == step.successor && DiffWalkSubtree(root, step.successor, words)) continue;
      // Apart on much of the subtree: most of it is plain text the key's configuration keeps
      // viable, so it is set whole (word by word where the byte's mask is kept) and what dies
      // is cleared (a clearing walk skips the plain subtrees unseen).
      if (const uint32_t* m = v.first_byte_mask(first)) {
        Or(words, m, n_words);
        walk_nodes_ += static_cast<int64_t>(n_words) / 16;
      } else {
        walk_nodes_ += SetSubtreeBits(v, root, words);
      }
      WalkSubtree<true>(root, v.trie_nodes()[root].subtree_end, config, words);
    }
  }
  return true;
}

bool Matcher::PlainChain(int32_t config, uint64_t* except) {
  const Vocabulary& v = *grammar_->vocab;
  if (v.max_plain_chars() >= Vocabulary::kSuffixBucketCap) return false;  // a bucket of mixed counts
  // Followed as far as any token's plain part reaches (plain capacity is only a lower bound:
  // a maxLength string split into rules for its powers of two has capacity 1 at its start),
  // or to the first configuration where no plain character is viable. Multi-byte characters
  // are checked only as far as tokens hold them (their step sets cost far more).
  chain_.assign(1, config);
  chain_len_ = v.max_plain_chars();
  for (int32_t m = 1; m <= v.max_plain_chars(); ++m) {
    const int32_t at = chain_.back();
    const uint64_t* live = parser_->LiveBytes(at);
    if (!HasSomePlain(live)) {
      chain_len_ = m - 1;
      break;
    }
    if (m > v.max_suffix_prefix_chars() && parser_->plain_capacity(config) >= v.max_plain_chars()) {
      // Past the suffix trie's longest prefix a position matters only for being viable, which
      // the capacity guarantees for every plain token: chain_ holds every bucket's position.
      break;
    }
    int32_t next = Parser::kDead;
    if (m > 1 && at == chain_[m - 2]) {
      // A loop (a key's string tail after its last listed prefix): the same step from here on.
      chain_.resize(static_cast<size_t>(v.max_plain_chars()) + 1, at);
      break;
    }
    if (m <= v.multibyte_plain_reach()) {
      const Parser::StepSet step = parser_->Steps(at, true);
      if (HasAllPlainAscii(step.bytes) && AllowMissingLeads(step.bytes)) {
        next = step.successor;
      } else if (except != nullptr && MostPlainAscii(step.bytes) && AllowMissingLeads(step.bytes)) {
        next = step.successor;
        except[0] |= kPlainBits0 & ~step.bytes[0];
        except[1] |= kPlainBits1 & ~step.bytes[1];
      }
    } else if (except == nullptr) {
      next = parser_->PlainAsciiSuccessor(at);
    } else {
      const Parser::StepSet step = parser_->Steps(at, false);
      if (MostPlainAscii(step.bytes)) {
        next = step.successor;
        except[0] |= kPlainBits0 & ~step.bytes[0];
        except[1] |= kPlainBits1 & ~step.bytes[1];
      }
    }
    if (next == Parser::kDead) return false;
    chain_.push_back(next);
  }
  return true;
}

// The walk of SuffixNode records [begin, end) (a suffix trie's bucket, or the rest trie): a node
// of depth d reads its byte from walk_config_[d - 1], set for the depth above `begin`'s; dead
// nodes skip their subtrees.
void Matcher::WalkSuffixRecords(const Vocabulary::SuffixNode* node, const int32_t* toks, int32_t begin, int32_t end,
                                uint32_t* words) {
  Parser& parser = *parser_;
  for (int32_t i = begin; i < end; ++walk_nodes_) {
    const Vocabulary::SuffixNode& at = node[i];
    const int32_t d = at.depth;
    if (at.subtree_end == i + 1) {  // a leaf: its viability only (Parser::ViableInRow)
      if (parser.ViableInRow(walk_row_[d - 1], walk_config_[d - 1], at.byte)) {
        SetBits(toks, at.token_begin, node[i + 1].token_begin, words);
      }
      ++i;
      continue;
    }
    const int32_t c = parser.NextInRow(walk_row_[d - 1], walk_config_[d - 1], at.byte);
    if (c == Parser::kDead) {
      i = at.subtree_end;
      continue;
    }
    SetBits(toks, at.token_begin, node[i + 1].token_begin, words);
    walk_config_[d] = c;
    walk_row_[d] = parser.Row(c);
    ++i;
  }
}

// Sets the bits of the non-plain tokens the walk's configuration allows: a token's plain
// prefix leads back to walk_config_[0] (a plain loop) or down the chain, so the token is
// allowed iff its suffix is from there. The suffix trie's first level buckets tokens by their
// prefix's characters; below a bucket, its suffixes are walked like the vocabulary's trie.
void Matcher::WalkSuffixes(uint32_t* words, bool chained) {
  const Vocabulary& v = *grammar_->vocab;
  const Vocabulary::SuffixNode* node = v.suffix_nodes();
  const int32_t* toks = v.suffix_tokens().data();
  for (int32_t i = 0, n = v.suffix_size(); i < n; i = node[i].subtree_end) {
    ++walk_nodes_;
    const int32_t k = node[i].byte - chain_shift_;  // plain characters from the chain's head
    if (chained && k > chain_len_) continue;
    // (k is at most the longest suffix prefix, which PlainChain always follows to.)
    walk_config_[1] = !chained || k < 0 ? walk_config_[0] : chain_.at(static_cast<size_t>(k));
    walk_row_[1] = parser_->Row(walk_config_[1]);
    WalkSuffixRecords(node, toks, i + 1, node[i].subtree_end, words);
  }
}

void Matcher::RestWalk(int32_t config, uint32_t* words) {
  const Vocabulary& v = *grammar_->vocab;
  std::memcpy(words, v.plain_mask(), static_cast<size_t>(v.mask_words()) * sizeof(uint32_t));
  walk_nodes_ += v.mask_words() / 16;  // bits cost like nodes, a word at a time
  WalkRestTrie(config, words);
}

void Matcher::WalkRestTrie(int32_t config, uint32_t* words) {
  const Vocabulary& v = *grammar_->vocab;
  walk_config_[0] = config;
  walk_row_[0] = parser_->Row(config);
  WalkSuffixRecords(v.rest_nodes(), v.rest_tokens().data(), 0, v.rest_size(), words);
}

bool Matcher::FirstCharWalk(int32_t config, uint32_t* words) {
  const Vocabulary& v = *grammar_->vocab;
  Parser& parser = *parser_;
  const uint64_t* live = parser.LiveBytes(config);
  if (!HasAllPlainAscii(live)) return false;
  const int32_t next = parser.PlainAsciiSuccessor(config);
  if (next == Parser::kDead || next == config) return false;
  // Worth it where the next configuration's bytes lead on from few first characters: a walk
  // visits every first character's node (most of a large vocabulary's first level, and the
  // multi-byte characters' nodes under it).
  const uint64_t* reads = parser.LiveBytes(next);
  int64_t below = 0;
  for (int q = 0; q < 4; ++q) {
    for (uint64_t w = reads[q]; w != 0; w &= w - 1) {
      below += v.num_after_first_char(static_cast<uint8_t>(64 * q + __builtin_ctzll(w)));
    }
  }
  constexpr int64_t kFewerShare = 4;
  if (kFewerShare * below > v.first_char_nodes()) return false;
  // Every plain ASCII character leads there, and the characters of most lead bytes; the few
  // others (a pattern's `.` reads neither U+2028 nor U+2029) are *odd leads*, whose subtrees
  // are walked from `config` (while they are small).
  const Parser::StepSet step = parser.Steps(config, true);
  if (step.successor != next || !HasAllPlainAscii(step.bytes)) return false;
  const uint64_t odd = kPlainLeadBits3 & ~step.bytes[3];
  constexpr int kFewOddLeads = 4;
  int64_t odd_tokens = 0;
  for (uint64_t w = odd; w != 0; w &= w - 1) {
    odd_tokens += v.tokens_with_first_byte(static_cast<uint8_t>(0xC0 + __builtin_ctzll(w)));
  }
  if (__builtin_popcountll(odd) > kFewOddLeads || 8 * odd_tokens > v.num_text_tokens()) return false;
  const Vocabulary::TrieNode* node = v.trie_nodes();
  auto under_odd_lead = [&](int32_t i) {
    for (uint64_t w = odd; w != 0; w &= w - 1) {
      const int32_t root = v.trie_root_child(static_cast<uint8_t>(0xC0 + __builtin_ctzll(w)));
      if (root >= 0 && root <= i && i < node[root].subtree_end) return true;
    }
    return false;
  };
  const size_t n_words = static_cast<size_t>(v.mask_words());
  // Tokens of one plain character (or a valid part of one): `next`, or on the way to it.
  std::memset(words, 0, n_words * sizeof(uint32_t));
  const std::vector<int32_t>& plain = v.plain_by_chars();
  if (v.max_plain_chars() >= 1) SetBits(plain.data(), v.plain_chars_begin(1), v.plain_chars_begin(2), words);
  walk_nodes_ += static_cast<int64_t>(n_words) / 16;  // bits cost like nodes, a word at a time
  // The odd leads' subtrees, cleared of the one-character tokens set above, and the first bytes
  // that start no plain character ('"', '\', control and continuation bytes): walked from
  // `config` where it reads them.
  for (uint64_t w = odd; w != 0; w &= w - 1) {
    const int32_t root = v.trie_root_child(static_cast<uint8_t>(0xC0 + __builtin_ctzll(w)));
    if (root >= 0) walk_nodes_ += ClearSubtreeBits(v, root, words);
  }
  const uint64_t walked[4] = {live[0] & ~kPlainBits0, live[1] & ~kPlainBits1, live[2],
                              live[3] & (~kPlainLeadBits3 | odd)};
  for (int q = 0; q < 4; ++q) {
    for (uint64_t w = walked[q]; w != 0; w &= w - 1) {
      const int32_t root = v.trie_root_child(static_cast<uint8_t>(64 * q + __builtin_ctzll(w)));
      if (root >= 0) WalkSubtree<false>(root, node[root].subtree_end, config, words);
    }
  }
  const std::vector<int32_t>& bad = v.bad_first_char_tokens();
  DecideTokens(config, bad.data(), static_cast<int32_t>(bad.size()), words);
  // Below each first character (but an odd lead's), the children on the bytes `next` reads.
  const std::atomic<int32_t>* row = parser.Row(next);
  const int32_t capacity = parser.plain_capacity(next);
  for (int q = 0; q < 4; ++q) {
    for (uint64_t w = reads[q]; w != 0; w &= w - 1) {
      const auto y = static_cast<uint8_t>(64 * q + __builtin_ctzll(w));
      const int32_t* nodes = v.after_first_char(y);
      for (int32_t k = 0, n = v.num_after_first_char(y); k < n; ++k) {
        const int32_t at = nodes[k];
        if (odd != 0 && under_odd_lead(at)) continue;
        const int32_t top = node[at].depth - 1;
        walk_config_[top] = next;
        walk_row_[top] = row;
        walk_capacity_[top] = capacity;
        WalkSubtree<false>(at, node[at].subtree_end, next, words);
      }
    }
  }
  return true;
}

bool Matcher::CapacityWalk(int32_t config, uint32_t* words) {
  const Vocabulary& v = *grammar_->vocab;
  int32_t capacity = walk_capacity_[0];
  const int32_t longest = v.max_plain_chars();
  if (capacity <= 0) {
    // No capacity where a pattern's `.` leaves out U+2028 and U+2029: the capacity for plain text
    // without the characters of those lead bytes, whose tokens are then decided one by one.
    if (32 * v.num_tokens_with_leads(Automaton::kNearLeads) > v.num_text_tokens()) return false;
    capacity = NearCapacity(config, longest);
    if (capacity <= 0) return false;
    except_leads_ = Automaton::kNearLeads;
  }
  if (capacity >= longest) {
    // (Only a near capacity gets here: ShortcutWalk takes a plain one this large.)
    RestWalk(config, words);
    DecideLeadTokens(config, words);
    return true;
  }
  // The tokens decided by their bytes (plain ones of capacity + 1 .. reach + 1 characters: the
  // last may be a partial character after `reach` whole ones) are at most a quarter of the
  // vocabulary: each costs a transition per byte, where a walk would visit nearly every trie
  // path longer than the capacity (most of the trie).
  constexpr int64_t kDecideShare = 4;
  const int32_t first = v.plain_chars_begin(capacity + 1);
  auto few_up_to = [&](int32_t chars) {
    return kDecideShare * static_cast<int64_t>(v.plain_chars_begin(chars + 1) - first) <= v.num_text_tokens();
  };
  // Past `limit` characters no plain text is viable (PlainReach), or there is no plain token
  // (limit + 1 == longest: every token longer than the capacity is decided by its bytes).
  int32_t limit = capacity;
  while (limit + 1 < longest && few_up_to(limit + 2)) ++limit;
  int32_t reach = limit;
  if (!few_up_to(capacity + 1) || (limit + 1 < longest && !PlainReach(config, limit, &reach))) {
    except_leads_ = 0;
    return false;
  }
  SetPlainTokensUpTo(capacity, words);
  const int32_t last = v.plain_chars_begin(std::min(reach + 1, longest) + 1);
  if (last > first) DecidePlainTokens(config, first, last, words);
  WalkRestTrie(config, words);
  DecideLeadTokens(config, words);
  return true;
}

int32_t Matcher::NearCapacity(int32_t config, int32_t limit) {
  Parser& parser = *parser_;
  constexpr size_t kMaxLevel = 32;  // configurations per character count
  constexpr uint64_t kLeads = kPlainLeadBits3 & ~Automaton::kNearLeads;
  std::vector<int32_t>& level = reach_level_;
  std::vector<int32_t>& next = reach_next_;
  level.assign(1, config);
  auto add = [&next](int32_t c) {
    if (std::find(next.begin(), next.end(), c) == next.end()) next.push_back(c);
  };
  // Every configuration after `chars` characters reads each plain ASCII byte and each character
  // of the other plain lead bytes (those step to the step successor): one more is viable.
  for (int32_t chars = 0; chars < limit; ++chars) {
    next.clear();
    for (int32_t c : level) {
      const uint64_t* live = parser.LiveBytes(c);
      if (!HasAllPlainAscii(live) || (live[3] & kLeads) != kLeads) return chars;
      const Parser::StepSet step = parser.Steps(c, true);
      if (step.successor == Parser::kDead || (step.bytes[3] & kLeads) != kLeads) return chars;
      for (int q = 0; q < 2; ++q) {
        for (uint64_t w = live[q] & (q == 0 ? kPlainBits0 : kPlainBits1); w != 0; w &= w - 1) {
          const int32_t n = parser.Next(c, static_cast<uint8_t>(64 * q + __builtin_ctzll(w)));
          if (n == Parser::kDead) return chars;
          add(n);
        }
      }
      add(step.successor);
      if (next.size() > kMaxLevel) return chars;
    }
    // Each level is a function of the one before (as a set): once one repeats, so does every
    // later one, and each passes as this one did (a searched suffix's states, all reached).
    std::sort(next.begin(), next.end());
    if (next == level) return limit;
    level.swap(next);
  }
  return limit;
}

bool Matcher::PlainReach(int32_t config, int32_t limit, int32_t* reach) {
  Parser& parser = *parser_;
  constexpr size_t kMaxLevel = 32;  // configurations per character count
  std::vector<int32_t>& level = reach_level_;
  std::vector<int32_t>& next = reach_next_;
  level.assign(1, config);
  auto add = [&next](int32_t c) {
    if (c != Parser::kDead && std::find(next.begin(), next.end(), c) == next.end()) next.push_back(c);
  };
  for (int32_t chars = 0; chars <= limit; ++chars) {
    next.clear();
    for (int32_t c : level) {
      const uint64_t* live = parser.LiveBytes(c);
      for (int q = 0; q < 2; ++q) {
        for (uint64_t w = live[q] & (q == 0 ? kPlainBits0 : kPlainBits1); w != 0; w &= w - 1) {
          add(parser.Next(c, static_cast<uint8_t>(64 * q + __builtin_ctzll(w))));
        }
      }
      // (The characters of except_leads_' lead bytes are left to DecideLeadTokens.)
      if ((live[3] & kPlainLeadBits3 & ~except_leads_) != 0) {
        const Parser::StepSet step = parser.Steps(c, true);
        if ((live[3] & kPlainLeadBits3 & ~except_leads_ & ~step.bytes[3]) != 0) return false;
        add(step.successor);
      }
      if (next.size() > kMaxLevel) return false;
    }
    if (next.empty()) {
      *reach = chars;
      return true;
    }
    // A level that repeats (as a set) repeats for ever: plain text of any length is viable.
    std::sort(next.begin(), next.end());
    if (next == level) return false;
    level.swap(next);
  }
  return false;
}

// An upper bound on the tokens `config` may allow, from their first two bytes: tokens whose
// first byte no head consumes are out, and for frequent first bytes (a leading space starts
// half of many vocabularies) so are those whose second byte the next configuration cannot
// consume. The depth-1 transitions it takes are the walk's own.
int64_t Matcher::ReachableEstimate(int32_t config) {
  const Vocabulary& v = *grammar_->vocab;
  const uint64_t* live = parser_->LiveBytes(config);
  const int64_t frequent = v.num_text_tokens() / 64;
  int64_t reachable = 0;
  for (int q = 0; q < 4; ++q) {
    for (uint64_t w = live[q]; w != 0; w &= w - 1) {
      const auto b = static_cast<uint8_t>(64 * q + __builtin_ctzll(w));
      const int32_t count = v.tokens_with_first_byte(b);
      reachable += count <= frequent ? count : ReachableWithFirstByte(config, b);
    }
  }
  return reachable;
}

// An upper bound on the tokens starting with byte b that `config` may allow: those whose
// second byte the configuration after b can consume (and the one-byte tokens b).
int64_t Matcher::ReachableWithFirstByte(int32_t config, uint8_t b) {
  const Vocabulary& v = *grammar_->vocab;
  const int32_t next = parser_->Next(config, b);
  if (next == Parser::kDead) return 0;
  int64_t pairs = 1;
  const uint64_t* live = parser_->LiveBytes(next);
  for (int q = 0; q < 4; ++q) {
    for (uint64_t w = live[q]; w != 0; w &= w - 1) {
      pairs += v.tokens_with_first_bytes(b, static_cast<uint8_t>(64 * q + __builtin_ctzll(w)));
    }
  }
  return pairs;
}

// Walks trie nodes [begin, end): whole subtrees whose parent's configuration is in
// walk_config_ (see Walk).
template <bool kClear>
void Matcher::WalkSubtree(int32_t begin, int32_t end, int32_t config, uint32_t* words) {
  const Vocabulary& v = *grammar_->vocab;
  const Vocabulary::TrieNode* node = v.trie_nodes();
  constexpr int32_t kShortcutMinNodes = 16;
  Parser& parser = *parser_;
  // Bytes no edge reads: their subtrees are dead; in clearing mode they are skipped unseen
  // only when the walk started from the alphabet's mask (so their tokens are already clear).
  const uint64_t* alphabet = parser.automaton().alphabet();
  const bool skip_unread = !kClear || clear_from_alphabet_;
  const bool full_alphabet = !skip_unread || parser.automaton().full_alphabet();
  // walk_config_[top ..] hold this walk's path (those above `begin` were set by the caller).
  const int32_t top = begin < end ? node[begin].depth - 1 : 0;
  // The node's byte may end a multi-byte character read from a configuration k bytes up
  // (k = 2..4); if that configuration stepped along its chain, the subtree may stay on it.
  auto after_character_step = [&](int32_t c, int32_t d, uint8_t byte) {
    if (byte < 0x80 || byte >= 0xC0) return false;
    for (int32_t k = 2; k <= 4 && d - k >= top; ++k) {
      if (c == StepSuccessor(walk_config_[d - k])) return true;
    }
    return false;
  };
  for (int32_t i = begin; i < end; ++walk_nodes_) {
    if (walk_nodes_ > walk_budget_) return;  // Walk gives up on this walk (see there)
    const Vocabulary::TrieNode& at = node[i];
    // The next node in trie order is usually the next one visited, and its summary (below) is
    // a scattered record whose load a subtree's shortcut waits on: asked for one node ahead.
    if (i + 1 < end) {
      if (const uint64_t* next_below = v.trie_descendant_bytes(i + 1)) __builtin_prefetch(next_below);
    }
    const int32_t d = at.depth;
    const int32_t parent = walk_config_[d - 1];
    if (skip_unread && !(alphabet[at.byte >> 6] >> (at.byte & 63) & 1)) {
      // No edge reads this byte: dead, and (in clearing mode) never in the starting mask.
      i = at.subtree_end;
      continue;
    }
    // The parent keeps any plain text of this length viable: a plain byte whose subtree is
    // plain too is allowed whole, without even the transition into it (children of a key
    // prefix, of a string body, whose tokens never close the text).
    if (PlainWithin(v, at, i, walk_capacity_[d - 1])) {
      if (!kClear) walk_nodes_ += SetSubtreeBits(v, i, words);  // the bits cost like nodes
      i = at.subtree_end;
      continue;
    }
    // A leaf (a token no other extends) needs its viability only, not the configuration
    // after it: no transition is computed for it (Parser::ViableInRow).
    if (at.inner < 0) {
      if (!parser.ViableInRow(walk_row_[d - 1], parent, at.byte)) {
        if (kClear) walk_nodes_ += ClearSubtreeBits(v, i, words);  // the bits cost like nodes
      } else if (!kClear) {
        SetNodeBits(v, at, i, words);
      }
      ++i;
      continue;
    }
    const int32_t c = parser.NextInRow(walk_row_[d - 1], parent, at.byte);
    if (c == Parser::kDead) {
      if (kClear) walk_nodes_ += ClearSubtreeBits(v, i, words);  // the bits cost like nodes
      i = at.subtree_end;
      continue;
    }
    // The shortcuts below read the node's summary (a second, scattered record: first visits
    // of a trie region are bound by memory latency), so it is read only where one may apply.
    // A head that keeps any plain text of this length viable (a universal one: any length)
    // allows a whole subtree of plain bytes (a path of h bytes holds at most h characters).
    const int32_t capacity = parser.plain_capacity(c);
    // The chain shortcut is tried where it is likely to pay: below ASCII bytes only (its check
    // stops at the first byte that leaves the chain, having asked for no more transitions than
    // the bytes below need); else where the configuration came back to itself (the node's
    // byte loops, or a whole character led back to the walk's start), or the node's byte was a
    // step of its parent's chain (bounded repetitions); and where the subtree is big enough to
    // be worth a few hundred transitions for the step sets. Not for the
    // positions of a long bounded text (capacity at least the longest chain followed, and
    // finite): the capacity check covers their plain subtrees, and following their chain for
    // the rest costs thousands of transitions for nothing.
    const bool chain_candidate = (capacity < kMaxChain || capacity >= Automaton::kUnbounded) &&
                                 at.subtree_end - i >= kShortcutMinNodes;
    if (capacity > 0 || chain_candidate) {
      const uint64_t* below = v.trie_descendant_bytes(i);
      // In clearing mode over a partial alphabet, tokens with a byte the grammar never reads
      // are already clear: the shortcuts need only hold for the bytes it reads.
      uint64_t readable[4];
      if (kClear && !full_alphabet) {
        for (int q = 0; q < 4; ++q) readable[q] = below[q] & alphabet[q];
        below = readable;
      }
      if ((capacity > 0 && v.trie_height(i) <= capacity && PlainOnly(below) && Utf8Below(v, i, below)) ||
          (chain_candidate &&
           ((below[2] | below[3]) == 0 || c == parent || c == config ||
            (d == 1 ? c == RootSuccessor() : c == StepSuccessor(parent)) || after_character_step(c, d, at.byte)) &&
           SubtreeAllowed(c, i, below))) {
        if (!kClear) walk_nodes_ += SetSubtreeBits(v, i, words);  // the bits cost like nodes
        i = at.subtree_end;
        continue;
      }
    }
    walk_config_[d] = c;
    walk_row_[d] = parser.Row(c);
    walk_capacity_[d] = capacity;
    if (!kClear) {
      SetNodeBits(v, at, i, words);
      // A wide node whose configuration can follow few of its children (a move's first letter
      // in a chess grammar, a leading space before a JSON value): visit only those. The
      // nesting is bounded by kMaxSparseDepth, whatever the vocabulary's token lengths.
      if (d < kMaxSparseDepth && (at.flags & Vocabulary::kWideNode)) {
        if (const uint64_t* kids = v.trie_child_bytes(i)) {
          const uint64_t* live = parser.LiveBytes(c);
          uint64_t follow[4];
          int32_t n_follow = 0;
          for (int q = 0; q < 4; ++q) {
            follow[q] = kids[q] & live[q];
            n_follow += __builtin_popcountll(follow[q]);
          }
          if (2 * n_follow < v.trie_num_children(i)) {
            // The children's records are scattered (a subtree apart each): ask for all of
            // them before walking the first, so that their cache misses overlap.
            int32_t follow_nodes[256];
            int32_t n = 0;
            for (int q = 0; q < 4; ++q) {
              for (uint64_t w = follow[q]; w != 0; w &= w - 1) {
                const int32_t j = v.trie_child(i, static_cast<uint8_t>(64 * q + __builtin_ctzll(w)));
                __builtin_prefetch(&node[j]);
                follow_nodes[n++] = j;
              }
            }
            for (int32_t k = 0; k < n; ++k) {
              WalkSubtree<false>(follow_nodes[k], node[follow_nodes[k]].subtree_end, config, words);
            }
            i = at.subtree_end;
            continue;
          }
        }
      }
    }
    ++i;
  }
}

// True when every token below trie node i is allowed from configuration `c` (the
// configuration after node i's byte): each byte below is, at its depth, in the step set of
// the configuration the chain of step successors has reached by then. A path of h bytes takes
// at most h steps, so the first height(i) positions of the chain suffice; a loop (successor
// == itself) ends the chain early. A position whose step set is not known yet is first asked
// only for the classes of the ASCII bytes below, and the check stops at the first that fails:
// a whole step set costs a transition per live class (each a new configuration: a URI
// position's ':', '/', '?', '#', '@' and '"' all lead elsewhere), which a subtree that leaves
// the chain never needs.
bool Matcher::SubtreeAllowed(int32_t c, int32_t i, const uint64_t* below) {
  const Vocabulary& v = *grammar_->vocab;
  Parser& parser = *parser_;
  const Automaton& automaton = parser.automaton();
  const bool ascii_only = (below[2] | below[3]) == 0;
  if (!ascii_only && !v.trie_utf8_below(i)) return false;
  // One byte per class below (a class is a run of bytes, so a class change in byte order
  // starts a new one): every byte of a class has its transition. Listed when first needed.
  uint8_t probe[128];
  int32_t n_probes = -1;
  const int32_t height = v.trie_height(i);
  int32_t at = c;
  for (int32_t j = 0; j < height; ++j) {
    if (j >= kMaxChain) return false;
    // (Continuation bytes are read within their lead's character: never live on their own.)
    const uint64_t* live = parser.LiveBytes(at);
    if ((below[0] & ~live[0]) | (below[1] & ~live[1]) | (below[3] & ~live[3])) return false;
    int32_t next = Parser::kUnknown;
    if (!parser.StepsReady(at, !ascii_only)) {
      if (n_probes < 0) {
        n_probes = 0;
        for (int q = 0, last = -1; q < 2; ++q) {
          for (uint64_t w = below[q]; w != 0; w &= w - 1) {
            const auto b = static_cast<uint8_t>(64 * q + __builtin_ctzll(w));
            if (automaton.byte_class(b) != last) probe[n_probes++] = b, last = automaton.byte_class(b);
          }
        }
      }
      const std::atomic<int32_t>* row = parser.Row(at);
      for (int32_t k = 0; k < n_probes; ++k) {
        const int32_t to = parser.NextInRow(row, at, probe[k]);
        if (to == Parser::kDead || (next != Parser::kUnknown && to != next)) return false;
        next = to;
      }
    }
    if (next == Parser::kUnknown || !ascii_only) {
      const Parser::StepSet step = parser.Steps(at, !ascii_only);
      if ((below[0] & ~step.bytes[0]) | (below[1] & ~step.bytes[1]) | (below[3] & ~step.bytes[3])) return false;
      next = step.successor;
    }
    if (next == Parser::kDead) return false;
    if (next == at) return true;  // a loop: the same check from here on
    at = next;
  }
  return true;
}

bool Matcher::TryFillMaskFast(uint32_t* words) {
  const Vocabulary& v = *grammar_->vocab;
  walk_nodes_ = 0;
  const size_t n_words = static_cast<size_t>(v.mask_words());
  if (terminated()) {
    std::memset(words, 0, n_words * sizeof(uint32_t));
    for (int32_t id : v.eos_ids()) words[id >> 5] |= 1u << (id & 31);
    return true;
  }
  if (const uint32_t* cached = parser_->CachedMask(current())) {
    std::memcpy(words, cached, n_words * sizeof(uint32_t));
    return true;
  }
  return false;
}

void Matcher::FillMask(uint32_t* words) {
  if (TryFillMaskFast(words)) return;
  WithRoom([&] { FillMaskInStore(words); });
}

void Matcher::FillMaskInStore(uint32_t* words) {
  const Vocabulary& v = *grammar_->vocab;
  const size_t n_words = static_cast<size_t>(v.mask_words());
  const int32_t config = current();
  // Its stand-in's mask is the same (Parser::StandIn); it is walked, and memoized, instead.
  const int32_t walked = stand_ins_.load(std::memory_order_relaxed) ? parser_->StandIn(config, v.max_token_length())
                                                                     : config;
  if (walked != config) {
    if (const uint32_t* known = parser_->CachedMask(walked)) {
      std::copy(known, known + n_words, words);
      walk_nodes_ = 0;
      return;
    }
  }
  const auto start = std::chrono::steady_clock::now();
  Walk(walked, words);
  if (parser_->has_token_heads(config)) {
    for (int32_t set : parser_->TokenSets(config)) {
      const uint32_t* m = grammar_->token_masks[static_cast<size_t>(set)].data();
      for (size_t w = 0; w < n_words; ++w) words[w] |= m[w];
    }
  }
  if (parser_->accepting(config)) {
    for (int32_t id : v.eos_ids()) words[id >> 5] |= 1u << (id & 31);
  }
  // A walk that cost more than a few mask copies would (a copy moves several words per
  // nanosecond; the bar is 2 ns per word) is worth memoizing at once; a cheap one only when its
  // state recurs. Nodes visited undercount first visits (transitions, step sets), hence the
  // clock as well.
  const int64_t elapsed_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
  const bool expensive =
      walk_nodes_ > static_cast<int64_t>(n_words / 4) || elapsed_ns > 2 * static_cast<int64_t>(n_words);
  parser_->StoreMask(walked, words, n_words, expensive);
}

std::shared_ptr<CompiledGrammar> AssembleGrammar(std::shared_ptr<const Vocabulary> vocab,
                                                 std::shared_ptr<const Automaton> automaton, const CoreLimits& limits) {
  auto g = std::make_shared<CompiledGrammar>();
  g->vocab = std::move(vocab);
  g->limits = limits;
  g->automaton = std::move(automaton);
  g->token_masks = TokenSetMasks(*g->vocab, *g->automaton);
  g->class_trie = ClassTrieFor(*g->vocab, *g->automaton);
  g->character_chains = CharacterChainsFor(*g->vocab, *g->automaton);
  g->parser = std::make_shared<Parser>(g->automaton, limits);
  return g;
}

std::vector<std::vector<uint32_t>> TokenSetMasks(const Vocabulary& vocab, const Automaton& automaton) {
  std::vector<std::vector<uint32_t>> masks;
  const size_t n_words = static_cast<size_t>(vocab.mask_words());
  for (const TokenSet& set : automaton.token_sets()) {
    for (int32_t id : set.ids) {
      if (id >= vocab.width() || (!vocab.is_text(id) && !vocab.is_special(id))) {
        throw CoreError::Grammar("unknown-token", "token id " + std::to_string(id) + " is not in the vocabulary");
      }
      if (!set.negated && vocab.is_eos(id)) {
        throw CoreError::Grammar("eos-token", "token id " + std::to_string(id) +
                                                  " is an EOS id: the grammar's end allows it, no terminal may read it");
      }
    }
    std::vector<uint32_t> m(n_words, 0);
    if (set.negated) {
      for (int32_t id = 0; id < vocab.width(); ++id) {
        if ((vocab.is_text(id) || vocab.is_special(id)) && !vocab.is_eos(id) && set.Contains(id)) {
          m[static_cast<size_t>(id) >> 5] |= 1u << (id & 31);
        }
      }
    } else {
      for (int32_t id : set.ids) m[static_cast<size_t>(id) >> 5] |= 1u << (id & 31);
    }
    masks.push_back(std::move(m));
  }
  return masks;
}

}  // namespace logitgate
