// Vocabulary::char_split: the text tokens split by a set of code points (vocabulary.h).

#include <algorithm>
#include <iterator>
#include <numeric>

#include "utf8_ranges.h"
#include "vocabulary.h"

namespace logitgate {

std::shared_ptr<const Vocabulary::CharSplit> Vocabulary::char_split(
    const std::vector<std::pair<uint32_t, uint32_t>>& chars, const uint64_t* exit_bytes) const {
  CharSplitKey key{chars, {exit_bytes[0], exit_bytes[1]}};
  std::lock_guard<std::mutex> lock(char_split_mu_);
  auto it = char_splits_.find(key);
  if (it != char_splits_.end()) {
    if (std::shared_ptr<const CharSplit> split = it->second.lock()) return split;
  }
  // (Entries whose splits no grammar holds any more go as new ones come.)
  for (auto e = char_splits_.begin(); e != char_splits_.end();) e = e->second.expired() ? char_splits_.erase(e) : std::next(e);
  std::shared_ptr<const CharSplit> split = BuildCharSplit(chars, exit_bytes);
  char_splits_[std::move(key)] = split;
  kept_char_splits_[char_splits_built_++ % kKeptCharSplits] = split;
  return split;
}

std::shared_ptr<const Vocabulary::CharSplit> Vocabulary::BuildCharSplit(
    const std::vector<std::pair<uint32_t, uint32_t>>& chars, const uint64_t* exit_bytes) const {
  // Membership: a bit per code point of the Basic Multilingual Plane, the ranges above it.
  std::vector<uint64_t> bmp(0x10000 / 64, 0);
  for (const auto& [lo, hi] : chars) {
    for (uint32_t cp = lo; cp <= std::min<uint32_t>(hi, 0xFFFF); ++cp) bmp[cp >> 6] |= 1ull << (cp & 63);
  }
  // True when some member lies in [lo, hi].
  auto meets = [&](uint32_t lo, uint32_t hi) {
    auto r = std::lower_bound(chars.begin(), chars.end(), lo,
                              [](const std::pair<uint32_t, uint32_t>& range, uint32_t cp) { return range.second < cp; });
    return r != chars.end() && r->first <= hi;
  };
  auto member = [&](uint32_t cp) { return cp <= 0xFFFF ? (bmp[cp >> 6] >> (cp & 63) & 1) != 0 : meets(cp, cp); };
  const uint64_t ascii[2] = {bmp[0], bmp[1]};  // the ASCII members

  struct Exit {
    int32_t id, chars, offset;
    uint8_t byte;
  };
  std::vector<std::pair<int32_t, int32_t>> inside;  // (characters, id)
  std::vector<Exit> exits;
  int32_t max_chars = 0;
  // One pass over the token trie, in node order (its records are contiguous, the tokens' own
  // strings scattered), skipping the subtrees that leave the set. Per depth, the path's state:
  // members read, and within a character the code point's bits so far, the continuation bytes
  // still to come and the range the next one must lie in.
  struct Path {
    int32_t chars = 0;
    uint32_t bits = 0;
    int left = 0;
    int lo = 0x80, hi = 0xBF;
  };
  std::vector<Path> path(static_cast<size_t>(max_token_length_) + 1);
  const TrieNode* node = trie_nodes_.data();
  for (int32_t i = 0, n = trie_size(); i < n;) {
    const TrieNode& at = node[i];
    const Path& up = path[at.depth - 1u];
    Path& here = path[at.depth];
    here = up;
    bool dead = false;
    if (up.left > 0) {
      dead = at.byte < up.lo || at.byte > up.hi;
      here.bits = up.bits << 6 | (at.byte & 0x3Fu);
      here.left = up.left - 1;
      here.lo = 0x80, here.hi = 0xBF;
      if (!dead && here.left == 0) {
        dead = !member(here.bits);
        ++here.chars;
      }
    } else if (at.byte < 0x80) {
      if (!member(at.byte)) {
        // Every token below leaves the set here: an exit where the byte is one, else dead.
        if (exit_bytes[at.byte >> 6] >> (at.byte & 63) & 1) {
          for (int32_t k = trie_token_begin_[i]; k < trie_token_begin_[at.subtree_end]; ++k) {
            exits.push_back({trie_tokens_[static_cast<size_t>(k)], up.chars, at.depth - 1, at.byte});
          }
          max_chars = std::max(max_chars, up.chars);
        }
        i = at.subtree_end;
        continue;
      }
      ++here.chars;
      // A subtree of member ASCII bytes only: each token's count is its depth below.
      const uint64_t* below = trie_descendant_bytes(i);
      if (below != nullptr && (below[0] & ~ascii[0]) == 0 && (below[1] & ~ascii[1]) == 0 && (below[2] | below[3]) == 0) {
        for (int32_t j = i; j < at.subtree_end; ++j) {
          const int32_t count = here.chars + node[j].depth - at.depth;
          for (int32_t k = trie_token_begin_[j]; k < trie_token_begin_[j + 1]; ++k) {
            inside.push_back({count, trie_tokens_[static_cast<size_t>(k)]});
          }
          if (trie_token_begin_[j] < trie_token_begin_[j + 1]) max_chars = std::max(max_chars, count);
        }
        i = at.subtree_end;
        continue;
      }
    } else {
      const Utf8Lead shape = Utf8LeadOf(at.byte);
      dead = shape.continuations == 0;  // no valid UTF-8
      here.bits = at.byte & (0x7Fu >> (shape.continuations + 1));
      here.left = shape.continuations;
      here.lo = shape.lo, here.hi = shape.hi;
    }
    if (dead) {
      i = at.subtree_end;
      continue;
    }
    int32_t count = here.chars;
    if (here.left > 0) {
      // Tokens that end inside a character count when some member starts with their bytes.
      const int rest = 6 * (here.left - 1);
      const uint32_t first = (here.bits << 6 | (here.lo & 0x3Fu)) << rest;
      const uint32_t last = (here.bits << 6 | (here.hi & 0x3Fu)) << rest | ((1u << rest) - 1);
      count = meets(first, last) ? count + 1 : -1;
    }
    if (count >= 0) {
      for (int32_t k = trie_token_begin_[i]; k < trie_token_begin_[i + 1]; ++k) {
        inside.push_back({count, trie_tokens_[static_cast<size_t>(k)]});
      }
      if (trie_token_begin_[i] < trie_token_begin_[i + 1]) max_chars = std::max(max_chars, count);
    }
    ++i;
  }

  auto split = std::make_shared<CharSplit>();
  split->max_chars = max_chars;
  split->inside_begin.assign(static_cast<size_t>(max_chars) + 2, 0);
  for (const auto& [count, id] : inside) ++split->inside_begin[static_cast<size_t>(count) + 1];
  std::partial_sum(split->inside_begin.begin(), split->inside_begin.end(), split->inside_begin.begin());
  split->inside.resize(inside.size());
  std::vector<int32_t> next(split->inside_begin.begin(), split->inside_begin.end() - 1);
  split->mask.assign(static_cast<size_t>(mask_words()), 0);
  for (const auto& [count, id] : inside) {
    split->inside[static_cast<size_t>(next[static_cast<size_t>(count)]++)] = id;
    split->mask[static_cast<size_t>(id) >> 5] |= 1u << (id & 31);
  }
  // Exits in (byte, characters before it) order, trie order within: a run of one position
  // walks a subtree's tokens in byte order, sharing their prefixes (Matcher::DecideEach).
  std::stable_sort(exits.begin(), exits.end(), [](const Exit& a, const Exit& b) {
    return a.byte != b.byte ? a.byte < b.byte : a.chars < b.chars;
  });
  for (const Exit& e : exits) {
    split->exit_ids.push_back(e.id);
    split->exit_chars.push_back(e.chars);
    split->exit_offset.push_back(e.offset);
    ++split->exit_begin[static_cast<size_t>(e.byte) + 1];
  }
  std::partial_sum(split->exit_begin.begin(), split->exit_begin.end(), split->exit_begin.begin());
  return split;
}

}  // namespace logitgate
