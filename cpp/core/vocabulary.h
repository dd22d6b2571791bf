// Vocabulary: exact bytes of every token id, plus the token trie the mask walk uses.
//
// Invariants:
// - ids are 0 .. width-1 (the model's logits width); ids with no bytes and special ids are
//   never in the trie, so grammar text can never produce them;
// - the trie is flat, in depth-first order of sorted token bytes: node i's subtree is
//   [i, subtree_end), so a walk skips a dead subtree with one assignment, and a node's
//   children are in byte order;
// - a node's depth (>= 1) is the length of its byte string (the root is implicit at depth 0).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
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

  // Flat trie (see the invariants above). One record per node, packed so that a walk reads one
  // record per node visited: the walk's visits are scattered (live children only), and with
  // a separate array per field each visit would cost a cache line per field. A node's token
  // id is in its record (a first visit of a trie region is bound by memory latency: an id in
  // another array costs a second miss per token).
  struct TrieNode {
    int32_t subtree_end;  // node i's subtree is [i, subtree_end)
    int32_t token;        // the id whose bytes end here (the first of several: kMoreTokens), or -1
    int32_t inner;        // offset of its summary block (nodes with children, see below), else -1
    uint16_t depth;       // length of the node's byte string (>= 1)
    uint8_t byte;
    uint8_t flags;        // kUtf8Below, kWideNode, kMoreTokens
  };
  static constexpr uint8_t kUtf8Below = 1;   // see trie_utf8_below
  static constexpr uint8_t kWideNode = 2;    // see trie_child_bytes
  static constexpr uint8_t kMoreTokens = 4;  // several ids share the node's bytes: see trie_node_tokens
  int32_t trie_size() const { return static_cast<int32_t>(trie_nodes_.size()) - 1; }
  // The trie nodes on byte `b` at depth `depth` or less (at any depth past kDepthCounted): at
  // least the boundary nodes on `b` that a split's chain of `depth` - 1 positions walks.
  static constexpr int32_t kDepthCounted = 16;
  int32_t nodes_on_byte_within(uint8_t b, int32_t depth) const {
    return byte_depth_nodes_[static_cast<size_t>(b) * (kDepthCounted + 2) +
                             static_cast<size_t>(std::min(depth, kDepthCounted + 1))];
  }
  // trie_size() records plus a sentinel.
  const TrieNode* trie_nodes() const { return trie_nodes_.data(); }
  // Every text token in trie order: node i's subtree holds trie_tokens()[trie_token_begin(i),
  // trie_token_begin(subtree_end)), and the node itself the first trie_token_begin(i + 1) -
  // trie_token_begin(i) of them.
  const std::vector<int32_t>& trie_tokens() const { return trie_tokens_; }
  int32_t trie_token_begin(int32_t i) const { return trie_token_begin_[i]; }
  int32_t max_token_length() const { return max_token_length_; }
  // The depth-1 trie node for first byte b, or -1 when no token starts with b.
  int32_t trie_root_child(uint8_t b) const { return trie_root_child_[b]; }
  // A node with children has a *summary block* in trie_inner_ (64-bit words, in node order),
  // read only where a shortcut may apply: the set of bytes on the nodes strictly below (words
  // 0-3, bit b of word b/64), the height of its subtree and its number of children (word 4).
  // Nodes with at least kWideChildren children ("wide" nodes) index their children by byte
  // in the same block, so that a walk that can follow few of them visits only those with one
  // more cache line or two: the children's byte set (words 5-8) and the children's node
  // indices in byte order (two per word from word 9).
  static constexpr int32_t kWideChildren = 8;
  // The set of bytes on the nodes strictly below node i (4 words), or nullptr for leaves.
  const uint64_t* trie_descendant_bytes(int32_t i) const {
    const int32_t k = trie_nodes_[i].inner;
    return k < 0 ? nullptr : &trie_inner_[static_cast<size_t>(k)];
  }
  // Length in bytes of the longest path below node i (0 for a leaf).
  int32_t trie_height(int32_t i) const {
    const int32_t k = trie_nodes_[i].inner;
    return k < 0 ? 0 : static_cast<int32_t>(trie_inner_[static_cast<size_t>(k) + 4] & 0xFFFFFFFFu);
  }
  // Number of children of node i, which must have children.
  int32_t trie_num_children(int32_t i) const {
    return static_cast<int32_t>(trie_inner_[static_cast<size_t>(trie_nodes_[i].inner) + 4] >> 32);
  }
  // True when node i ends on a UTF-8 character boundary and every path below it continues
  // with valid UTF-8 (complete characters, possibly ending in a valid partial one).
  bool trie_utf8_below(int32_t i) const { return (trie_nodes_[i].flags & kUtf8Below) != 0; }
  // The set of a wide node's children's bytes (4 words), nullptr for other nodes;
  // trie_child(i, b) is the child on byte b, which must be in that set.
  const uint64_t* trie_child_bytes(int32_t i) const {
    if (!(trie_nodes_[i].flags & kWideNode)) return nullptr;
    return &trie_inner_[static_cast<size_t>(trie_nodes_[i].inner) + 5];
  }
  int32_t trie_child(int32_t i, uint8_t b) const {
    const uint64_t* block = &trie_inner_[static_cast<size_t>(trie_nodes_[i].inner)];
    const uint64_t* bytes = block + 5;
    int32_t rank = 0;  // children with a smaller byte (they are in byte order)
    for (int q = 0; q < (b >> 6); ++q) rank += __builtin_popcountll(bytes[q]);
    rank += __builtin_popcountll(bytes[b >> 6] & ((1ull << (b & 63)) - 1));
    return static_cast<int32_t>(block[9 + rank / 2] >> (32 * (rank & 1)) & 0xFFFFFFFFu);
  }
  // The mask of every text token (mask_words() words): where a mask walk that expects to allow
  // most of the vocabulary starts before clearing what is not allowed.
  const uint32_t* text_mask() const { return text_mask_.data(); }
  // Plain text (printable ASCII but '"' and '\', and valid multi-byte UTF-8 characters) is
  // what string bodies and free text read: a configuration that returns to itself on every
  // plain character allows every *plain token* (plain characters, possibly ending in a valid
  // partial one), and any other token according to its *suffix* from its first byte that
  // starts no plain character. plain_mask() holds the plain tokens (mask_words() words); the
  // suffix trie holds the other tokens' suffixes (far fewer nodes than the vocabulary's trie):
  // a walk from such a configuration starts from the mask and walks only the suffixes.
  // A chain of configurations (the positions of a `maxLength` string: each plain character
  // leads to the next) is handled the same way with character counts: a plain token of n
  // characters (a trailing partial one counts) needs n positions, and a suffix starts at the
  // position after its token's plain prefix.
  const uint32_t* plain_mask() const { return plain_mask_.data(); }
  // The plain tokens ordered by character count, then by their bytes (so a run of them shares
  // prefixes): plain_by_chars()[plain_chars_begin(n), ...) are those of n characters or more
  // (n <= max_plain_chars() + 1).
  const std::vector<int32_t>& plain_by_chars() const { return plain_by_chars_; }
  int32_t plain_chars_begin(int32_t n) const { return plain_chars_begin_[n]; }
  // Their bytes, in the same order and in one piece (a run of them is read front to back).
  std::string_view plain_text(int32_t k) const {
    return std::string_view(plain_text_).substr(static_cast<size_t>(plain_text_begin_[k]),
                                                static_cast<size_t>(plain_text_begin_[k + 1] - plain_text_begin_[k]));
  }
  // The most characters of any token's plain part (a plain token, or a suffix token's prefix),
  // and of a suffix token's prefix alone.
  int32_t max_plain_chars() const { return max_plain_chars_; }
  int32_t max_suffix_prefix_chars() const { return max_suffix_prefix_chars_; }
  // Plain parts hold multi-byte characters only within their first multibyte_plain_reach()
  // characters, at most kMultibytePlainReach (a token with one further on is a suffix token
  // from there): a chain's step sets for multi-byte characters, which cost far more than the
  // ASCII ones, are needed only that far.
  static constexpr int32_t kMultibytePlainReach = 16;
  int32_t multibyte_plain_reach() const { return multibyte_plain_reach_; }
  // The trie below a token's first character, for a position that reads any plain character
  // and then a narrow set (a pattern's unescaped `.` between literals, `1.0`): the nodes whose
  // parent's path is exactly one plain character (a printable ASCII byte but '"' and '\', or a
  // valid multi-byte character), by their own byte y: [after_first_char(y), + num_after_first_char(y)).
  // first_char_nodes(): how many such parents there are (about the trie nodes a walk of every
  // first character visits).
  const int32_t* after_first_char(uint8_t y) const { return after_first_char_.data() + after_first_char_begin_[y]; }
  int32_t num_after_first_char(uint8_t y) const { return after_first_char_begin_[y + 1] - after_first_char_begin_[y]; }
  int32_t first_char_nodes() const { return first_char_nodes_; }
  // The text tokens whose first byte is a plain lead byte (0xC2-0xF4) and whose first
  // character is no valid UTF-8 (a lead, then a byte that cannot follow it).
  const std::vector<int32_t>& bad_first_char_tokens() const { return bad_first_char_tokens_; }
  // The text tokens holding the UTF-8 lead byte `lead` (0xC2-0xF4) anywhere, each once per
  // byte: [lead_tokens(lead), + num_lead_tokens(lead)). With num_tokens_with_leads (a sum over
  // a lead set, bit b - 192 of `leads` for lead b; a token with two of them counts twice),
  // they let a plain-text shortcut serve a configuration that reads every plain character but
  // those of a few lead bytes (a class without U+0085 or U+2028): those tokens are decided
  // one by one.
  const int32_t* lead_tokens(uint8_t lead) const { return lead_tokens_.data() + lead_begin_[lead - 0xC0]; }
  int32_t num_lead_tokens(uint8_t lead) const { return lead_begin_[lead - 0xC0 + 1] - lead_begin_[lead - 0xC0]; }
  int64_t num_tokens_with_leads(uint64_t leads) const {
    int64_t n = 0;
    for (uint64_t w = leads; w != 0; w &= w - 1) n += num_lead_tokens(static_cast<uint8_t>(0xC0 + __builtin_ctzll(w)));
    return n;
  }
  // The text tokens whose first byte is the lead byte `lead` (0xC2-0xF4). A token of whole
  // multi-byte characters only has its character count and the lead bytes it holds (bit
  // b - 0xC0 for lead b); the others (an ASCII byte after the first character, a partial
  // character) have `chars` 0, and their bytes are kept in list order (a walk over a list reads
  // them in order, where the vocabulary's own strings are scattered). A chain whose positions
  // each step every character of those leads along allows the first kind by their counts
  // (Matcher::WideTokensAlong), where walking their subtree visits a node per byte.
  struct WideToken {
    uint64_t leads;
    int32_t id;
    int32_t chars;
  };
  struct WideList {
    const WideToken* tokens = nullptr;
    const int32_t* text_begin = nullptr;  // token k's bytes: [text_begin[k], text_begin[k + 1]) of text
    const char* text = nullptr;           // (empty for a token of whole characters)
    int32_t size = 0;
  };
  WideList wide_tokens(uint8_t lead) const;
  // The same below a *wide tail node*: a node on a lead byte whose path above is ASCII bytes
  // only (` ` then the first byte of a Cyrillic word). Every token of its subtree, in trie
  // order, with the characters, leads and bytes of what it holds from that node on: a chain
  // that reads the ASCII path steps on with them as with a first lead byte's tokens. Empty
  // for any other node.
  WideList wide_tail_tokens(int32_t node) const;
  // The text tokens holding the plain ASCII byte `b` anywhere, each once per byte, kept only
  // for bytes that a 32nd of the text tokens or fewer hold (`<`, `{`, `|`; not letters):
  // [ascii_tokens(b), + num_ascii_tokens(b)), and -1 tokens for a byte not kept. They let the
  // plain-loop shortcut serve free text that reads every plain character back into itself but
  // a few rare ones (a trigger's or an exclusion's first character): those tokens are decided
  // one by one.
  const int32_t* ascii_tokens(uint8_t b) const { return ascii_byte_tokens_.data() + ascii_begin_[b]; }
  int32_t num_ascii_tokens(uint8_t b) const {
    return ascii_kept_[b] ? ascii_begin_[b + 1] - ascii_begin_[b] : -1;
  }
  // The suffix trie's first level is a *bucket* per character count of the plain prefix
  // (byte = that count, capped at kSuffixBucketCap: that bucket holds every longer prefix);
  // the suffix bytes are below it (depth 2 on). Buckets have no tokens of their own.
  static constexpr int32_t kSuffixBucketCap = 255;
  struct SuffixNode {
    int32_t subtree_end;  // like TrieNode's
    int32_t token_begin;  // its tokens: suffix_tokens()[token_begin, next record's token_begin)
    uint16_t depth;       // 1 for a bucket, else 1 + the length of the suffix so far
    uint8_t byte;
  };
  // suffix_size() records plus a sentinel (as for the trie).
  const SuffixNode* suffix_nodes() const { return suffix_nodes_.data(); }
  int32_t suffix_size() const { return static_cast<int32_t>(suffix_nodes_.size()) - 1; }
  const std::vector<int32_t>& suffix_tokens() const { return suffix_tokens_; }
  // The *rest trie*: the vocabulary trie cut to the paths to non-plain tokens (each node that has
  // one in its subtree, with only those tokens), in the same depth-first order, as SuffixNode
  // records (depth: the full token prefix's length). A configuration that keeps any plain text
  // viable allows every plain token; where it does not return to itself on plain text (the
  // start of a key whose pattern is searched for, which plain text moves from "not matched
  // yet" to "matched"), the other tokens' prefixes matter whole, and this is the part of the
  // trie that holds them: a fraction of the nodes, contiguous.
  const SuffixNode* rest_nodes() const { return rest_nodes_.data(); }
  int32_t rest_size() const { return static_cast<int32_t>(rest_nodes_.size()) - 1; }
  const std::vector<int32_t>& rest_tokens() const { return rest_tokens_; }
  // Number of tokens whose first byte is b, and whose first two bytes are b1 b2.
  int32_t tokens_with_first_byte(uint8_t b) const { return first_byte_tokens_[b]; }
  // Number of tokens whose first byte is in the byte set's first `n_words` words (bit b of
  // word b/64; 2 words: an ASCII set).
  int64_t tokens_with_first_byte_in(const uint64_t* bytes, int n_words) const {
    int64_t n = 0;
    for (int q = 0; q < n_words; ++q) {
      for (uint64_t w = bytes[q]; w != 0; w &= w - 1) n += first_byte_tokens_[64 * q + __builtin_ctzll(w)];
    }
    return n;
  }
  int32_t tokens_with_first_bytes(uint8_t b1, uint8_t b2) const { return pair_tokens_[b1 << 8 | b2]; }
  int32_t num_text_tokens() const { return static_cast<int32_t>(trie_tokens_.size()); }
  // The mask (mask_words() words) of the text tokens whose every byte is in `alphabet` (4
  // words, bit b of word b/64), for an ASCII alphabet (nullptr for others, and once
  // kMaxAlphabetMasks distinct alphabets are kept). Computed on first use per alphabet from
  // the ASCII tokens' byte groups (see AsciiGroup), and kept (grammars of one kind share
  // alphabets). Thread-safe. (Also the mask of a loop's ASCII set: see quote_nodes.)
  static constexpr size_t kMaxAlphabetMasks = 128;
  const uint32_t* alphabet_mask(const uint64_t* alphabet, bool compute = true) const;
  // The trie nodes on '"' and '\\' below a path of ASCII bytes, in node order, each with the set
  // of its path's bytes above it (2 words). A string body that loops on an ASCII set L (a
  // pattern's class) and reads no other byte but those two (its end and its escapes) allows the
  // tokens of L's bytes only (alphabet_mask(L)) and the subtrees of these nodes whose path is in
  // L: what its loop split would give, at the cost of one scan of the ASCII tokens where a new
  // set's split scans the whole trie (Matcher::QuoteLoopWalk).
  struct QuoteNode {
    int32_t node;
    uint64_t above[2];
  };
  const std::vector<QuoteNode>& quote_nodes() const { return quote_nodes_; }
  // A *loop split* over an ASCII byte set L: what a configuration that returns to itself on
  // every byte of L needs to decide every token, and a chain of configurations that each step
  // to the next on every byte of L (the positions of a bounded repetition of L) too. `mask`
  // holds the text tokens of L's bytes only (all allowed from such a loop; from a chain those
  // of at most as many bytes as the chain has steps). Every other token has a first byte
  // outside L after a prefix of L bytes (which leads back to the loop, or down the chain by
  // its length), at a *boundary node*: a trie node whose byte is not in L below a path of L
  // bytes (depth-1 nodes on other bytes included). Its subtree is decided by walking it from
  // the configuration its prefix leads to. The boundary nodes are grouped by byte,
  // boundary[begin[b], begin[b + 1]) on byte b, so that a configuration skips the bytes it
  // cannot read without visiting their nodes.
  // With a `first` byte (0-255), the split of that byte's subtree, for the configuration its
  // first byte leads to: paths are that byte then L's bytes, the mask holds the subtree's
  // tokens of such bytes only, and boundary nodes have depth 2 or more.
  // A first byte's split keeps only boundary nodes on ASCII bytes and on the bytes past 0x7F
  // of `wide` (2 words: bit b - 128 of word (b - 128) / 64; nullptr: none): it serves
  // configurations whose chains read no other byte past 0x7F (Matcher::SetChain and
  // FirstByteSplit check), where the others are dead. A root split keeps them all.
  // Computed on first use per set and first byte, and kept, at most kMaxLoopSplits of them
  // (nullptr once full, and when not computed yet and `compute` is false). Thread-safe. A
  // root split (no `first` byte) is built from indexes, with no trie walk: its mask as
  // alphabet_mask(L) is, its boundary nodes from the split candidates (split_nodes_) of the
  // bytes outside L whose path's byte groups L holds (reading no token's bytes and no trie
  // node but the boundary's, where a scan walks most of the trie). A first byte's split scans
  // the byte's subtree, skipping a subtree once no ASCII byte outside L is below it and taking
  // its ASCII tokens from trie_ascii_tokens_.
  struct LoopSplit {
    std::vector<uint32_t> mask;
    std::vector<int32_t> boundary;
    std::array<int32_t, 257> begin;
    int32_t max_depth = 0;  // the deepest node on a path (a boundary node's parent is no deeper)
    int32_t max_token = 0;  // the longest token of the mask, in bytes
  };
  static constexpr size_t kMaxLoopSplits = 512;
  const LoopSplit* loop_split(const uint64_t* ascii, bool compute, int first = -1,
                              const uint64_t* wide = nullptr) const;
  // True when the root split over `ascii` (2 words) would have at most `most` boundary nodes of
  // depth `depth` or less on the ASCII bytes of `bytes` (2 words) outside the set: read from
  // the split candidates, without computing the split (and stopping once past `most`).
  bool FewRootBoundaries(const uint64_t* ascii, const uint64_t* bytes, int32_t depth, int64_t most) const;
  // A *class trie*: the token trie with every byte read as its class (`of_byte`, from
  // Automaton::CoarseClasses), so that tokens spelling the same string of classes share a node
  // (where most letters are one class, a tenth of the token trie's nodes). Tokens holding the
  // `excluded` byte are left out, listed apart in trie order. Flat and in depth-first order
  // like the token trie: node i (0 .. size() - 1) has subtree [i, subtree_end[i]), depth
  // depth[i] >= 1, a byte of its class byte[i] (the smallest), and the tokens
  // tokens[token_begin[i], token_begin[i + 1]) (its subtree's: up to token_begin[subtree_end[i]]);
  // height[i], the longest path below it in bytes, and plain[i], whether every token of its
  // subtree is a plain token (plain_mask()).
  struct ClassTrie {
    std::vector<int32_t> subtree_end, token_begin, tokens, excluded;
    std::vector<uint16_t> depth, height;
    std::vector<uint8_t> byte, plain;
    int32_t size() const { return static_cast<int32_t>(depth.size()); }
    int64_t memory_bytes() const {
      return static_cast<int64_t>((subtree_end.capacity() + token_begin.capacity() + tokens.capacity() +
                                   excluded.capacity()) * sizeof(int32_t) +
                                  (depth.capacity() + height.capacity()) * sizeof(uint16_t) + byte.capacity() +
                                  plain.capacity());
    }
  };
  // The class trie of a partition into `count` classes (at most Automaton::kMaxCoarseClasses),
  // or nullptr where it would hold more than `max_nodes` nodes (its build stops as soon as its
  // growth says so). Built on first use per (partition, excluded byte, max_nodes) and kept, at
  // most kMaxClassTries of them (nullptr once full). Thread-safe.
  static constexpr size_t kMaxClassTries = 16;
  std::shared_ptr<const ClassTrie> class_trie(const std::array<uint8_t, 256>& of_byte, int32_t count,
                                              uint8_t excluded, int32_t max_nodes) const;
  // A *character split* over a set of code points (sorted, merged ranges: an
  // Automaton::CharacterStep's `chars`): what a chain of configurations that each step to the
  // next on every member needs to decide every token (a bounded repetition of a class that reads
  // only some characters of a lead byte: `[\p{L} ]{1,200}`). `inside` holds the text tokens of
  // members only, by their count of characters (a last partial character counts when some
  // member starts with its bytes): inside[inside_begin[n], inside_begin[n + 1]) have n. The
  // *exits* are the tokens whose first character that is no member is one of the ASCII
  // `exit_bytes` (2 words: the bytes a chain position may read besides members, such as a
  // string's closing quote and a backslash), after exit_chars members, at byte exit_offset;
  // grouped by that byte (exit_begin), then by exit_chars, then by their bytes from it. Any
  // other token (whose first non-member is another byte, a multi-byte character, or no valid
  // UTF-8) is in neither. Built on first use per set (character_split.cc), shared while a
  // grammar holds it, and the last kKeptCharSplits built kept besides (a grammar compiled again
  // finds its split). Thread-safe.
  struct CharSplit {
    std::vector<int32_t> inside, inside_begin;  // inside_begin: max_chars + 2 entries
    std::vector<uint32_t> mask;                 // the inside tokens (mask_words() words)
    std::vector<int32_t> exit_ids, exit_chars, exit_offset;
    std::array<int32_t, 129> exit_begin{};
    int32_t max_chars = 0;  // the most characters of an inside token or before an exit
    int64_t memory_bytes() const {
      return static_cast<int64_t>((inside.capacity() + inside_begin.capacity() + exit_ids.capacity() +
                                   exit_chars.capacity() + exit_offset.capacity() + mask.capacity()) *
                                  sizeof(int32_t)) +
             static_cast<int64_t>(sizeof(CharSplit));
    }
  };
  static constexpr size_t kKeptCharSplits = 8;
  std::shared_ptr<const CharSplit> char_split(const std::vector<std::pair<uint32_t, uint32_t>>& chars,
                                              const uint64_t* exit_bytes) const;
  // Bytes the indexes computed on first use hold (alphabet masks, loop splits, class tries and
  // character splits, shared by every grammar of this vocabulary; bounded by kMaxAlphabetMasks,
  // kMaxLoopSplits and kMaxClassTries, and character splits by the grammars that hold them).
  // Thread-safe.
  int64_t shared_cache_bytes() const {
    int64_t n = 0;
    {
      std::lock_guard<std::mutex> lock(alphabet_mu_);
      for (const auto& [key, mask] : alphabet_masks_) n += static_cast<int64_t>(mask->capacity() * sizeof(uint32_t));
    }
    {
      std::lock_guard<std::mutex> lock(class_trie_mu_);
      for (const auto& [key, trie] : class_tries_) n += trie != nullptr ? trie->memory_bytes() : 0;
    }
    {
      std::lock_guard<std::mutex> lock(char_split_mu_);
      for (const auto& [key, held] : char_splits_) {
        if (const std::shared_ptr<const CharSplit> split = held.lock()) n += split->memory_bytes();
      }
    }
    std::lock_guard<std::mutex> lock(loop_split_mu_);
    for (const auto& [key, split] : loop_splits_) {
      n += static_cast<int64_t>(sizeof(LoopSplit) + split->mask.capacity() * sizeof(uint32_t) +
                                split->boundary.capacity() * sizeof(int32_t));
    }
    return n;
  }
  // True once kMaxLoopSplits splits are kept: loop_split computes no more.
  bool loop_splits_full() const {
    std::lock_guard<std::mutex> lock(loop_split_mu_);
    return loop_splits_.size() >= kMaxLoopSplits;
  }
  // The mask (mask_words() words) of the text tokens of at most `length` bytes, for 1 <=
  // length < kLengthMasks (nullptr for others).
  static constexpr int32_t kLengthMasks = 64;
  const uint32_t* length_mask(int32_t length) const {
    if (length < 1 || length >= kLengthMasks) return nullptr;
    return length_masks_.data() + static_cast<size_t>(length) * mask_words();
  }
  // The text tokens of kLengthMasks bytes or more as (length, id), shortest first: the few a
  // length mask does not cover (134 of Llama 3's, none of Gemma 3's).
  const std::vector<std::pair<int32_t, int32_t>>& long_tokens() const { return long_tokens_; }
  // The mask (mask_words() words) of the tokens whose first byte is b, for the first bytes that
  // start many tokens (clearing them word by word beats clearing them token by token), or
  // nullptr.
  const uint32_t* first_byte_mask(uint8_t b) const {
    const int32_t k = first_byte_mask_index_[b];
    return k < 0 ? nullptr : first_byte_masks_.data() + static_cast<size_t>(k) * mask_words();
  }

 private:
  void BuildTrie();
  // The summary blocks, and the nodes' kUtf8Below and kWideNode flags and inner offsets.
  void ComputeSubtreeSummaries(const std::vector<uint8_t>& byte, const std::vector<uint16_t>& depth);
  void BuildPlainSplit();
  void BuildRestTrie();
  void BuildFirstCharIndex();

  int32_t width_;
  std::vector<std::string> tokens_;
  std::vector<bool> special_, eos_, text_;
  std::vector<int32_t> eos_ids_;
  std::vector<TrieNode> trie_nodes_;
  std::vector<uint64_t> trie_inner_;  // summary blocks (see trie_descendant_bytes)
  std::vector<int32_t> trie_tokens_;
  std::vector<int32_t> trie_token_begin_;
  // nodes_on_byte_within's: per byte, cumulative by depth 0..kDepthCounted, then every depth.
  std::vector<int32_t> byte_depth_nodes_;
  int32_t max_token_length_ = 0;
  int32_t trie_root_child_[256];
  int32_t first_byte_tokens_[256] = {};
  std::vector<uint32_t> text_mask_;
  std::vector<uint32_t> plain_mask_;
  std::vector<SuffixNode> suffix_nodes_;
  std::vector<int32_t> suffix_tokens_;
  std::vector<SuffixNode> rest_nodes_;
  std::vector<QuoteNode> quote_nodes_;
  std::vector<int32_t> rest_tokens_;
  std::vector<int32_t> plain_by_chars_;
  std::vector<int32_t> plain_chars_begin_;
  std::string plain_text_;
  std::vector<int32_t> plain_text_begin_;
  int32_t max_plain_chars_ = 0;
  int32_t max_suffix_prefix_chars_ = 0;
  int32_t multibyte_plain_reach_ = 0;
  std::vector<int32_t> after_first_char_;
  std::array<int32_t, 257> after_first_char_begin_{};
  int32_t first_char_nodes_ = 0;
  std::vector<int32_t> bad_first_char_tokens_;
  std::vector<int32_t> pair_tokens_;
  int32_t first_byte_mask_index_[256];
  std::vector<uint32_t> first_byte_masks_;
  struct AsciiToken {
    int32_t id;
    int32_t length;  // in bytes
    uint64_t bytes[2];
  };
  std::vector<AsciiToken> ascii_tokens_;  // text tokens of ASCII bytes only, with their byte sets
  // The ASCII bytes fall in kByteGroups groups (letters, digits, a few punctuation groups: the
  // ranges classes are made of); a token's *signature* is the set of groups its bytes are in.
  // ascii_tokens_ is ordered by signature, one AsciiGroup per signature (and a sentinel), so an
  // alphabet mask skips every group holding a byte group the alphabet has no byte of, takes
  // whole each group whose byte groups the alphabet holds entirely (from ascii_ids_, or from
  // its own mask when it has more tokens than a mask has words), and checks the few others
  // token by token: [a-z ] on a 128k vocabulary reads a few masks instead of every ASCII token.
  static constexpr int kByteGroups = 16;
  struct AsciiGroup {
    uint16_t signature;
    int32_t begin;       // its tokens: ascii_tokens_[begin, next group's begin)
    int32_t mask;        // its mask's index in ascii_group_masks_ (mask_words() words each), or -1
    int32_t max_length;  // its longest token, in bytes
  };
  std::vector<AsciiGroup> ascii_groups_;
  std::vector<int32_t> ascii_ids_;  // ascii_tokens_' ids, in the same order
  std::vector<uint32_t> ascii_group_masks_;
  std::array<std::array<uint64_t, 2>, kByteGroups> byte_group_bytes_{};  // each group's ASCII bytes
  void BuildAsciiGroups();
  // The byte groups an ASCII byte set (2 words) has a byte of, and those it holds entirely.
  void ByteGroupsOf(const uint64_t* bytes, uint32_t& touched, uint32_t& whole) const;
  // ORs into m (mask_words() words) the text tokens whose every byte is in the ASCII set
  // `alphabet` (2 words); returns the longest one's length in bytes (0: none).
  int32_t FillAlphabetMask(const uint64_t* alphabet, uint32_t* m) const;
  // The candidates for a root split's boundary nodes: every trie node below a path of ASCII
  // bytes only (depth 1 included: an empty path), with the path's bytes (so
  // that a split reads no token's bytes, cold, to check it), grouped by the node's byte, then
  // by the path's signature (its bytes' byte groups), in node order within a run. Byte b's
  // runs are split_runs_[split_run_begin_[b], split_run_begin_[b + 1]); run k's nodes
  // split_nodes_[split_runs_[k].begin, split_runs_[k + 1].begin) (a sentinel run ends them).
  struct SplitNode {
    uint64_t above[2];
    int32_t node;
    int32_t depth;
  };
  struct SplitRun {
    uint16_t signature;
    int32_t begin;
  };
  std::vector<SplitNode> split_nodes_;
  std::vector<SplitRun> split_runs_;
  std::array<int32_t, 257> split_run_begin_{};
  // Calls f(candidate) for each split candidate on byte b whose path is in `ascii` (2 words;
  // `touched` and `whole`: its byte groups, ByteGroupsOf), in node order within a run: the
  // root split's boundary nodes on b. Stops when f returns false.
  template <typename F>
  void ForEachRootBoundary(const uint64_t* ascii, uint32_t touched, uint32_t whole, uint8_t b, F&& f) const {
    for (int32_t k = split_run_begin_[b]; k < split_run_begin_[b + 1]; ++k) {
      const SplitRun& run = split_runs_[static_cast<size_t>(k)];
      if ((run.signature & ~touched) != 0) continue;  // a group the set has no byte of
      const int32_t run_end = split_runs_[static_cast<size_t>(k) + 1].begin;
      const bool all = (run.signature & ~whole) == 0;  // groups the set holds whole
      for (int32_t j = run.begin; j < run_end; ++j) {
        const SplitNode& c = split_nodes_[static_cast<size_t>(j)];
        if ((all || ((c.above[0] & ~ascii[0]) | (c.above[1] & ~ascii[1])) == 0) && !f(c)) return;
      }
    }
  }
  std::vector<int32_t> lead_tokens_;      // by lead byte (see lead_tokens)
  WideList wide_list(int32_t begin, int32_t end) const;
  std::vector<WideToken> wide_pool_;      // the lists of wide_tokens, then those of wide_tail_tokens
  std::vector<int32_t> wide_text_begin_;  // (one more entry than wide_pool_)
  std::string wide_text_;
  std::array<int32_t, 65> wide_begin_{};  // lead b's at [wide_begin_[b - 0xC0], [b - 0xC0 + 1])
  std::vector<int32_t> wide_tail_nodes_;  // the wide tail nodes, ascending
  std::vector<int32_t> wide_tail_begin_;  // node wide_tail_nodes_[k]'s at [wide_tail_begin_[k], [k + 1])
  std::array<int32_t, 65> lead_begin_{};  // lead b's at [lead_begin_[b - 0xC0], [b - 0xC0 + 1])
  std::vector<int32_t> ascii_byte_tokens_;  // by plain ASCII byte (see ascii_tokens)
  std::array<int32_t, 129> ascii_begin_{};  // byte b's at [ascii_begin_[b], ascii_begin_[b + 1])
  std::array<bool, 128> ascii_kept_{};
  // The same tokens in trie node order; node i's subtree holds those of
  // [trie_ascii_begin_[i], trie_ascii_begin_[subtree_end]).
  std::vector<int32_t> trie_ascii_tokens_;
  std::vector<int32_t> trie_ascii_begin_;
  mutable std::mutex alphabet_mu_;
  mutable std::map<std::array<uint64_t, 4>, std::unique_ptr<std::vector<uint32_t>>> alphabet_masks_;
  std::vector<uint32_t> length_masks_;  // kLengthMasks masks, length k's at k * mask_words()
  std::vector<std::pair<int32_t, int32_t>> long_tokens_;
  mutable std::mutex loop_split_mu_;
  // By (L, first or 256, the first byte's wide bytes).
  mutable std::map<std::array<uint64_t, 5>, std::unique_ptr<LoopSplit>> loop_splits_;
  std::shared_ptr<const ClassTrie> BuildClassTrie(const std::array<uint8_t, 256>& of_byte, int32_t count,
                                                  uint8_t excluded, int32_t max_nodes) const;
  mutable std::mutex class_trie_mu_;
  // By ((of_byte, excluded), max_nodes); nullptr where the trie would be larger.
  mutable std::map<std::pair<std::array<uint8_t, 257>, int32_t>, std::shared_ptr<const ClassTrie>> class_tries_;
  mutable size_t num_class_tries_ = 0;  // the entries that are no nullptr
  std::shared_ptr<const CharSplit> BuildCharSplit(const std::vector<std::pair<uint32_t, uint32_t>>& chars,
                                                  const uint64_t* exit_bytes) const;
  mutable std::mutex char_split_mu_;
  using CharSplitKey = std::pair<std::vector<std::pair<uint32_t, uint32_t>>, std::array<uint64_t, 2>>;
  mutable std::map<CharSplitKey, std::weak_ptr<const CharSplit>> char_splits_;
  mutable std::array<std::shared_ptr<const CharSplit>, kKeptCharSplits> kept_char_splits_;
  mutable size_t char_splits_built_ = 0;
};

}  // namespace logitgate
