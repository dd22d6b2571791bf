// ThreadPool: a small persistent pool for batch mask fills. ParallelFor(n, fn) runs fn(i)
// for i in [0, n) on up to `threads` threads (the caller's thread included) and returns when
// all are done. Workers are started on first use and live for the process; indices are handed
// out through an atomic counter, so uneven work balances itself. A worker that finished a
// batch spins for a short while before it sleeps: batch fills come once per decoding step, and
// waking a sleeping thread costs about as much as a few mask fills. For the same reason the
// caller, once every index is taken, waits only for the workers that joined the batch (a
// worker still waking up sits it out) and spins for them before it sleeps.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace logitgate {

class ThreadPool {
 public:
  static ThreadPool& Global() {
    static ThreadPool* pool = new ThreadPool();  // never destroyed: workers may outlive statics
    return *pool;
  }

  // Runs fn(i) for every i < n; rethrows the first exception any call threw.
  void ParallelFor(size_t n, size_t threads, const std::function<void(size_t)>& fn) {
    if (threads <= 1 || n <= 1) {
      for (size_t i = 0; i < n; ++i) fn(i);
      return;
    }
    std::lock_guard<std::mutex> one_batch_at_a_time(batch_mu_);
    EnsureWorkers(threads - 1);
    {
      std::lock_guard<std::mutex> lock(mu_);
      fn_ = &fn;
      n_ = n;
      next_.store(0);
      active_ = std::min(threads - 1, workers_.size());
      batch_done_.store(active_ == 0, std::memory_order_relaxed);
      error_ = nullptr;
      generation_.store(generation_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    }
    cv_.notify_all();
    Work();
    {
      // Every row is taken: workers that have not joined yet (still waking up) are not waited
      // for; they sit this batch out (and never see fn_).
      std::lock_guard<std::mutex> lock(mu_);
      if (joined_ < active_) active_ = joined_;
      if (active_ == 0) {
        joined_ = 0;
        batch_done_.store(true, std::memory_order_relaxed);
      }
    }
    // The workers that joined finish their last rows about when this thread does: spin for
    // them a while rather than sleep at once (a futex wake-up costs 10-20 us, a whole small
    // batch's work).
    const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(kSpinMicros);
    while (!batch_done_.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < spin_until) {
      for (int i = 0; i < 16; ++i) Pause();
    }
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return active_ == 0; });
    fn_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  ThreadPool() = default;

  void EnsureWorkers(size_t count) {
    while (workers_.size() < count) {
      workers_.emplace_back([this] { Loop(); });
      workers_.back().detach();
    }
  }

  void Work() {
    // Read once: next_ is the only shared line written during a batch.
    const std::function<void(size_t)>& fn = *fn_;
    const size_t n = n_;
    for (size_t i = next_.fetch_add(1); i < n; i = next_.fetch_add(1)) {
      try {
        fn(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu_);
        if (!error_) error_ = std::current_exception();
      }
    }
  }

  void Loop() {
    uint64_t seen = 0;
    for (;;) {
      const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(kSpinMicros);
      while (generation_.load(std::memory_order_acquire) == seen && std::chrono::steady_clock::now() < spin_until) {
        for (int i = 0; i < 64; ++i) Pause();
      }
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (generation_.load(std::memory_order_relaxed) != seen && joined_ >= active_) {
          seen = generation_.load(std::memory_order_relaxed);  // a batch done without it: spin for the next
          continue;
        }
        cv_.wait(lock, [&] { return generation_.load(std::memory_order_relaxed) != seen && joined_ < active_; });
        seen = generation_.load(std::memory_order_relaxed);
        ++joined_;
      }
      Work();
      std::lock_guard<std::mutex> lock(mu_);
      if (--active_ == 0) {
        joined_ = 0;
        batch_done_.store(true, std::memory_order_release);
        done_cv_.notify_all();
      }
    }
  }

  std::mutex batch_mu_;  // one ParallelFor at a time
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::vector<std::thread> workers_;
  const std::function<void(size_t)>* fn_ = nullptr;
  size_t n_ = 0;
  alignas(64) std::atomic<size_t> next_{0};  // its own cache line: the other fields stay shared read-only
  char next_pad_[64 - sizeof(std::atomic<size_t>)] = {};
  size_t active_ = 0;  // workers taking part in the current batch that have not finished
  size_t joined_ = 0;  // workers that have joined the current batch
  std::atomic<bool> batch_done_{true};  // active_ == 0, for the caller's spin (set under mu_)
  std::atomic<uint64_t> generation_{0};  // written under mu_, read by spinning workers
  static constexpr int kSpinMicros = 200;
  static void Pause() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    std::this_thread::yield();
#endif
  }
  std::exception_ptr error_;
};

}  // namespace logitgate
