#include "vocabulary.h"

#include <algorithm>
#include <numeric>

#include "error.h"

namespace logitgate {

namespace {
constexpr size_t kMaxTokenLength = 65535;  // trie depth is stored as uint16
}

Vocabulary::Vocabulary(std::vector<std::string> tokens, std::vector<bool> has_bytes,
                       const std::vector<int32_t>& special_ids, const std::vector<int32_t>& eos_ids, int32_t width)
    : width_(width), tokens_(std::move(tokens)) {
  if (width <= 0) throw CoreError::Usage("vocabulary width must be positive");
  if (has_bytes.size() != tokens_.size()) throw CoreError::Usage("tokens and has_bytes differ in length");
  // Ids at or beyond the logits width can never be sampled: drop them.
  if (static_cast<int64_t>(tokens_.size()) > width) {
    tokens_.resize(width);
    has_bytes.resize(width);
  }
  tokens_.resize(width);
  has_bytes.resize(width, false);
  special_.assign(width, false);
  eos_.assign(width, false);
  text_.assign(width, false);
  for (int32_t id : special_ids) {
    if (id >= 0 && id < width) special_[id] = true;
  }
  for (int32_t id : eos_ids) {
    if (id >= 0 && id < width && !eos_[id]) {
      eos_[id] = true;
      eos_ids_.push_back(id);
    }
  }
  for (int32_t i = 0; i < width; ++i) {
    if (tokens_[i].size() > kMaxTokenLength) throw CoreError::Usage("token " + std::to_string(i) + " is too long");
    text_[i] = has_bytes[i] && !tokens_[i].empty() && !special_[i] && !eos_[i];
  }
  BuildTrie();
}

void Vocabulary::BuildTrie() {
  std::vector<int32_t> order;
  for (int32_t i = 0; i < width_; ++i) {
    if (text_[i]) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    int c = tokens_[a].compare(tokens_[b]);
    return c < 0 || (c == 0 && a < b);
  });
  // `path[d]` is the node index at depth d+1 on the current root-to-leaf path.
  std::vector<int32_t> path;
  std::vector<std::vector<int32_t>> node_tokens;
  const std::string* prev = nullptr;
  for (int32_t id : order) {
    const std::string& t = tokens_[id];
    max_token_length_ = std::max<int32_t>(max_token_length_, static_cast<int32_t>(t.size()));
    size_t common = 0;
    if (prev != nullptr) {
      size_t n = std::min(prev->size(), t.size());
      while (common < n && (*prev)[common] == t[common]) ++common;
    }
    while (path.size() > common) {
      trie_subtree_end_[path.back()] = static_cast<int32_t>(trie_byte_.size());
      path.pop_back();
    }
    for (size_t d = common; d < t.size(); ++d) {
      path.push_back(static_cast<int32_t>(trie_byte_.size()));
      trie_byte_.push_back(static_cast<uint8_t>(t[d]));
      trie_depth_.push_back(static_cast<uint16_t>(d + 1));
      trie_subtree_end_.push_back(0);
      node_tokens.emplace_back();
    }
    node_tokens[path.back()].push_back(id);
    prev = &t;
  }
  while (!path.empty()) {
    trie_subtree_end_[path.back()] = static_cast<int32_t>(trie_byte_.size());
    path.pop_back();
  }
  trie_token_begin_.assign(trie_byte_.size() + 1, 0);
  for (size_t i = 0; i < node_tokens.size(); ++i) {
    trie_token_begin_[i] = static_cast<int32_t>(trie_tokens_.size());
    trie_tokens_.insert(trie_tokens_.end(), node_tokens[i].begin(), node_tokens[i].end());
  }
  trie_token_begin_[node_tokens.size()] = static_cast<int32_t>(trie_tokens_.size());
  // Descendant byte sets, children before parents (reverse DFS order).
  const int32_t n = static_cast<int32_t>(trie_byte_.size());
  trie_desc_bytes_.assign(2 * static_cast<size_t>(n), 0);
  for (int32_t i = n - 1; i >= 0; --i) {
    uint64_t lo = 0, hi = 0;
    for (int32_t j = i + 1; j < trie_subtree_end_[i]; j = trie_subtree_end_[j]) {
      int bit = std::min<int>(trie_byte_[j], 127);
      (bit < 64 ? lo : hi) |= 1ull << (bit & 63);
      lo |= trie_desc_bytes_[2 * j];
      hi |= trie_desc_bytes_[2 * j + 1];
    }
    trie_desc_bytes_[2 * i] = lo;
    trie_desc_bytes_[2 * i + 1] = hi;
  }
}

}  // namespace logitgate
