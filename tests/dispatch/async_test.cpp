#include "cyan/dispatch/async.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <coroutine>
#include <exception>
#include <latch>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "cyan/dispatch.h"
#include "support/detached.h"
#include "support/weighted_tasks.h"

// The global pool lives for the whole test program and is drained at exit; no test stops it.

namespace {

using cyan::dispatch::async;
using cyan::dispatch::async_awaitable;
using cyan::dispatch::future;
using cyan::dispatch::global_concurrent_pool;
using cyan::dispatch::serial_token;
using namespace std::chrono_literals;

TEST(async, runs_on_the_global_pool) {
  EXPECT_EQ(&global_concurrent_pool(), &global_concurrent_pool());
  EXPECT_EQ(global_concurrent_pool().size(), cyan::dispatch::thread_pool::default_size());
  constexpr int kTasks = 10000;
  std::latch done(kTasks);
  std::atomic<int> on_pool{ 0 };
  for (int i = 0; i < kTasks; ++i) {
    async([&] {
      on_pool.fetch_add(global_concurrent_pool().is_current() ? 1 : 0);
      done.count_down();
    });
  }
  done.wait();
  EXPECT_EQ(on_pool.load(), kTasks);
}

TEST(async, token_tasks_run_one_at_a_time_in_order) {
  serial_token token;
  std::vector<int> order;  // written by token tasks only
  std::atomic<int> running{ 0 };
  std::atomic<int> overlaps{ 0 };
  for (int i = 0; i < 5000; ++i) {
    async(token, [&, i] {
      overlaps.fetch_add(running.fetch_add(1) != 0 ? 1 : 0);
      order.push_back(i);
      running.fetch_sub(1);
    });
  }
  async_awaitable(token, [] {}).get();
  EXPECT_EQ(overlaps.load(), 0);
  ASSERT_EQ(order.size(), 5000u);
  for (int i = 0; i < 5000; ++i) {
    ASSERT_EQ(order[i], i);
  }
}

TEST(async, delayed_tasks_run_after_their_delay) {
  const auto start = std::chrono::steady_clock::now();
  std::latch done(1);
  std::chrono::steady_clock::duration fire_and_forget_elapsed{};
  async(
      [&] {
        fire_and_forget_elapsed = std::chrono::steady_clock::now() - start;
        done.count_down();
      },
      30ms);
  auto delayed =
      async_awaitable([start] { return std::chrono::steady_clock::now() - start; }, 40ms);
  // Never early; late by at most 5 s (generous for a shared machine; a lost timer fails).
  const auto delayed_elapsed = delayed.get();
  EXPECT_GE(delayed_elapsed, 40ms);
  EXPECT_LE(delayed_elapsed, 40ms + 5s);
  done.wait();
  EXPECT_GE(fire_and_forget_elapsed, 30ms);
  EXPECT_LE(fire_and_forget_elapsed, 30ms + 5s);
}

// Every async form takes a closure that returns a value (the result is ignored), and a
// move-only one: each runs exactly once (distinct weights, so a lost or doubled one changes the
// sum).
TEST(async, accepts_closures_that_return_a_value) {
  serial_token token;
  cyan::test::weighted_tasks tasks(6);
  async(tasks.returning_int(1));
  async(token, tasks.returning_int(2));
  async(tasks.returning_int(4), 1ms);
  async(tasks.move_only(8));
  async(token, tasks.move_only(16));
  async(tasks.move_only(32), 1ms);
  EXPECT_EQ(tasks.wait_for_sum(), 63);
}

TEST(async, awaitable_results_and_errors) {
  std::vector<future<long>> results;
  for (long i = 0; i < 20000; ++i) {
    results.push_back(async_awaitable([i] { return i * i; }));
  }
  long long sum = 0;
  for (auto& result : results) {
    sum += result.get();
  }
  long long expected = 0;
  for (long i = 0; i < 20000; ++i) {
    expected += static_cast<long long>(i) * i;
  }
  EXPECT_EQ(sum, expected);
  EXPECT_THROW(async_awaitable([]() -> int { throw std::out_of_range("x"); }).get(),
               std::out_of_range);
}

using cyan::test::detached;

// Suspends at its first co_await for sure (the awaited task waits for `go`, which the test
// opens only once this coroutine has returned to it), so it must resume on the pool thread
// that completed that task.
detached add_on_the_pool(std::latch& go, std::atomic<int>& out, std::atomic<bool>& resumed_on_pool,
                         std::latch& finished) {
  int first = co_await async_awaitable([&go] {
    go.wait();
    return 10;
  });
  resumed_on_pool.store(global_concurrent_pool().is_current());
  int second = co_await async_awaitable([] { return 200; });
  out.store(first + second);
  finished.count_down();
}

TEST(async, futures_can_be_co_awaited) {
  std::latch go(1);
  std::atomic<int> out{ 0 };
  std::atomic<bool> resumed_on_pool{ false };
  std::latch finished(1);
  add_on_the_pool(go, out, resumed_on_pool, finished);
  EXPECT_EQ(out.load(), 0);  // suspended
  go.count_down();
  finished.wait();
  EXPECT_EQ(out.load(), 210);
  EXPECT_TRUE(resumed_on_pool.load());
}

}  // namespace
