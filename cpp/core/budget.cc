#include "budget.h"

#include <algorithm>
#include <functional>
#include <queue>

namespace logitgate {

namespace {
// Fixed-point passes ComputeGrowth allows itself before it gives up on a bound (then the cheap
// check never applies and RestrictMask decides token by token when it is asked to).
constexpr int kGrowthPasses = 64;

int64_t SatAdd(int64_t x, int64_t y) { return std::min(ShortestPaths::kInfinite, x + y); }

// Reverse edges in CSR form: items of node v are [begin(v), end(v)).
struct Rev {
  std::vector<int32_t> offset;
  std::vector<std::pair<int32_t, int32_t>> items;
  template <typename Each>
  void Build(int32_t n_nodes, Each each) {
    offset.assign(static_cast<size_t>(n_nodes) + 2, 0);
    each([&](int32_t to, int32_t, int32_t) { ++offset[static_cast<size_t>(to) + 2]; });
    for (size_t i = 2; i < offset.size(); ++i) offset[i] += offset[i - 1];
    items.resize(static_cast<size_t>(offset.back()));
    each([&](int32_t to, int32_t x, int32_t y) { items[static_cast<size_t>(offset[static_cast<size_t>(to) + 1]++)] = {x, y}; });
  }
  const std::pair<int32_t, int32_t>* begin(int32_t v) const { return items.data() + offset[static_cast<size_t>(v)]; }
  const std::pair<int32_t, int32_t>* end(int32_t v) const { return items.data() + offset[static_cast<size_t>(v) + 1]; }
};
}  // namespace

ShortestPaths::ShortestPaths(const Automaton& a) : a_(a) {
  ComputeDistances();
  ComputeGrowth();
}

// Dijkstra from the rules' final states backwards. A state's options: its rule ends there (0),
// a kernel state of its epsilon closure (that state's distance), a byte edge (1 + the target's),
// a call (the rule's shortest string + the return state's). A call's option is offered once
// both of its parts are settled; its value is at least both, so the order stays monotone.
void ShortestPaths::ComputeDistances() {
  const int32_t n = a_.num_states();
  std::vector<int64_t>& d = *dist_;  // the table this pass fills
  d.assign(static_cast<size_t>(n), kInfinite);
  choice_.assign(static_cast<size_t>(n), Choice{});
  // by_byte[t] = (source, byte) of edges into t; by_kernel[k] = states whose closure holds
  // kernel state k; by_call[x] = calls waiting on x (the rule's start or the return state), as
  // (source, index of the call among the source's calls).
  Rev by_byte, by_kernel, by_call;
  by_byte.Build(n, [&](auto add) {
    for (int32_t s = 0; s < n; ++s) {
      for (const ByteEdge& e : a_.bytes(s)) add(e.target, s, e.lo);
    }
  });
  by_kernel.Build(n, [&](auto add) {
    for (int32_t s = 0; s < n; ++s) {
      for (const int32_t* k = a_.kernel_begin(s); k != a_.kernel_end(s); ++k) {
        if (*k != s) add(*k, s, 0);
      }
    }
  });
  by_call.Build(n, [&](auto add) {
    for (int32_t s = 0; s < n; ++s) {
      const auto& calls = a_.calls(s);
      for (size_t i = 0; i < calls.size(); ++i) {
        add(a_.rule_start(calls[i].rule), s, static_cast<int32_t>(i));
        if (calls[i].ret != a_.rule_start(calls[i].rule)) add(calls[i].ret, s, static_cast<int32_t>(i));
      }
    }
  });
  struct Item {
    int64_t d;
    int32_t s;
    Choice c;
    bool operator>(const Item& o) const { return d > o.d; }
  };
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> queue;
  for (int32_t s = 0; s < n; ++s) {
    if (a_.is_final(s)) queue.push({0, s, {kEnd}});
  }
  std::vector<uint8_t> settled(static_cast<size_t>(n), 0);
  while (!queue.empty()) {
    const Item it = queue.top();
    queue.pop();
    if (settled[static_cast<size_t>(it.s)]) continue;
    settled[static_cast<size_t>(it.s)] = 1;
    d[static_cast<size_t>(it.s)] = it.d;
    choice_[static_cast<size_t>(it.s)] = it.c;
    if (it.c.kind == kByte) spelled_bytes_[it.c.byte >> 6] |= uint64_t{1} << (it.c.byte & 63);
    for (auto p = by_byte.begin(it.s); p != by_byte.end(it.s); ++p) {
      if (!settled[static_cast<size_t>(p->first)]) {
        queue.push({it.d + 1, p->first, {kByte, static_cast<uint8_t>(p->second), it.s}});
      }
    }
    for (auto p = by_kernel.begin(it.s); p != by_kernel.end(it.s); ++p) {
      if (!settled[static_cast<size_t>(p->first)]) queue.push({it.d, p->first, {kEpsilon, 0, it.s}});
    }
    for (auto p = by_call.begin(it.s); p != by_call.end(it.s); ++p) {
      if (settled[static_cast<size_t>(p->first)]) continue;
      const CallEdge& c = a_.calls(p->first)[static_cast<size_t>(p->second)];
      const int32_t start = a_.rule_start(c.rule);
      if (!settled[static_cast<size_t>(start)] || !settled[static_cast<size_t>(c.ret)]) continue;
      queue.push({SatAdd(dist(start), dist(c.ret)), p->first,
                  {kCall, 0, c.rule, c.ret}});
    }
  }
}

// The bound behind Budget::ExactFrom. For a head (q, f) its completion through it is
// dist(q) + D(f) (D: the frames' return states' distances, up the stack). Reading a byte from q
// to t and closing over t gives heads whose completions are at most dist(t) + D(f) + O, where O
// bounds, over every state s, how much longer than dist(s) the completion through a head of
// s's closure can be (X(s) - dist(s) below; returns from the frame go to a return state r with
// D(f) = dist(r) + D(parent), whose closure adds at most O as well). dist(t) <= dist(q) - 1 + G
// for the largest G over byte edges. So one byte grows the longest completion of a
// configuration by at most max(G - 1, 0) + O.
//
// X(s): the longest completion through a head of s's closure, relative to s's frame: kernel
// states with byte edges (their distance), calls (X of the rule's start plus the return
// state's distance, and X of the return state when the rule can end at once). A fixed point,
// computed by passes; without one after kGrowthPasses the bound is infinite.
void ShortestPaths::ComputeGrowth() {
  const int32_t n = a_.num_states();
  int64_t g = 0;
  for (int32_t s = 0; s < n; ++s) {
    if (dist(s) >= kInfinite) continue;
    for (const ByteEdge& e : a_.bytes(s)) {
      g = std::max(g, dist(e.target) - dist(s));
    }
  }
  std::vector<int64_t> x(static_cast<size_t>(n), -1);
  bool converged = false;
  for (int pass = 0; pass < kGrowthPasses && !converged; ++pass) {
    converged = true;
    for (int32_t s = n - 1; s >= 0; --s) {
      int64_t v = -1;
      for (const int32_t* k = a_.kernel_begin(s); k != a_.kernel_end(s); ++k) {
        if (!a_.bytes(*k).empty()) v = std::max(v, dist(*k));
        for (const CallEdge& c : a_.calls(*k)) {
          const int32_t start = a_.rule_start(c.rule);
          const int64_t through = x[static_cast<size_t>(start)];
          if (through >= 0) v = std::max(v, SatAdd(through, dist(c.ret)));
          if (dist(start) == 0) v = std::max(v, x[static_cast<size_t>(c.ret)]);
        }
      }
      if (v > x[static_cast<size_t>(s)]) {
        x[static_cast<size_t>(s)] = v;
        converged = false;
      }
    }
  }
  if (!converged) return;  // growth_per_byte_ stays kInfinite
  int64_t o = 0;
  for (int32_t s = 0; s < n; ++s) {
    if (x[static_cast<size_t>(s)] >= 0 && dist(s) < kInfinite) {
      o = std::max(o, x[static_cast<size_t>(s)] - dist(s));
    }
  }
  growth_per_byte_ = SatAdd(g, o);
}

bool ShortestPaths::Spell(int32_t s, std::string* out, size_t max_bytes) const {
  if (dist(s) >= kInfinite) return false;
  std::vector<int32_t> after;  // return states still to spell, innermost last
  for (int32_t cur = s;;) {
    const Choice& c = choice_[static_cast<size_t>(cur)];
    switch (c.kind) {
      case kEnd:
        if (after.empty()) return true;
        cur = after.back();
        after.pop_back();
        break;
      case kEpsilon:
        cur = c.a;
        break;
      case kByte:
        if (out->size() >= max_bytes) return false;
        out->push_back(static_cast<char>(c.byte));
        cur = c.a;
        break;
      case kCall:
        after.push_back(c.b);
        cur = a_.rule_start(c.a);
        break;
      case kUnset:
        return false;  // unreachable for a finite distance
    }
  }
}

Budget::Budget(std::shared_ptr<const CompiledGrammar> grammar)
    : grammar_(std::move(grammar)), paths_(*grammar_->automaton) {
  const Vocabulary& v = *grammar_->vocab;
  bytes_are_tokens_ = true;
  for (int b = 0; b < 256 && bytes_are_tokens_; ++b) {
    if (!(paths_.spelled_bytes()[b >> 6] >> (b & 63) & 1)) continue;
    const int32_t node = v.trie_root_child(static_cast<uint8_t>(b));
    bytes_are_tokens_ = node >= 0 && v.trie_nodes()[node].token >= 0;
  }
}

Budget::Known& Budget::Entry(int32_t config) {
  if (static_cast<size_t>(config) >= known_.size()) {
    // Every configuration of the store so far: one growth per batch of new ones.
    known_.resize(std::max(static_cast<size_t>(config) + 1, static_cast<size_t>(store_->num_configurations())));
  }
  return known_[static_cast<size_t>(config)];
}

Parser& Budget::StoreLocked(const Matcher& m) {
  if (store_ != m.store()) {
    store_ = m.store();
    known_.clear();
    frame_dist_.clear();
    store_->TrackShortest(paths_.dist_table());
  }
  return *store_;
}

std::pair<int64_t, int64_t> Budget::FrameDistances(int32_t frame) {
  // Each frame after the frames it refers to (its parent, a frame set's members), from a list
  // of pending ones: no recursion.
  auto known = [&](int32_t f) {
    return f == 0 || (static_cast<size_t>(f) < frame_dist_.size() && frame_dist_[static_cast<size_t>(f)].first >= 0);
  };
  auto of = [&](int32_t f) { return f == 0 ? std::pair<int64_t, int64_t>{0, 0} : frame_dist_[static_cast<size_t>(f)]; };
  if (known(frame)) return of(frame);  // (most calls: BestHead's, per head)
  std::vector<int32_t> pending{frame};
  while (!pending.empty()) {
    const int32_t f = pending.back();
    if (known(f)) {
      pending.pop_back();
      continue;
    }
    const auto [ret, parent] = store_->FrameLink(f);
    std::pair<int64_t, int64_t> d{kUnreachable, 0};
    if (ret == Parser::kFrameSet) {
      store_->FrameSetMembers(f, &members_);
      bool ready = true;
      for (int32_t m : members_) {
        if (known(m)) {
          d = {std::min(d.first, of(m).first), std::max(d.second, of(m).second)};
        } else {
          pending.push_back(m);
          ready = false;
        }
      }
      if (!ready) continue;
    } else if (!known(parent)) {
      pending.push_back(parent);
      continue;
    } else {
      d = {SatAdd(paths_.dist(ret), of(parent).first), SatAdd(paths_.dist(ret), of(parent).second)};
    }
    pending.pop_back();
    if (static_cast<size_t>(f) >= frame_dist_.size()) frame_dist_.resize(static_cast<size_t>(f) + 1, {-1, -1});
    frame_dist_[static_cast<size_t>(f)] = d;
  }
  return of(frame);
}

std::pair<int32_t, int32_t> Budget::LinkOnShortest(int32_t frame) {
  auto link = store_->FrameLink(frame);
  if (link.first != Parser::kFrameSet) return link;
  FrameDistances(frame);  // (its members' too)
  store_->FrameSetMembers(frame, &members_);
  int32_t best = members_[0];
  for (int32_t m : members_) {
    if (frame_dist_[static_cast<size_t>(m)].first < frame_dist_[static_cast<size_t>(best)].first) best = m;
  }
  return store_->FrameLink(best);
}

std::pair<int32_t, int32_t> Budget::BestHead(int32_t config) {
  int64_t best = kUnreachable, longest = 0;
  std::pair<int32_t, int32_t> head{-1, -1};
  store_->Heads(config, &heads_);
  for (const auto& h : heads_) {
    // A head whose frame is a set stands for one head per member: the shortest and the
    // longest of theirs.
    const auto [near, far] = FrameDistances(h.second);
    const int64_t through = SatAdd(paths_.dist(h.first), near);
    longest = std::max(longest, SatAdd(paths_.dist(h.first), far));
    if (through < best) best = through, head = h;
  }
  Known& k = Entry(config);
  k.longest = longest;
  k.shortest = best;
  return head;
}

bool Budget::SpellLocked(int32_t config, std::string* out) {
  const Parser& p = *store_;
  if (p.accepting(config)) return true;
  const auto [state, frame] = BestHead(config);
  if (state < 0 || !paths_.Spell(state, out, kMaxSpelledBytes)) return false;
  for (int32_t f = frame; f != 0;) {
    const auto [ret, parent] = LinkOnShortest(f);
    if (!paths_.Spell(ret, out, kMaxSpelledBytes)) return false;
    f = parent;
  }
  return true;
}

void Budget::CostLocked(int32_t config) {
  Known& k = Entry(config);
  if (k.tokens >= 0) return;
  Parser& p = *store_;
  if (k.longest < 0) BestHead(config);
  if (p.accepting(config)) {
    k.bytes = 0;
    k.tokens = p.has_heads(config) ? 1 : 0;  // EOS, unless nothing may follow
    return;
  }
  std::string text;
  if (!SpellLocked(config, &text)) {
    // Too long to spell (or no completion): its length is still known.
    const auto [state, frame] = BestHead(config);
    k.bytes = state < 0 ? kUnreachable : SatAdd(paths_.dist(state), FrameDistances(frame).first);
    k.tokens = bytes_are_tokens_ && k.bytes < kUnreachable ? SatAdd(k.bytes, 1) : kUnreachable;
    return;
  }
  int32_t end = config;
  for (unsigned char b : text) end = p.Next(end, b);
  if (!p.accepting(end)) throw CoreError::Usage("internal: a shortest completion does not complete the grammar");
  const std::vector<int32_t> ids = FewestTokens(text);
  k.bytes = static_cast<int64_t>(text.size());
  k.tokens = ids.empty() && !text.empty() ? kUnreachable : static_cast<int64_t>(ids.size()) + (p.has_heads(end) ? 1 : 0);
}

Budget::Cost Budget::CostOf(const Matcher& m) {
  std::lock_guard<std::mutex> lock(mu_);
  StoreLocked(m);
  const int32_t config = m.configuration();
  CostLocked(config);
  const Known& k = Entry(config);
  return {k.bytes, k.tokens};
}

std::string Budget::ShortestCompletion(const Matcher& m) {
  std::lock_guard<std::mutex> lock(mu_);
  StoreLocked(m);
  std::string text;
  if (!SpellLocked(m.configuration(), &text)) {
    throw CoreError::Usage("the shortest completion is longer than " + std::to_string(kMaxSpelledBytes) + " bytes");
  }
  return text;
}

std::vector<int32_t> Budget::CompletionTokens(const Matcher& m) { return FewestTokens(ShortestCompletion(m)); }

int32_t Budget::TrieChild(int32_t node, uint8_t b) const {
  const Vocabulary& v = *grammar_->vocab;
  if (node < 0) return v.trie_root_child(b);
  if (const uint64_t* set = v.trie_child_bytes(node)) return (set[b >> 6] >> (b & 63) & 1) ? v.trie_child(node, b) : -1;
  const Vocabulary::TrieNode* nodes = v.trie_nodes();
  for (int32_t j = node + 1; j < nodes[node].subtree_end; j = nodes[j].subtree_end) {
    if (nodes[j].byte == b) return j;
    if (nodes[j].byte > b) break;
  }
  return -1;
}

std::vector<int32_t> Budget::FewestTokens(const std::string& data) const {
  const size_t n = data.size();
  const Vocabulary::TrieNode* nodes = grammar_->vocab->trie_nodes();
  // best[i]: fewest tokens spelling data[i:]; via[i]: the first of them.
  std::vector<int64_t> best(n + 1, kUnreachable);
  std::vector<int32_t> via(n + 1, -1);
  best[n] = 0;
  for (size_t i = n; i-- > 0;) {
    int32_t node = -1;
    for (size_t j = i; j < n; ++j) {
      node = TrieChild(node, static_cast<uint8_t>(data[j]));
      if (node < 0) break;
      const int32_t token = nodes[node].token;
      if (token >= 0 && best[j + 1] < kUnreachable && best[j + 1] + 1 < best[i]) best[i] = best[j + 1] + 1, via[i] = token;
    }
  }
  std::vector<int32_t> ids;
  if (best[0] >= kUnreachable) return ids;
  for (size_t i = 0; i < n; i += grammar_->vocab->bytes(ids.back()).size()) ids.push_back(via[i]);
  return ids;
}

int64_t Budget::ExactFrom(const Matcher& m, int64_t longest_token) {
  std::lock_guard<std::mutex> lock(mu_);
  StoreLocked(m);
  const int32_t config = m.configuration();
  Known& k = Entry(config);
  if (k.longest < 0) BestHead(config);
  if (!bytes_are_tokens_ || paths_.growth_per_byte() >= kUnreachable) return kUnreachable;
  const int64_t reach = longest_token * paths_.growth_per_byte();
  // This token, then the longest completion after it (a byte per token), then EOS.
  return SatAdd(SatAdd(Entry(config).longest, reach), 2);
}

int64_t Budget::LongestToken(const uint32_t* words) const {
  const Vocabulary& v = *grammar_->vocab;
  int64_t longest = 0;
  for (int32_t w = 0; w < v.mask_words(); ++w) {
    for (uint32_t bits = words[w]; bits != 0; bits &= bits - 1) {
      const int32_t t = 32 * w + __builtin_ctz(bits);
      if (v.is_text(t)) longest = std::max<int64_t>(longest, static_cast<int64_t>(v.bytes(t).size()));
    }
  }
  return longest;
}

int32_t Budget::FitsLocked(int32_t config, int64_t room, bool quick) {
  const Parser& p = *store_;
  if (p.accepting(config)) return room >= (p.has_heads(config) ? 1 : 0);  // EOS, unless nothing may follow
  if (Entry(config).tokens < 0) {
    if (bytes_are_tokens_) {
      if (Entry(config).longest < 0) BestHead(config);
      // At most a token per byte of the shortest completion, then EOS.
      if (SatAdd(Entry(config).shortest, 1) <= room) return 1;
    }
    if (quick) return -1;
    CostLocked(config);
  }
  return Entry(config).tokens <= room;
}

bool Budget::TokenFits(const Matcher& m, int32_t token, int64_t remaining) {
  const Vocabulary& v = *grammar_->vocab;
  if (m.eos_accepted()) return v.is_eos(token) && remaining >= 1;
  std::lock_guard<std::mutex> lock(mu_);
  Parser& p = StoreLocked(m);
  const int32_t config = m.configuration();
  if (v.is_eos(token)) return p.accepting(config) && remaining >= 1;
  if (!v.is_text(token)) return false;
  int32_t c = config;
  for (unsigned char b : v.bytes(token)) {
    c = p.Next(c, b);
    if (c == Parser::kDead) return false;
  }
  return FitsLocked(c, remaining - 1, false) == 1;
}

int32_t Budget::AcceptWithin(Matcher& m, int32_t token, int64_t remaining, bool quick) {
  if (!m.Accept(token)) return kRejected;
  if (m.eos_accepted()) {
    if (remaining >= 1) return kAccepted;
    m.Rollback(1);
    return kNoRoom;
  }
  // Lock-free first: the store's shortest completion of a new configuration bounds its tokens
  // (a token per byte, then EOS) where bytes are tokens. Most steps end here.
  const int32_t config = m.configuration();
  const Parser& store = *m.store();
  if (bytes_are_tokens_ && !store.accepting(config)) {
    const int64_t shortest = store.shortest(config);
    if (shortest >= 0 && SatAdd(shortest, 2) <= remaining) return kAccepted;
  }
  int32_t fits;
  {
    std::lock_guard<std::mutex> lock(mu_);
    StoreLocked(m);
    fits = FitsLocked(config, remaining - 1, quick);
  }
  if (fits < 0) return kUndecided;
  if (fits == 0) m.Rollback(1);
  return fits ? kAccepted : kNoRoom;
}

int32_t Budget::Settle(Matcher& m, int64_t remaining) {
  int32_t fits;
  {
    std::lock_guard<std::mutex> lock(mu_);
    StoreLocked(m);
    fits = FitsLocked(m.configuration(), remaining - 1, false);
  }
  if (fits == 0) m.Rollback(1);
  return fits ? kAccepted : kNoRoom;
}

int64_t Budget::RestrictMask(const Matcher& m, uint32_t* words, int64_t remaining) {
  if (m.eos_accepted()) return 0;
  const int32_t config = m.configuration();
  // Cheapest first: the longest token of the vocabulary, the memo, then the longest allowed one.
  if (remaining >= ExactFrom(m, grammar_->vocab->max_token_length())) return 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    StoreLocked(m);
    const int64_t known_max = Entry(config).max_after;
    if (known_max >= 0) {
      if (remaining >= SatAdd(known_max, 1)) return 0;
    }
  }
  if (remaining >= ExactFrom(m, LongestToken(words))) return 0;
  std::lock_guard<std::mutex> lock(mu_);
  const Vocabulary& v = *grammar_->vocab;
  Parser& p = StoreLocked(m);
  int64_t cleared = 0, max_after = 0;
  auto decide = [&](int32_t t, int64_t after) {
    if (!(words[t >> 5] >> (t & 31) & 1)) return;  // not allowed anyway
    max_after = std::max(max_after, after);
    if (SatAdd(after, 1) > remaining) {
      words[t >> 5] &= ~(uint32_t{1} << (t & 31));
      ++cleared;
    }
  };
  for (int32_t t : v.eos_ids()) decide(t, 0);
  // The token trie in depth-first order, one transition per node (tokens that share a prefix
  // share its transitions); a dead node's subtree is skipped. at[d]: the configuration after
  // the current node's first d bytes.
  const Vocabulary::TrieNode* nodes = v.trie_nodes();
  const std::vector<int32_t>& trie_tokens = v.trie_tokens();
  std::vector<int32_t> at(static_cast<size_t>(v.max_token_length()) + 1, config);
  int32_t last_config = Parser::kDead;
  int64_t last_cost = kUnreachable;
  for (int32_t i = 0; i < v.trie_size();) {
    const Vocabulary::TrieNode& node = nodes[i];
    const int32_t c = p.Next(at[node.depth - 1u], node.byte);
    if (c == Parser::kDead) {
      i = node.subtree_end;
      continue;
    }
    at[node.depth] = c;
    const int32_t first = v.trie_token_begin(i), last = v.trie_token_begin(i + 1);
    if (first < last) {
      if (c != last_config) {
        CostLocked(c);
        last_config = c, last_cost = Entry(c).tokens;
      }
      for (int32_t k = first; k < last; ++k) decide(trie_tokens[static_cast<size_t>(k)], last_cost);
    }
    ++i;
  }
  Entry(config).max_after = max_after;
  return cleared;
}

}  // namespace logitgate
