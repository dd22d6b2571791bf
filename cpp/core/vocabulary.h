// Vocabulary: exact bytes of every token id, plus the token trie the mask walk uses.
//
// Invariants:
// - ids are 0 .. width-1 (the model's logits width); ids with no bytes and special ids are
//   never in the trie, so grammar text can never produce them;
// - the trie is flat, in depth-first order of sorted token bytes: node i's subtree is
//   [i, subtree_end[i]), so a walk skips a dead subtree with one assignment;
// - depth[i] >= 1 is the length of node i's byte string (the root is implicit at depth 0).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace logitgate {

class Vocabulary {
 public:
  // tokens[i] is id i's bytes; has_bytes[i] false means the id has none (padding, unused).
  Vocabulary(std::vector<std::string> tokens, std::vector<bool> has_bytes, const std::vector<int32_t>& special_ids,
             const std::vector<int32_t>& eos_ids, int32_t width);

  int32_t width() const { return width_; }
  int32_t mask_words() const { return (width_ + 31) / 32; }
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }
  bool is_special(int32_t id) const { return id >= 0 && id < width_ && special_[id]; }
  bool is_eos(int32_t id) const { return id >= 0 && id < width_ && eos_[id]; }
  // True when `id` can be produced by grammar text (non-special, non-empty bytes).
  bool is_text(int32_t id) const { return id >= 0 && id < width_ && text_[id]; }
  const std::string& bytes(int32_t id) const { return tokens_[id]; }

  // Flat trie (see the invariants above).
  int32_t trie_size() const { return static_cast<int32_t>(trie_byte_.size()); }
  const std::vector<uint8_t>& trie_byte() const { return trie_byte_; }
  const std::vector<uint16_t>& trie_depth() const { return trie_depth_; }
  const std::vector<int32_t>& trie_subtree_end() const { return trie_subtree_end_; }
  // Tokens ending at node i: trie_tokens()[trie_token_begin()[i] .. trie_token_begin()[i+1]).
  const std::vector<int32_t>& trie_token_begin() const { return trie_token_begin_; }
  const std::vector<int32_t>& trie_tokens() const { return trie_tokens_; }
  int32_t max_token_length() const { return max_token_length_; }
  // The depth-1 trie node for first byte b, or -1 when no token starts with b.
  int32_t trie_root_child(uint8_t b) const { return trie_root_child_[b]; }
  // The set of bytes on the nodes strictly below node i (4 words, bit b of word b/64), or
  // nullptr for leaves. Nodes with children get an entry; leaves need none.
  const uint64_t* trie_descendant_bytes(int32_t i) const {
    int32_t k = trie_desc_index_[i];
    return k < 0 ? nullptr : trie_desc_bytes_.data() + 4 * static_cast<size_t>(k);
  }
  // True when node i ends on a UTF-8 character boundary and every path below it continues
  // with valid UTF-8 (complete characters, possibly ending in a valid partial one).
  bool trie_utf8_below(int32_t i) const { return trie_utf8_below_[i]; }
  // Length in bytes of the longest path below node i (0 for a leaf).
  int32_t trie_height(int32_t i) const { return trie_height_[i]; }
  // The mask of every text token (mask_words() words): where a mask walk that expects to allow
  // most of the vocabulary starts before clearing what is not allowed.
  const uint32_t* text_mask() const { return text_mask_.data(); }
  // Number of tokens whose first byte is b, and whose first two bytes are b1 b2.
  int32_t tokens_with_first_byte(uint8_t b) const { return first_byte_tokens_[b]; }
  int32_t tokens_with_first_bytes(uint8_t b1, uint8_t b2) const { return pair_tokens_[b1 << 8 | b2]; }
  int32_t num_text_tokens() const { return static_cast<int32_t>(trie_tokens_.size()); }
  // The mask (mask_words() words) of the text tokens whose every byte is in `alphabet` (4
  // words, bit b of word b/64), for an ASCII alphabet (nullptr for others, and once
  // kMaxAlphabetMasks distinct alphabets are kept). Computed on first use per alphabet from
  // the ASCII tokens' byte sets and kept (grammars of one kind share alphabets). Thread-safe.
  static constexpr size_t kMaxAlphabetMasks = 64;
  const uint32_t* alphabet_mask(const uint64_t* alphabet) const;
  // The mask (mask_words() words) of the tokens whose first byte is b, for the first bytes that
  // start many tokens (clearing them word by word beats clearing them token by token), or
  // nullptr.
  const uint32_t* first_byte_mask(uint8_t b) const {
    const int32_t k = first_byte_mask_index_[b];
    return k < 0 ? nullptr : first_byte_masks_.data() + static_cast<size_t>(k) * mask_words();
  }

 private:
  void BuildTrie();
  void ComputeSubtreeSummaries();

  int32_t width_;
  std::vector<std::string> tokens_;
  std::vector<bool> special_, eos_, text_;
  std::vector<int32_t> eos_ids_;
  std::vector<uint8_t> trie_byte_;
  std::vector<uint16_t> trie_depth_;
  std::vector<int32_t> trie_subtree_end_;
  std::vector<int32_t> trie_token_begin_;
  std::vector<int32_t> trie_tokens_;
  std::vector<int32_t> trie_desc_index_;
  std::vector<uint64_t> trie_desc_bytes_;
  std::vector<bool> trie_utf8_below_;
  std::vector<uint16_t> trie_height_;
  int32_t max_token_length_ = 0;
  int32_t trie_root_child_[256];
  int32_t first_byte_tokens_[256] = {};
  std::vector<uint32_t> text_mask_;
  std::vector<int32_t> pair_tokens_;
  int32_t first_byte_mask_index_[256];
  std::vector<uint32_t> first_byte_masks_;
  struct AsciiToken {
    int32_t id;
    uint64_t bytes[2];
  };
  std::vector<AsciiToken> ascii_tokens_;  // text tokens of ASCII bytes only, with their byte sets
  mutable std::mutex alphabet_mu_;
  mutable std::map<std::array<uint64_t, 4>, std::unique_ptr<std::vector<uint32_t>>> alphabet_masks_;
};

}  // namespace logitgate
