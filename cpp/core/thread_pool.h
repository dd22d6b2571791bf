// ThreadPool: a small persistent pool for batch mask fills. ParallelFor(n, fn) runs fn(i)
// for i in [0, n) on up to `threads` threads (the caller's thread included) and returns when
// all are done. Workers are started on first use and live for the process; indices are handed
// out one at a time (the caller's from the front, the workers' from the back), so uneven work
// balances itself. A worker that finished a batch spins for a short while before it sleeps:
// batch fills come once per decoding step, and waking a sleeping thread costs about as much as
// a few mask fills. For the same reason the caller does not wait for workers that are still
// waking up once every index is taken: it *closes* the batch, and a worker that arrives after
// that sits the batch out.
//
// Per batch, under mu_: `joined_` workers joined it, `finished_` of them are done, and `closed_`
// is set by the caller after its own share. No worker joins a closed batch, so once closed
// `joined_` is final, and the batch is done exactly when closed_ && finished_ == joined_.
#pragma once

#include <algorithm>
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
    if (threads <= 1 || n <= 1 || n > 0xFFFFFFFFu) {  // (range_ holds 32-bit indices)
      for (size_t i = 0; i < n; ++i) fn(i);
      return;
    }
    std::lock_guard<std::mutex> one_batch_at_a_time(batch_mu_);
    EnsureWorkers(threads - 1);
    {
      std::lock_guard<std::mutex> lock(mu_);
      fn_ = &fn;
      range_.store(static_cast<uint64_t>(n));  // front 0, back n
      max_joined_ = threads - 1;
      joined_ = finished_ = 0;
      closed_ = false;
      done_.store(false, std::memory_order_relaxed);
      error_ = nullptr;
      generation_.store(generation_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    }
    cv_.notify_all();
    Work(fn, true);
    {
      // Every index is taken: close the batch, so that the workers to wait for are known.
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
      if (finished_ == joined_) done_.store(true, std::memory_order_relaxed);
    }
    // The workers that joined finish their last indices about when this thread does: spin for
    // them a while rather than sleep at once (a futex wake-up costs about as much as a whole
    // small batch's work).
    const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(kSpinMicros);
    while (!done_.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < spin_until) {
      for (int i = 0; i < 16; ++i) Pause();
    }
    // Bounded: every joined worker is running fn on indices it took and finishes them.
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return finished_ == joined_; });
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

  // The caller takes indices from the front, workers from the back, until they meet: each
  // row tends to go to the same thread from one batch to the next (its mask row stays in that
  // core's cache), and uneven work still balances itself.
  void Work(const std::function<void(size_t)>& fn, bool front) {
    for (;;) {
      uint64_t r = range_.load(std::memory_order_relaxed);
      size_t i;
      do {
        const uint64_t lo = r >> 32, hi = r & 0xFFFFFFFFu;
        if (lo >= hi) return;
        i = static_cast<size_t>(front ? lo : hi - 1);
        const uint64_t next = front ? ((lo + 1) << 32 | hi) : (lo << 32 | (hi - 1));
        if (range_.compare_exchange_weak(r, next, std::memory_order_relaxed)) break;
      } while (true);
      try {
        fn(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu_);
        if (!error_) error_ = std::current_exception();
      }
    }
  }

  void Loop() {
    uint64_t seen = 0;  // the last batch this worker joined or sat out
    for (;;) {
      const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(kSpinMicros);
      while (generation_.load(std::memory_order_acquire) == seen && std::chrono::steady_clock::now() < spin_until) {
        for (int i = 0; i < 64; ++i) Pause();
      }
      const std::function<void(size_t)>* fn;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return generation_.load(std::memory_order_relaxed) != seen; });
        seen = generation_.load(std::memory_order_relaxed);
        if (closed_ || joined_ >= max_joined_) continue;  // closed or full: sit this batch out
        ++joined_;
        fn = fn_;  // valid until the caller sees this worker finish
      }
      Work(*fn, false);
      std::lock_guard<std::mutex> lock(mu_);
      if (++finished_ == joined_ && closed_) {
        done_.store(true, std::memory_order_release);
        done_cv_.notify_one();
      }
    }
  }

  std::mutex batch_mu_;  // one ParallelFor at a time
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::vector<std::thread> workers_;
  alignas(64) std::atomic<uint64_t> range_{0};  // indices not taken yet: front << 32 | back
  char range_pad_[64 - sizeof(std::atomic<uint64_t>)] = {};
  // The current batch; guarded by mu_.
  const std::function<void(size_t)>* fn_ = nullptr;
  size_t max_joined_ = 0;  // workers the batch may use (threads - 1)
  size_t joined_ = 0;      // workers that joined it
  size_t finished_ = 0;    // joined workers done with it
  bool closed_ = true;     // the caller took its share: no more workers join
  std::exception_ptr error_;
  std::atomic<bool> done_{true};         // closed_ && finished_ == joined_, for the caller's spin
  std::atomic<uint64_t> generation_{0};  // batches started; written under mu_, read by spinning workers
  static constexpr int kSpinMicros = 200;
  static void Pause() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    std::this_thread::yield();
#endif
  }
};

}  // namespace logitgate
