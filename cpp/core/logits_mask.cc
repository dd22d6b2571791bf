#include "logits_mask.h"

#include <algorithm>

// Where the compiler and the loader support it, the row kernels are also built for AVX2 and
// the loader picks the variant the CPU runs (about twice as fast; the baseline is SSE2).
#if defined(__GNUC__) && defined(__x86_64__) && defined(__ELF__) && !defined(__clang__)
#define LOGITGATE_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define LOGITGATE_VECTOR_CLONES
#endif

namespace logitgate {

namespace {

// The kernels work on the values' bit patterns (uint32 for float32, uint16 for the half
// types), selecting between the old value and -inf with masks built from constant lane bits:
// a form compilers vectorize (a variable shift per lane is not, before AVX2).
constexpr uint32_t kNegInfF32 = 0xFF800000u;
constexpr uint16_t kNegInfF16 = 0xFC00u;
constexpr uint16_t kNegInfBF16 = 0xFF80u;

template <typename T>
struct LaneBits {
  static constexpr int kLanes = 8 * sizeof(T);  // mask bits one pass over T values covers
  T bit[kLanes] = {};
  constexpr LaneBits() {
    for (int j = 0; j < kLanes; ++j) bit[j] = static_cast<T>(T{1} << j);
  }
};
constexpr LaneBits<uint32_t> kLanes32;
constexpr LaneBits<uint16_t> kLanes16;

// Applies the 32 bits of one mask word to the 32 values at p.
inline void MaskWord(uint32_t* p, uint32_t bits, uint32_t neg_inf) {
  for (int j = 0; j < 32; ++j) {
    const uint32_t keep = 0u - static_cast<uint32_t>((bits & kLanes32.bit[j]) != 0);
    p[j] = (p[j] & keep) | (neg_inf & ~keep);
  }
}
inline void MaskWord(uint16_t* p, uint32_t bits, uint16_t neg_inf) {
  for (int half = 0; half < 2; ++half) {
    const auto part = static_cast<uint16_t>(bits >> (16 * half));
    uint16_t* q = p + 16 * half;
    for (int j = 0; j < 16; ++j) {
      const auto keep = static_cast<uint16_t>(0u - static_cast<uint16_t>((part & kLanes16.bit[j]) != 0));
      q[j] = static_cast<uint16_t>((q[j] & keep) | (neg_inf & ~keep));
    }
  }
}

template <typename T>
inline int64_t MaskRow(T* out, int64_t width, const uint32_t* words, int64_t n_words, T neg_inf) {
  const int64_t covered = std::min(width, n_words * 32);
  const int64_t full_words = covered / 32;
  int64_t allowed = 0;
  for (int64_t w = 0; w < full_words; ++w) {
    const uint32_t bits = words[w];
    allowed += __builtin_popcount(bits);
    if (bits != ~0u) MaskWord(out + w * 32, bits, neg_inf);  // all allowed: nothing to write
  }
  // The last, partial word: only its bits below `covered`.
  for (int64_t c = full_words * 32; c < covered; ++c) {
    if ((words[c / 32] >> (c % 32)) & 1u) {
      ++allowed;
    } else {
      out[c] = neg_inf;
    }
  }
  std::fill(out + covered, out + std::max(covered, width), neg_inf);
  return allowed;
}

LOGITGATE_VECTOR_CLONES
int64_t MaskRow32(uint32_t* out, int64_t width, const uint32_t* words, int64_t n_words, uint32_t neg_inf) {
  return MaskRow(out, width, words, n_words, neg_inf);
}

LOGITGATE_VECTOR_CLONES
int64_t MaskRow16(uint16_t* out, int64_t width, const uint32_t* words, int64_t n_words, uint16_t neg_inf) {
  return MaskRow(out, width, words, n_words, neg_inf);
}

}  // namespace

int64_t ApplyMaskRow(void* logits, LogitsType type, int64_t width, const uint32_t* words, int64_t n_words) {
  if (width <= 0) return 0;
  n_words = std::max<int64_t>(n_words, 0);
  switch (type) {
    case LogitsType::kFloat32:
      return MaskRow32(static_cast<uint32_t*>(logits), width, words, n_words, kNegInfF32);
    case LogitsType::kFloat16:
      return MaskRow16(static_cast<uint16_t*>(logits), width, words, n_words, kNegInfF16);
    case LogitsType::kBFloat16:
      return MaskRow16(static_cast<uint16_t*>(logits), width, words, n_words, kNegInfBF16);
  }
  return 0;
}

}  // namespace logitgate
