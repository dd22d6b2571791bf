#include "utf8_ranges.h"

#include <algorithm>
#include <map>

namespace logitgate {

CodePointRanges NormalizeCodePoints(CodePointRanges ranges, bool negated) {
  std::sort(ranges.begin(), ranges.end());
  CodePointRanges merged;
  for (auto [lo, hi] : ranges) {
    if (lo > hi) continue;
    if (!merged.empty() && lo <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, hi);
    } else {
      merged.push_back({lo, hi});
    }
  }
  if (negated) {
    CodePointRanges comp;
    uint32_t next = 0;
    for (auto [lo, hi] : merged) {
      if (lo > next) comp.push_back({next, lo - 1});
      next = hi + 1;
    }
    if (next <= 0x10FFFF) comp.push_back({next, 0x10FFFF});
    merged.swap(comp);
  }
  // Remove surrogates and clamp to the Unicode range.
  CodePointRanges out;
  for (auto [lo, hi] : merged) {
    if (lo > 0x10FFFF) continue;
    hi = std::min<uint32_t>(hi, 0x10FFFF);
    if (hi < 0xD800 || lo > 0xDFFF) {
      out.push_back({lo, hi});
      continue;
    }
    if (lo < 0xD800) out.push_back({lo, 0xD7FF});
    if (hi > 0xDFFF) out.push_back({0xE000, hi});
  }
  return out;
}

namespace {

int EncodedLength(uint32_t cp) { return cp <= 0x7F ? 1 : cp <= 0x7FF ? 2 : cp <= 0xFFFF ? 3 : 4; }

}  // namespace

int EncodeUtf8(uint32_t cp, uint8_t* out) {
  if (cp <= 0x7F) {
    out[0] = static_cast<uint8_t>(cp);
    return 1;
  }
  if (cp <= 0x7FF) {
    out[0] = static_cast<uint8_t>(0xC0 | (cp >> 6));
    out[1] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp <= 0xFFFF) {
    out[0] = static_cast<uint8_t>(0xE0 | (cp >> 12));
    out[1] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
    out[2] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = static_cast<uint8_t>(0xF0 | (cp >> 18));
  out[1] = static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F));
  out[2] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
  out[3] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
  return 4;
}

namespace {

// Splits [lo, hi] until both ends share an encoded length and every continuation byte below
// the first differing position spans its full 0x80..0xBF range; then one sequence covers it.
// Uses an explicit work stack (the split depth is bounded, but no recursion keeps it obvious).
void SplitRange(uint32_t lo0, uint32_t hi0, std::vector<Utf8Sequence>* out) {
  std::vector<std::pair<uint32_t, uint32_t>> work{{lo0, hi0}};
  static const uint32_t kLengthEnds[] = {0x7F, 0x7FF, 0xFFFF};
  while (!work.empty()) {
    auto [lo, hi] = work.back();
    work.pop_back();
    bool split = false;
    for (uint32_t b : kLengthEnds) {
      if (lo <= b && hi > b) {
        work.push_back({b + 1, hi});
        work.push_back({lo, b});
        split = true;
        break;
      }
    }
    if (split) continue;
    int n = EncodedLength(lo);
    for (int i = 1; i < n && !split; ++i) {
      uint32_t m = (1u << (6 * i)) - 1;
      if ((lo & ~m) != (hi & ~m)) {
        if ((lo & m) != 0) {
          work.push_back({(lo | m) + 1, hi});
          work.push_back({lo, lo | m});
          split = true;
        } else if ((hi & m) != m) {
          work.push_back({hi & ~m, hi});
          work.push_back({lo, (hi & ~m) - 1});
          split = true;
        }
      }
    }
    if (split) continue;
    uint8_t a[4], b[4];
    int len = EncodeUtf8(lo, a);
    EncodeUtf8(hi, b);
    Utf8Sequence seq;
    for (int i = 0; i < len; ++i) seq.push_back({a[i], b[i]});
    out->push_back(std::move(seq));
  }
}

}  // namespace

std::vector<Utf8Sequence> Utf8Sequences(const CodePointRanges& normalized) {
  std::vector<Utf8Sequence> out;
  for (auto [lo, hi] : normalized) SplitRange(lo, hi, &out);
  return out;
}

Utf8Plan PlanUtf8(const CodePointRanges& normalized) {
  Utf8Plan plan;
  // Share suffixes: the state that reads suffix seq[k..] and then ends is built once.
  std::map<std::vector<std::pair<int, int>>, int32_t> suffix_state;
  for (const Utf8Sequence& seq : Utf8Sequences(normalized)) {
    int32_t next = 1;
    std::vector<std::pair<int, int>> suffix;
    for (size_t k = seq.size(); k-- > 1;) {
      suffix.insert(suffix.begin(), {seq[k].lo, seq[k].hi});
      auto it = suffix_state.find(suffix);
      if (it != suffix_state.end()) {
        next = it->second;
        continue;
      }
      const int32_t s = 2 + plan.inner_states++;
      plan.edges.push_back({s, next, seq[k].lo, seq[k].hi});
      suffix_state.emplace(suffix, s);
      next = s;
    }
    plan.edges.push_back({0, next, seq[0].lo, seq[0].hi});
  }
  return plan;
}

}  // namespace logitgate
