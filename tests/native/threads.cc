// The core's concurrency without Python, for ThreadSanitizer (`make tsan`): the Python
// extension cannot be run under TSan with an uninstrumented interpreter, so this driver does
// what tests/unit/test_threads.py does, on the inputs tests/native/export_threads.py writes
// (bench/native/export.py's layout):
//   1. per case, one compile and one walk per token sequence on this thread: the reference
//      digest of every mask along each sequence;
//   2. one fresh grammar per case under 64 matchers on 64 threads, started together;
//   3. 8 threads each compiling every case (compile and interrupt checks racing) and walking;
//   4. ThreadPool::ParallelFor filling masks of matchers left at every point of the walks.
// Exits 1 on any digest that differs from the reference (TSan reports races itself).
//
//   threads DIR
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "../../bench/native/case_files.h"
#include "../../cpp/core/automaton.h"
#include "../../cpp/core/interrupt.h"
#include "../../cpp/core/matcher.h"
#include "../../cpp/core/parser.h"
#include "../../cpp/core/thread_pool.h"
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
  std::vector<std::vector<int32_t>> walks;
};

std::shared_ptr<const CompiledGrammar> Compile(const std::shared_ptr<const Vocabulary>& vocab, const Case& c) {
  // A compile with an interrupt that never fires: its checks run, as in a compile with a timeout.
  Interrupt interrupt(std::make_shared<CancelFlag>(), 3600.0);
  InterruptScope scope(&interrupt);
  return AssembleGrammar(vocab, std::make_shared<const Automaton>(c.program, c.names, c.limits), c.limits);
}

uint64_t Mix(uint64_t h, const std::vector<uint32_t>& words) {
  for (uint32_t w : words) h = (h ^ w) * 0x100000001b3ull;
  return h;
}

// The digest of every mask along `ids`, each token accepted after its mask; 0 when a token
// of the sequence is masked off or rejected.
uint64_t Walk(const std::shared_ptr<const CompiledGrammar>& g, const std::vector<int32_t>& ids) {
  Matcher m(g);
  std::vector<uint32_t> words(static_cast<size_t>(g->vocab->mask_words()));
  uint64_t h = 0xcbf29ce484222325ull;
  for (int32_t t : ids) {
    m.FillMask(words.data());
    h = Mix(h, words);
    if (!(words[static_cast<size_t>(t) >> 5] >> (t & 31) & 1) || !m.Accept(t)) return 0;
  }
  return h;
}

// Starts n threads running fn(i) together and joins them.
template <typename Fn>
void RunTogether(int n, Fn fn) {
  std::mutex mu;
  std::condition_variable cv;
  int waiting = 0;
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      {
        std::unique_lock<std::mutex> lock(mu);
        if (++waiting == n) cv.notify_all();
        cv.wait(lock, [&] { return waiting == n; });
      }
      fn(i);
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: threads DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  auto vocab = ReadVocabulary(dir + "/vocab.bin");

  Reader cr(dir + "/cases.bin");
  std::vector<Case> cases(static_cast<size_t>(cr.I32()));
  for (Case& c : cases) {
    ReadCompileInputs(cr, c);
    c.walks.resize(static_cast<size_t>(cr.I32()));
    for (auto& w : c.walks) w = cr.I32s();
  }

  std::atomic<int64_t> failures{0};
  std::vector<std::vector<uint64_t>> reference(cases.size());
  for (size_t k = 0; k < cases.size(); ++k) {
    auto g = Compile(vocab, cases[k]);
    for (const auto& w : cases[k].walks) {
      reference[k].push_back(Walk(g, w));
      if (reference[k].back() == 0) ++failures;  // the exported walks came from the masks
    }
  }
  std::printf("reference: %zu cases, failures %lld\n", cases.size(), static_cast<long long>(failures.load()));

  // 2. One fresh grammar per case, 64 matchers on 64 threads.
  for (size_t k = 0; k < cases.size(); ++k) {
    auto g = Compile(vocab, cases[k]);
    const auto& walks = cases[k].walks;
    RunTogether(64, [&](int i) {
      const size_t w = static_cast<size_t>(i) % walks.size();
      if (Walk(g, walks[w]) != reference[k][w]) ++failures;
    });
  }
  std::printf("64 threads on one grammar: failures %lld\n", static_cast<long long>(failures.load()));

  // 3. 8 threads compiling every case at once.
  RunTogether(8, [&](int i) {
    for (size_t j = 0; j < cases.size(); ++j) {
      const size_t k = (j + static_cast<size_t>(i)) % cases.size();
      auto g = Compile(vocab, cases[k]);
      for (size_t w = 0; w < cases[k].walks.size(); w += 4) {
        if (Walk(g, cases[k].walks[w]) != reference[k][w]) ++failures;
      }
    }
  });
  std::printf("8 compiling threads: failures %lld\n", static_cast<long long>(failures.load()));

  // 4. A batch fill over matchers at every point of the walks, of fresh grammars.
  std::vector<std::shared_ptr<const CompiledGrammar>> grammars;
  for (const Case& c : cases) grammars.push_back(Compile(vocab, c));
  std::vector<std::unique_ptr<Matcher>> matchers;
  for (size_t k = 0; k < cases.size(); ++k) {
    for (const auto& w : cases[k].walks) {
      for (size_t stop = 0; stop <= w.size(); stop += 3) {
        auto m = std::make_unique<Matcher>(grammars[k]);
        for (size_t p = 0; p < stop; ++p) m->Accept(w[p]);
        matchers.push_back(std::move(m));
      }
    }
  }
  const size_t words = static_cast<size_t>(vocab->mask_words());
  std::vector<uint32_t> batched(matchers.size() * words), serial(matchers.size() * words);
  ThreadPool::Global().ParallelFor(matchers.size(), 8, [&](size_t i) { matchers[i]->FillMask(&batched[i * words]); });
  for (size_t i = 0; i < matchers.size(); ++i) matchers[i]->FillMask(&serial[i * words]);
  if (batched != serial) ++failures;
  std::printf("batch fill of %zu matchers: failures %lld\n", matchers.size(), static_cast<long long>(failures.load()));
  return failures.load() == 0 ? 0 : 1;
}
