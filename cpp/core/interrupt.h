// Interrupting a compile: a cancel flag another thread may set, and a wall-clock deadline.
// The compile's long loops poll the calling thread's current Interrupt (set by an
// InterruptScope around the compile) and throw CoreError::Interrupted when either fires; every
// object the compile built is then released by unwinding. Matchers never see an interrupt:
// run-time work is bounded by Limits, not by time.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "error.h"

namespace logitgate {

// Set once, by any thread; never cleared (a token cancels every compile that holds it).
class CancelFlag {
 public:
  void Cancel() { set_.store(true, std::memory_order_release); }
  bool cancelled() const { return set_.load(std::memory_order_acquire); }

 private:
  std::atomic<bool> set_{false};
};

class Interrupt {
 public:
  // timeout_s <= 0: no deadline. The deadline counts from construction.
  Interrupt(std::shared_ptr<const CancelFlag> cancel, double timeout_s)
      : cancel_(std::move(cancel)), timeout_s_(timeout_s) {
    if (timeout_s > 0) {
      deadline_ = std::chrono::steady_clock::now() +
                  std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(timeout_s));
    }
  }
  double timeout_s() const { return timeout_s_; }
  bool cancelled() const { return cancel_ && cancel_->cancelled(); }
  bool expired() const { return timeout_s_ > 0 && std::chrono::steady_clock::now() >= deadline_; }
  // Throws when cancelled or past the deadline (cancellation wins when both hold).
  void Check() const {
    if (cancelled()) throw CoreError::Interrupted("compile-cancelled", "compile cancelled", 0);
    if (expired()) {
      throw CoreError::Interrupted("compile-timeout",
                                   "compile exceeded its timeout of " + std::to_string(timeout_s_) + " s", timeout_s_);
    }
  }

 private:
  std::shared_ptr<const CancelFlag> cancel_;
  double timeout_s_;
  std::chrono::steady_clock::time_point deadline_{};
};

namespace interrupt_detail {
inline thread_local const Interrupt* current = nullptr;
inline thread_local uint32_t polls = 0;
}  // namespace interrupt_detail

// Makes `interrupt` the calling thread's current one for the scope's lifetime.
class InterruptScope {
 public:
  explicit InterruptScope(const Interrupt* interrupt) : previous_(interrupt_detail::current) {
    interrupt_detail::current = interrupt;
  }
  ~InterruptScope() { interrupt_detail::current = previous_; }
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

 private:
  const Interrupt* previous_;
};

// Checks the current interrupt now (nothing when none is set).
inline void CheckInterrupt() {
  if (const Interrupt* i = interrupt_detail::current) i->Check();
}

// Checks the current interrupt on every 256th call: for loops whose bodies are short
// (one state, one subset), where reading the clock each time would show.
inline void PollInterrupt() {
  if (const Interrupt* i = interrupt_detail::current) {
    if ((++interrupt_detail::polls & 255u) == 0) i->Check();
  }
}

// What an interrupted compile had built is freed on a thread of its own, so that the compile
// returns without waiting for millions of frees (the freeing of a 2M-state automaton takes
// tens of milliseconds, most of the time to return from a cancel). PendingDiscards() counts
// the frees not finished yet (tests wait for 0 before measuring memory).
namespace interrupt_detail {
inline std::atomic<int64_t> pending_discards{0};
}  // namespace interrupt_detail

inline int64_t PendingDiscards() { return interrupt_detail::pending_discards.load(std::memory_order_acquire); }

template <typename T>
void DiscardLater(std::unique_ptr<T> doomed) {
  interrupt_detail::pending_discards.fetch_add(1, std::memory_order_acq_rel);
  T* raw = doomed.release();
  try {
    std::thread([raw] {
      delete raw;
      interrupt_detail::pending_discards.fetch_sub(1, std::memory_order_acq_rel);
    }).detach();
  } catch (...) {  // no thread to be had: free it here
    delete raw;
    interrupt_detail::pending_discards.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace logitgate
