// Lowering of Unicode scalar-value sets to UTF-8 byte-range sequences.
//
// A code point set (inclusive ranges) becomes a list of sequences; each sequence is 1-4 byte
// ranges, and a byte string is the UTF-8 encoding of a member iff it matches exactly one
// sequence position by position. Surrogates (U+D800..U+DFFF) are never members: they have no
// valid UTF-8 encoding.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace logitgate {

struct ByteRange {
  uint8_t lo;
  uint8_t hi;
};

using Utf8Sequence = std::vector<ByteRange>;
using CodePointRanges = std::vector<std::pair<uint32_t, uint32_t>>;

// Sorts, merges, optionally complements over [0, 0x10FFFF], and removes surrogates.
CodePointRanges NormalizeCodePoints(CodePointRanges ranges, bool negated);

// The shape of the characters a UTF-8 lead byte starts: how many continuation bytes follow,
// and the range the first of them must lie in (E0, ED, F0 and F4 narrow it: no overlong forms,
// no surrogates, nothing above U+10FFFF; the later ones are always 80-BF). `continuations` is
// 0 for a byte that starts no multi-byte character (ASCII, a continuation byte, C0-C1, F5-FF).
struct Utf8Lead {
  int continuations;
  uint8_t lo, hi;
};
constexpr Utf8Lead Utf8LeadOf(uint8_t b) {
  if (b < 0xC2 || b > 0xF4) return {0, 0x80, 0xBF};
  return {b <= 0xDF ? 1 : b <= 0xEF ? 2 : 3, static_cast<uint8_t>(b == 0xE0 ? 0xA0 : b == 0xF0 ? 0x90 : 0x80),
          static_cast<uint8_t>(b == 0xED ? 0x9F : b == 0xF4 ? 0x8F : 0xBF)};
}

// Writes the UTF-8 encoding of scalar value cp (not a surrogate, at most 0x10FFFF) into out
// (4 bytes of room); returns its length.
int EncodeUtf8(uint32_t cp, uint8_t* out);

// The UTF-8 byte-range sequences matching exactly the (normalized) set.
std::vector<Utf8Sequence> Utf8Sequences(const CodePointRanges& normalized);

// The same set as a small automaton with locally numbered states: 0 is where it starts, 1
// where it ends, and the inner states (2, 3, ...) read the multi-byte sequences' continuation
// bytes, one state per distinct suffix (so `inner_states` stays small whatever the set).
struct Utf8Plan {
  struct Edge {
    int32_t from, to;
    uint8_t lo, hi;
  };
  int32_t inner_states = 0;
  std::vector<Edge> edges;
};
Utf8Plan PlanUtf8(const CodePointRanges& normalized);

}  // namespace logitgate
