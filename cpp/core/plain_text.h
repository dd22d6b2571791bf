// Plain text: the characters a string body or free text reads whatever they are. Printable
// ASCII but '"' and '\', and every valid multi-byte UTF-8 character. Several mechanisms rely
// on this one definition and must agree: Automaton::is_universal and plain capacity, the mask
// walk's plain shortcuts and plain loops, and Vocabulary::plain_mask with its suffix trie (a
// token is decided by its suffix only if "plain" means the same on both sides).
#pragma once

#include <cstdint>

namespace logitgate {

constexpr bool IsPlainAscii(uint8_t b) { return b >= 0x20 && b <= 0x7E && b != '"' && b != '\\'; }

// The bytes that start plain characters, as bits (bit b of word b/64): the plain ASCII bytes
// (words 0 and 1) and the lead bytes of multi-byte characters (word 3).
constexpr uint64_t kPlainBits0 = ~0ull << 0x20 & ~(1ull << 0x22);                        // 0x20-0x3F but '"'
constexpr uint64_t kPlainBits1 = ~(1ull << (0x5C - 64)) & ~(1ull << (0x7F - 64));        // 0x40-0x7E but '\'
constexpr uint64_t kPlainLeadBits3 = (~0ull << (0xC2 - 192)) & ((1ull << (0xF5 - 192)) - 1);  // 0xC2-0xF4

// Adds the bytes [lo, hi] to a 4-word byte set (bit b of word b/64), a word at a time.
inline void AddByteRange(int lo, int hi, uint64_t* bits) {
  for (int q = lo >> 6; q <= hi >> 6; ++q) {
    const int a = lo > 64 * q ? lo : 64 * q, b = hi < 64 * q + 63 ? hi : 64 * q + 63;
    const int n = b - a + 1;
    bits[q] |= (n == 64 ? ~0ull : ((1ull << n) - 1)) << (a - 64 * q);
  }
}

// On byte sets (bit b of word b/64; words 0-1, or 0-3 where leads are read): every plain ASCII
// byte is in the set; every plain lead byte is; some plain byte (ASCII or lead) is.
inline bool HasAllPlainAscii(const uint64_t* bits) {
  return (bits[0] & kPlainBits0) == kPlainBits0 && (bits[1] & kPlainBits1) == kPlainBits1;
}
inline bool HasAllPlainLeads(const uint64_t* bits) { return (bits[3] & kPlainLeadBits3) == kPlainLeadBits3; }
inline bool HasSomePlain(const uint64_t* bits) {
  return ((bits[0] & kPlainBits0) | (bits[1] & kPlainBits1) | (bits[3] & kPlainLeadBits3)) != 0;
}

}  // namespace logitgate
