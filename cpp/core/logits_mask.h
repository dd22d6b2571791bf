// Applying a token bitmask to logits in place: every column whose mask bit is 0 becomes -inf.
// Torch-free: the bindings hand over a raw row (float32, float16 or bfloat16 storage) and the
// mask words; callers check shapes, dtypes and strides before calling (see module.cc).
//
// Columns [0, min(width, 32 * n_words)) follow the mask; columns past the mask (logits wider
// than the vocabulary, e.g. padded embedding rows) are set to -inf too, so padding ids can
// never be sampled. Mask bits past `width` are ignored.
#pragma once

#include <cstdint>

namespace logitgate {

enum class LogitsType { kFloat32, kFloat16, kBFloat16 };

// Masks one row of `width` logits in place; returns how many columns the mask allows.
int64_t ApplyMaskRow(void* logits, LogitsType type, int64_t width, const uint32_t* words, int64_t n_words);

}  // namespace logitgate
