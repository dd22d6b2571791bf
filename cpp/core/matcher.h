// Matcher: per-request state over one compiled grammar: the parser configuration after each
// accepted step (for rollback), token masks, forced bytes. The heavy state (configurations,
// transitions, memoized masks) lives in the grammar's shared Parser, so matchers are cheap
// to create and fork, and what one request computes serves the next. When that store is full
// the matcher moves its history to the grammar's fresh store and retries the step (see
// SharedParser, WithRoom): max_configurations then fails a request only when a fresh store
// cannot hold its own history and one more step.
//
// Mask semantics: token t is allowed iff its whole byte string keeps the output a viable
// prefix (the configuration after it is not dead); EOS ids iff the output is a complete
// sentence; ids without bytes never; special ids only where a token terminal of the grammar
// reads them (Automaton::token_set), never through text. A token terminal reads a whole token
// (text or special, never EOS, which is the grammar's end): a text token is allowed when its
// bytes keep the output viable or a terminal reads its id (both ways are followed). After EOS
// is accepted only EOS is allowed.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "automaton.h"
#include "parser.h"
#include "stamp_set.h"
#include "vocabulary.h"

namespace logitgate {

struct CompiledGrammar {
  std::shared_ptr<const Vocabulary> vocab;
  std::shared_ptr<const Automaton> automaton;
  SharedParser parser;  // the store new matchers start on; internally synchronized
  CoreLimits limits;
  // Per token set of the automaton, the ids it allows (mask_words() words; TokenSetMasks).
  std::vector<std::vector<uint32_t>> token_masks;
  // The vocabulary's class trie for the automaton's coarse classes (ClassTrieFor), or nullptr.
  std::shared_ptr<const Vocabulary::ClassTrie> class_trie;
  // Per rule start state whose character step reads only some characters of a lead byte
  // (CharacterChainsFor); empty for most grammars.
  struct CharacterChain {
    const Automaton::CharacterStep* step;
    std::shared_ptr<const Vocabulary::CharSplit> split;
  };
  std::unordered_map<int32_t, CharacterChain> character_chains;
};

// The class trie a compiled grammar's walks may take (Matcher::ClassWalk): for an automaton of
// at least kClassTrieMinStates states (fewer: its walks are cheap, or shortcuts serve them) with
// coarse classes (Automaton::CoarseClasses), the vocabulary's class trie where it has at most a
// quarter of the token trie's nodes (a walk over more would save too little), else nullptr.
// Built at compile time: its classes cost a pass over the covered states, its trie one over the
// token trie, which a first mask would otherwise pay.
std::shared_ptr<const Vocabulary::ClassTrie> ClassTrieFor(const Vocabulary& vocab, const Automaton& automaton);
constexpr int32_t kClassTrieMinStates = 4096;
// For tests: 0 gives any automaton a class trie of any size. Process-wide; returns the previous
// value.
int32_t SetClassTrieMinStates(int32_t states);

// The character chains a compiled grammar's walks may take (Matcher::CharacterChainWalk): the
// rules that read one character of a class reading only some characters of a lead byte
// (Automaton::CharacterStep, Automaton::char_rule_at), called from at least
// kCharacterChainMinCalls states (the positions of a bounded repetition; a loop's one position is
// walked once and memoized), by their start state, each with the vocabulary's character split
// of that class. Built at compile time: a split costs a pass over the token trie, which a first
// mask would otherwise pay.
std::unordered_map<int32_t, CompiledGrammar::CharacterChain> CharacterChainsFor(const Vocabulary& vocab,
                                                                              const Automaton& automaton);
constexpr int32_t kCharacterChainMinCalls = 8;

// A compiled grammar around a built automaton: the token sets' masks (TokenSetMasks) and the
// class trie (ClassTrieFor) for this vocabulary, and a fresh parser store.
std::shared_ptr<CompiledGrammar> AssembleGrammar(std::shared_ptr<const Vocabulary> vocab,
                                                 std::shared_ptr<const Automaton> automaton, const CoreLimits& limits);

// The mask of each of the automaton's token sets over `vocab`: a set's ids, or (negated)
// every text and special id but those and the EOS ids. Throws CoreError (code unknown-token)
// for an id outside the vocabulary or without bytes, and (eos-token) for an EOS id named in a
// set: EOS ends the grammar, it is no terminal.
std::vector<std::vector<uint32_t>> TokenSetMasks(const Vocabulary& vocab, const Automaton& automaton);

class Matcher {
 public:
  explicit Matcher(std::shared_ptr<const CompiledGrammar> grammar);

  // Writes the allowed-token bitmask into `words` (mask_words() uint32 words, bit i%32 of
  // word i/32 = token i). One matcher is not thread-safe; distinct matchers (of the same
  // grammar too) may be used from different threads at once.
  void FillMask(uint32_t* words);
  // FillMask when it is only a copy (terminated, or the mask is memoized); false otherwise.
  // Callers use it to skip releasing the GIL for work that takes nanoseconds.
  bool TryFillMaskFast(uint32_t* words);
  bool Accept(int32_t token);
  bool AcceptBytes(const std::string& data);
  bool IsComplete() const { return terminated() || parser_->accepting(current()); }
  bool IsTerminated() const {
    return terminated() || (!parser_->has_heads(current()) && parser_->accepting(current()));
  }
  void Rollback(int64_t n);
  void Reset() { history_.resize(1); }
  std::string ForcedBytes(int64_t max_bytes);
  std::unique_ptr<Matcher> Fork() const { return std::make_unique<Matcher>(*this); }
  // The parser configuration after the last accepted step (budget.h reads it), and whether
  // EOS was accepted.
  int32_t configuration() const { return current(); }
  // The store configuration() lives in (it changes when a full store is replaced).
  const std::shared_ptr<Parser>& store() const { return store_; }
  bool eos_accepted() const { return terminated(); }
  // Steps accepted since the start (EOS included).
  int64_t num_accepted() const { return static_cast<int64_t>(history_.size()) - 1; }
  const CompiledGrammar& grammar() const { return *grammar_; }
  // Trie nodes a walk may visit before Walk computes a loop split instead (default
  // kSplitWalkBudget: about a root split's cost, which reads indexes instead of the trie:
  // 50-100 µs on a 128k vocabulary, cold, as a walk of a few hundred trie nodes). Process-wide;
  // returns the previous value. For tests (0: every configuration a split applies to computes it).
  static constexpr int64_t kSplitWalkBudget = 256;
  static int64_t SetSplitWalkBudget(int64_t nodes) { return split_walk_budget_.exchange(nodes); }
  // Whether walks may take RegionWalk (default true). Process-wide; returns the previous value.
  // For tests (the masks are the same either way).
  static bool SetRegionWalks(bool enabled) { return region_walks_.exchange(enabled); }
  // Whether a mask is taken from its configuration's stand-in (Parser::StandIn; default true).
  // Process-wide; returns the previous value. For tests (the masks are the same either way).
  static bool SetStandIns(bool enabled) { return stand_ins_.exchange(enabled); }
  // Trie nodes the last FillMask walked (bits set by subtree shortcuts count as nodes); 0 when
  // that fill was a copy. For profiling.
  int64_t last_walk_nodes() const { return walk_nodes_; }

 private:
  struct Step {
    int32_t config;
    bool terminated;
  };
  // Runs `step` (which reads the state afresh: configuration ids change with the store). When
  // the store is full, moves to the grammar's next store (SharedParser::Renew) and runs it
  // again; when other requests fill that one too, to a fresh store of its own, so the step
  // fails only if this request alone overflows a store.
  template <typename StepFn>
  auto WithRoom(StepFn&& step) -> decltype(step());
  // Moves history_ into `store`.
  void MoveTo(std::shared_ptr<Parser> store);
  // The steps WithRoom retries.
  void FillMaskInStore(uint32_t* words);
  std::string ForcedBytesInStore(int64_t max_bytes);
  int32_t current() const { return history_.back().config; }
  bool terminated() const { return history_.back().terminated; }
  // Fills `words` (all of it) with the text tokens allowed from `config`.
  void Walk(int32_t config, uint32_t* words);
  // Points slot 0 of the walk at `config` (its row and capacity; no shortcut state yet).
  void StartWalk(int32_t config);
  // Walk's shortcuts that need no trie walk (plain loops and chains, rest walks): true when
  // one served `config` (slot 0, StartWalk) and filled `words`; nothing written otherwise.
  bool ShortcutWalk(int32_t config, uint32_t* words);
  // A walk over the grammar's class trie (CompiledGrammar::class_trie) instead of the token
  // trie: one transition per class string, on a byte of each class, where the token trie walks
  // every token's bytes; the tokens holding the excluded byte decided by their bytes. Only from
  // a configuration whose heads and return states are all covered (Automaton::CoarseClasses,
  // Parser::StacksWithin). False where it does not apply (`words` untouched).
  bool ClassWalk(int32_t config, uint32_t* words);
  // A position of a chain that steps on the characters of a class reading only some
  // characters of a lead byte (`[\p{L} ]{1,200}`: CompiledGrammar::character_chains), where the
  // plain and split shortcuts do not apply and a trie walk pays a transition per position and
  // mid-character state: the tokens of members only, from the class's character split
  // (Vocabulary::char_split) by their counts; the exits decided by their bytes from the
  // chain's position where they leave the class. False where it does not apply (`words`
  // untouched).
  bool CharacterChainWalk(int32_t config, uint32_t* words);
  // True when the heads of a chain position (char_heads_) that read any byte but `step`'s
  // exits are all at one state, whose character step has `step`'s characters and exits: every
  // member then leads to one configuration, a token whose first non-member is no exit byte
  // dies, and so does any other multi-byte character.
  bool CharacterPosition(const Automaton::CharacterStep& step);
  // Its first two: PlainLoop and PlainLoopWithExceptions.
  bool LoopShortcutWalk(int32_t config, uint32_t* words);
  // A position that reads part of what its step successor reads and then goes on as it does
  // (the first character of `[^/]+`, which may not be the key's closing quote or a slash):
  // the successor's mask (memoized, or a plain loop's: LoopShortcutWalk) less the tokens of
  // the first bytes that die here, and those of the first bytes that lead elsewhere walked
  // against it (DiffWalkSubtree). NarrowedPlan decides whether that applies and pays;
  // NarrowedWalk (after it) writes all of `words`, or returns false (words undefined) when no
  // shortcut serves the successor.
  bool NarrowedPlan(int32_t config);
  bool NarrowedWalk(int32_t config, uint32_t* words);
  // The subtree of trie node `root` (depth 1), whose tokens `words` holds as `wider` allows
  // them: walked from walk_config_[0] and from `wider` in step, down only where the two
  // configurations differ (where they meet, `wider`'s decision stands). False, the subtree's
  // bits undefined, once that has visited a quarter of the subtree.
  bool DiffWalkSubtree(int32_t root, int32_t wider, uint32_t* words);
  // True when `a` and `b` allow the same byte strings of up to `depth` bytes and then lead to
  // the same configuration (the rest of a multi-byte character read from two positions of one
  // loop); pairs proven so far are kept in same_pairs_.
  bool SameContinuations(int32_t a, int32_t b, int depth);
  // True when `config` returns to itself on every plain character (Vocabulary::plain_mask).
  bool PlainLoop(int32_t config);
  // Free text with triggers: `config` returns to itself on every plain character but a few
  // rare ASCII ones (a trigger's first character, kept by Vocabulary::ascii_tokens), which it
  // reads elsewhere or not at all (a `[^/]` loop). Fills `words` as a plain loop would, then decides every token holding one of
  // those bytes by its bytes (before them its prefix kept `config`). False (nothing written)
  // when that does not apply or would decide too many tokens one by one.
  bool PlainLoopWithExceptions(int32_t config, uint32_t* words);
  // True when every plain character leads from `config` through a chain of configurations
  // (chain_[m]: after m characters) until none is viable (after chain_len_ characters) or as
  // far as any token's plain part reaches (chain_len_ = Vocabulary::max_plain_chars): the
  // positions of a `maxLength` string. Fills chain_ (chain_len_ + 1 entries; where the plain
  // capacity covers every plain token, only as far as the longest suffix-token prefix: the
  // suffix walk needs no position past it).
  // With `except` (2 words), a chain where a few plain ASCII bytes (at most 8 per position) do
  // not step along (they die, or lead elsewhere): they are added to `except`.
  bool PlainChain(int32_t config, uint64_t* except = nullptr);
  // A chain with such exceptions (a `maxLength` string of `[^,"]`): decided as a plain chain,
  // then every token holding an exception byte by its bytes (while there are at most 8 such
  // bytes, their tokens a 64th of the vocabulary at most). False (nothing written) when that does not apply.
  bool PlainChainWithExceptions(int32_t config, uint32_t* words);
  // Sets the non-plain tokens allowed from walk_config_[0], a plain loop (`chained` false) or
  // a chain: a token whose plain prefix holds m characters goes on from chain_[m - chain_shift_]
  // (from walk_config_[0] when that is negative; dead past chain_len_). The suffix trie's walk.
  void WalkSuffixes(uint32_t* words, bool chained);
  // Their shared walk, and the rest trie's (below): the SuffixNode records [begin, end), a node of
  // depth d going on from walk_config_[d - 1] (set above `begin`'s depth by the caller).
  void WalkSuffixRecords(const Vocabulary::SuffixNode* node, const int32_t* toks, int32_t begin, int32_t end,
                         uint32_t* words);
  void SetPlainTokensUpTo(int32_t chars, uint32_t* words);
  // A configuration that keeps any plain token viable (plain capacity unbounded, or past every
  // plain token's characters) without returning to itself on it: every plain token, and the
  // other tokens by a walk of the rest trie (Vocabulary::rest_nodes) from `config`. (Also for a near universal one, whose tokens
  // holding Automaton::kNearLeads' bytes DecideLeadTokens then decides.)
  void RestWalk(int32_t config, uint32_t* words);
  // The rest trie's walk alone: sets the non-plain tokens allowed from `config`.
  void WalkRestTrie(int32_t config, uint32_t* words);
  // A position where every plain character leads to one configuration that reads few bytes (a
  // pattern's unescaped `.` between literals: `^[0-9].[0-9]$` after its first digit): the tokens
  // of one plain character, then below every first character only the children on those bytes
  // (Vocabulary::after_first_char), walked from that configuration; the tokens of other first
  // bytes walked from `config`, those of an invalid first character decided by their bytes.
  // False (nothing written) when that does not apply or would not visit far fewer nodes than a
  // walk of every first character.
  bool FirstCharWalk(int32_t config, uint32_t* words);
  // A position that keeps any plain text of up to its plain capacity viable and no plain text
  // past a bound a few characters further (a string of a searched pattern under `maxLength`, whose
  // positions tell "matched" from "not yet" and so make no chain): the plain tokens within the
  // capacity allowed by their counts, those past the bound not, those between decided by their
  // bytes, the other tokens by a walk of the rest trie. False (nothing written) when no such
  // bound is near enough for the tokens between to be few.
  bool CapacityWalk(int32_t config, uint32_t* words);
  // The most plain characters viable from `config`, when at most `limit`: configurations are
  // followed a character at a time (every plain ASCII byte, and the multi-byte characters where
  // each lead's characters all lead to the step successor). False when some plain text of
  // limit + 1 characters is viable, or that is not known cheaply.
  bool PlainReach(int32_t config, int32_t limit, int32_t* reach);
  // The plain capacity of `config` for plain text without the characters of
  // Automaton::kNearLeads' lead bytes, followed a character at a time as for PlainReach, up to
  // `limit` (the positions of a bounded string whose pattern's `.` leaves out U+2028 and U+2029
  // have no plain capacity at all). 0 where none is known.
  int32_t NearCapacity(int32_t config, int32_t limit);
  bool PlainStepWithExceptions(int32_t config, uint32_t* words);
  // The plain-text shortcuts above also serve configurations whose step sets lack a few plain
  // lead bytes (a class without U+0085, U+2028 and U+2029 reads neither 0xC2 nor 0xE2 for all
  // of their characters): AllowMissingLeads adds those of `step_bytes` to except_leads_ (false
  // when that makes too many tokens to decide one by one), and DecideLeadTokens then decides
  // every token holding one of them by its bytes from `config`, whatever the shortcut wrote.
  bool AllowMissingLeads(const uint64_t* step_bytes);
  // A position that reads only a few plain ASCII bytes, which start a good part of the
  // vocabulary (a space) and all lead to one configuration that starts a plain chain or loop
  // (a list item's text after its "- "): decided as a chain one position longer, then cut to
  // the tokens of those first bytes. False (nothing written) when that does not apply.
  bool PlainFirstStep(int32_t config, uint32_t* words);
  void DecideLeadTokens(int32_t config, uint32_t* words);
  // Sets or clears each of the `n` tokens `ids` by its bytes from `config` (the exception
  // tokens of the shortcuts above).
  void DecideTokens(int32_t config, const int32_t* ids, int32_t n, uint32_t* words);
  // The same for the plain tokens [first, last) of Vocabulary::plain_by_chars (read from its
  // plain_text, in order).
  void DecidePlainTokens(int32_t config, int32_t first, int32_t last, uint32_t* words);
  // Both: token k's bytes are bytes_of(k).
  template <typename BytesOf>
  void DecideEach(int32_t config, const int32_t* ids, int32_t n, BytesOf&& bytes_of, uint32_t* words);
  // DecideTokens over the tokens holding each ASCII byte of `except` (2 words; their lists kept:
  // Vocabulary::ascii_tokens).
  void DecideByteTokens(int32_t config, const uint64_t* except, uint32_t* words);
  // A configuration that returns to itself on a wide set of ASCII bytes other than plain text
  // (a pattern's `[\w.-]*`, an identifier, a line of free text), or that starts a chain of
  // configurations each stepping to the next on every byte of such a set (a bounded
  // repetition of it, a UUID's hex digits, an e-mail address's first character then its
  // loop): its set's loop split (Vocabulary::loop_split), the split's mask cut to the chain's
  // length, and the boundary nodes on bytes the chain can read walked from where their
  // prefix leads. A configuration that also reads multi-byte characters (an e-mail address's
  // `[^@\s]`) is served by the root split alone, whose boundary nodes include those on bytes
  // past 0x7F below paths of the set. kNotComputed: it would apply but the set's split is not
  // computed, `may_compute` is false and the vocabulary has room for it. Nothing is written
  // unless kDone.
  enum class SplitUse { kDone, kNotApplicable, kNotComputed };
  SplitUse SplitWalk(int32_t config, uint32_t* words, bool may_compute);
  // A configuration within a *closed region*: a few configurations (region_) that read every
  // byte of an ASCII set S into each other and never die on one (a pattern that searches for
  // a word: `.*\.gov\.uk` after the address's `@`, each letter of the word a configuration of
  // its own). Every token of S's bytes is allowed (the split's mask); the others from the
  // split's boundary nodes on bytes some configuration of the region reads, walked from where
  // their prefix leads. Where the split walk's loop is one of the region's configurations, it
  // would walk every token holding one of the word's letters instead. False (nothing written)
  // unless it applies.
  bool RegionWalk(int32_t config, uint32_t* words);
  // The closed region from `config` into region_ and its set into `set` (2 words); false when
  // it takes more than kMaxRegion configurations or leaves fewer than 32 bytes.
  bool ClosedRegion(int32_t config, uint64_t* set);
  // The tokens of a wide list (a lead byte's, or a wide tail node's: its path above is the
  // set's bytes) from `config`, in a closed region: those of whole characters of `leads` (each
  // read back into the region by every configuration of it) and the set's ASCII bytes are
  // allowed, the others decided by their bytes. False for an empty list.
  bool RegionWideTokens(const Vocabulary::WideList& tokens, const uint64_t* set, uint64_t leads, int32_t config,
                        uint32_t* words);
  // For a configuration that reads multi-byte characters, whose split's chain must keep few
  // boundary nodes on the ASCII bytes it reads outside `set` (FewBoundaryNodes): true when the
  // split candidates already show too many, so that the split (hundreds of microseconds on a
  // large vocabulary, then kept) is not computed only to be refused. False when unknown (a
  // chain longer than a short look).
  bool ManyWideBoundaries(int32_t config, const uint64_t* set);
  // A *wide split*: `config` steps the bytes of `set` (its SplitSet) into a loop, or a chain of
  // positions, that reads more bytes still (a statement's start, whose letters but a keyword's
  // first ones begin an identifier that then reads every letter and digit; a key pattern's
  // first character, but a listed key's): the split of the wider set, cut to the chain's
  // length, less the tokens of its other first bytes, whose subtrees are walked from `config`.
  // Boundary nodes below those first bytes are skipped (wide_skip_, SkippedBelow).
  SplitUse WideSplitWalk(int32_t config, const uint64_t* set, uint32_t* words, bool may_compute);
  bool SkippedBelow(int32_t j) const;
  // A root split's boundary node on a lead byte `lead` (0xC2-0xF4) below `at` of the set's
  // bytes, which lead to position `at` of a chain (up to `end`) that reads multi-byte
  // characters; `tokens` its subtree's (Vocabulary::wide_tokens for a first byte,
  // wide_tail_tokens below an ASCII path). Its tokens of whole characters of leads that step
  // along the chain are allowed by their counts, the others decided by their bytes, instead
  // of a walk of the subtree. False (nothing written) where the first character of `lead`
  // does not step along from there.
  bool WideTokensAlong(const Vocabulary::WideList& tokens, uint8_t lead, int32_t at, const std::vector<int32_t>& chain,
                       int32_t end, uint32_t* words);
  // For a chain that reads multi-byte characters (whose walk the split does not shorten where
  // they start a token): true when the split's boundary nodes on `bytes` (4 words) that a chain
  // ending at `end` walks (one at depth d from chain position d - shift) are few enough for the
  // split to pay over a walk. Asked for the ASCII bytes a chain's head reads outside the set (a
  // searched hex digit's are on most of the vocabulary's letters), and for the bytes past 0x7F
  // its positions read where the head reads ASCII bytes only (a name's letters, then `\s`).
  bool FewBoundaryNodes(const Vocabulary::LoopSplit& split, const uint64_t* bytes, int32_t end, int32_t shift);
  // Before a set is narrowed to leave out `excluded` (2 words) for such a chain, whose position
  // `depth` - 1 reads them (its chain then ends there): true when the boundary nodes this adds
  // on the bytes `config` reads are surely few (FewBoundaryNodes would otherwise refuse the
  // split only once computed).
  bool FewExcludedNodes(int32_t config, const uint64_t* excluded, int32_t depth);
  // SplitWalk for a loop over `set` whose split is not computed and which reads no byte outside
  // the set but '"' and '\\' (a string body of a pattern's class): the set's alphabet mask and
  // the subtrees of the vocabulary's quote nodes below paths of the set (Vocabulary::quote_nodes).
  // The mask is computed on first use (from a few of the vocabulary's byte-group masks: cheaper
  // than a walk, far cheaper than a split). False (nothing written) when that does not apply.
  bool QuoteLoopWalk(int32_t config, const uint64_t* set, uint32_t* words);
  // The rest of Walk: the trie from the first bytes `config` reads. Gives up (words undefined)
  // once walk_nodes_ passes walk_budget_.
  void GeneralWalk(int32_t config, uint32_t* words);
  // The subtree of the depth-1 node on byte `first` where the configuration after that
  // byte loops on, or starts a chain over, a wide ASCII set (a URL path or an identifier after
  // a space, free text after its first byte): the subtree's loop split for that set
  // (Vocabulary::loop_split with a first byte), its mask cut to the chain's length, and its
  // boundary nodes walked from where their prefix leads. A chain that also reads the characters
  // of a few lead bytes (a name's words, then `\s`) takes the split that keeps the boundary
  // nodes on them. Writes the subtree's tokens only (`clear`: they may be set on entry). False
  // (nothing written) when that does not apply or would not pay.
  bool FirstByteSplit(uint8_t first, bool clear, uint32_t* words);
  // The set a split of `config` would be over (its step set's ASCII bytes, 2 words): false
  // when `config` reads too few bytes for a split to pay, or (unless `wide_reads`) a
  // multi-byte character. Only root splits keep boundary nodes on bytes past 0x7F, so only
  // they serve configurations that read such bytes (`wide_reads`).
  bool SplitSet(int32_t config, uint64_t* set, bool wide_reads = false);
  // Walks `split`'s boundary nodes on the bytes outside `set` that the chain (up to `end`)
  // reads, a node at depth d from chain position d - shift: its prefix is shift - 1 fixed
  // bytes (none for a split of the trie's root, the first byte for a first byte's) and then
  // bytes of the set. A depth-1 node (root splits only) goes through WalkFirstByte.
  void WalkBoundaries(const Vocabulary::LoopSplit& split, const uint64_t* set, const std::vector<int32_t>& chain,
                      int32_t end, int32_t shift, uint32_t* words);
  // Follows the chain of `config` on the ASCII set `set` (chain[m]: after m bytes of it) for
  // up to `reach` bytes: false when some position steps the set's bytes to different
  // configurations (or only some of them), else `end` is the position where every byte of
  // the set dies (`reach` when none does within reach: a loop is followed to `reach`). Unless
  // `wide_reads`, also false when some position reads a byte past 0x7F.
  bool SetChain(int32_t config, const uint64_t* set, int32_t reach, std::vector<int32_t>& chain, int32_t& end,
                bool wide_reads = false);
  // The configuration every byte of the ASCII set `set` leads to from `config` (kDead: none is
  // read) where each head reads all of them into one state or none of them
  // (Automaton::SetTarget); kUnknown where some head tells them apart.
  int32_t SetSuccessor(int32_t config, const uint64_t* set);
  // Walks the depth-1 trie node on byte `first` from walk_config_[0]: set word by word from
  // the byte's precomputed mask and walked in clearing mode where most of its tokens may be
  // allowed, walked in setting mode otherwise.
  void WalkFirstByte(uint8_t first, uint32_t* words);
  int64_t ReachableEstimate(int32_t config);
  int64_t ReachableWithFirstByte(int32_t config, uint8_t b);
  // kClear: `words` starts as every text token and the walk clears what is not allowed (for
  // configurations that allow most of the vocabulary); otherwise it starts empty and the walk
  // sets what is allowed.
  template <bool kClear>
  void WalkSubtree(int32_t begin, int32_t end, int32_t config, uint32_t* words);
  // The walk's start configuration's step successor (first bytes leading there may start a
  // chain worth the subtree shortcut); computed on first use per walk.
  int32_t RootSuccessor() {
    if (root_successor_ == Parser::kUnknown) root_successor_ = parser_->Steps(walk_config_[0], false).successor;
    return root_successor_;
  }
  // The step successor of `config` where a chain is likely (many ASCII bytes live: a string
  // body, a bounded repetition of a wide class) or already known; kUnknown elsewhere, so that
  // narrow positions (a chess move's file) never pay for their step sets.
  int32_t StepSuccessor(int32_t config) {
    const int32_t known = parser_->KnownStepSuccessor(config);
    if (known != Parser::kUnknown) return known;
    const uint64_t* live = parser_->LiveBytes(config);
    if (__builtin_popcountll(live[0]) + __builtin_popcountll(live[1]) < 16) return Parser::kUnknown;
    return parser_->Steps(config, false).successor;
  }
  bool SubtreeAllowed(int32_t c, int32_t i, const uint64_t* below);
  int32_t Advance(int32_t config, std::string_view data);

  std::shared_ptr<const CompiledGrammar> grammar_;
  std::shared_ptr<Parser> store_;  // the store history_'s configurations live in
  Parser* parser_;                 // store_.get()
  std::vector<Step> history_;
  std::vector<int32_t> walk_config_;
  int32_t root_successor_ = Parser::kDead;
  int64_t walk_nodes_ = 0;  // trie nodes the last walk visited
  std::vector<const std::atomic<int32_t>*> walk_row_;
  std::vector<int32_t> walk_capacity_;  // plain capacity of walk_config_[d]
  std::vector<int32_t> walk_reference_;  // DiffWalkSubtree: the wider configuration after the same bytes
  std::vector<int32_t> chain_;          // PlainChain's configurations
  int32_t chain_len_ = 0;
  int32_t chain_shift_ = 0;             // positions before chain_[0] (see WalkSuffixes)
  uint64_t except_leads_ = 0;           // AllowMissingLeads' (bit b - 192 for lead b)
  std::vector<uint32_t> first_bytes_mask_;  // PlainFirstStep's cut
  // WideTokensAlong's, per chain: per position m, the leads whose every character steps from m
  // to the next position (bit m of wide_steps_known_: computed).
  std::array<uint64_t, Vocabulary::kMultibytePlainReach> wide_steps_{};
  uint32_t wide_steps_known_ = 0;
  std::vector<int32_t> wide_skip_;          // WideSplitWalk's first bytes (their trie nodes)
  std::vector<int32_t> wide_chain_;         // and its chain from the step successor on (SetChain)
  bool clear_from_alphabet_ = false;     // this clearing walk started from the alphabet's mask
  std::vector<int32_t> split_chain_;      // SplitWalk's chain and its end (SetChain)
  std::vector<int32_t> region_;           // RegionWalk's closed region, in the order found
  StampSet in_region_;                    // and the same configurations, for membership
  int32_t split_end_ = 0;
  std::vector<int32_t> reach_level_, reach_next_;  // PlainReach's configurations per character count
  std::vector<int32_t> decide_configs_;              // DecideTokens' configurations along the previous token
  std::vector<std::pair<int32_t, int32_t>> set_heads_;  // SetSuccessor's
  std::vector<int32_t> first_chain_;      // FirstByteSplit's
  std::vector<std::pair<int32_t, int32_t>> char_heads_;  // CharacterChainWalk's heads of a position
  std::vector<int32_t> char_chain_;                      // and its chain
  int32_t first_end_ = 0;
  std::vector<std::pair<int32_t, int32_t>> same_pairs_;  // SameContinuations' proven pairs
  int32_t narrow_plan_ = -1;                              // NarrowedPlan's verdict this walk (-1: none yet)
  int32_t narrow_wider_ = 0;                              // and its step successor
  uint64_t narrow_dies_[4] = {}, narrow_differs_[4] = {};  // and its first bytes
  static constexpr int64_t kNoBudget = INT64_MAX;
  // Trie nodes a walk of a narrowed position may visit before NarrowedWalk computes the wider
  // position's mask instead (a shortcut's cost, about).
  static constexpr int64_t kNarrowWalkBudget = 2048;
  int64_t walk_budget_ = kNoBudget;
  static std::atomic<int64_t> split_walk_budget_;
  static std::atomic<bool> region_walks_;
  static std::atomic<bool> stand_ins_;
};

}  // namespace logitgate
