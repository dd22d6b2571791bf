#include "matcher.h"

#include <cstring>

namespace logitgate {

Matcher::Matcher(std::shared_ptr<const CompiledGrammar> grammar)
    : grammar_(std::move(grammar)), parser_(grammar_->parser.get()) {
  history_.push_back({parser_->initial(), false});
}

int32_t Matcher::Advance(int32_t config, const std::string& data) {
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
  if (!v.is_text(token)) return false;
  int32_t next = Advance(current(), v.bytes(token));
  if (next == Parser::kDead) return false;
  history_.push_back({next, false});
  return true;
}

bool Matcher::AcceptBytes(const std::string& data) {
  if (terminated()) return data.empty();
  int32_t next = Advance(current(), data);
  if (next == Parser::kDead) return false;
  history_.push_back({next, false});
  return true;
}

void Matcher::Rollback(int64_t n) {
  if (n < 0 || n > num_accepted()) {
    throw CoreError::Usage("cannot roll back " + std::to_string(n) + " tokens: only " +
                           std::to_string(num_accepted()) + " accepted");
  }
  history_.resize(history_.size() - static_cast<size_t>(n));
}

std::string Matcher::ForcedBytes(int64_t max_bytes) {
  std::string out;
  if (terminated()) return out;
  int32_t config = current();
  while (static_cast<int64_t>(out.size()) < max_bytes && !parser_->accepting(config)) {
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
// such subtrees cost one bit per token instead of one transition per trie node. Sets text
// tokens only.
void Matcher::Walk(int32_t config, uint32_t* words) {
  const Vocabulary& v = *grammar_->vocab;
  const size_t levels = static_cast<size_t>(v.max_token_length()) + 1;
  walk_config_.assign(levels, Parser::kDead);
  walk_row_.assign(levels, nullptr);
  Parser& parser = *parser_;
  walk_config_[0] = config;
  walk_row_[0] = parser.Row(config);
  // The root's step successor (its transitions on live bytes are needed by the walk anyway):
  // first bytes leading there may start a chain worth the subtree shortcut.
  root_successor_ = parser.Steps(config, false).successor;
  walk_nodes_ = 0;
  // Only the first bytes some head can consume start a subtree worth walking.
  const uint64_t* live = parser.LiveBytes(config);
  for (int first = 0; first < 256; ++first) {
    if (!(live[first >> 6] >> (first & 63) & 1)) continue;
    const int32_t root = v.trie_root_child(static_cast<uint8_t>(first));
    if (root >= 0) WalkSubtree(root, config, words);
  }
}

// Walks the subtree of depth-1 node `root` (see Walk).
void Matcher::WalkSubtree(int32_t root, int32_t config, uint32_t* words) {
  const Vocabulary& v = *grammar_->vocab;
  const uint8_t* byte = v.trie_byte().data();
  const uint16_t* depth = v.trie_depth().data();
  const int32_t* subtree_end = v.trie_subtree_end().data();
  const int32_t* tok_begin = v.trie_token_begin().data();
  const int32_t* toks = v.trie_tokens().data();
  constexpr int32_t kShortcutMinNodes = 16;
  Parser& parser = *parser_;
  const int32_t n = subtree_end[root];
  for (int32_t i = root; i < n; ++walk_nodes_) {
    const int32_t d = depth[i];
    const int32_t parent = walk_config_[d - 1];
    const int32_t c = parser.NextInRow(walk_row_[d - 1], parent, byte[i]);
    if (c == Parser::kDead) {
      i = subtree_end[i];
      continue;
    }
    const uint64_t* below = v.trie_descendant_bytes(i);
    // The shortcut is tried where it is likely to pay: the configuration came back to itself
    // (the node's byte loops, or a whole character led back to the walk's start), or the
    // node's byte was a step of its parent's chain (bounded repetitions); and the subtree is
    // big enough to be worth a few hundred transitions for the step sets.
    if (below != nullptr && subtree_end[i] - i >= kShortcutMinNodes &&
        (c == parent || c == config || (d == 1 ? c == root_successor_ : parser.KnownStepSuccessor(parent) == c)) &&
        SubtreeAllowed(c, i, below)) {
      for (int32_t k = tok_begin[i]; k < tok_begin[subtree_end[i]]; ++k) {
        words[toks[k] >> 5] |= 1u << (toks[k] & 31);
      }
      walk_nodes_ += tok_begin[subtree_end[i]] - tok_begin[i];  // the bits cost like nodes
      i = subtree_end[i];
      continue;
    }
    walk_config_[d] = c;
    walk_row_[d] = parser.Row(c);
    for (int32_t k = tok_begin[i]; k < tok_begin[i + 1]; ++k) {
      words[toks[k] >> 5] |= 1u << (toks[k] & 31);
    }
    ++i;
  }
}

// True when every token below trie node i is allowed from configuration `c` (the
// configuration after node i's byte): each byte below is, at its depth, in the step set of
// the configuration the chain of step successors has reached by then. A path of h bytes takes
// at most h steps, so the sets of the first height(i) configurations of the chain suffice;
// a loop (successor == itself) ends the chain early.
bool Matcher::SubtreeAllowed(int32_t c, int32_t i, const uint64_t* below) {
  // Chains longer than this are not followed (each new position costs transitions); loops
  // end the chain at once, so they are unaffected.
  constexpr int32_t kMaxChain = 16;
  constexpr uint64_t kContinuation = ~0ull;  // word 2: bytes 0x80-0xBF
  const Vocabulary& v = *grammar_->vocab;
  Parser& parser = *parser_;
  const bool ascii_only = (below[2] | below[3]) == 0;
  if (!ascii_only && !v.trie_utf8_below(i)) return false;
  Parser::StepSet step = parser.Steps(c, !ascii_only);
  uint64_t allowed[4] = {step.bytes[0], step.bytes[1], step.bytes[2] | kContinuation, step.bytes[3]};
  int32_t at = c;
  for (int32_t j = 1; j < v.trie_height(i); ++j) {
    if (step.successor == Parser::kDead) return false;
    if (step.successor == at) break;  // a loop: the same set from here on
    if (j >= kMaxChain) return false;
    at = step.successor;
    step = parser.Steps(at, !ascii_only);
    for (int q = 0; q < 4; ++q) allowed[q] &= step.bytes[q] | (q == 2 ? kContinuation : 0);
    if ((below[0] & ~allowed[0]) | (below[1] & ~allowed[1])) return false;  // early out
  }
  if (step.successor == Parser::kDead) return false;
  for (int q = 0; q < 4; ++q) {
    if (below[q] & ~allowed[q]) return false;
  }
  return true;
}

bool Matcher::TryFillMaskFast(uint32_t* words) {
  const Vocabulary& v = *grammar_->vocab;
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
  const Vocabulary& v = *grammar_->vocab;
  const size_t n_words = static_cast<size_t>(v.mask_words());
  std::memset(words, 0, n_words * sizeof(uint32_t));
  const int32_t config = current();
  Walk(config, words);
  if (parser_->accepting(config)) {
    for (int32_t id : v.eos_ids()) words[id >> 5] |= 1u << (id & 31);
  }
  // A walk that did more work (nodes visited, bits set by shortcuts) than a few mask copies
  // would cost is worth memoizing at once; a very cheap one only when its state recurs.
  parser_->StoreMask(config, words, n_words, walk_nodes_ > static_cast<int64_t>(n_words / 4));
}

}  // namespace logitgate
