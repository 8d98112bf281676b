// Fork-join on a thread_pool: helping waits (nested future::get), join(), task_group and
// parallel_for(). Every wait that could deadlock is bounded: a test that would hang reports
// and exits instead.

#include "cyan/dispatch/join.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <latch>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cyan/dispatch/errors.h"
#include "cyan/dispatch/stop_mode.h"
#include "cyan/dispatch/thread_pool.h"
#include "support/worker_holder.h"

namespace cyan::dispatch {
namespace {

using namespace std::chrono_literals;

// Waits for `f` at most 60 s; a deadlock (the defect these tests guard) ends the test binary
// with a message instead of hanging it (the pool could not be destroyed).
template <typename T>
T get_bounded(future<T>& f, const char* what) {
  if (f.wait_for(60s) != std::future_status::ready) {
    std::fprintf(stderr, "%s: no result within 60 s (deadlocked pool)\n", what);
    std::_Exit(1);
  }
  return f.get();
}

// The fork-join a user of post_awaitable writes first: fork one half, compute the other, get().
std::uint64_t fib_by_get(thread_pool& pool, int n) {
  if (n < 2) {
    return static_cast<std::uint64_t>(n);
  }
  auto left = pool.post_awaitable([&pool, n] { return fib_by_get(pool, n - 1); });
  const std::uint64_t right = fib_by_get(pool, n - 2);
  return left.get() + right;
}

std::uint64_t fib_by_join(thread_pool& pool, int n) {
  if (n < 2) {
    return static_cast<std::uint64_t>(n);
  }
  auto [a, b] = join(
      pool, [&pool, n] { return fib_by_join(pool, n - 1); },
      [&pool, n] { return fib_by_join(pool, n - 2); });
  return a + b;
}

class on_workers : public ::testing::TestWithParam<std::size_t> {};

INSTANTIATE_TEST_SUITE_P(join, on_workers, ::testing::Values(1, 2, 4),
                         [](const auto& info) { return std::to_string(info.param) + "_workers"; });

// Before the helping wait: deadlocked once the recursion was two levels deeper than workers.
TEST_P(on_workers, nested_future_gets_in_pool_tasks_do_not_deadlock) {
  thread_pool pool(GetParam());
  auto root = pool.post_awaitable([&pool] { return fib_by_get(pool, 25); });
  EXPECT_EQ(get_bounded(root, "fib_by_get(25)"), 75025U);
}

TEST_P(on_workers, join_computes_fib_exactly) {
  thread_pool pool(GetParam());
  auto root = pool.post_awaitable([&pool] { return fib_by_join(pool, 22); });
  EXPECT_EQ(get_bounded(root, "fib_by_join(22)"), 17711U);
}

TEST(join, from_outside_the_pool_runs_both_halves_on_it) {
  thread_pool pool(2);
  std::atomic<int> on_pool{ 0 };
  auto [a, b] = join(
      pool,
      [&] {
        on_pool += pool.is_current() ? 1 : 0;
        return std::string("left");
      },
      [&] {
        on_pool += pool.is_current() ? 1 : 0;
        return 7;
      });
  EXPECT_EQ(a, "left");
  EXPECT_EQ(b, 7);
  EXPECT_EQ(on_pool.load(), 2);
}

TEST(join, void_halves_contribute_no_member) {
  thread_pool pool(2);
  int left = 0;
  int right = 0;
  static_assert(std::is_same_v<decltype(join(
                                   pool, [] {}, [] {})),
                               void>);
  static_assert(std::is_same_v<decltype(join(
                                   pool, [] {}, [] { return 1; })),
                               int>);
  static_assert(std::is_same_v<decltype(join(
                                   pool, [] { return 1.5; }, [] {})),
                               double>);
  join(
      pool, [&] { left = 1; }, [&] { right = 2; });
  EXPECT_EQ(left, 1);
  EXPECT_EQ(right, 2);
  EXPECT_EQ(join(
                pool, [&] { left = 3; }, [] { return 4; }),
            4);
  EXPECT_EQ(left, 3);
  EXPECT_EQ(join(
                pool, [] { return 5; }, [&] { right = 6; }),
            5);
  EXPECT_EQ(right, 6);
}

TEST(join, a_half_that_throws_is_rethrown_after_both_finished) {
  thread_pool pool(2);
  for (int round = 0; round < 50; ++round) {
    bool other_finished = false;
    auto run = [&] {
      join(
          pool, [] { throw std::runtime_error("left"); },
          [&] {
            std::this_thread::yield();
            other_finished = true;
          });
    };
    auto done = pool.post_awaitable(run);  // on a worker: the fork path
    EXPECT_THROW(
        {
          try {
            get_bounded(done, "throwing join");
          } catch (const std::runtime_error& e) {
            EXPECT_STREQ(e.what(), "left");
            throw;
          }
        },
        std::runtime_error);
    EXPECT_TRUE(other_finished) << "round " << round;
  }
}

TEST(join, when_both_halves_throw_one_exception_comes_out) {
  thread_pool pool(2);
  for (int round = 0; round < 50; ++round) {
    auto done = pool.post_awaitable([&] {
      join(
          pool, [] { throw std::runtime_error("left"); }, [] { throw std::logic_error("right"); });
    });
    try {
      get_bounded(done, "join of two throwing halves");
      ADD_FAILURE() << "no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "left");
    } catch (const std::logic_error& e) {
      EXPECT_STREQ(e.what(), "right");
    }
  }
}

TEST(join, off_the_pool_after_stop_throws_executor_stopped) {
  thread_pool pool(1);
  pool.stop();
  pool.join();
  EXPECT_THROW(join(
                   pool, [] { return 1; }, [] { return 2; }),
               executor_stopped);
}

// The forked half of a join on a worker blocked in another join's wait is taken by the idle
// worker: both workers end up holding a half each, which only a steal can give.
TEST(join, an_idle_worker_steals_the_forked_half) {
  thread_pool pool(2);
  auto done = pool.post_awaitable([&pool] {
    std::latch both(2);
    join(
        pool, [&] { both.arrive_and_wait(); }, [&] { both.arrive_and_wait(); });
    return true;
  });
  EXPECT_TRUE(get_bounded(done, "join whose halves wait for each other"));
  std::uint64_t stolen = 0;
  for (const auto& s : pool.stats()) {
    stolen += s.stolen;
  }
  EXPECT_GE(stolen, 1U);
}

// Item 6 of the scheduler's issue: a task forking on a pool whose other worker is busy takes
// every fork back from its own deque (none stolen), and stats() counts each one.
TEST(join, forks_on_a_busy_pool_come_back_from_the_own_deque) {
  thread_pool pool(2);
  cyan::test::worker_holder busy(pool);
  auto root = pool.post_awaitable([&pool] { return fib_by_join(pool, 20); });
  const std::uint64_t value = get_bounded(root, "fib_by_join(20) beside a busy worker");
  busy.release();
  pool.stop();
  pool.join();
  EXPECT_EQ(value, 6765U);
  constexpr std::uint64_t kForks = 10945;  // joins in fib(20): fib(21) - 1
  std::uint64_t from_local = 0;
  std::uint64_t stolen = 0;
  std::uint64_t injected = 0;
  for (const auto& s : pool.stats()) {
    from_local += s.from_local;
    stolen += s.stolen;
    injected += s.from_injection;
  }
  EXPECT_EQ(from_local, kForks);
  EXPECT_EQ(stolen, 0U);
  EXPECT_EQ(injected, 2U);  // the busy task and the root
}

// stop(discard) while forks are queued: a join's halves always run (their joiner started), so
// a parallel_for under way finishes every index.
TEST(join, stop_discard_during_a_parallel_for_still_runs_every_started_range) {
  for (int round = 0; round < 20; ++round) {
    thread_pool pool(2);
    std::atomic<int> calls{ 0 };
    auto done = pool.post_awaitable([&] {
      parallel_for(
          pool, 0, 4096,
          [&](int i) {
            if (i == 100) {
              pool.stop(stop_mode::discard);
            }
            calls.fetch_add(1, std::memory_order_relaxed);
          },
          1);
    });
    get_bounded(done, "parallel_for across a stop(discard)");
    pool.join();
    EXPECT_EQ(calls.load(), 4096) << "round " << round;
  }
}

// stop(discard) while awaitable tasks wait in a worker's deque: each reports task_cancelled.
TEST(join, awaitables_dropped_from_a_deque_by_stop_discard_report_cancellation) {
  thread_pool pool(1);
  std::vector<future<int>> children;
  std::atomic<int> ran{ 0 };
  pool.post([&] {
    for (int i = 0; i < 100; ++i) {
      children.push_back(pool.post_awaitable([&ran, i] {
        ++ran;
        return i;
      }));
    }
    pool.stop(stop_mode::discard);
  });
  pool.join();
  ASSERT_EQ(children.size(), 100U);
  for (auto& child : children) {
    EXPECT_THROW(child.get(), task_cancelled);
  }
  EXPECT_EQ(ran.load(), 0);
}

TEST(join, global_pool_overload) {
  auto [a, b] = join([] { return 1; }, [] { return 2; });
  EXPECT_EQ(a + b, 3);
}

// ---- task_group ---------------------------------------------------------------------------

TEST_P(on_workers, task_group_waits_for_every_task_run_so_far) {
  thread_pool pool(GetParam());
  std::atomic<int> ran{ 0 };
  task_group group(pool);
  for (int i = 0; i < 1000; ++i) {
    group.run([&] { ran.fetch_add(1, std::memory_order_relaxed); });
  }
  group.wait();
  EXPECT_EQ(ran.load(), 1000);
  // Reusable: a second round.
  for (int i = 0; i < 10; ++i) {
    group.run([&] { ran.fetch_add(1, std::memory_order_relaxed); });
  }
  group.wait();
  EXPECT_EQ(ran.load(), 1010);
}

TEST_P(on_workers, task_group_children_that_run_children_on_the_pool) {
  thread_pool pool(GetParam());
  std::atomic<int> ran{ 0 };
  auto done = pool.post_awaitable([&] {
    task_group outer(pool);
    for (int i = 0; i < 16; ++i) {
      outer.run([&] {
        task_group inner(pool);
        for (int j = 0; j < 16; ++j) {
          inner.run([&] { ran.fetch_add(1, std::memory_order_relaxed); });
        }
        inner.wait();  // on a worker: helps
      });
    }
    outer.wait();
    return ran.load();
  });
  EXPECT_EQ(get_bounded(done, "nested task groups"), 256);
}

TEST(task_group, wait_rethrows_the_first_exception_once_and_the_group_is_reusable) {
  thread_pool pool(2);
  task_group group(pool);
  group.run([] { throw std::runtime_error("child"); });
  try {
    group.wait();
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "child");
  }
  EXPECT_FALSE(group.is_canceling());
  std::atomic<int> ran{ 0 };
  group.run([&] { ++ran; });
  EXPECT_NO_THROW(group.wait());
  EXPECT_EQ(ran.load(), 1);
}

// One worker, held by a task from outside: the group's tasks queue behind it, cancel() skips
// every one of them.
TEST(task_group, cancel_skips_the_tasks_not_started) {
  thread_pool pool(1);
  cyan::test::worker_holder hold(pool);
  std::atomic<int> ran{ 0 };
  task_group group(pool);
  for (int i = 0; i < 10; ++i) {
    group.run([&] { ++ran; });
  }
  group.cancel();
  EXPECT_TRUE(group.is_canceling());
  hold.release();
  EXPECT_NO_THROW(group.wait());
  EXPECT_EQ(ran.load(), 0);
  EXPECT_FALSE(group.is_canceling());
}

// An exception cancels the group: on one worker, the tasks after the thrower do not run.
TEST(task_group, an_exception_cancels_the_tasks_not_started) {
  thread_pool pool(1);
  cyan::test::worker_holder hold(pool);
  std::atomic<int> ran{ 0 };
  task_group group(pool);
  group.run([] { throw std::runtime_error("first"); });
  for (int i = 0; i < 10; ++i) {
    group.run([&] { ++ran; });
  }
  hold.release();
  EXPECT_THROW(group.wait(), std::runtime_error);
  EXPECT_EQ(ran.load(), 0);
}

TEST(task_group, the_destructor_waits_for_the_tasks) {
  thread_pool pool(2);
  std::atomic<bool> finished{ false };
  {
    task_group group(pool);
    group.run([&] {
      for (int i = 0; i < 1000; ++i) {
        std::this_thread::yield();
      }
      finished.store(true, std::memory_order_relaxed);
    });
  }
  EXPECT_TRUE(finished.load(std::memory_order_relaxed));
}

TEST(task_group, the_destructor_reports_an_exception_left_to_the_pool) {
  std::atomic<int> reported{ 0 };
  thread_pool_options options;
  options.on_error = [&](std::exception_ptr error) {
    try {
      std::rethrow_exception(error);
    } catch (const std::runtime_error& e) {
      if (std::string(e.what()) == "left") {
        ++reported;
      }
    }
  };
  thread_pool pool(1, std::move(options));
  {
    task_group group(pool);
    group.run([] { throw std::runtime_error("left"); });
  }
  EXPECT_EQ(reported.load(), 1);
}

TEST(task_group, run_after_stop_throws_and_counts_as_cancelled) {
  thread_pool pool(1);
  task_group group(pool);
  pool.stop();
  EXPECT_THROW(group.run([] {}), executor_stopped);
  EXPECT_THROW(group.wait(), task_cancelled);
  EXPECT_NO_THROW(group.wait());
}

TEST(task_group, tasks_dropped_by_stop_discard_finish_as_task_cancelled) {
  thread_pool pool(1);
  cyan::test::worker_holder hold(pool);
  std::atomic<int> ran{ 0 };
  task_group group(pool);
  for (int i = 0; i < 10; ++i) {
    group.run([&] { ++ran; });
  }
  pool.stop(stop_mode::discard);
  hold.release();
  EXPECT_THROW(group.wait(), task_cancelled);
  EXPECT_EQ(ran.load(), 0);
  pool.join();
}

// ---- parallel_for -------------------------------------------------------------------------

class parallel_for_grain : public ::testing::TestWithParam<std::size_t> {};

INSTANTIATE_TEST_SUITE_P(parallel_for, parallel_for_grain, ::testing::Values(0, 1, 7, 1000, 200000),
                         [](const auto& info) { return "grain_" + std::to_string(info.param); });

TEST_P(parallel_for_grain, calls_every_index_exactly_once) {
  thread_pool pool(2);
  constexpr int kCount = 100000;
  std::vector<std::atomic<int>> calls(kCount);
  parallel_for(
      pool, 0, kCount, [&](int i) { calls[static_cast<std::size_t>(i)].fetch_add(1); }, GetParam());
  for (int i = 0; i < kCount; ++i) {
    ASSERT_EQ(calls[static_cast<std::size_t>(i)].load(), 1) << "index " << i;
  }
}

TEST(parallel_for, an_empty_or_reversed_range_calls_nothing) {
  thread_pool pool(2);
  int calls = 0;
  parallel_for(pool, 5, 5, [&](int) { ++calls; });
  parallel_for(pool, 9, 3, [&](int) { ++calls; });
  EXPECT_EQ(calls, 0);
}

TEST(parallel_for, negative_and_unsigned_bounds) {
  thread_pool pool(2);
  std::atomic<long> sum{ 0 };
  parallel_for(pool, -500L, 500L, [&](long i) { sum += i; });
  EXPECT_EQ(sum.load(), -500);
  std::atomic<std::uint64_t> usum{ 0 };
  parallel_for(pool, std::size_t{ 0 }, std::size_t{ 1000 }, [&](std::size_t i) { usum += i; });
  EXPECT_EQ(usum.load(), 499500U);
}

TEST(parallel_for, inside_a_pool_task_and_nested) {
  thread_pool pool(2);
  auto done = pool.post_awaitable([&pool] {
    std::atomic<int> cells{ 0 };
    parallel_for(pool, 0, 64, [&](int) {
      parallel_for(pool, 0, 64, [&](int) { cells.fetch_add(1, std::memory_order_relaxed); });
    });
    return cells.load();
  });
  EXPECT_EQ(get_bounded(done, "nested parallel_for"), 64 * 64);
}

TEST(parallel_for, the_first_exception_comes_out_after_the_started_calls_finished) {
  thread_pool pool(2);
  std::atomic<int> running{ 0 };
  std::atomic<int> after_throw_seen_running{ 0 };
  try {
    parallel_for(
        pool, 0, 10000,
        [&](int i) {
          ++running;
          if (i == 5000) {
            --running;
            throw std::out_of_range("5000");
          }
          --running;
        },
        1);
    ADD_FAILURE() << "no exception";
  } catch (const std::out_of_range& e) {
    EXPECT_STREQ(e.what(), "5000");
    after_throw_seen_running = running.load();
  }
  EXPECT_EQ(after_throw_seen_running.load(), 0);
}

TEST(parallel_for, global_pool_overload) {
  std::atomic<int> sum{ 0 };
  parallel_for(0, 100, [&](int i) { sum += i; });
  EXPECT_EQ(sum.load(), 4950);
}

}  // namespace
}  // namespace cyan::dispatch
