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

// Writes the UTF-8 encoding of scalar value cp (not a surrogate, at most 0x10FFFF) into out
// (4 bytes of room); returns its length.
int EncodeUtf8(uint32_t cp, uint8_t* out);

// The UTF-8 byte-range sequences matching exactly the (normalized) set.
std::vector<Utf8Sequence> Utf8Sequences(const CodePointRanges& normalized);

}  // namespace logitgate
