// Stand-ins (automaton.h): checking a program's claims that one rule reads what another reads,
// and for how many bytes each pair of states the claims lead to agrees.
#include <algorithm>
#include <cstdint>
#include <deque>
#include <limits>
#include <utility>
#include <vector>

#include "automaton.h"

namespace logitgate {

bool Automaton::ReadsByteFirst(int32_t rule) const {
  const int32_t s = rule_start_[rule];
  const uint8_t* kind = kernel_kinds_begin(s);
  for (const int32_t* k = kernel_begin(s); k != kernel_end(s); ++k, ++kind) {
    if (*kind != kHeadState || reads_token(*k)) return false;
  }
  return true;
}

// An unrolled repetition of a called rule (a bounded string's characters, `x{0,255}`) is a chain
// of positions, each a state whose one call returns to the next, and positions far from its end
// read alike. Checked here directly, in one pass per chain rather than pair by pair below (the
// chains of a large schema hold thousands of positions): consecutive positions agree where they
// match as ComputeStandIns's pairs must (one kernel state of one kind, equal byte edges, here
// with equal targets too, one call of the same rule), for one byte per position ahead while
// they do (the rule reads a byte before it can end), up to the chain's last position (taken to
// differ from whatever follows it). Each position's stand-in is the next; Parser::StandIn
// follows such links as far as a vocabulary's longest token allows. Chains shorter than
// kMinChainPositions are left out: their positions never agree for a token's length.
void Automaton::ComputeChainStandIns() {
  if (!long_repetitions_) return;
  const int32_t n = num_states();
  // The one call of kernel state s that is not a tail call, or nullptr.
  auto single_call = [&](int32_t s) -> const CallEdge* {
    const auto& calls = calls_[static_cast<size_t>(s)];
    return calls.size() == 1 && !calls[0].tail ? &calls[0] : nullptr;
  };
  auto only_kernel = [&](int32_t s) { return kernel_end(s) - kernel_begin(s) == 1 ? *kernel_begin(s) : -1; };
  // next[s]: the position after kernel state s where s and it match, else -1.
  std::vector<int32_t> next;
  std::vector<uint8_t> has_previous;
  for (int32_t s = 0; s < n; ++s) {
    const CallEdge* call = single_call(s);
    if (call == nullptr || only_kernel(s) != s || reads_token(s)) continue;
    const int32_t t = only_kernel(call->ret);
    if (t < 0 || t == s || reads_token(t)) continue;
    const CallEdge* then = single_call(t);
    // (The kernel kind holds the final flag.)
    if (then == nullptr || then->rule != call->rule || *kernel_kinds_begin(s) != *kernel_kinds_begin(t)) continue;
    const auto& bs = bytes_[static_cast<size_t>(s)];
    const auto& bt = bytes_[static_cast<size_t>(t)];
    if (bs.size() != bt.size() || (!bs.empty() && !(deterministic_[s] && deterministic_[t]))) continue;
    bool same = true;
    for (size_t e = 0; e < bs.size() && same; ++e) {
      same = bs[e].lo == bt[e].lo && bs[e].hi == bt[e].hi && bs[e].target == bt[e].target;
    }
    if (!same || !ReadsByteFirst(call->rule)) continue;
    if (next.empty()) {
      next.assign(static_cast<size_t>(n), -1);
      has_previous.assign(static_cast<size_t>(n), 0);
    }
    next[static_cast<size_t>(s)] = t;
    has_previous[static_cast<size_t>(t)] = 1;
  }
  if (next.empty()) return;
  std::vector<int32_t> chain, walked_from(static_cast<size_t>(n), -1);
  for (int32_t head = 0; head < n; ++head) {
    if (next[static_cast<size_t>(head)] < 0 || has_previous[static_cast<size_t>(head)]) continue;
    chain.assign(1, head);
    walked_from[static_cast<size_t>(head)] = head;
    // (A loop of positions without a way in has no head and is never walked; one entered from
    // a head ends where it comes back.)
    for (int32_t at = next[static_cast<size_t>(head)]; at >= 0 && walked_from[static_cast<size_t>(at)] != head;
         at = next[static_cast<size_t>(at)]) {
      walked_from[static_cast<size_t>(at)] = head;
      chain.push_back(at);
    }
    const auto links = static_cast<int32_t>(chain.size()) - 1;
    if (links < kMinChainPositions) continue;
    if (stand_ins_.empty()) stand_ins_.assign(static_cast<size_t>(n), StandIn{});
    // Link i (chain[i] to chain[i + 1]) agrees for links - i bytes: the last link's pair reads
    // one position alike before the chain's end.
    for (int32_t i = 0; i < links; ++i) {
      const int32_t s = chain[static_cast<size_t>(i)];
      const StandIn in{chain[static_cast<size_t>(i) + 1], links - i};
      if (in.bytes > stand_ins_[static_cast<size_t>(s)].bytes) stand_ins_[static_cast<size_t>(s)] = in;
      // Frames return to the call's return state, whose kernel is the next position.
      const int32_t ret = calls_[static_cast<size_t>(s)][0].ret;
      if (i + 1 < links && ret != in.state) {
        const StandIn back{calls_[static_cast<size_t>(in.state)][0].ret, links - i - 1};
        if (back.bytes > stand_ins_[static_cast<size_t>(ret)].bytes) stand_ins_[static_cast<size_t>(ret)] = back;
      }
    }
  }
}

void Automaton::ComputeStandIns() {
  ComputeChainStandIns();
  if (stand_in_claims_.empty()) return;
  // Pairs followed from every claim together; past this many no stand-in is given (the claimed
  // chains hold a few pairs per state).
  const size_t max_pairs = 2 * bytes_.size() + (size_t{1} << 16);
  constexpr int32_t kNever = std::numeric_limits<int32_t>::max();

  // Pairs by their first state: first_with[x] the latest pair (x, ...), next_with the one
  // before it (a state is in one pair or a few).
  std::vector<int32_t> first_with(bytes_.size(), -1), next_with;
  std::vector<std::pair<int32_t, int32_t>> pairs;
  std::vector<uint8_t> differs;
  // Edges between pairs, as (from, to, bytes read), reversed below for the distances.
  struct Edge {
    int32_t from, to;
    uint8_t bytes;
  };
  std::vector<Edge> edges;
  std::vector<int32_t> pending;
  auto pair_of = [&](int32_t x, int32_t y) {
    for (int32_t p = first_with[static_cast<size_t>(x)]; p >= 0; p = next_with[static_cast<size_t>(p)]) {
      if (pairs[static_cast<size_t>(p)].second == y) return p;
    }
    const auto p = static_cast<int32_t>(pairs.size());
    pairs.emplace_back(x, y);
    differs.push_back(0);
    next_with.push_back(first_with[static_cast<size_t>(x)]);
    first_with[static_cast<size_t>(x)] = p;
    pending.push_back(p);
    return p;
  };
  pairs.reserve(stand_in_claims_.size() * 2);
  differs.reserve(stand_in_claims_.size() * 2);
  next_with.reserve(stand_in_claims_.size() * 2);
  edges.reserve(stand_in_claims_.size() * 2);
  for (size_t i = 0; i + 1 < stand_in_claims_.size(); i += 2) {
    const int32_t a = stand_in_claims_[i], b = stand_in_claims_[i + 1];
    if (a != b) pair_of(rule_start_[a], rule_start_[b]);
  }

  std::vector<ByteEdge> bx, by;
  std::vector<CallEdge> cx, cy;
  auto by_lo = [](const ByteEdge& p, const ByteEdge& q) { return p.lo < q.lo; };
  // Tail calls last; the others by rule.
  auto by_rule = [](const CallEdge& p, const CallEdge& q) {
    return p.tail != q.tail ? q.tail : (!p.tail && p.rule < q.rule);
  };
  // An edge list in order, copied into scratch (the automaton's lists keep their build order).
  auto sorted_copy = [](const auto& list, auto& out, auto less) {
    out.assign(list.begin(), list.end());
    if (out.size() > 1) std::sort(out.begin(), out.end(), less);
  };
  // Compares the pair's states' one kernel state each: false where they differ; else the
  // pairs they lead to, by edge.
  auto compare = [&](int32_t pair) {
    const auto [x, y] = pairs[static_cast<size_t>(pair)];
    if (kernel_end(x) - kernel_begin(x) != 1 || kernel_end(y) - kernel_begin(y) != 1) return false;
    const int32_t kx = *kernel_begin(x), ky = *kernel_begin(y);
    if (*kernel_kinds_begin(x) != *kernel_kinds_begin(y) || reads_token(kx) || reads_token(ky)) return false;
    if (bytes_[kx].size() != bytes_[ky].size() || calls_[kx].size() != calls_[ky].size()) return false;
    if (!bytes_[kx].empty() && !(deterministic_[kx] && deterministic_[ky])) return false;
    sorted_copy(bytes_[kx], bx, by_lo);
    sorted_copy(bytes_[ky], by, by_lo);
    for (size_t e = 0; e < bx.size(); ++e) {
      if (bx[e].lo != by[e].lo || bx[e].hi != by[e].hi) return false;
    }
    sorted_copy(calls_[kx], cx, by_rule);
    sorted_copy(calls_[ky], cy, by_rule);
    for (size_t e = 0; e < cx.size(); ++e) {
      if (cx[e].tail != cy[e].tail || (!cx[e].tail && cx[e].rule != cy[e].rule)) return false;
      // Calls pair up by rule: each rule once, and one tail call at most.
      if (e > 0 && (cx[e].tail ? cx[e - 1].tail : cx[e - 1].rule == cx[e].rule)) return false;
    }
    for (size_t e = 0; e < bx.size(); ++e) {
      if (bx[e].target != by[e].target) edges.push_back({pair, pair_of(bx[e].target, by[e].target), 1});
    }
    for (size_t e = 0; e < cx.size(); ++e) {
      const int32_t to_x = cx[e].tail ? rule_start_[cx[e].rule] : cx[e].ret;
      const int32_t to_y = cy[e].tail ? rule_start_[cy[e].rule] : cy[e].ret;
      const uint8_t moved = !cx[e].tail && ReadsByteFirst(cx[e].rule) ? 1 : 0;
      if (to_x != to_y) edges.push_back({pair, pair_of(to_x, to_y), moved});
    }
    return true;
  };
  while (!pending.empty()) {
    const int32_t pair = pending.back();
    pending.pop_back();
    if (!compare(pair)) differs[static_cast<size_t>(pair)] = 1;
    if (pairs.size() > max_pairs) return;
  }

  // Agreement of each pair: the fewest bytes to a pair that differs (0-1 breadth-first search
  // over the reversed edges); kNever where no path leads to one.
  const size_t n = pairs.size();
  std::vector<int32_t> first(n + 1, 0), from(edges.size());
  std::vector<uint8_t> cost(edges.size());
  for (const Edge& e : edges) ++first[static_cast<size_t>(e.to) + 1];
  for (size_t i = 0; i < n; ++i) first[i + 1] += first[i];
  {
    std::vector<int32_t> fill(first.begin(), first.end() - 1);
    for (const Edge& e : edges) {
      const auto at = static_cast<size_t>(fill[static_cast<size_t>(e.to)]++);
      from[at] = e.from;
      cost[at] = e.bytes;
    }
  }
  std::vector<int32_t> agrees(n, kNever);
  std::deque<int32_t> queue;
  for (size_t i = 0; i < n; ++i) {
    if (differs[i]) {
      agrees[i] = 0;
      queue.push_back(static_cast<int32_t>(i));
    }
  }
  while (!queue.empty()) {
    const int32_t p = queue.front();
    queue.pop_front();
    for (int32_t k = first[static_cast<size_t>(p)]; k < first[static_cast<size_t>(p) + 1]; ++k) {
      const int32_t q = from[static_cast<size_t>(k)];
      const int32_t d = agrees[static_cast<size_t>(p)] + cost[static_cast<size_t>(k)];
      if (d < agrees[static_cast<size_t>(q)]) {
        agrees[static_cast<size_t>(q)] = d;
        if (cost[static_cast<size_t>(k)] == 0) {
          queue.push_front(q);
        } else {
          queue.push_back(q);
        }
      }
    }
  }

  const bool chained = !stand_ins_.empty();
  if (!chained) stand_ins_.assign(bytes_.size(), StandIn{});
  auto keep = [&](int32_t s, int32_t t, int32_t bytes) {
    if (s == t) return;
    StandIn& best = stand_ins_[static_cast<size_t>(s)];
    if (bytes > best.bytes) best = {t, bytes};
  };
  bool any = false;
  for (size_t i = 0; i < n; ++i) {
    if (agrees[i] == 0) continue;
    const auto [x, y] = pairs[i];
    keep(x, y, agrees[i]);
    // Heads are kernel states: a pair that agrees has one each.
    keep(*kernel_begin(x), *kernel_begin(y), agrees[i]);
    any = true;
  }
  if (!any && !chained) stand_ins_.clear();
}

}  // namespace logitgate
