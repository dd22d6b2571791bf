#include "vocabulary.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string_view>

#include "error.h"
#include "plain_text.h"
#include "utf8_ranges.h"

namespace logitgate {

namespace {
constexpr size_t kMaxTokenLength = 65535;  // trie depth is stored as uint16

// An ASCII byte's group (Vocabulary::AsciiGroup): the ranges character classes are usually
// made of (hex letters apart from the other letters, digits, space, and the punctuation of
// identifiers, paths, URLs and e-mail addresses in small groups), so that a class holds its
// groups whole and a token's bytes are seldom checked one by one.
int ByteGroup(uint8_t b) {
  if (b >= 'a' && b <= 'f') return 0;
  if (b >= 'g' && b <= 'z') return 1;
  if (b >= 'A' && b <= 'F') return 2;
  if (b >= 'G' && b <= 'Z') return 3;
  if (b >= '0' && b <= '9') return 4;
  switch (b) {
    case ' ':
      return 5;
    case '_':
      return 6;
    case '-':
      return 7;
    case '.':
      return 8;
    case '/':
    case ':':
      return 9;
    case '@':
    case '+':
    case '=':
    case '%':
    case '&':
    case '?':
    case '#':
    case '~':
      return 10;
    case '"':
    case '\\':
      return 13;
    case '\t':
    case '\n':
    case '\r':
      return 14;
    default:
      break;
  }
  if (b < 0x20 || b == 0x7F) return 15;
  if (b == '[' || b == ']' || b == '{' || b == '}' || b == '<' || b == '>') return 12;
  return 11;  // , ; ! ' ( ) * $ ^ ` |
}
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
  text_mask_.assign(static_cast<size_t>(mask_words()), 0);
  pair_tokens_.assign(1 << 16, 0);
  for (int32_t i = 0; i < width; ++i) {
    if (!text_[i]) continue;
    text_mask_[i >> 5] |= 1u << (i & 31);
    const auto b1 = static_cast<uint8_t>(tokens_[i][0]);
    ++first_byte_tokens_[b1];
    if (tokens_[i].size() >= 2) ++pair_tokens_[b1 << 8 | static_cast<uint8_t>(tokens_[i][1])];
    AsciiToken t{i, static_cast<int32_t>(tokens_[i].size()), {0, 0}};
    bool ascii = true;
    for (unsigned char b : tokens_[i]) {
      ascii = ascii && b < 0x80;
      if (ascii) t.bytes[b >> 6] |= 1ull << (b & 63);
    }
    if (ascii) ascii_tokens_.push_back(t);
  }
  BuildAsciiGroups();
  {
    // The tokens of each lead byte: a count, then a fill, of each token's distinct leads.
    auto leads_of = [](const std::string& token) {
      uint64_t leads = 0;
      for (unsigned char b : token) {
        if (b >= 0xC2 && b <= 0xF4) leads |= 1ull << (b - 0xC0);
      }
      return leads;
    };
    std::array<int32_t, 65> next{};
    for (int32_t i = 0; i < width; ++i) {
      if (!text_[i]) continue;
      for (uint64_t w = leads_of(tokens_[i]); w != 0; w &= w - 1) ++next[__builtin_ctzll(w) + 1];
    }
    for (int k = 0; k < 64; ++k) next[k + 1] += next[k];
    lead_begin_ = next;
    lead_tokens_.resize(static_cast<size_t>(next[64]));
    for (int32_t i = 0; i < width; ++i) {
      if (!text_[i]) continue;
      for (uint64_t w = leads_of(tokens_[i]); w != 0; w &= w - 1) lead_tokens_[next[__builtin_ctzll(w)]++] = i;
    }
  }
  {
    // The tokens of each first lead byte, with their characters when they are whole multi-byte
    // characters only: a count, then a fill.
    auto wide_of = [](std::string_view token) {
      WideToken t{0, 0, 0};
      for (size_t k = 0; k < token.size();) {
        const auto lead = static_cast<uint8_t>(token[k]);
        const Utf8Lead shape = Utf8LeadOf(lead);
        bool whole = shape.continuations > 0 && k + static_cast<size_t>(shape.continuations) < token.size();
        for (int c = 1; whole && c <= shape.continuations; ++c) {
          const auto b = static_cast<uint8_t>(token[k + static_cast<size_t>(c)]);
          whole = c == 1 ? b >= shape.lo && b <= shape.hi : b >= 0x80 && b <= 0xBF;
        }
        if (!whole) return WideToken{0, 0, 0};
        t.leads |= 1ull << (lead - 0xC0);
        ++t.chars;
        k += 1 + static_cast<size_t>(shape.continuations);
      }
      return t;
    };
    // One pool of lists: a token and, unless it is whole characters only, its bytes from the
    // lead on (which a walk over the list reads in order).
    auto add = [&](int32_t id, size_t from) {
      const std::string_view bytes = std::string_view(tokens_[id]).substr(from);
      WideToken t = wide_of(bytes);
      t.id = id;
      wide_pool_.push_back(t);
      if (t.chars == 0) wide_text_.append(bytes);
      wide_text_begin_.push_back(static_cast<int32_t>(wide_text_.size()));
    };
    wide_text_begin_.push_back(0);
    auto first_lead = [&](int32_t i) {
      const auto b = tokens_[i].empty() ? 0 : static_cast<uint8_t>(tokens_[i][0]);
      return text_[i] && b >= 0xC2 && b <= 0xF4 ? b - 0xC0 : -1;
    };
    std::vector<std::pair<int, int32_t>> firsts;  // (lead - 0xC0, id), by lead then id
    for (int32_t i = 0; i < width; ++i) {
      if (const int k = first_lead(i); k >= 0) firsts.emplace_back(k, i);
    }
    std::sort(firsts.begin(), firsts.end());
    wide_begin_.fill(0);
    for (const auto& [k, id] : firsts) {
      ++wide_begin_[static_cast<size_t>(k) + 1];
      add(id, 0);
    }
    for (int k = 0; k < 64; ++k) wide_begin_[k + 1] += wide_begin_[k];
    // Wide tail nodes: a lead byte below an ASCII path (depth >= 2; depth 1 is the above). The
    // walk enters ASCII nodes only, so every node it meets has an ASCII path above it.
    const TrieNode* node = trie_nodes_.data();
    for (int32_t i = 0; i < trie_size();) {
      const int32_t d = node[i].depth;
      const uint8_t b = node[i].byte;
      if (b < 0x80) {
        ++i;
        continue;
      }
      if (d >= 2 && b >= 0xC2 && b <= 0xF4) {
        wide_tail_nodes_.push_back(i);
        wide_tail_begin_.push_back(static_cast<int32_t>(wide_pool_.size()));
        for (int32_t k = trie_token_begin_[i]; k < trie_token_begin_[node[i].subtree_end]; ++k) {
          add(trie_tokens_[k], static_cast<size_t>(d - 1));
        }
      }
      i = node[i].subtree_end;
    }
    wide_tail_begin_.push_back(static_cast<int32_t>(wide_pool_.size()));
  }
  {
    // The tokens of each rare plain ASCII byte: a count of every byte's tokens, then a fill of
    // the kept bytes' (each token's distinct bytes).
    auto plain_ascii_of = [](const std::string& token, uint64_t* set) {
      set[0] = set[1] = 0;
      for (unsigned char b : token) {
        if (IsPlainAscii(b)) set[b >> 6] |= 1ull << (b & 63);
      }
    };
    std::array<int32_t, 128> count{};
    int32_t n_text = 0;
    uint64_t set[2];
    for (int32_t i = 0; i < width; ++i) {
      if (!text_[i]) continue;
      ++n_text;
      plain_ascii_of(tokens_[i], set);
      for (int q = 0; q < 2; ++q) {
        for (uint64_t w = set[q]; w != 0; w &= w - 1) ++count[64 * q + __builtin_ctzll(w)];
      }
    }
    std::array<int32_t, 129> next{};
    for (int b = 0; b < 128; ++b) {
      ascii_kept_[b] = IsPlainAscii(static_cast<uint8_t>(b)) && 32 * static_cast<int64_t>(count[b]) <= n_text;
      next[b + 1] = next[b] + (ascii_kept_[b] ? count[b] : 0);
    }
    ascii_begin_ = next;
    ascii_byte_tokens_.resize(static_cast<size_t>(next[128]));
    for (int32_t i = 0; i < width; ++i) {
      if (!text_[i]) continue;
      plain_ascii_of(tokens_[i], set);
      for (int q = 0; q < 2; ++q) {
        for (uint64_t w = set[q]; w != 0; w &= w - 1) {
          const int b = 64 * q + __builtin_ctzll(w);
          if (ascii_kept_[b]) ascii_byte_tokens_[next[b]++] = i;
        }
      }
    }
  }
  int32_t n_masks = 0;
  for (int b = 0; b < 256; ++b) {
    first_byte_mask_index_[b] = 4 * first_byte_tokens_[b] >= mask_words() ? n_masks++ : -1;
  }
  BuildPlainSplit();
  BuildRestTrie();
  BuildFirstCharIndex();
  first_byte_masks_.assign(static_cast<size_t>(n_masks) * mask_words(), 0);
  for (int32_t i = 0; i < width; ++i) {
    if (!text_[i]) continue;
    const int32_t k = first_byte_mask_index_[static_cast<uint8_t>(tokens_[i][0])];
    if (k >= 0) first_byte_masks_[static_cast<size_t>(k) * mask_words() + (i >> 5)] |= 1u << (i & 31);
  }
  // Length k's mask is length k-1's plus the tokens of exactly k bytes. (Built here, while the
  // tokens are in cache: on first use a large vocabulary's cold token table cost milliseconds.)
  const size_t n_words = static_cast<size_t>(mask_words());
  length_masks_.assign(static_cast<size_t>(kLengthMasks) * n_words, 0);
  for (int32_t i = 0; i < width; ++i) {
    const size_t n = tokens_[i].size();
    if (!text_[i]) continue;
    if (n < static_cast<size_t>(kLengthMasks)) {
      length_masks_[n * n_words + (i >> 5)] |= 1u << (i & 31);
    } else {
      long_tokens_.push_back({static_cast<int32_t>(n), i});
    }
  }
  std::sort(long_tokens_.begin(), long_tokens_.end());
  for (int32_t k = 2; k < kLengthMasks; ++k) {
    uint32_t* mask = &length_masks_[static_cast<size_t>(k) * n_words];
    const uint32_t* shorter = mask - n_words;
    for (size_t q = 0; q < n_words; ++q) mask[q] |= shorter[q];
  }
}

namespace {

// A flat trie in depth-first order of sorted keys (see the invariants in vocabulary.h): per
// node its byte, depth and subtree end, and the ids of the keys ending there.
struct FlatTrie {
  std::vector<uint8_t> byte;
  std::vector<uint16_t> depth;
  std::vector<int32_t> subtree_end;
  std::vector<int32_t> token_begin;  // tokens[token_begin[i], token_begin[i+1]): ids ending at node i
  std::vector<int32_t> tokens;
  int32_t max_length = 0;
};

// `keys` sorted by (bytes, id); every key non-empty.
FlatTrie BuildFlatTrie(const std::vector<std::pair<std::string_view, int32_t>>& keys) {
  FlatTrie t;
  // `path[d]` is the node index at depth d+1 on the current root-to-leaf path.
  std::vector<int32_t> path;
  std::vector<std::vector<int32_t>> node_ids;
  std::string_view prev;
  for (const auto& [key, id] : keys) {
    t.max_length = std::max<int32_t>(t.max_length, static_cast<int32_t>(key.size()));
    size_t common = 0;
    const size_t n = std::min(prev.size(), key.size());
    while (common < n && prev[common] == key[common]) ++common;
    while (path.size() > common) {
      t.subtree_end[path.back()] = static_cast<int32_t>(t.byte.size());
      path.pop_back();
    }
    for (size_t d = common; d < key.size(); ++d) {
      path.push_back(static_cast<int32_t>(t.byte.size()));
      t.byte.push_back(static_cast<uint8_t>(key[d]));
      t.depth.push_back(static_cast<uint16_t>(d + 1));
      t.subtree_end.push_back(0);
      node_ids.emplace_back();
    }
    node_ids[path.back()].push_back(id);
    prev = key;
  }
  while (!path.empty()) {
    t.subtree_end[path.back()] = static_cast<int32_t>(t.byte.size());
    path.pop_back();
  }
  for (const std::vector<int32_t>& ids : node_ids) {
    t.token_begin.push_back(static_cast<int32_t>(t.tokens.size()));
    t.tokens.insert(t.tokens.end(), ids.begin(), ids.end());
  }
  t.token_begin.push_back(static_cast<int32_t>(t.tokens.size()));
  return t;
}

}  // namespace

void Vocabulary::BuildTrie() {
  std::vector<std::pair<std::string_view, int32_t>> keys;
  for (int32_t i = 0; i < width_; ++i) {
    if (text_[i]) keys.emplace_back(tokens_[i], i);
  }
  std::sort(keys.begin(), keys.end());
  FlatTrie t = BuildFlatTrie(keys);
  max_token_length_ = t.max_length;
  const auto n = static_cast<int32_t>(t.byte.size());
  trie_nodes_.resize(static_cast<size_t>(n) + 1);
  for (int32_t i = 0; i < n; ++i) {
    const int32_t own = t.token_begin[i + 1] - t.token_begin[i];
    trie_nodes_[i] = {t.subtree_end[i], own > 0 ? t.tokens[t.token_begin[i]] : -1, -1, t.depth[i], t.byte[i],
                      static_cast<uint8_t>(own > 1 ? kMoreTokens : 0)};
  }
  trie_nodes_[n] = {n, -1, -1, 0, 0, 0};  // the sentinel
  constexpr int32_t kRow = kDepthCounted + 2;
  byte_depth_nodes_.assign(256 * kRow, 0);
  for (int32_t i = 0; i < n; ++i) {
    int32_t* row = byte_depth_nodes_.data() + t.byte[i] * kRow;
    ++row[std::min<int32_t>(t.depth[i], kDepthCounted + 1)];
  }
  for (int32_t b = 0; b < 256; ++b) {
    for (int32_t d = 1; d < kRow; ++d) byte_depth_nodes_[b * kRow + d] += byte_depth_nodes_[b * kRow + d - 1];
  }
  trie_tokens_ = std::move(t.tokens);
  trie_token_begin_ = std::move(t.token_begin);
  for (int32_t& r : trie_root_child_) r = -1;
  for (int32_t i = 0; i < n; i = t.subtree_end[i]) trie_root_child_[t.byte[i]] = i;
  ComputeSubtreeSummaries(t.byte, t.depth);
  // The ASCII tokens in node order, and where each node's subtree starts among them.
  std::vector<uint8_t> ascii_path(static_cast<size_t>(max_token_length_) + 1, 1);  // by depth
  trie_ascii_begin_.resize(static_cast<size_t>(n) + 1);
  for (int32_t i = 0; i < n; ++i) {
    trie_ascii_begin_[i] = static_cast<int32_t>(trie_ascii_tokens_.size());
    const bool ascii = ascii_path[t.depth[i] - 1] != 0 && t.byte[i] < 0x80;
    ascii_path[t.depth[i]] = ascii;
    if (!ascii) continue;
    for (int32_t k = trie_token_begin_[i]; k < trie_token_begin_[i + 1]; ++k) {
      trie_ascii_tokens_.push_back(trie_tokens_[k]);
    }
  }
  trie_ascii_begin_[n] = static_cast<int32_t>(trie_ascii_tokens_.size());
}

namespace {

// UTF-8 decoder states for the trie summaries: kStart (at a boundary), kError, or the number
// of continuation bytes still expected together with the allowed range of the next one.
struct Utf8State {
  int8_t need = 0;  // -1: error
  uint8_t lo = 0x80, hi = 0xBF;
};

Utf8State Utf8Step(Utf8State s, uint8_t b) {
  if (s.need < 0) return s;
  if (s.need > 0) {
    if (b < s.lo || b > s.hi) return {-1, 0, 0};
    return {static_cast<int8_t>(s.need - 1), 0x80, 0xBF};
  }
  if (b < 0x80) return {0, 0x80, 0xBF};
  const Utf8Lead lead = Utf8LeadOf(b);
  if (lead.continuations == 0) return {-1, 0, 0};  // a continuation byte, C0-C1, F5-FF
  return {static_cast<int8_t>(lead.continuations), lead.lo, lead.hi};
}

}  // namespace

void Vocabulary::ComputeSubtreeSummaries(const std::vector<uint8_t>& byte, const std::vector<uint16_t>& depth) {
  const int32_t n = trie_size();
  // UTF-8 state of every node's path from the root, top-down (a parent precedes its children).
  std::vector<Utf8State> state(n);
  std::vector<Utf8State> by_depth(static_cast<size_t>(max_token_length_) + 1);
  for (int32_t i = 0; i < n; ++i) {
    state[i] = Utf8Step(by_depth[depth[i] - 1], byte[i]);
    by_depth[depth[i]] = state[i];
  }
  // Byte sets, heights and validity of the nodes with children, bottom-up (children follow
  // their parent in DFS order).
  struct Summary {
    uint64_t below[4];
    int32_t height;
    int32_t children;
  };
  std::vector<Summary> summaries;
  std::vector<int32_t> summary_of(n, -1);
  std::vector<bool> all_valid_below(n, true);
  for (int32_t i = n - 1; i >= 0; --i) {
    TrieNode& node = trie_nodes_[i];
    if (node.subtree_end == i + 1) continue;  // leaf
    Summary sum{{0, 0, 0, 0}, 0, 0};
    bool valid = true;
    for (int32_t j = i + 1; j < node.subtree_end; j = trie_nodes_[j].subtree_end) {
      ++sum.children;
      sum.below[byte[j] >> 6] |= 1ull << (byte[j] & 63);
      if (summary_of[j] >= 0) {
        const Summary& child = summaries[summary_of[j]];
        sum.height = std::max(sum.height, child.height + 1);
        for (int q = 0; q < 4; ++q) sum.below[q] |= child.below[q];
      } else {
        sum.height = std::max(sum.height, 1);
      }
      valid = valid && state[j].need >= 0 && all_valid_below[j];
    }
    all_valid_below[i] = valid;
    if (valid && state[i].need == 0) node.flags |= kUtf8Below;
    summary_of[i] = static_cast<int32_t>(summaries.size());
    summaries.push_back(sum);
  }
  // The blocks, in node order (the walk's order).
  trie_inner_.clear();
  for (int32_t i = 0; i < n; ++i) {
    if (summary_of[i] < 0) continue;
    if (trie_inner_.size() > static_cast<size_t>(INT32_MAX)) throw CoreError::Usage("vocabulary trie too large");
    TrieNode& node = trie_nodes_[i];
    const Summary& sum = summaries[summary_of[i]];
    node.inner = static_cast<int32_t>(trie_inner_.size());
    trie_inner_.insert(trie_inner_.end(), sum.below, sum.below + 4);
    trie_inner_.push_back(static_cast<uint64_t>(static_cast<uint32_t>(sum.children)) << 32 |
                          static_cast<uint32_t>(sum.height));
    if (sum.children < kWideChildren) continue;
    node.flags |= kWideNode;
    const size_t bytes_at = trie_inner_.size();
    trie_inner_.resize(bytes_at + 4 + static_cast<size_t>(sum.children + 1) / 2, 0);
    int32_t rank = 0;
    for (int32_t j = i + 1; j < node.subtree_end; j = trie_nodes_[j].subtree_end, ++rank) {
      const uint8_t b = byte[j];
      trie_inner_[bytes_at + (b >> 6)] |= 1ull << (b & 63);
      trie_inner_[bytes_at + 4 + rank / 2] |= static_cast<uint64_t>(static_cast<uint32_t>(j)) << (32 * (rank & 1));
    }
  }
}

namespace {
// The length in bytes of t's plain prefix, its characters in `chars` (a valid partial
// character ending the token counts as one), and in `multibyte_end` the number of characters
// up to its last multi-byte one (0: none). A multi-byte character after the first
// Vocabulary::kMultibytePlainReach characters ends the prefix (its token has a suffix).
size_t PlainPrefix(const std::string& t, int32_t* chars, int32_t* multibyte_end) {
  size_t i = 0;
  *chars = 0;
  *multibyte_end = 0;
  while (i < t.size()) {
    const auto b = static_cast<uint8_t>(t[i]);
    if (b < 0x80) {
      if (!IsPlainAscii(b)) return i;
      ++i;
      ++*chars;
      continue;
    }
    if (*chars >= Vocabulary::kMultibytePlainReach) return i;
    Utf8State st = Utf8Step(Utf8State{}, b);
    if (st.need <= 0) return i;  // a continuation byte or an invalid lead
    size_t j = i + 1;
    while (j < t.size() && st.need > 0) {
      st = Utf8Step(st, static_cast<uint8_t>(t[j]));
      if (st.need < 0) return i;
      ++j;
    }
    i = j;  // a whole character, or a valid partial one ending the token
    *multibyte_end = ++*chars;
  }
  return i;
}
}  // namespace

void Vocabulary::BuildFirstCharIndex() {
  // The first character's nodes: a plain ASCII byte's root child, or the node where a plain
  // lead's character completes (below a lead, the walk follows the UTF-8 decoder down to it).
  std::vector<std::pair<uint8_t, int32_t>> after;  // (byte, node) of the nodes below them
  std::vector<Utf8State> by_depth(static_cast<size_t>(max_token_length_) + 1);  // below a lead
  bad_first_char_tokens_.clear();
  first_char_nodes_ = 0;
  auto add_children = [&](int32_t i) {
    ++first_char_nodes_;
    for (int32_t j = i + 1; j < trie_nodes_[i].subtree_end; j = trie_nodes_[j].subtree_end) {
      after.emplace_back(trie_nodes_[j].byte, j);
    }
  };
  for (int b = 0; b < 256; ++b) {
    const int32_t root = trie_root_child_[b];
    if (root < 0) continue;
    const auto lead = static_cast<uint8_t>(b);
    if (lead < 0x80) {
      if (IsPlainAscii(lead)) add_children(root);
      continue;
    }
    const Utf8State first = Utf8Step(Utf8State{}, lead);
    if (first.need <= 0) continue;  // no lead byte: never a plain character's start
    by_depth[1] = first;
    for (int32_t j = root + 1; j < trie_nodes_[root].subtree_end;) {
      const TrieNode& at = trie_nodes_[j];
      const Utf8State st = Utf8Step(by_depth[at.depth - 1], at.byte);
      if (st.need < 0) {
        for (int32_t k = trie_token_begin_[j]; k < trie_token_begin_[at.subtree_end]; ++k) {
          bad_first_char_tokens_.push_back(trie_tokens_[k]);
        }
        j = at.subtree_end;
      } else if (st.need == 0) {
        add_children(j);
        j = at.subtree_end;
      } else {
        by_depth[at.depth] = st;
        ++j;
      }
    }
  }
  std::sort(after.begin(), after.end());
  after_first_char_.clear();
  after_first_char_begin_.fill(0);
  for (const auto& [byte, node] : after) {
    ++after_first_char_begin_[byte + 1];
    after_first_char_.push_back(node);
  }
  for (int y = 0; y < 256; ++y) after_first_char_begin_[y + 1] += after_first_char_begin_[y];
}

void Vocabulary::BuildPlainSplit() {
  plain_mask_.assign(static_cast<size_t>(mask_words()), 0);
  std::vector<std::string> keys;  // bucket byte + suffix
  std::vector<int32_t> key_ids;
  std::vector<std::pair<int32_t, int32_t>> plain;  // (characters, id)
  max_plain_chars_ = 0;
  max_suffix_prefix_chars_ = 0;
  multibyte_plain_reach_ = 0;
  for (int32_t id = 0; id < width_; ++id) {
    if (!text_[id]) continue;
    const std::string& t = tokens_[id];
    int32_t chars = 0, multibyte_end = 0;
    const size_t p = PlainPrefix(t, &chars, &multibyte_end);
    max_plain_chars_ = std::max(max_plain_chars_, chars);
    multibyte_plain_reach_ = std::max(multibyte_plain_reach_, multibyte_end);
    if (p == t.size()) {
      plain_mask_[id >> 5] |= 1u << (id & 31);
      plain.emplace_back(chars, id);
    } else {
      max_suffix_prefix_chars_ = std::max(max_suffix_prefix_chars_, chars);
      keys.push_back(static_cast<char>(std::min(chars, kSuffixBucketCap)) + t.substr(p));
      key_ids.push_back(id);
    }
  }
  // By characters, then in the trie's (byte) order: tokens decided one by one share their
  // prefixes with the one before (Matcher::DecideTokens).
  std::vector<int32_t> trie_rank(static_cast<size_t>(width_), 0);
  for (size_t k = 0; k < trie_tokens_.size(); ++k) {
    trie_rank[static_cast<size_t>(trie_tokens_[k])] = static_cast<int32_t>(k);
  }
  for (auto& [chars, id] : plain) id = trie_rank[static_cast<size_t>(id)];
  std::sort(plain.begin(), plain.end());
  plain_chars_begin_.clear();
  for (int32_t n = 0; n <= max_plain_chars_ + 1; ++n) {
    const auto first = std::lower_bound(plain.begin(), plain.end(), std::make_pair(n, INT32_MIN));
    plain_chars_begin_.push_back(static_cast<int32_t>(first - plain.begin()));
  }
  plain_by_chars_.clear();
  plain_text_.clear();
  plain_text_begin_.assign(1, 0);
  for (const auto& [chars, rank] : plain) {
    const int32_t id = trie_tokens_[static_cast<size_t>(rank)];
    plain_by_chars_.push_back(id);
    plain_text_ += tokens_[id];
    if (plain_text_.size() > static_cast<size_t>(INT32_MAX)) throw CoreError::Usage("vocabulary too large");
    plain_text_begin_.push_back(static_cast<int32_t>(plain_text_.size()));
  }
  std::vector<std::pair<std::string_view, int32_t>> suffixes;
  for (size_t k = 0; k < keys.size(); ++k) suffixes.emplace_back(keys[k], key_ids[k]);
  std::sort(suffixes.begin(), suffixes.end());
  FlatTrie t = BuildFlatTrie(suffixes);
  const auto n = static_cast<int32_t>(t.byte.size());
  for (int32_t i = 0; i < n; ++i) {
    suffix_nodes_.push_back({t.subtree_end[i], t.token_begin[i], t.depth[i], t.byte[i]});
  }
  suffix_nodes_.push_back({n, t.token_begin[n], 0, 0});  // the sentinel
  suffix_tokens_ = std::move(t.tokens);
}

void Vocabulary::BuildRestTrie() {
  const int32_t n = trie_size();
  std::vector<uint8_t> keep(static_cast<size_t>(n), 0);
  std::vector<int32_t> parent(static_cast<size_t>(n), -1), open;
  auto plain = [this](int32_t id) { return (plain_mask_[id >> 5] >> (id & 31) & 1) != 0; };
  for (int32_t i = 0; i < n; ++i) {
    while (!open.empty() && i >= trie_nodes_[open.back()].subtree_end) open.pop_back();
    parent[i] = open.empty() ? -1 : open.back();
    open.push_back(i);
    for (int32_t k = trie_token_begin_[i]; k < trie_token_begin_[i + 1]; ++k) {
      if (!plain(trie_tokens_[k])) keep[i] = 1;
    }
  }
  // (Children come after their parent: one backward pass marks every ancestor.)
  for (int32_t i = n - 1; i >= 0; --i) {
    if (keep[i] && parent[i] >= 0) keep[parent[i]] = 1;
  }
  std::vector<int32_t> index(static_cast<size_t>(n) + 1, 0);  // kept nodes before node i
  for (int32_t i = 0; i < n; ++i) index[i + 1] = index[i] + keep[i];
  rest_nodes_.clear();
  rest_tokens_.clear();
  for (int32_t i = 0; i < n; ++i) {
    if (!keep[i]) continue;
    const TrieNode& at = trie_nodes_[i];
    rest_nodes_.push_back({index[at.subtree_end], static_cast<int32_t>(rest_tokens_.size()), at.depth, at.byte});
    for (int32_t k = trie_token_begin_[i]; k < trie_token_begin_[i + 1]; ++k) {
      if (!plain(trie_tokens_[k])) rest_tokens_.push_back(trie_tokens_[k]);
    }
  }
  rest_nodes_.push_back({index[n], static_cast<int32_t>(rest_tokens_.size()), 0, 0});  // the sentinel
  // The quote nodes: the path's ASCII bytes per depth (and whether a byte past 0x7F is on it).
  std::vector<std::array<uint64_t, 2>> path(static_cast<size_t>(max_token_length_) + 1, {0, 0});
  std::vector<uint8_t> wide(static_cast<size_t>(max_token_length_) + 1, 0);
  std::vector<uint16_t> signature(static_cast<size_t>(max_token_length_) + 1, 0);  // the path's byte groups
  std::vector<std::pair<uint64_t, SplitNode>> candidates;  // by (byte, path signature, node)
  quote_nodes_.clear();
  for (int32_t i = 0; i < n; ++i) {
    const TrieNode& at = trie_nodes_[i];
    const size_t d = at.depth;
    if ((at.byte == '"' || at.byte == '\\') && !wide[d - 1]) quote_nodes_.push_back({i, {path[d - 1][0], path[d - 1][1]}});
    if (!wide[d - 1]) {
      const uint64_t order =
          static_cast<uint64_t>(at.byte) << 48 | static_cast<uint64_t>(signature[d - 1]) << 32 | static_cast<uint32_t>(i);
      candidates.push_back({order, {{path[d - 1][0], path[d - 1][1]}, i, static_cast<int32_t>(d)}});
    }
    path[d] = path[d - 1];
    wide[d] = wide[d - 1] || at.byte >= 0x80;
    signature[d] = signature[d - 1];
    if (at.byte < 0x80) {
      path[d][at.byte >> 6] |= 1ull << (at.byte & 63);
      signature[d] = static_cast<uint16_t>(signature[d] | 1u << ByteGroup(at.byte));
    }
  }
  std::sort(candidates.begin(), candidates.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  split_nodes_.clear();
  split_runs_.clear();
  split_nodes_.reserve(candidates.size());
  split_run_begin_.fill(0);
  for (size_t k = 0; k < candidates.size(); ++k) {
    const uint64_t c = candidates[k].first;
    if (k == 0 || c >> 32 != candidates[k - 1].first >> 32) {
      split_runs_.push_back({static_cast<uint16_t>(c >> 32), static_cast<int32_t>(k)});
      ++split_run_begin_[(c >> 48) + 1];
    }
    split_nodes_.push_back(candidates[k].second);
  }
  split_runs_.push_back({0, static_cast<int32_t>(split_nodes_.size())});  // the sentinel
  for (int b = 0; b < 256; ++b) split_run_begin_[b + 1] += split_run_begin_[b];
}

void Vocabulary::BuildAsciiGroups() {
  for (int b = 0; b < 128; ++b) byte_group_bytes_[ByteGroup(static_cast<uint8_t>(b))][b >> 6] |= 1ull << (b & 63);
  auto signature = [this](const AsciiToken& t) {
    uint16_t sig = 0;
    for (int g = 0; g < kByteGroups; ++g) {
      if ((t.bytes[0] & byte_group_bytes_[g][0]) != 0 || (t.bytes[1] & byte_group_bytes_[g][1]) != 0) sig |= 1u << g;
    }
    return sig;
  };
  std::vector<std::pair<uint16_t, int32_t>> order;  // (signature, index): ids stay ascending within a group
  order.reserve(ascii_tokens_.size());
  for (size_t k = 0; k < ascii_tokens_.size(); ++k) order.emplace_back(signature(ascii_tokens_[k]), static_cast<int32_t>(k));
  std::sort(order.begin(), order.end());
  std::vector<AsciiToken> sorted;
  sorted.reserve(order.size());
  ascii_ids_.clear();
  ascii_groups_.clear();
  ascii_group_masks_.clear();
  const auto n = static_cast<int32_t>(order.size());
  for (int32_t k = 0; k < n; ++k) {
    if (k == 0 || order[k].first != order[k - 1].first) ascii_groups_.push_back({order[k].first, k, -1, 0});
    sorted.push_back(ascii_tokens_[order[k].second]);
    ascii_ids_.push_back(sorted.back().id);
    int32_t& longest = ascii_groups_.back().max_length;
    longest = std::max(longest, sorted.back().length);
  }
  ascii_groups_.push_back({0, n, -1, 0});  // the sentinel
  ascii_tokens_ = std::move(sorted);
  // A group of more tokens than a mask has words is taken faster as a mask (a few of them).
  const size_t n_words = static_cast<size_t>(mask_words());
  for (size_t k = 0; k + 1 < ascii_groups_.size(); ++k) {
    AsciiGroup& g = ascii_groups_[k];
    if (static_cast<size_t>(ascii_groups_[k + 1].begin - g.begin) <= n_words) continue;
    g.mask = static_cast<int32_t>(ascii_group_masks_.size() / n_words);
    ascii_group_masks_.resize(ascii_group_masks_.size() + n_words, 0);
    uint32_t* m = ascii_group_masks_.data() + static_cast<size_t>(g.mask) * n_words;
    for (int32_t j = g.begin; j < ascii_groups_[k + 1].begin; ++j) m[ascii_ids_[j] >> 5] |= 1u << (ascii_ids_[j] & 31);
  }
}

void Vocabulary::ByteGroupsOf(const uint64_t* bytes, uint32_t& touched, uint32_t& whole) const {
  touched = whole = 0;
  for (int g = 0; g < kByteGroups; ++g) {
    const std::array<uint64_t, 2>& gb = byte_group_bytes_[g];
    if ((gb[0] & bytes[0]) != 0 || (gb[1] & bytes[1]) != 0) touched |= 1u << g;
    if ((gb[0] & ~bytes[0]) == 0 && (gb[1] & ~bytes[1]) == 0) whole |= 1u << g;
  }
}

int32_t Vocabulary::FillAlphabetMask(const uint64_t* alphabet, uint32_t* m) const {
  const size_t n_words = static_cast<size_t>(mask_words());
  uint32_t touched = 0, whole = 0;
  ByteGroupsOf(alphabet, touched, whole);
  int32_t longest = 0;
  for (size_t k = 0; k + 1 < ascii_groups_.size(); ++k) {
    const AsciiGroup& g = ascii_groups_[k];
    if ((g.signature & ~touched) != 0) continue;  // each token has a byte outside the alphabet
    const int32_t end = ascii_groups_[k + 1].begin;
    if ((g.signature & ~whole) == 0) {  // every token's bytes are the alphabet's
      if (g.mask >= 0) {
        const uint32_t* gm = ascii_group_masks_.data() + static_cast<size_t>(g.mask) * n_words;
        for (size_t w = 0; w < n_words; ++w) m[w] |= gm[w];
      } else {
        for (int32_t j = g.begin; j < end; ++j) m[ascii_ids_[j] >> 5] |= 1u << (ascii_ids_[j] & 31);
      }
      longest = std::max(longest, g.max_length);
      continue;
    }
    for (int32_t j = g.begin; j < end; ++j) {
      const AsciiToken& t = ascii_tokens_[j];
      if ((t.bytes[0] & ~alphabet[0]) == 0 && (t.bytes[1] & ~alphabet[1]) == 0) {
        m[t.id >> 5] |= 1u << (t.id & 31);
        longest = std::max(longest, t.length);
      }
    }
  }
  return longest;
}

const uint32_t* Vocabulary::alphabet_mask(const uint64_t* alphabet, bool compute) const {
  if (alphabet[2] != 0 || alphabet[3] != 0) return nullptr;
  const std::array<uint64_t, 4> key{alphabet[0], alphabet[1], 0, 0};
  std::lock_guard<std::mutex> lock(alphabet_mu_);
  auto it = alphabet_masks_.find(key);
  if (it != alphabet_masks_.end()) return it->second->data();
  if (!compute || alphabet_masks_.size() >= kMaxAlphabetMasks) return nullptr;
  auto mask = std::make_unique<std::vector<uint32_t>>(static_cast<size_t>(mask_words()), 0);
  FillAlphabetMask(key.data(), mask->data());
  const uint32_t* out = mask->data();
  alphabet_masks_.emplace(key, std::move(mask));
  return out;
}

const Vocabulary::LoopSplit* Vocabulary::loop_split(const uint64_t* ascii, bool compute, int first,
                                                   const uint64_t* wide) const {
  const bool keeps_wide = first >= 0 && wide != nullptr;
  const std::array<uint64_t, 5> key{ascii[0], ascii[1], first < 0 ? 256u : static_cast<uint64_t>(first),
                                    keeps_wide ? wide[0] : 0, keeps_wide ? wide[1] : 0};
  std::lock_guard<std::mutex> lock(loop_split_mu_);
  auto it = loop_splits_.find(key);
  if (it != loop_splits_.end()) return it->second.get();
  if (!compute || loop_splits_.size() >= kMaxLoopSplits) return nullptr;
  int32_t begin = 0, end = trie_size();  // the nodes scanned
  auto split = std::make_unique<LoopSplit>();
  std::vector<uint32_t>& mask = split->mask;
  mask.assign(static_cast<size_t>(mask_words()), 0);
  auto set_ids = [&mask](const std::vector<int32_t>& ids, int32_t from, int32_t to) {  // ids[from, to)
    for (int32_t k = from; k < to; ++k) mask[ids[k] >> 5] |= 1u << (ids[k] & 31);
  };
  auto set_tokens = [&](int32_t from, int32_t to) { set_ids(trie_tokens_, from, to); };
  auto in_set = [&key](uint8_t b) { return b < 128 && (key[b >> 6] >> (b & 63) & 1); };
  auto kept_wide = [&key](uint8_t b) { return b >= 128 && (key[3 + ((b - 128) >> 6)] >> (b & 63) & 1); };
  std::vector<int32_t> count(256, 0);
  std::vector<int32_t> found;
  if (first < 0) {
    // The tokens of L's bytes only, and the nodes on a byte outside L below a path of L's bytes:
    // a run of candidates whose path's byte groups L holds whole is taken whole, one whose path
    // has a group L has no byte of is skipped, the others are checked node by node.
    split->max_token = FillAlphabetMask(key.data(), mask.data());
    uint32_t touched = 0, whole = 0;
    ByteGroupsOf(key.data(), touched, whole);
    int32_t deepest = 0;  // the deepest boundary node
    for (int b = 0; b < 256; ++b) {
      if (in_set(static_cast<uint8_t>(b))) continue;
      const size_t from = found.size();
      ForEachRootBoundary(key.data(), touched, whole, static_cast<uint8_t>(b), [&](const SplitNode& c) {
        found.push_back(c.node);
        deepest = std::max(deepest, c.depth);
        return true;
      });
      std::sort(found.begin() + static_cast<std::ptrdiff_t>(from), found.end());  // node order
      count[b] = static_cast<int32_t>(found.size() - from);
    }
    // A chain must reach each boundary node's parent and the mask's longest token.
    split->max_depth = std::max(split->max_token, deepest - 1);
    begin = end;  // no scan
  }
  if (first >= 0) {
    // Below the first byte's node, which belongs to every path whatever its byte. (Past 0x7F
    // no configuration a split serves follows it: see below.)
    const int32_t root = trie_root_child(static_cast<uint8_t>(first));
    if (root < 0 || first >= 0x80) return nullptr;
    set_tokens(trie_token_begin_[root], trie_token_begin_[root + 1]);
    split->max_depth = split->max_token = 1;
    begin = root + 1;
    end = trie_nodes_[root].subtree_end;
  }
  // A first byte's split: a preorder scan of its subtree. A node is reached only through nodes
  // of L's bytes (a skipped subtree resumes at its next sibling or an ancestor's), so a node on
  // another byte is a boundary, and the tokens of the nodes on L's bytes are the mask's. A
  // subtree is skipped once no ASCII byte outside L is below: its ASCII tokens are L's (set
  // from the ASCII tokens in node order), the others hold a byte past 0x7F. Boundary nodes
  // past 0x7F are not kept: a split serves only configurations whose chains read no such byte
  // (Matcher::SetChain), where they are dead; but for the `wide` bytes, whose boundary nodes are
  // kept, so a subtree with one of them below is scanned on.
  constexpr int32_t kScanSmallSubtree = 4;
  for (int32_t i = begin; i < end;) {
    const TrieNode& at = trie_nodes_[i];
    // The scan goes on at the next sibling or the first child (a sentinel ends the nodes),
    // cold on a large vocabulary: fetch both early (-20% on Gemma 3's lower-case letters).
    __builtin_prefetch(&trie_nodes_[at.subtree_end]);
    if (trie_nodes_[i + 1].inner >= 0) __builtin_prefetch(&trie_inner_[static_cast<size_t>(trie_nodes_[i + 1].inner)]);
    if (!in_set(at.byte)) {
      if (at.byte < 0x80 || kept_wide(at.byte)) {
        found.push_back(i);
        ++count[at.byte];
      }
      i = at.subtree_end;
      continue;
    }
    const uint64_t* below = trie_descendant_bytes(i);
    if (below == nullptr || ((below[0] & ~key[0]) | (below[1] & ~key[1]) | below[2] | below[3]) == 0) {
      set_tokens(trie_token_begin_[i], trie_token_begin_[at.subtree_end]);  // L's bytes only below
      // The subtree's deepest node is a leaf, so a token of its length.
      const int32_t deepest = at.depth + trie_height(i);
      split->max_depth = std::max(split->max_depth, deepest);
      split->max_token = std::max(split->max_token, deepest);
      i = at.subtree_end;
      continue;
    }
    // (A small subtree is cheaper to scan on: its nodes are in the cache lines read next.)
    if (((below[0] & ~key[0]) | (below[1] & ~key[1]) | (below[2] & key[3]) | (below[3] & key[4])) == 0 &&
        at.subtree_end - i > kScanSmallSubtree) {
      const int32_t from = trie_ascii_begin_[i], to = trie_ascii_begin_[at.subtree_end];
      set_ids(trie_ascii_tokens_, from, to);
      // (An upper bound: the subtree's longest token may be one of the others.)
      if (to > from) split->max_token = std::max(split->max_token, at.depth + trie_height(i));
      i = at.subtree_end;
      continue;
    }
    set_tokens(trie_token_begin_[i], trie_token_begin_[i + 1]);  // the node's own tokens
    split->max_depth = std::max<int32_t>(split->max_depth, at.depth);
    if (trie_token_begin_[i + 1] > trie_token_begin_[i]) split->max_token = std::max<int32_t>(split->max_token, at.depth);
    ++i;
  }
  split->max_depth = std::max(split->max_depth, split->max_token);
  split->begin[0] = 0;
  for (int b = 0; b < 256; ++b) split->begin[b + 1] = split->begin[b] + count[b];
  split->boundary.resize(found.size());
  std::vector<int32_t> next(split->begin.begin(), split->begin.end() - 1);
  for (int32_t i : found) split->boundary[next[trie_nodes_[i].byte]++] = i;  // node order within a byte
  const LoopSplit* out = split.get();
  loop_splits_.emplace(key, std::move(split));
  return out;
}

bool Vocabulary::FewRootBoundaries(const uint64_t* ascii, const uint64_t* bytes, int32_t depth, int64_t most) const {
  uint32_t touched = 0, whole = 0;
  ByteGroupsOf(ascii, touched, whole);
  int64_t n = 0;
  for (int q = 0; q < 2; ++q) {
    for (uint64_t w = bytes[q] & ~ascii[q]; w != 0; w &= w - 1) {
      ForEachRootBoundary(ascii, touched, whole, static_cast<uint8_t>(64 * q + __builtin_ctzll(w)),
                          [&](const SplitNode& c) {
                            n += c.depth <= depth ? 1 : 0;
                            return n <= most;
                          });
      if (n > most) return false;
    }
  }
  return true;
}

std::shared_ptr<const Vocabulary::ClassTrie> Vocabulary::class_trie(const std::array<uint8_t, 256>& of_byte,
                                                                   int32_t count, uint8_t excluded,
                                                                   int32_t max_nodes) const {
  std::pair<std::array<uint8_t, 257>, int32_t> key;
  std::copy(of_byte.begin(), of_byte.end(), key.first.begin());
  key.first[256] = excluded;
  key.second = max_nodes;
  std::lock_guard<std::mutex> lock(class_trie_mu_);
  auto it = class_tries_.find(key);
  if (it != class_tries_.end()) return it->second;
  if (num_class_tries_ >= kMaxClassTries) return nullptr;
  std::shared_ptr<const ClassTrie> trie = BuildClassTrie(of_byte, count, excluded, max_nodes);
  // (A partition found too fine is remembered too, a key's bytes, while there are fewer than
  // 1,024: a grammar compiled again does not scan the token trie again.)
  constexpr size_t kMaxFinePartitions = 1024;
  if (trie != nullptr) {
    ++num_class_tries_;
  } else if (class_tries_.size() - num_class_tries_ >= kMaxFinePartitions) {
    return nullptr;
  }
  class_tries_.emplace(key, trie);
  return trie;
}

std::shared_ptr<const Vocabulary::ClassTrie> Vocabulary::BuildClassTrie(const std::array<uint8_t, 256>& of_byte,
                                                                        int32_t count, uint8_t excluded,
                                                                        int32_t max_nodes) const {
  const auto n_classes = static_cast<size_t>(count);
  // One preorder pass over the token trie: node `at[d]` of the class trie holds the path to
  // depth d; kids[p * n_classes + c] is node p's child on class c (node 0 the root, -1 none).
  // Nodes are numbered as first met, which is not the class trie's own preorder.
  std::vector<int32_t> kids(n_classes * 1024, -1);
  std::vector<uint16_t> depth_of{0};
  std::vector<uint8_t> class_of{0};
  std::vector<int32_t> node_of(trie_tokens_.size(), -1);  // per token in trie order
  auto trie = std::make_shared<ClassTrie>();
  std::vector<int32_t> at(static_cast<size_t>(max_token_length_) + 1, 0);
  const int64_t n_trie = trie_size();
  for (int32_t i = 0; i < trie_size();) {
    // A class trie grows fastest over the first tokens (later ones mostly spell known strings):
    // one that outgrows its share of `max_nodes` once past a sixteenth of the token trie would
    // pass it, and is given up there rather than at the end of the scan.
    if ((i & 4095) == 0 && 16 * static_cast<int64_t>(i) >= n_trie &&
        static_cast<int64_t>(depth_of.size()) * n_trie > static_cast<int64_t>(max_nodes) * i) {
      return nullptr;
    }
    const TrieNode& node = trie_nodes_[i];
    if (node.byte == excluded) {
      const int32_t end = trie_token_begin_[node.subtree_end];
      trie->excluded.insert(trie->excluded.end(), trie_tokens_.begin() + trie_token_begin_[i], trie_tokens_.begin() + end);
      i = node.subtree_end;
      continue;
    }
    const size_t slot = static_cast<size_t>(at[node.depth - 1]) * n_classes + of_byte[node.byte];
    if (kids[slot] < 0) {
      const auto made = static_cast<int32_t>(depth_of.size());
      if (made > max_nodes) return nullptr;
      kids[slot] = made;
      depth_of.push_back(node.depth);
      class_of.push_back(of_byte[node.byte]);
      if (kids.size() < depth_of.size() * n_classes) kids.resize(2 * kids.size(), -1);
    }
    const int32_t k = kids[slot];
    at[node.depth] = k;
    // Its children look up their class nodes in its row next: fetch the row now (the rows of a
    // large class trie are scattered over megabytes).
    if (node.inner >= 0) __builtin_prefetch(&kids[static_cast<size_t>(k) * n_classes]);
    for (int32_t t = trie_token_begin_[i]; t < trie_token_begin_[i + 1]; ++t) node_of[static_cast<size_t>(t)] = k;
    ++i;
  }
  // Renumbered in preorder (children in class order), then each subtree's end from the depths.
  const auto n = static_cast<int32_t>(depth_of.size()) - 1;
  std::array<uint8_t, 256> byte_of{};  // the smallest byte of each class (never `excluded`)
  for (int b = 255; b >= 0; --b) {
    if (b != excluded) byte_of[of_byte[b]] = static_cast<uint8_t>(b);
  }
  std::vector<int32_t> order(depth_of.size(), -1);
  trie->depth.reserve(static_cast<size_t>(n));
  trie->byte.reserve(static_cast<size_t>(n));
  std::vector<int32_t> pending;
  auto push_kids = [&](int32_t p) {
    for (size_t c = n_classes; c-- > 0;) {
      const int32_t k = kids[static_cast<size_t>(p) * n_classes + c];
      if (k >= 0) pending.push_back(k);
    }
  };
  push_kids(0);
  while (!pending.empty()) {
    const int32_t k = pending.back();
    pending.pop_back();
    order[static_cast<size_t>(k)] = trie->size();
    trie->depth.push_back(depth_of[static_cast<size_t>(k)]);
    trie->byte.push_back(byte_of[class_of[static_cast<size_t>(k)]]);
    push_kids(k);
  }
  trie->subtree_end.assign(static_cast<size_t>(n), n);
  std::vector<int32_t> open;  // nodes whose subtree has not ended yet
  for (int32_t j = 0; j < n; ++j) {
    while (!open.empty() && trie->depth[static_cast<size_t>(open.back())] >= trie->depth[static_cast<size_t>(j)]) {
      trie->subtree_end[static_cast<size_t>(open.back())] = j;
      open.pop_back();
    }
    open.push_back(j);
  }
  // Tokens by node, in trie order within a node.
  trie->token_begin.assign(static_cast<size_t>(n) + 1, 0);
  for (int32_t k : node_of) {
    if (k >= 0) ++trie->token_begin[static_cast<size_t>(order[static_cast<size_t>(k)]) + 1];
  }
  for (int32_t j = 0; j < n; ++j) trie->token_begin[static_cast<size_t>(j) + 1] += trie->token_begin[static_cast<size_t>(j)];
  trie->tokens.resize(static_cast<size_t>(trie->token_begin[static_cast<size_t>(n)]));
  std::vector<int32_t> next(trie->token_begin.begin(), trie->token_begin.end() - 1);
  for (size_t t = 0; t < node_of.size(); ++t) {
    if (node_of[t] >= 0) trie->tokens[static_cast<size_t>(next[static_cast<size_t>(order[static_cast<size_t>(node_of[t])])]++)] = trie_tokens_[t];
  }
  // Heights and plainness, children before parents (a node's children follow it in preorder).
  trie->height.assign(static_cast<size_t>(n), 0);
  trie->plain.assign(static_cast<size_t>(n), 1);
  for (int32_t j = n - 1; j >= 0; --j) {
    const auto u = static_cast<size_t>(j);
    for (int32_t t = trie->token_begin[u]; t < trie->token_begin[u + 1]; ++t) {
      const int32_t id = trie->tokens[static_cast<size_t>(t)];
      if (!(plain_mask_[static_cast<size_t>(id) >> 5] >> (id & 31) & 1)) trie->plain[u] = 0;
    }
    for (int32_t k = j + 1; k < trie->subtree_end[u]; k = trie->subtree_end[static_cast<size_t>(k)]) {
      trie->height[u] = std::max<uint16_t>(trie->height[u], static_cast<uint16_t>(trie->height[static_cast<size_t>(k)] + 1));
      trie->plain[u] = trie->plain[u] & trie->plain[static_cast<size_t>(k)];
    }
  }
  return trie;
}

Vocabulary::WideList Vocabulary::wide_list(int32_t begin, int32_t end) const {
  return {wide_pool_.data() + begin, wide_text_begin_.data() + begin, wide_text_.data(), end - begin};
}

Vocabulary::WideList Vocabulary::wide_tokens(uint8_t lead) const {
  return wide_list(wide_begin_[lead - 0xC0], wide_begin_[lead - 0xC0 + 1]);
}

Vocabulary::WideList Vocabulary::wide_tail_tokens(int32_t node) const {
  const auto at = std::lower_bound(wide_tail_nodes_.begin(), wide_tail_nodes_.end(), node);
  if (at == wide_tail_nodes_.end() || *at != node) return {};
  const auto k = static_cast<size_t>(at - wide_tail_nodes_.begin());
  return wide_list(wide_tail_begin_[k], wide_tail_begin_[k + 1]);
}

}  // namespace logitgate
