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
// node; a dead node skips its whole subtree. When a node's byte loops the configuration onto
// itself and every byte below the node does too (string bodies, free text), every token in the
// subtree is allowed: their bits are set without walking it. Sets text tokens only.
void Matcher::Walk(int32_t config, uint32_t* words) {
  // Below this many nodes a subtree is cheaper to walk than to test for the shortcut.
  constexpr int32_t kSkipMinNodes = 2;
  const Vocabulary& v = *grammar_->vocab;
  const uint8_t* byte = v.trie_byte().data();
  const uint16_t* depth = v.trie_depth().data();
  const int32_t* subtree_end = v.trie_subtree_end().data();
  const int32_t* tok_begin = v.trie_token_begin().data();
  const int32_t* toks = v.trie_tokens().data();
  const uint64_t* desc = v.trie_descendant_bytes().data();
  const size_t levels = static_cast<size_t>(v.max_token_length()) + 1;
  walk_config_.assign(levels, Parser::kDead);
  walk_row_.assign(levels, nullptr);
  Parser& parser = *parser_;
  walk_config_[0] = config;
  walk_row_[0] = parser.Row(config);
  int32_t loop_config = -1;  // the configuration whose self-loop set is in loop_lo/loop_hi
  uint64_t loop_lo = 0, loop_hi = 0;
  const int32_t n = v.trie_size();
  for (int32_t i = 0; i < n;) {
    const int32_t d = depth[i];
    const int32_t parent = walk_config_[d - 1];
    const int32_t c = parser.NextInRow(walk_row_[d - 1], parent, byte[i]);
    if (c == Parser::kDead) {
      i = subtree_end[i];
      continue;
    }
    if (c == parent && subtree_end[i] - i >= kSkipMinNodes) {
      if (loop_config != c) {
        parser.SelfLoops(c, &loop_lo, &loop_hi);
        loop_config = c;
      }
      if ((desc[2 * i] & ~loop_lo) == 0 && (desc[2 * i + 1] & ~loop_hi) == 0) {
        for (int32_t k = tok_begin[i]; k < tok_begin[subtree_end[i]]; ++k) {
          words[toks[k] >> 5] |= 1u << (toks[k] & 31);
        }
        i = subtree_end[i];
        continue;
      }
    }
    walk_config_[d] = c;
    walk_row_[d] = parser.Row(c);
    for (int32_t k = tok_begin[i]; k < tok_begin[i + 1]; ++k) {
      words[toks[k] >> 5] |= 1u << (toks[k] & 31);
    }
    ++i;
  }
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
  parser_->StoreMask(config, words, n_words);
}

}  // namespace logitgate
