// Budget: how long the output still has to be. For a compiled grammar and a parser
// configuration, the shortest completion (bytes that take the output to a full sentence), its
// length in tokens of the vocabulary, and the token mask cut to a number of tokens left, so
// that a generation with max_tokens N ends in a complete sentence whenever N allows one.
//
// Invariants and guarantees:
// - ShortestPaths::dist(s) is the length of the shortest byte string from automaton state s to
//   the end of its rule, a call costing its rule's shortest string (a Knuth-style Dijkstra over
//   the automaton: calls are resolved once their rule's start and return state are settled).
//   Every choice it records points at states settled earlier, so spelling a completion follows
//   finitely many steps, on an explicit stack (no recursion).
// - A configuration's shortest completion is the cheapest of its heads: the head's state's
//   shortest string, then each frame's return state's, up the stack.
// - Its cost in tokens is the fewest text tokens of the vocabulary that spell it (dynamic
//   programming over the token trie: a real token sequence, which the matcher accepts), plus
//   one EOS where the grammar does not end by itself after it. Never a byte count: bytes stand
//   in only for completions longer than kMaxSpelledBytes, and only where every byte a
//   completion may hold is a token by itself (then each byte is at most one token).
// - AcceptWithin (lg.generate's per-step check) accepts a drawn token only when 1 + cost(config
//   after it) <= tokens left. The parser stores track each configuration's shortest completion
//   (Parser::TrackShortest, from this class's distances), so where bytes are tokens the common
//   step reads one number without a lock; the exact cost is computed only where that bound is
//   too loose for the tokens left.
// - RestrictMask keeps token t only when 1 + cost(config after t) <= tokens left; EOS costs one.
//   A cheap bound first (ExactUpTo): when every allowed token leaves room, the mask is left as
//   is, so the masks are exactly the plain ones unless the budget is tight.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "matcher.h"

namespace logitgate {

class ShortestPaths {
 public:
  static constexpr int64_t kInfinite = INT64_MAX / 4;
  explicit ShortestPaths(const Automaton& a);
  int64_t dist(int32_t s) const { return (*dist_)[static_cast<size_t>(s)]; }
  // Every state's distance (shared with the parser stores that track shortest completions).
  const std::shared_ptr<std::vector<int64_t>>& dist_table() const { return dist_; }
  // Appends the shortest string from s to the end of s's rule; false (out partly written) when
  // it would pass max_bytes.
  bool Spell(int32_t s, std::string* out, size_t max_bytes) const;
  // An upper bound on how much the longest completion through any head can grow per byte read
  // (kInfinite when it could not be bounded): see budget.cc.
  int64_t growth_per_byte() const { return growth_per_byte_; }
  // The bytes Spell can write (bit b of word b/64): the first byte of each edge's range.
  const uint64_t* spelled_bytes() const { return spelled_bytes_; }

 private:
  enum Kind : uint8_t { kUnset, kEnd, kEpsilon, kByte, kCall };
  struct Choice {
    Kind kind = kUnset;
    uint8_t byte = 0;
    int32_t a = -1;  // kEpsilon: the kernel state; kByte: the target; kCall: the rule
    int32_t b = -1;  // kCall: the return state
  };
  void ComputeDistances();
  void ComputeGrowth();

  const Automaton& a_;
  std::shared_ptr<std::vector<int64_t>> dist_ = std::make_shared<std::vector<int64_t>>();
  std::vector<Choice> choice_;
  int64_t growth_per_byte_ = kInfinite;
  uint64_t spelled_bytes_[4] = {0, 0, 0, 0};
};

class Budget {
 public:
  static constexpr int64_t kUnreachable = ShortestPaths::kInfinite;
  // Completions longer than this are costed, not spelled (their tokens are bounded by bytes).
  static constexpr size_t kMaxSpelledBytes = size_t{1} << 16;

  explicit Budget(std::shared_ptr<const CompiledGrammar> grammar);

  struct Cost {
    int64_t bytes;   // the shortest completion's length in bytes
    int64_t tokens;  // output tokens to finish: its fewest tokens, plus EOS where needed
  };
  // Of the matcher's configuration. Thread-safe (one mutex per budget).
  Cost CostOf(const Matcher& m);
  // The shortest completion's bytes (empty when complete), and the tokens that spell it
  // (EOS not included). Throws a LimitExceeded when it passes kMaxSpelledBytes.
  std::string ShortestCompletion(const Matcher& m);
  std::vector<int32_t> CompletionTokens(const Matcher& m);
  // True when `token` (allowed by the matcher's plain mask) leaves room to finish within
  // `remaining` tokens, itself included: the check of one drawn token (lg.generate cuts the
  // mask only when it fails). The shortest completion's bytes bound its tokens first.
  bool TokenFits(const Matcher& m, int32_t token, int64_t remaining);
  // What AcceptWithin did.
  enum Accepted : int32_t {
    kRejected = 0,   // the grammar does not allow the token; the matcher is unchanged
    kAccepted = 1,   // accepted, and the output can still finish in time
    kNoRoom = 2,     // allowed, but it leaves no room to finish; the matcher is unchanged
    kUndecided = 3,  // (quick only) accepted; whether it leaves room is for Settle to decide
  };
  // The check of lg.generate's drawn token fused with its accept: accepts `token` when the
  // grammar allows it and the output can still finish within `remaining` tokens, this one
  // included (the token's transitions are computed once, by the accept). `quick`: decides from
  // the memo and the bytes bound only, and returns kUndecided (token accepted) where the
  // completion's fewest tokens have to be computed first (spelling it and a walk over the
  // trie: the binding releases the GIL for Settle).
  int32_t AcceptWithin(Matcher& m, int32_t token, int64_t remaining, bool quick);
  // After kUndecided: kAccepted, or kNoRoom with the token rolled back.
  int32_t Settle(Matcher& m, int64_t remaining);
  // Clears from `words` (the matcher's plain mask) every token after which the output cannot
  // finish within `remaining` tokens (this one included); returns how many were cleared.
  int64_t RestrictMask(const Matcher& m, uint32_t* words, int64_t remaining);
  // Tokens left from which RestrictMask leaves the mask of `config` as it is, given the
  // longest allowed token (bytes): every allowed token leaves room (ShortestPaths::
  // growth_per_byte over its bytes). kUnreachable when that cannot be bounded (some byte a
  // completion may hold is no token by itself).
  int64_t ExactFrom(const Matcher& m, int64_t longest_token);
  // The longest text token set in `words` (bytes).
  int64_t LongestToken(const uint32_t* words) const;
  bool bytes_are_tokens() const { return bytes_are_tokens_; }
  int64_t growth_per_byte() const { return paths_.growth_per_byte(); }

 private:
  struct Known {
    int64_t bytes = -1, tokens = -1;
    int64_t longest = -1;     // the longest completion through any head, in bytes
    int64_t shortest = -1;    // the shortest one (set with `longest`)
    int64_t max_after = -1;   // RestrictMask: the largest cost after one allowed token
  };
  // The memo of `config`; a reference valid until the next Entry (it may grow the table).
  Known& Entry(int32_t config);
  // Whether the output can finish from `config` within `room` tokens: 1 yes, 0 no, -1 not
  // known without computing the fewest tokens of its completion (only when `quick`).
  int32_t FitsLocked(int32_t config, int64_t room, bool quick);
  // The matcher's store (configuration ids are a store's own, SharedParser): the memos below
  // are of store_, and are dropped when a matcher on another store asks. Under mu_.
  Parser& StoreLocked(const Matcher& m);
  // The cheapest head's (state, frame); Entry(config).longest is set on the way.
  std::pair<int32_t, int32_t> BestHead(int32_t config);
  // The shortest and the longest of the shortest completions after returning into `frame`
  // (a frame set's members each one way).
  std::pair<int64_t, int64_t> FrameDistances(int32_t frame);
  // `frame`'s (return state, parent); for a frame set, its member's on the shortest way out.
  std::pair<int32_t, int32_t> LinkOnShortest(int32_t frame);
  bool SpellLocked(int32_t config, std::string* out);
  void CostLocked(int32_t config);
  // Fewest tokens spelling `data` (dynamic programming over the trie); empty when none does.
  std::vector<int32_t> FewestTokens(const std::string& data) const;
  int32_t TrieChild(int32_t node, uint8_t b) const;

  std::shared_ptr<const CompiledGrammar> grammar_;
  ShortestPaths paths_;
  bool bytes_are_tokens_ = false;
  std::mutex mu_;
  std::shared_ptr<Parser> store_;  // the store known_ and frame_dist_ describe
  std::vector<Known> known_;  // by configuration id (ids are dense in a store)
  std::vector<std::pair<int64_t, int64_t>> frame_dist_;  // FrameDistances by frame id; -1: not known yet
  std::vector<std::pair<int32_t, int32_t>> heads_;  // BestHead's scratch
  std::vector<int32_t> members_;  // FrameDistances' and LinkOnShortest's scratch
};

}  // namespace logitgate
