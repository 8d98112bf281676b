// Liveness of thread_pool under the pattern that deadlocked it: workers that go to sleep at
// random moments, then N tasks that can only finish together (a std::barrier of N) on a pool of
// N workers. A pool that hides a queued task from an idle worker, or loses a wake-up, hangs
// here; the bounded waits turn that hang into a failure.

#include <gtest/gtest.h>

#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <random>
#include <thread>
#include <vector>

#include "cyan/dispatch/thread_pool.h"
#include "support/stress_env.h"

namespace {

using cyan::dispatch::future;
using cyan::dispatch::thread_pool;
using cyan::test::env_or;
using namespace std::chrono_literals;

// One run of the pattern on pool(workers): per iteration, sleep a random 0..3 ms (so that the
// workers fall asleep at every stage of their idle cycle), post 1..3 trivial tasks, then
// `workers` tasks that meet at one barrier. Expect every barrier task done within 2 s.
void run_barrier_rounds(std::size_t workers, std::uint64_t iterations, std::uint64_t seed) {
  thread_pool pool(workers);
  std::mt19937_64 random(seed);
  std::uniform_int_distribution<int> pause_us(0, 3000);
  std::uniform_int_distribution<int> trivial_count(1, 3);
  std::atomic<std::uint64_t> trivial_ran{ 0 };
  std::uint64_t trivial_posted = 0;
  std::barrier meeting(static_cast<std::ptrdiff_t>(workers));
  std::vector<future<void>> arrivals;
  for (std::uint64_t iteration = 0; iteration < iterations; ++iteration) {
    std::this_thread::sleep_for(std::chrono::microseconds(pause_us(random)));
    for (int i = trivial_count(random); i > 0; --i, ++trivial_posted) {
      pool.post([&trivial_ran] { trivial_ran.fetch_add(1, std::memory_order_relaxed); });
    }
    arrivals.clear();
    for (std::size_t i = 0; i < workers; ++i) {
      arrivals.push_back(pool.post_awaitable([&meeting] { meeting.arrive_and_wait(); }));
    }
    for (std::size_t i = 0; i < workers; ++i) {
      if (arrivals[i].wait_for(2s) != std::future_status::ready) {
        // The pool could never be stopped and joined: its workers wait at the barrier.
        std::fprintf(stderr,
                     "pool(%zu): barrier task %zu of iteration %llu did not run within 2 s "
                     "(seed %llu)\n",
                     workers, i, static_cast<unsigned long long>(iteration),
                     static_cast<unsigned long long>(seed));
        std::abort();
      }
      arrivals[i].get();
    }
  }
  pool.stop();
  pool.join();
  EXPECT_EQ(trivial_ran.load(), trivial_posted);
}

// 1..(2 x cores) workers, CYAN_STRESS_ITEMS iterations in total (default 10,000), split evenly.
TEST(thread_pool_stress, n_workers_run_n_tasks_that_wait_for_each_other) {
  const std::size_t max_workers = 2 * std::max(1u, std::thread::hardware_concurrency());
  const std::uint64_t total = env_or("CYAN_STRESS_ITEMS", 10000);
  const std::uint64_t seed = env_or("CYAN_STRESS_SEED", 20261201);
  for (std::size_t workers = 1; workers <= max_workers; ++workers) {
    run_barrier_rounds(workers, std::max<std::uint64_t>(1, total / max_workers), seed + workers);
  }
}

}  // namespace
