// The core without Python under AddressSanitizer, UndefinedBehaviorSanitizer and LeakSanitizer
// (tests/native/test_sanitized.py, docs/sanitizers.md), on the cases
// tests/native/export_sanitized.py writes (grammars of every frontend compiled by the normal
// build, with the masks it filled along random walks):
//   1. each case compiles, or raises the core error the normal build raised;
//   2. each walk replays with the same mask at every step, the same error where one ended it;
//      along it, a fork taken halfway continues alike, a rollback to halfway and the same tokens
//      again give the same masks, and the budget, forced bytes and logits masking run
//      (a budget-restricted mask within the mask; -inf logits exactly where the mask is 0);
//   3. mutants of each program (truncated, one value overwritten) compile or raise CoreError;
//   4. compiles of the largest case cancelled from another thread, or past a tiny timeout,
//      raise the interrupt's error (LeakSanitizer checks at exit that they freed everything);
//   5. the parser's HashIndex finds every id inserted and no other, across its growths (while
//      an old table is drained), with spread hashes and with hashes whose low halves collide.
// Prints one line per failure and exits 1 on any (the sanitizers abort on their own reports).
//
//   sanitized DIR
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../../bench/native/case_files.h"
#include "../../cpp/core/automaton.h"
#include "../../cpp/core/budget.h"
#include "../../cpp/core/hash_index.h"
#include "../../cpp/core/interrupt.h"
#include "../../cpp/core/logits_mask.h"
#include "../../cpp/core/matcher.h"
#include "../../cpp/core/parser.h"
#include "../../cpp/core/vocabulary.h"

using namespace logitgate;
using logitgate_native::ReadCompileInputs;
using logitgate_native::Reader;
using logitgate_native::ReadVocabulary;

namespace {

struct WalkCase {
  std::vector<int32_t> tokens;
  std::vector<uint64_t> digests;
  std::string error;
};

struct Case {
  std::string id;
  std::vector<int32_t> program;
  std::vector<std::string> names;
  CoreLimits limits;
  std::string error;
  std::vector<WalkCase> walks;
};

int64_t failures = 0;

template <typename... Args>
void Fail(const char* fmt, Args... args) {
  ++failures;
  std::printf("FAIL ");
  std::printf(fmt, args...);
  std::printf("\n");
}

// As export_sanitized.py's error names: "limit:FIELD" for a limit, else the error's code.
std::string ErrorName(const CoreError& e) { return e.kind == ErrorKind::kLimit ? "limit:" + e.limit : e.code; }

std::shared_ptr<const CompiledGrammar> Compile(const std::shared_ptr<const Vocabulary>& vocab,
                                               const std::vector<int32_t>& program,
                                               const std::vector<std::string>& names, const CoreLimits& limits) {
  return AssembleGrammar(vocab, std::make_shared<const Automaton>(program, names, limits), limits);
}

// export_sanitized.py's mask_digest: sum(w[i] * (2i + 1)) mod 2**64.
uint64_t MaskDigest(const std::vector<uint32_t>& words) {
  uint64_t h = 0;
  for (size_t i = 0; i < words.size(); ++i) h += uint64_t{words[i]} * (2 * uint64_t{i} + 1);
  return h;
}

bool Allowed(const std::vector<uint32_t>& words, int32_t t) { return words[static_cast<size_t>(t) >> 5] >> (t & 31) & 1; }

// What a walk's mask allows, checked against the core's other users of a mask.
void CheckMaskUsers(const Case& c, Budget& budget, Matcher& m, const std::vector<uint32_t>& words, int32_t width) {
  std::vector<uint32_t> restricted = words;
  budget.RestrictMask(m, restricted.data(), 6);
  for (size_t i = 0; i < words.size(); ++i) {
    if (restricted[i] & ~words[i]) Fail("%s: the budget's mask allows a token the mask does not", c.id.c_str());
  }
  budget.CostOf(m);
  m.ForcedBytes(64);
  std::vector<float> logits(static_cast<size_t>(width), 1.0f);
  const int64_t allowed = ApplyMaskRow(logits.data(), LogitsType::kFloat32, width, words.data(),
                                       static_cast<int64_t>(words.size()));
  int64_t finite = 0;
  for (int32_t t = 0; t < width; ++t) {
    const bool kept = std::isfinite(logits[static_cast<size_t>(t)]);
    finite += kept;
    if (kept != (t < static_cast<int32_t>(words.size() * 32) && Allowed(words, t))) {
      Fail("%s: logits masking disagrees with the mask at token %d", c.id.c_str(), t);
      break;
    }
  }
  if (finite != allowed) Fail("%s: ApplyMaskRow counted %lld allowed, %lld kept", c.id.c_str(), (long long)allowed, (long long)finite);
}

// Replays `w` on `m` from step `from` (the matcher has accepted w.tokens[0, from)); true when
// every mask and the ending error agree with the export.
bool Replay(const Case& c, size_t walk, Matcher& m, size_t from, Budget* budget, int32_t width) {
  const WalkCase& w = c.walks[walk];
  std::vector<uint32_t> words(static_cast<size_t>(m.grammar().vocab->mask_words()));
  for (size_t k = from;; ++k) {
    try {
      if (k >= w.digests.size() && w.error.rfind("fill:", 0) != 0) return true;
      m.FillMask(words.data());
      if (k >= w.digests.size()) {
        Fail("%s walk %zu: step %zu filled a mask, the export raised %s", c.id.c_str(), walk, k, w.error.c_str());
        return false;
      }
    } catch (const CoreError& e) {
      if (k == w.digests.size() && "fill:" + ErrorName(e) == w.error) return true;
      Fail("%s walk %zu: step %zu fill raised %s (%s)", c.id.c_str(), walk, k, ErrorName(e).c_str(), e.what());
      return false;
    }
    if (MaskDigest(words) != w.digests[k]) {
      Fail("%s walk %zu: mask %zu differs from the normal build's", c.id.c_str(), walk, k);
      return false;
    }
    if (budget) CheckMaskUsers(c, *budget, m, words, width);
    if (k >= w.tokens.size()) return true;
    const bool last = k + 1 == w.tokens.size();
    try {
      if (!m.Accept(w.tokens[k])) {
        Fail("%s walk %zu: token %d of step %zu refused", c.id.c_str(), walk, w.tokens[k], k);
        return false;
      }
      if (last && w.error.rfind("accept:", 0) == 0) {
        Fail("%s walk %zu: the last token was accepted, the export raised %s", c.id.c_str(), walk, w.error.c_str());
        return false;
      }
    } catch (const CoreError& e) {
      if (last && "accept:" + ErrorName(e) == w.error) return true;
      Fail("%s walk %zu: step %zu accept raised %s (%s)", c.id.c_str(), walk, k, ErrorName(e).c_str(), e.what());
      return false;
    }
  }
}

void RunCase(const std::shared_ptr<const Vocabulary>& vocab, const Case& c, int32_t width) {
  std::shared_ptr<const CompiledGrammar> g;
  try {
    g = Compile(vocab, c.program, c.names, c.limits);
  } catch (const CoreError& e) {
    if (ErrorName(e) != c.error) Fail("%s: compile raised %s, the normal build %s", c.id.c_str(), ErrorName(e).c_str(), c.error.empty() ? "compiled" : c.error.c_str());
    return;
  }
  if (!c.error.empty()) {
    Fail("%s: compiled, the normal build raised %s", c.id.c_str(), c.error.c_str());
    return;
  }
  Budget budget(g);
  for (size_t i = 0; i < c.walks.size(); ++i) {
    const WalkCase& w = c.walks[i];
    Matcher m(g);
    if (!Replay(c, i, m, 0, &budget, width)) continue;
    // A fork halfway, and a rollback to halfway, replay the rest alike (on clean walks).
    const size_t half = w.tokens.size() / 2;
    if (!w.error.empty() || m.num_accepted() != static_cast<int64_t>(w.tokens.size())) continue;
    Matcher again(g);
    for (size_t k = 0; k < half; ++k) again.Accept(w.tokens[k]);
    std::unique_ptr<Matcher> fork = again.Fork();
    Replay(c, i, *fork, half, nullptr, width);
    m.Rollback(static_cast<int64_t>(w.tokens.size() - half));
    Replay(c, i, m, half, nullptr, width);
    Matcher by_bytes(g);
    std::string text;
    for (int32_t t : w.tokens) {
      if (!vocab->is_text(t)) break;
      text += vocab->bytes(t);
    }
    by_bytes.AcceptBytes(text);
  }
}

// splitmix64: the mutants' choices, the same on every run.
uint64_t Next(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Mutants of a case's program: each compiles or raises CoreError, and what compiles walks a
// few random steps.
int64_t RunMutants(const std::shared_ptr<const Vocabulary>& vocab, const Case& c, int n) {
  static const int32_t kValues[] = {-1, 0, 1, 2, 3, 7, 9, 10, 255, 256, 0x10FFFF, 0x110000,
                                    std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min()};
  uint64_t seed = std::hash<std::string>{}(c.id);
  CoreLimits limits = c.limits;
  limits.max_automaton_states = std::min<int64_t>(limits.max_automaton_states, 50000);
  limits.max_repeat = std::min<int64_t>(limits.max_repeat, 2000);
  int64_t compiled = 0;
  for (int i = 0; i < n && !c.program.empty(); ++i) {
    std::vector<int32_t> p = c.program;
    const size_t at = Next(seed) % p.size();
    if (i % 4 == 0) {
      p.resize(at);
    } else {
      const uint64_t r = Next(seed);
      p[at] = r % 3 == 0 ? static_cast<int32_t>(Next(seed) % 64) : kValues[r % (sizeof(kValues) / sizeof(kValues[0]))];
    }
    try {
      auto g = Compile(vocab, p, c.names, limits);
      ++compiled;
      Matcher m(g);
      std::vector<uint32_t> words(static_cast<size_t>(vocab->mask_words()));
      for (int step = 0; step < 6; ++step) {
        m.FillMask(words.data());
        std::vector<int32_t> allowed;
        for (int32_t t = 0; t < vocab->width(); ++t) {
          if (Allowed(words, t)) allowed.push_back(t);
        }
        if (allowed.empty()) break;
        const int32_t t = allowed[Next(seed) % allowed.size()];
        if (!m.Accept(t)) Fail("%s mutant %d: a token of its mask was refused", c.id.c_str(), i);
      }
    } catch (const CoreError&) {
      // A refusal is the expected outcome of most mutants.
    }
  }
  return compiled;
}

// Compiles interrupted from another thread, or by a deadline: each raises the interrupt's error
// (or finishes first); what they built is freed by unwinding.
void RunInterrupts(const std::shared_ptr<const Vocabulary>& vocab, const Case& c) {
  for (int delay_us : {0, 200, 1000, 5000}) {
    auto flag = std::make_shared<CancelFlag>();
    std::thread canceller([&] {
      std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
      flag->Cancel();
    });
    try {
      Interrupt interrupt(flag, 0);
      InterruptScope scope(&interrupt);
      Compile(vocab, c.program, c.names, c.limits);
    } catch (const CoreError& e) {
      if (e.code != "compile-cancelled") Fail("%s: a cancelled compile raised %s", c.id.c_str(), ErrorName(e).c_str());
    }
    canceller.join();
  }
  try {
    Interrupt interrupt(std::make_shared<CancelFlag>(), 1e-9);
    InterruptScope scope(&interrupt);
    std::this_thread::sleep_for(std::chrono::microseconds(10));
    CheckInterrupt();
    Compile(vocab, c.program, c.names, c.limits);
    Fail("%s: a compile past its deadline finished", c.id.c_str());
  } catch (const CoreError& e) {
    if (e.code != "compile-timeout") Fail("%s: a timed-out compile raised %s", c.id.c_str(), ErrorName(e).c_str());
  }
}

// Inserts ids 0..n-1 under hash_of(id), checking after each insert that the id is found and
// the next is not, and every id so far after inserting a power of two: the insert that grows
// the index, so most of them are still in the old table.
template <typename HashOf>
void CheckHashIndex(const char* what, int32_t n, HashOf&& hash_of) {
  HashIndex index;
  auto find = [&](int32_t id) { return index.Find(hash_of(id), [&](int32_t held) { return held == id; }); };
  for (int32_t id = 0; id < n; ++id) {
    index.Insert(id, hash_of(id));
    if (find(id) != id) Fail("hash index (%s): id %d not found after its insert", what, id);
    if (find(id + 1) != -1) Fail("hash index (%s): id %d found before its insert", what, id + 1);
    if ((id & (id - 1)) == 0) {
      for (int32_t k = 0; k <= id; ++k) {
        if (find(k) != k) Fail("hash index (%s): id %d lost after %d inserts", what, k, id + 1);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: sanitized DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  auto vocab = ReadVocabulary(dir + "/vocab.bin");

  Reader cr(dir + "/cases.bin");
  std::vector<Case> cases(static_cast<size_t>(cr.I32()));
  for (Case& c : cases) {
    ReadCompileInputs(cr, c);
    c.error = cr.Str();
    c.walks.resize(static_cast<size_t>(cr.I32()));
    for (WalkCase& w : c.walks) {
      w.tokens = cr.I32s();
      w.digests.resize(static_cast<size_t>(cr.I32()));
      for (uint64_t& d : w.digests) d = static_cast<uint64_t>(cr.I64());
      w.error = cr.Str();
    }
  }

  size_t walks = 0, steps = 0, refused = 0;
  const Case* largest = nullptr;
  for (const Case& c : cases) {
    RunCase(vocab, c, vocab->width());
    walks += c.walks.size();
    for (const WalkCase& w : c.walks) steps += w.digests.size();
    refused += !c.error.empty();
    if (c.error.empty() && (!largest || c.program.size() > largest->program.size())) largest = &c;
  }
  std::printf("cases: %zu (%zu refused), walks %zu, masks %zu, failures %lld\n", cases.size(), refused, walks, steps,
              static_cast<long long>(failures));
  int64_t mutants = 0, compiled = 0;
  for (const Case& c : cases) {
    compiled += RunMutants(vocab, c, 24);
    mutants += 24;
  }
  std::printf("mutants: %lld, %lld compiled, failures %lld\n", static_cast<long long>(mutants),
              static_cast<long long>(compiled), static_cast<long long>(failures));
  if (largest) RunInterrupts(vocab, *largest);
  std::printf("interrupted compiles of %s: failures %lld\n", largest ? largest->id.c_str() : "-", static_cast<long long>(failures));
  CheckHashIndex("spread", 100000, [](int32_t id) { return static_cast<uint64_t>(id) * 0x9e3779b97f4a7c15ull; });
  // Low halves in 7 values: every probe sequence runs through long clusters, in both tables.
  CheckHashIndex("colliding", 3000, [](int32_t id) { return static_cast<uint64_t>(id) << 32 | static_cast<uint32_t>(id % 7); });
  std::printf("hash index: failures %lld\n", static_cast<long long>(failures));
  return failures == 0 ? 0 : 1;
}
