// The adaptive spin (detail/spin_governor.h) in the pool and in handler threads still leaves an
// idle program at ~0 % CPU: after a burst of work (the spin budget at its longest), and beside a
// process that keeps one CPU busy (where the spin loses its CPU and rests). Measures idleness,
// so it sleeps; process CPU time from getrusage(RUSAGE_SELF), which the busy child is not part
// of. Bound: < 5 % of the wall time of one core (15 ms in 300 ms), generous for sanitizers.

#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <thread>

#include "cyan/dispatch/handler_thread.h"
#include "cyan/dispatch/thread_pool.h"

namespace {

using namespace std::chrono_literals;
using cyan::dispatch::handler_thread;
using cyan::dispatch::thread_pool;

constexpr auto kIdleWall = 300ms;
constexpr auto kMaxCpu = 15ms;  // 5 % of kIdleWall

std::chrono::microseconds process_cpu() {
  ::rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return std::chrono::seconds(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         std::chrono::microseconds(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

// Process CPU time used over kIdleWall of idleness.
std::chrono::microseconds cpu_used_while_idle() {
  std::this_thread::sleep_for(20ms);  // the last spins end (50 µs each at most)
  const auto before = process_cpu();
  std::this_thread::sleep_for(kIdleWall);  // the thing measured: doing nothing
  return process_cpu() - before;
}

// A child that burns the last CPU we may run on until it is destroyed (no exec: only system
// calls after fork()).
class cpu_hog {
 public:
  cpu_hog() {
    ::cpu_set_t allowed;
    CPU_ZERO(&allowed);
    (void)::sched_getaffinity(0, sizeof allowed, &allowed);
    int cpu = 0;
    for (int i = 0; i < CPU_SETSIZE; ++i) {
      cpu = CPU_ISSET(i, &allowed) ? i : cpu;
    }
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      ::sched_setaffinity(0, sizeof one, &one);
      for (;;) {
        asm volatile("" ::: "memory");
      }
    }
  }
  cpu_hog(const cpu_hog&) = delete;
  cpu_hog& operator=(const cpu_hog&) = delete;
  ~cpu_hog() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
    }
  }
  [[nodiscard]] bool started() const noexcept { return pid_ > 0; }

 private:
  pid_t pid_ = -1;
};

// A burst that keeps every worker spinning and finding work: 20,000 tiny tasks, each counted.
void burst(thread_pool& pool) {
  std::atomic<int> ran{ 0 };
  for (int i = 0; i < 20'000; ++i) {
    // release: the count's load below then orders each task's end before `ran` goes away.
    pool.post([&ran] { ran.fetch_add(1, std::memory_order_release); });
  }
  pool.post_awaitable([] {}).get();
  // The marker may overtake tasks claimed by another worker: wait for the count (bounded).
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (ran.load() != 20'000 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  ASSERT_EQ(ran.load(), 20'000);
}

// Ping-pong with the calling thread: each reply's wait lets the handler thread spin.
void burst(handler_thread& thread) {
  int sum = 0;
  for (int i = 0; i < 2'000; ++i) {
    sum += thread.post_awaitable([i] { return i; }).get();
  }
  ASSERT_EQ(sum, 2'000 * 1'999 / 2);
}

TEST(spin_governor_idle, a_pool_after_a_burst_uses_almost_no_cpu) {
  thread_pool pool(4);
  burst(pool);
  const auto used = cpu_used_while_idle();
  EXPECT_LT(used, kMaxCpu) << used.count() << " us of CPU in 300 ms";
}

TEST(spin_governor_idle, a_handler_thread_after_a_burst_uses_almost_no_cpu) {
  handler_thread thread;
  burst(thread);
  const auto used = cpu_used_while_idle();
  EXPECT_LT(used, kMaxCpu) << used.count() << " us of CPU in 300 ms";
}

TEST(spin_governor_idle, a_pool_and_a_handler_thread_beside_a_busy_cpu_use_almost_no_cpu) {
  const cpu_hog hog;
  ASSERT_TRUE(hog.started());
  thread_pool pool(4);
  handler_thread thread;
  burst(pool);
  burst(thread);
  const auto used = cpu_used_while_idle();
  EXPECT_LT(used, kMaxCpu) << used.count() << " us of CPU in 300 ms";
}

}  // namespace
