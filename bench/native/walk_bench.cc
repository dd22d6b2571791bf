// Native driver for the core: core compile and mask walks of exported harness cases, with no
// Python in the loop, for profiling (perf, valgrind --tool=cachegrind/callgrind) and for timing
// engine changes more steadily than the harness can. Inputs come from bench/native/export.py.
//
//   walk_bench DIR [--case SUBSTR] [--repeat N] [--evict] [--verbose] [--configs] [--compile-only]
//              [--no-stand-ins]
//
// Per case: a cold core compile (Automaton + Parser), then for every instance a fresh matcher
// that fills the mask at each position and accepts the instance's token, as bench/worker.py
// does. --evict touches a 64 MiB buffer before each case, so the case starts with cold caches
// (the harness's gc.collect() and the cases before it do the same to the vocabulary trie).
// Prints per case the compile time, mask mean / max (first mask excluded, as in the harness),
// transitions, automaton states and a digest of every mask (a core change that keeps masks
// keeps the digests); then totals, and how many cases' slowest mask passes 200 us, 500 us and
// 1 ms (the whole-corpus tail's counts, for comparing two cores run alternately).
// --no-stand-ins walks every configuration itself (Matcher::SetStandIns): the digests must not
// change. --configs prints, after each fill, the configurations it built, each head as its state
// and rule, then the return state and rule of each of its top four frames (`[set]`: a frame set),
// to see what a position builds anew (docs/performance.md, "The mask mean against the peers").
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "case_files.h"
#include "../../cpp/core/automaton.h"
#include "../../cpp/core/matcher.h"
#include "../../cpp/core/parser.h"
#include "../../cpp/core/vocabulary.h"

using namespace logitgate;
using logitgate_native::ReadCompileInputs;
using logitgate_native::Reader;
using logitgate_native::ReadVocabulary;

namespace {

struct Case {
  std::string id;
  std::vector<int32_t> program;
  std::vector<std::string> names;
  CoreLimits limits;
  std::vector<std::vector<int32_t>> instances;
};

double Micros(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

// A configuration's heads cut to `depth` frames of their stacks, as a hash: each head's state and
// the return states of its top `depth` frames (a frame set: each member's chain), the heads'
// signatures sorted and deduplicated, with the accepting and token-head bits. Equal keys at a
// depth where a token cannot reach further down the stacks would mean equal masks;
// repeated_masks.py counts the walks such a key would have spared, and the keys that met two
// masks (depths too shallow).
uint64_t Mix(uint64_t h, uint64_t x) { return (h ^ (x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2))) * 0x100000001b3ull; }

uint64_t FrameChainKey(const logitgate::Parser& p, int32_t frame, int depth) {
  if (frame == 0) return 1;
  if (depth == 0) return 2;
  const auto [ret, parent] = p.FrameLink(frame);
  if (ret != logitgate::Parser::kFrameSet) return Mix(Mix(5, static_cast<uint64_t>(ret)), FrameChainKey(p, parent, depth - 1));
  std::vector<int32_t> members;
  p.FrameSetMembers(frame, &members);
  std::vector<uint64_t> keys;
  for (int32_t m : members) keys.push_back(FrameChainKey(p, m, depth));
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  uint64_t h = 3;
  for (uint64_t k : keys) h = Mix(h, k);
  return h;
}

// The last bytes of an instance's text before token `pos` (its last six tokens, at most 24
// bytes), printable: what --verbose and --configs show of where a fill is.
std::string TextTail(const Vocabulary& vocab, const std::vector<int32_t>& inst, size_t pos) {
  std::string tail;
  for (size_t k = pos > 6 ? pos - 6 : 0; k < pos; ++k) tail += vocab.bytes(inst[k]);
  for (char& ch : tail) ch = (ch >= 0x20 && ch < 0x7F) ? ch : '.';
  return tail.size() > 24 ? tail.substr(tail.size() - 24) : tail;
}

// One configuration's heads, as --configs prints them.
void PrintConfiguration(const logitgate::Parser& p, const Automaton& a, int32_t config) {
  auto state_text = [&](int32_t state) {
    const int32_t rule = a.rule_of_state(state);
    return std::to_string(state) + "(" + (rule >= 0 ? a.rule_names()[static_cast<size_t>(rule)] : "?") + ")";
  };
  std::vector<std::pair<int32_t, int32_t>> heads;
  p.Heads(config, &heads);
  std::printf("    c%d:", config);
  for (const auto& [state, frame0] : heads) {
    std::string text = " " + state_text(state);
    int32_t frame = frame0;
    for (int depth = 0; frame != 0 && depth < 4; ++depth) {
      const auto [ret, parent] = p.FrameLink(frame);
      if (ret == logitgate::Parser::kFrameSet) {
        text += "<[set]";
        break;
      }
      text += "<" + state_text(ret);
      frame = parent;
    }
    std::printf("%s", text.c_str());
  }
  std::printf("%s\n", p.accepting(config) ? " (accepting)" : "");
}

uint64_t StackCutKey(const logitgate::Parser& p, int32_t config, int depth) {
  std::vector<std::pair<int32_t, int32_t>> heads;
  p.Heads(config, &heads);
  std::vector<uint64_t> sigs;
  for (const auto& [state, frame] : heads) sigs.push_back(Mix(Mix(7, static_cast<uint64_t>(state)), FrameChainKey(p, frame, depth)));
  std::sort(sigs.begin(), sigs.end());
  sigs.erase(std::unique(sigs.begin(), sigs.end()), sigs.end());
  uint64_t h = Mix(11, (p.accepting(config) ? 1u : 0u) | (p.has_token_heads(config) ? 2u : 0u));
  for (uint64_t k : sigs) h = Mix(h, k);
  return h;
}

// What a case's masks reached of its automaton, once its instances ran: the states some
// configuration of the store holds (a head's state, or a frame's return state), the rules they
// belong to, and the states of those rules.
struct Reach {
  int64_t states = 0, rules = 0, states_in_rules = 0;
};

Reach ReachedPart(const logitgate::Parser& p, const logitgate::Automaton& a) {
  std::vector<uint8_t> state_seen(static_cast<size_t>(a.num_states()), 0), rule_seen(static_cast<size_t>(a.num_rules()), 0);
  std::vector<uint8_t> frame_seen;
  std::vector<std::pair<int32_t, int32_t>> heads;
  std::vector<int32_t> pending, members;
  Reach r;
  auto mark = [&](int32_t s) {
    if (state_seen[static_cast<size_t>(s)]) return;
    state_seen[static_cast<size_t>(s)] = 1;
    ++r.states;
    const int32_t rule = a.rule_of_state(s);
    if (rule >= 0 && !rule_seen[static_cast<size_t>(rule)]) {
      rule_seen[static_cast<size_t>(rule)] = 1;
      ++r.rules;
    }
  };
  for (int32_t c = 0; c < p.num_configurations(); ++c) {
    p.Heads(c, &heads);
    for (const auto& [state, frame] : heads) {
      mark(state);
      pending.push_back(frame);
    }
    while (!pending.empty()) {  // the frames below, each once
      const int32_t f = pending.back();
      pending.pop_back();
      if (f == 0) continue;
      if (static_cast<size_t>(f) >= frame_seen.size()) frame_seen.resize(static_cast<size_t>(f) + 1, 0);
      if (frame_seen[static_cast<size_t>(f)]) continue;
      frame_seen[static_cast<size_t>(f)] = 1;
      const auto [ret, parent] = p.FrameLink(f);
      if (ret == logitgate::Parser::kFrameSet) {
        p.FrameSetMembers(f, &members);
        pending.insert(pending.end(), members.begin(), members.end());
        continue;
      }
      mark(ret);
      pending.push_back(parent);
    }
  }
  for (int32_t s = 0; s < a.num_states(); ++s) {
    const int32_t rule = a.rule_of_state(s);
    r.states_in_rules += rule >= 0 && rule_seen[static_cast<size_t>(rule)];
  }
  return r;
}

}  // namespace

int Run(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: walk_bench DIR [--case SUBSTR] [--repeat N] [--evict] [--verbose] [--configs] "
                 "[--compile-only] [--no-stand-ins] [--reach]\n");
    return 2;
  }
  const std::string dir = argv[1];
  std::string filter;
  int repeat = 1;
  bool evict = false, verbose = false, configs = false, compile_only = false, reach = false;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--case" && i + 1 < argc) {
      filter = argv[++i];
    } else if (a == "--repeat" && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--evict") {
      evict = true;
    } else if (a == "--verbose") {
      verbose = true;
    } else if (a == "--configs") {
      configs = true;
    } else if (a == "--compile-only") {
      compile_only = true;
    } else if (a == "--reach") {
      reach = true;
    } else if (a == "--no-stand-ins") {
      Matcher::SetStandIns(false);  // masks walked from each configuration itself (Parser::StandIn)
    } else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }

  auto t0 = std::chrono::steady_clock::now();
  auto vocab = ReadVocabulary(dir + "/vocab.bin");
  std::printf("vocabulary: width %d, trie %d nodes, read and built in %.1f ms\n", vocab->width(), vocab->trie_size(),
              Micros(t0, std::chrono::steady_clock::now()) / 1e3);

  Reader cr(dir + "/cases.bin");
  std::vector<Case> cases(static_cast<size_t>(cr.I32()));
  for (Case& c : cases) {
    ReadCompileInputs(cr, c);
    c.instances.resize(static_cast<size_t>(cr.I32()));
    for (auto& inst : c.instances) inst = cr.I32s();
  }

  std::vector<uint8_t> evict_buffer(evict ? size_t{64} << 20 : 0, 1);
  uint64_t evict_sum = 0;  // printed, so the eviction reads cannot be optimized away
  std::vector<uint32_t> words(static_cast<size_t>(vocab->mask_words()));
  std::vector<double> all_masks, compiles;
  int64_t slowest_over[3] = {0, 0, 0};  // cases whose slowest mask takes >= 200 us, 500 us, 1 ms
  int64_t transitions = 0, failures = 0;
  for (int rep = 0; rep < repeat; ++rep) {
    for (const Case& c : cases) {
      if (!filter.empty() && c.id.find(filter) == std::string::npos) continue;
      if (evict) {
        for (size_t i = 0; i < evict_buffer.size(); i += 64) evict_sum += evict_buffer[i];
      }
      std::shared_ptr<CompiledGrammar> g;
      const auto c0 = std::chrono::steady_clock::now();
      try {
        g = AssembleGrammar(vocab, std::make_shared<const Automaton>(c.program, c.names, c.limits), c.limits);
      } catch (const std::exception& e) {
        if (rep == 0) std::printf("%-40s compile error: %s\n", c.id.c_str(), e.what());
        continue;
      }
      const double compile_us = Micros(c0, std::chrono::steady_clock::now());
      compiles.push_back(compile_us);
      std::vector<double> masks;
      uint64_t digest = 0xcbf29ce484222325ull;  // of every mask: equal across core changes that keep masks
      bool first = true;
      for (const auto& inst : c.instances) {
        if (compile_only) break;
        Matcher m(g);
        for (size_t pos = 0; pos <= inst.size(); ++pos) {
          const int64_t tr0 = g->parser->num_transitions();
          const int32_t config = m.configuration();
          const int32_t configs_before = m.store()->num_configurations();
          const auto m0 = std::chrono::steady_clock::now();
          m.FillMask(words.data());
          const double us = Micros(m0, std::chrono::steady_clock::now());
          if (configs && rep == repeat - 1) {
            const int32_t configs_after = m.store()->num_configurations();
            std::printf("  %-38s pos %3zu config %d: %d new  ...%s\n", c.id.c_str(), pos, config,
                        configs_after - configs_before, TextTail(*vocab, inst, pos).c_str());
            for (int32_t x = configs_before; x < configs_after; ++x) PrintConfiguration(*m.store(), *g->automaton, x);
          }
          if (!first) masks.push_back(us);
          for (uint32_t w : words) digest = (digest ^ w) * 0x100000001b3ull;
          if (verbose && rep == repeat - 1) {
            const std::string tail = TextTail(*vocab, inst, pos);
            // This mask's digest, and one of the configuration's heads' states without their
            // stacks (bench/native/repeated_masks.py reads both).
            uint64_t mask_digest = 0xcbf29ce484222325ull, states_digest = 0xcbf29ce484222325ull;
            for (uint32_t w : words) mask_digest = (mask_digest ^ w) * 0x100000001b3ull;
            std::vector<std::pair<int32_t, int32_t>> heads;
            m.store()->Heads(config, &heads);
            std::vector<int32_t> states;
            for (const auto& head : heads) states.push_back(head.first);
            std::sort(states.begin(), states.end());
            states.erase(std::unique(states.begin(), states.end()), states.end());
            for (int32_t st : states) states_digest = (states_digest ^ static_cast<uint32_t>(st)) * 0x100000001b3ull;
            // The configuration, and its heads with stacks cut to 1, 2, 3 and 4 frames.
            char keys[4 * 17];
            for (int d = 1; d <= 4; ++d) {
              std::snprintf(keys + 17 * (d - 1), 18, "%016llx%s",
                            static_cast<unsigned long long>(StackCutKey(*m.store(), config, d)), d < 4 ? "," : "");
            }
            std::printf("  %-38s pos %3zu %8.2f us nodes %7lld transitions %4lld mask %016llx states %016llx config %d "
                        "keys %s%s  ...%s\n",
                        c.id.c_str(), pos, us, static_cast<long long>(m.last_walk_nodes()),
                        static_cast<long long>(g->parser->num_transitions() - tr0),
                        static_cast<unsigned long long>(mask_digest), static_cast<unsigned long long>(states_digest),
                        config, keys, first ? " (first)" : "", tail.c_str());
          }
          first = false;
          if (pos == inst.size()) break;
          const int32_t t = inst[pos];
          if (!(words[static_cast<size_t>(t) >> 5] >> (t & 31) & 1) || !m.Accept(t)) {
            ++failures;
            break;
          }
        }
      }
      transitions += g->parser->num_transitions();
      if (reach && !compile_only && rep == repeat - 1) {
        // (One store: a case whose matchers moved to a fresh store reports the last one's part.)
        const Reach r = ReachedPart(*g->parser.get(), *g->automaton);
        const Automaton& a = *g->automaton;
        std::printf("%-40s reach: states %lld/%d, rules %lld/%d, states of those rules %lld; compile %.1f us\n",
                    c.id.c_str(), static_cast<long long>(r.states), a.num_states(), static_cast<long long>(r.rules),
                    a.num_rules(), static_cast<long long>(r.states_in_rules), compile_us);
      }
      double sum = 0, mx = 0;
      for (double x : masks) sum += x, mx = std::max(mx, x);
      if (rep == repeat - 1) {
        slowest_over[0] += mx >= 200;
        slowest_over[1] += mx >= 500;
        slowest_over[2] += mx >= 1000;
        std::printf("%-40s compile %8.1f us  masks %5zu  mean %7.2f  max %8.1f  transitions %lld  states %d  digest %016llx\n",
                    c.id.c_str(), compile_us, masks.size(), masks.empty() ? 0.0 : sum / masks.size(), mx,
                    static_cast<long long>(g->parser->num_transitions()), g->automaton->num_states(),
                    static_cast<unsigned long long>(digest));
      }
      all_masks.insert(all_masks.end(), masks.begin(), masks.end());
    }
  }
  auto pct = [](std::vector<double> v, double p) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
  };
  double sum = 0;
  for (double x : all_masks) sum += x;
  std::printf("total: %zu masks, mean %.2f us, p50 %.2f, p99 %.1f, max %.1f; compile p50 %.1f us, p99 %.1f; "
              "%lld transitions; %lld rejected instances\n",
              all_masks.size(), all_masks.empty() ? 0.0 : sum / all_masks.size(), pct(all_masks, 0.5),
              pct(all_masks, 0.99), pct(all_masks, 1.0), pct(compiles, 0.5), pct(compiles, 0.99),
              static_cast<long long>(transitions), static_cast<long long>(failures));
  std::printf("cases whose slowest mask takes >= 200 us: %lld, >= 500 us: %lld, >= 1 ms: %lld\n",
              static_cast<long long>(slowest_over[0]), static_cast<long long>(slowest_over[1]),
              static_cast<long long>(slowest_over[2]));
  if (evict) std::printf("(evicted %llu lines)\n", static_cast<unsigned long long>(evict_sum));
  return failures == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  // A missing or unreadable input (ReadVocabulary, Reader) is an error message, not an abort.
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "walk_bench: %s\n", e.what());
    return 2;
  }
}
