// Automaton::character_step: the characters a state reads whole into one state (automaton.h).

#include <algorithm>
#include <unordered_map>

#include "automaton.h"
#include "plain_text.h"

namespace logitgate {

const Automaton::CharacterStep* Automaton::character_step(int32_t s) const {
  std::lock_guard<std::mutex> lock(character_steps_mu_);
  auto it = character_steps_.find(s);
  if (it == character_steps_.end()) it = character_steps_.emplace(s, ComputeCharacterStep(s)).first;
  return it->second.get();
}

std::unique_ptr<const Automaton::CharacterStep> Automaton::ComputeCharacterStep(int32_t s) const {
  if (!deterministic_[s] || !calls_[s].empty() || !ReadsLeadBytes(s)) return nullptr;
  auto step = std::make_unique<CharacterStep>();
  CodePointRanges& chars = step->chars;
  // A mid-character state reads bytes only (no call to push, no end to pop), and only bytes a
  // valid character may hold there: whatever a token's bytes do past it, they do in this rule.
  auto mid_character = [&](int32_t t, int lo, int hi) {
    if (!deterministic_[t] || final_[t] || !calls_[t].empty()) return false;
    return std::all_of(bytes_[t].begin(), bytes_[t].end(), [&](const ByteEdge& e) { return e.lo >= lo && e.hi <= hi; });
  };
  // What a mid-character state t reads with `left` continuation bytes to go (the next one
  // within [lo, hi]): the characters' last 6 * left bits, as sorted ranges; nullptr where some
  // character ends anywhere but at step->end. Memoized: the states after many lead bytes and
  // continuation bytes are shared.
  std::unordered_map<int64_t, CodePointRanges> memo;
  auto suffixes = [&](auto&& self, int32_t t, int left, int lo, int hi) -> const CodePointRanges* {
    const int64_t key = static_cast<int64_t>(t) << 24 | left << 16 | lo << 8 | hi;
    if (auto it = memo.find(key); it != memo.end()) return &it->second;
    if (!mid_character(t, lo, hi)) return nullptr;
    CodePointRanges out;
    const int shift = 6 * (left - 1);
    const uint32_t full = (1u << shift) - 1;
    for (const ByteEdge& e : bytes_[t]) {
      const uint32_t a = e.lo & 0x3Fu, b = e.hi & 0x3Fu;
      if (left == 1) {
        if (step->end < 0) step->end = e.target;
        if (e.target != step->end) return nullptr;
        out.push_back({a, b});
        continue;
      }
      const CodePointRanges* below = self(self, e.target, left - 1, 0x80, 0xBF);
      if (below == nullptr) return nullptr;
      if (below->size() == 1 && below->front().first == 0 && below->front().second == full) {
        out.push_back({a << shift, b << shift | full});
        continue;
      }
      for (uint32_t x = a; x <= b; ++x) {
        for (const auto& [l, h] : *below) out.push_back({x << shift | l, x << shift | h});
      }
    }
    return &memo.emplace(key, std::move(out)).first->second;
  };
  for (const ByteEdge& e : bytes_[s]) {
    for (int b = std::max<int>(e.lo, 0x80); b <= e.hi; ++b) {
      const Utf8Lead shape = Utf8LeadOf(static_cast<uint8_t>(b));
      if (shape.continuations == 0) return nullptr;  // a byte that starts no character
      const CodePointRanges* rest = suffixes(suffixes, e.target, shape.continuations, shape.lo, shape.hi);
      if (rest == nullptr) return nullptr;
      const uint32_t top = (static_cast<uint32_t>(b) & (0x7Fu >> (shape.continuations + 1))) << (6 * shape.continuations);
      for (const auto& [l, h] : *rest) chars.push_back({top | l, top | h});
    }
  }
  if (step->end < 0) return nullptr;
  for (const ByteEdge& e : bytes_[s]) {
    if (e.lo > 0x7F) continue;
    if (e.target == step->end) {
      chars.push_back({e.lo, std::min<uint32_t>(e.hi, 0x7F)});
    } else {
      AddByteRange(e.lo, std::min<int>(e.hi, 0x7F), step->exits);
    }
  }
  chars = NormalizeCodePoints(std::move(chars), false);
  for (const auto& [lo, hi] : chars) {
    if (lo <= 0x7F) AddByteRange(static_cast<int>(lo), static_cast<int>(std::min<uint32_t>(hi, 0x7F)), step->first);
  }
  // The closing quote is an exit unless it is a member: exits and members stay apart (a head
  // elsewhere that reads an exit byte must not read a member).
  if (!(step->first['"' >> 6] >> ('"' & 63) & 1)) step->exits['"' >> 6] |= 1ull << ('"' & 63);
  // Per lead byte, its characters' code points and how many of them are members.
  for (int lead = 0xC2; lead <= 0xF4; ++lead) {
    const Utf8Lead shape = Utf8LeadOf(static_cast<uint8_t>(lead));
    const int tail = 6 * (shape.continuations - 1);  // bits after the first continuation byte's
    const uint32_t top = (static_cast<uint32_t>(lead) & (0x7Fu >> (shape.continuations + 1))) << (tail + 6);
    const uint32_t first = top | (shape.lo & 0x3Fu) << tail;
    const uint32_t last = top | (shape.hi & 0x3Fu) << tail | ((1u << tail) - 1);
    uint64_t members = 0;
    for (const auto& [lo, hi] : chars) {
      if (hi >= first && lo <= last) members += std::min(hi, last) - std::max(lo, first) + 1;
    }
    if (members == 0) continue;
    step->first[lead >> 6] |= 1ull << (lead & 63);
    // (ED's characters stop at U+D7FF: surrogates are no members, and its continuation range leaves them out.)
    if (members < last - first + 1) step->partial_leads |= 1ull << (lead - 0xC0);
  }
  step->probe_length = EncodeUtf8(chars.front().first, step->probe);
  return step;
}

}  // namespace logitgate
