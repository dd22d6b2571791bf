// How much thread CPU time this machine charges for work that did not take it: the noise floor
// under every "slowest mask" measured in CPU time (bench/mask_tail.py).
//
//   cpu_time_spikes [SECONDS]        (default 60)
//
// Repeats one fixed piece of arithmetic (about 20 µs; no memory, no system calls) for SECONDS
// of wall clock, timing each repetition by the thread's CPU clock and by the monotonic clock.
// A repetition whose CPU time is far above the others was charged for something outside it:
// on a virtual machine, time the host ran something else on this vCPU (the guest's scheduler
// clock still advancing), or an interrupt's work. Wall-clock outliers also count preemption
// by other processes, which CPU time leaves out. Prints the count and the largest of each,
// the slowest CPU-time repetitions, and the steal time the kernel reported meanwhile.
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

double Micros(clockid_t clock) {
  timespec t;
  clock_gettime(clock, &t);
  return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_nsec) / 1e3;
}

// The machine's steal time so far, in clock ticks (the "cpu" line of /proc/stat; -1: unknown).
long StealTicks() {
  FILE* f = std::fopen("/proc/stat", "r");
  if (f == nullptr) return -1;
  long v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const int n = std::fscanf(f, "cpu %ld %ld %ld %ld %ld %ld %ld %ld", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                            &v[6], &v[7]);
  std::fclose(f);
  return n == 8 ? v[7] : -1;
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 60.0;
  if (!(seconds > 0)) {
    std::fprintf(stderr, "usage: cpu_time_spikes [SECONDS]\n");
    return 2;
  }
  constexpr double kOutlierUs = 500;
  volatile uint64_t x = 1;  // (volatile: the loop is not folded away)
  const long steal0 = StealTicks();
  const double end = Micros(CLOCK_MONOTONIC) + seconds * 1e6;
  int64_t reps = 0, cpu_outliers = 0, wall_outliers = 0;
  double cpu_max = 0, wall_max = 0, cpu_sum = 0;
  std::vector<double> slowest;
  while (Micros(CLOCK_MONOTONIC) < end) {
    const double c0 = Micros(CLOCK_THREAD_CPUTIME_ID), w0 = Micros(CLOCK_MONOTONIC);
    for (int i = 0; i < 20000; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
    const double cpu = Micros(CLOCK_THREAD_CPUTIME_ID) - c0, wall = Micros(CLOCK_MONOTONIC) - w0;
    ++reps;
    cpu_sum += cpu;
    cpu_max = std::max(cpu_max, cpu);
    wall_max = std::max(wall_max, wall);
    wall_outliers += wall >= kOutlierUs;
    if (cpu >= kOutlierUs) {
      ++cpu_outliers;
      slowest.push_back(cpu);
    }
  }
  const long steal1 = StealTicks();
  std::sort(slowest.rbegin(), slowest.rend());
  std::printf("%lld repetitions of %.1f us (mean CPU time) in %.0f s\n", static_cast<long long>(reps),
              cpu_sum / static_cast<double>(std::max<int64_t>(reps, 1)), seconds);
  std::printf("CPU time >= %.0f us: %lld (max %.0f us); wall time >= %.0f us: %lld (max %.0f us)\n", kOutlierUs,
              static_cast<long long>(cpu_outliers), cpu_max, kOutlierUs, static_cast<long long>(wall_outliers),
              wall_max);
  std::printf("slowest by CPU time (us):");
  for (size_t i = 0; i < slowest.size() && i < 10; ++i) std::printf(" %.0f", slowest[i]);
  std::printf("\nsteal time meanwhile: ");
  if (steal0 < 0 || steal1 < 0) {
    std::printf("unknown\n");
  } else {
    std::printf("%ld ticks of 1/%ld s\n", steal1 - steal0, sysconf(_SC_CLK_TCK));
  }
  return 0;
}
