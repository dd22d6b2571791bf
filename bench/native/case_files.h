// The vocabulary and per-case limits as the exporters write them (bench/native/layout.py), read
// with Reader's bounds checks: shared by walk_bench and the native test drivers.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "reader.h"
#include "../../cpp/core/error.h"
#include "../../cpp/core/vocabulary.h"

namespace logitgate_native {

// vocab.bin: width, token count, each token's bytes (a negative length: no token at that id),
// then the special and end-of-sequence ids.
inline std::shared_ptr<const logitgate::Vocabulary> ReadVocabulary(const std::string& path) {
  Reader r(path);
  const int32_t width = r.I32();
  const int32_t n_tokens = r.I32();
  if (n_tokens < 0) throw std::runtime_error("negative token count");
  std::vector<std::string> tokens(static_cast<size_t>(n_tokens));
  std::vector<bool> has(static_cast<size_t>(n_tokens), false);
  for (int32_t i = 0; i < n_tokens; ++i) {
    const int32_t n = r.I32();
    if (n < 0) continue;
    has[static_cast<size_t>(i)] = true;
    tokens[static_cast<size_t>(i)] = r.Bytes(n);
  }
  const std::vector<int32_t> specials = r.I32s(), eos = r.I32s();
  return std::make_shared<const logitgate::Vocabulary>(std::move(tokens), std::move(has), specials, eos, width);
}

// A case's seven limits, in CoreLimits' order.
inline logitgate::CoreLimits ReadLimits(Reader& r) {
  logitgate::CoreLimits l;
  l.max_nesting = r.I64();
  l.max_repeat = r.I64();
  l.max_automaton_states = r.I64();
  l.max_stack_depth = r.I64();
  l.max_parse_heads = r.I64();
  l.max_configurations = r.I64();
  l.mask_cache_entries = r.I64();
  return l;
}

// What every case starts with: its id, the serialized program, the rule names and the limits
// (fills those members of any case struct that has them).
template <typename Case>
void ReadCompileInputs(Reader& r, Case& c) {
  c.id = r.Str();
  c.program = r.I32s();
  const int32_t n_names = r.I32();
  if (n_names < 0) throw std::runtime_error("negative name count");
  c.names.resize(static_cast<size_t>(n_names));
  for (auto& n : c.names) n = r.Str();
  c.limits = ReadLimits(r);
}

}  // namespace logitgate_native
