#include "cyan/dispatch/thread_pool.h"

#include <gtest/gtest.h>

#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <latch>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cyan/dispatch/detail/frame_allocator.h"
#include "support/allocation_counter.h"
#include "support/cpu_time.h"
#include "support/discard_ring.h"
#include "support/lifecycle.h"
#include "support/stress_env.h"
#include "support/weighted_tasks.h"

using cyan::test::env_or;

namespace {

using cyan::dispatch::executor_stopped;
using cyan::dispatch::future;
using cyan::dispatch::stop_mode;
using cyan::dispatch::task_cancelled;
using cyan::dispatch::thread_pool;
using cyan::test::lifecycle;
using namespace std::chrono_literals;

// Keeps every worker of a pool busy until open() is called, so that tasks posted meanwhile
// stay queued.
class gate {
 public:
  explicit gate(thread_pool& pool) : entered_(static_cast<std::ptrdiff_t>(pool.size())) {
    for (std::size_t i = 0; i < pool.size(); ++i) {
      pool.post([this] {
        entered_.count_down();
        opened_.wait();
      });
    }
    entered_.wait();  // every worker is now inside a blocker
  }
  void open() { opened_.count_down(); }

 private:
  std::latch entered_;
  std::latch opened_{ 1 };
};

TEST(thread_pool, runs_every_posted_task_once) {
  const std::size_t count = env_or("CYAN_STRESS_ITEMS", 100000);
  std::vector<std::atomic<int>> runs(count);
  {
    thread_pool pool(4);
    EXPECT_EQ(pool.size(), 4u);
    for (std::size_t i = 0; i < count; ++i) {
      pool.post([&runs, i] { runs[i].fetch_add(1, std::memory_order_relaxed); });
    }
  }  // the destructor drains and joins
  for (std::size_t i = 0; i < count; ++i) {
    ASSERT_EQ(runs[i].load(), 1) << "task " << i << " of " << count;
  }
}

TEST(thread_pool, runs_tasks_on_its_workers_only) {
  thread_pool pool(3);
  std::mutex mutex;
  std::set<std::thread::id> seen;
  std::vector<future<bool>> inside;
  for (int i = 0; i < 3000; ++i) {
    inside.push_back(pool.post_awaitable([&] {
      const std::lock_guard lock(mutex);
      seen.insert(std::this_thread::get_id());
      return pool.is_current();
    }));
  }
  for (auto& f : inside) {
    EXPECT_TRUE(f.get());
  }
  EXPECT_FALSE(pool.is_current());
  EXPECT_EQ(seen.count(std::this_thread::get_id()), 0u);
  EXPECT_LE(seen.size(), 3u);
  EXPECT_GE(seen.size(), 1u);
}

// Every post form takes a closure that returns a value (the result is ignored), and a move-only
// one: each runs exactly once (distinct weights, so a lost or doubled one changes the sum).
TEST(thread_pool, post_accepts_closures_that_return_a_value) {
  thread_pool pool(2);
  cyan::dispatch::serial_token token;
  cyan::test::weighted_tasks tasks(6);
  pool.post(tasks.returning_int(1));
  pool.post(tasks.returning_int(2), 1ms);
  pool.post(token, tasks.returning_int(4));
  pool.post(tasks.move_only(8));
  pool.post(tasks.move_only(16), 1ms);
  pool.post(token, tasks.move_only(32));
  EXPECT_EQ(tasks.wait_for_sum(), 63);
}

TEST(thread_pool, post_awaitable_returns_results_and_exceptions) {
  thread_pool pool(2);
  auto answer = pool.post_awaitable([] { return 42; });
  auto failure = pool.post_awaitable([]() -> int { throw std::runtime_error("bad"); });
  auto nothing = pool.post_awaitable([] {});
  EXPECT_EQ(answer.get(), 42);
  EXPECT_THROW(failure.get(), std::runtime_error);
  nothing.get();
  std::future<int> standard = pool.post_awaitable([] { return 7; });  // converts implicitly
  EXPECT_EQ(standard.get(), 7);
}

TEST(thread_pool, fire_and_forget_exceptions_go_to_the_error_callback) {
  std::mutex mutex;
  std::vector<std::string> errors;
  cyan::dispatch::thread_pool_options options;
  options.on_error = [&](std::exception_ptr error) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      const std::lock_guard lock(mutex);
      errors.emplace_back(e.what());
    } catch (int) {
      const std::lock_guard lock(mutex);
      errors.emplace_back("int");
    }
  };
  std::atomic<int> ran{ 0 };
  {
    thread_pool pool(2, options);
    for (int i = 0; i < 100; ++i) {
      pool.post([&ran, i] {
        ran.fetch_add(1);
        if (i % 10 == 0) {
          throw std::runtime_error("task " + std::to_string(i));
        }
        if (i == 55) {
          throw 5;
        }
      });
    }
  }
  EXPECT_EQ(ran.load(), 100);  // the workers kept going
  std::sort(errors.begin(), errors.end());
  EXPECT_EQ(errors,
            (std::vector<std::string>{ "int", "task 0", "task 10", "task 20", "task 30", "task 40",
                                       "task 50", "task 60", "task 70", "task 80", "task 90" }));
}

TEST(thread_pool, stop_drain_runs_every_queued_task) {
  thread_pool pool(2);
  std::atomic<int> ran{ 0 };
  gate blockers(pool);
  for (int i = 0; i < 1000; ++i) {
    pool.post([&ran] { ran.fetch_add(1); });
  }
  pool.stop(stop_mode::drain);
  EXPECT_THROW(pool.post([] {}), executor_stopped);
  blockers.open();
  pool.join();
  EXPECT_EQ(ran.load(), 1000);
}

// Tasks busy handing items to each other through channels, then stop(discard): each is
// destroyed at its next resumption, none goes on to run a catch block for a cancellation, and
// every future reports task_cancelled. Several rounds: the window is a few instructions wide.
TEST(thread_pool, stop_discard_runs_no_more_of_tasks_that_wait_on_each_other) {
  for (int round = 0; round < 40; ++round) {
    cyan::test::discard_ring ring(100);
    {
      thread_pool pool(2);
      for (std::size_t i = 0; i < 100; ++i) {
        ring.spawn(pool, i);
      }
      ring.wait_until_busy(2'000);
      pool.stop(stop_mode::discard);
      pool.join();
    }
    EXPECT_EQ(ring.caught(), 0) << "round " << round;
    EXPECT_EQ(ring.not_task_cancelled(), 0) << "round " << round;
  }
}

TEST(thread_pool, stop_discard_cancels_every_task_not_started) {
  lifecycle::reset();
  thread_pool pool(2);
  std::atomic<int> ran{ 0 };
  std::vector<future<int>> results;
  gate blockers(pool);
  for (int i = 0; i < 500; ++i) {
    pool.post([&ran, captured = lifecycle(i)] { ran.fetch_add(1); });
    results.push_back(pool.post_awaitable([&ran, i] {
      ran.fetch_add(1);
      return i;
    }));
  }
  pool.stop(stop_mode::discard);
  blockers.open();
  pool.join();
  EXPECT_EQ(ran.load(), 0);
  for (auto& result : results) {
    EXPECT_THROW(result.get(), task_cancelled);
  }
  EXPECT_EQ(lifecycle::live(), 0);  // discarded closures were destroyed
}

TEST(thread_pool, post_after_stop_throws_in_every_form) {
  thread_pool pool(1);
  pool.stop();
  cyan::dispatch::serial_token token;
  EXPECT_THROW(pool.post([] {}), executor_stopped);
  EXPECT_THROW(pool.post([] {}, 1ms), executor_stopped);
  EXPECT_THROW(pool.post(token, [] {}), executor_stopped);
  EXPECT_THROW((void)pool.post_awaitable([] { return 1; }), executor_stopped);
  EXPECT_THROW((void)pool.post_awaitable([] { return 1; }, 1ms), executor_stopped);
  EXPECT_THROW((void)pool.post_awaitable(token, [] { return 1; }), executor_stopped);
  pool.join();
  EXPECT_EQ(token.pending(), 0u);
}

TEST(thread_pool, delayed_tasks_wait_and_are_cancelled_by_stop) {
  thread_pool pool(2);
  const auto start = std::chrono::steady_clock::now();
  auto soon =
      pool.post_awaitable([start] { return std::chrono::steady_clock::now() - start; }, 50ms);
  auto never = pool.post_awaitable([] { return 0; }, 1h);
  std::atomic<bool> fire_and_forget{ false };
  pool.post([&] { fire_and_forget = true; }, 20ms);
  // Expect the delay honoured, and late by at most 5 s (generous for a shared machine).
  const auto soon_elapsed = soon.get();
  EXPECT_GE(soon_elapsed, 50ms);
  EXPECT_LE(soon_elapsed, 50ms + 5s);
  EXPECT_EQ(never.wait_for(0s), std::future_status::timeout);
  pool.stop();
  pool.join();
  EXPECT_TRUE(fire_and_forget.load());
  EXPECT_THROW(never.get(), task_cancelled);
}

TEST(thread_pool, many_producers) {
  const std::size_t per_producer = env_or("CYAN_STRESS_ITEMS", 50000);
  constexpr int kProducers = 4;
  std::atomic<std::uint64_t> sum{ 0 };
  {
    thread_pool pool(2);
    std::vector<std::thread> producers;
    for (int p = 0; p < kProducers; ++p) {
      producers.emplace_back([&] {
        for (std::size_t i = 0; i < per_producer; ++i) {
          pool.post([&sum, i] { sum.fetch_add(i, std::memory_order_relaxed); });
        }
      });
    }
    for (auto& producer : producers) {
      producer.join();
    }
  }
  EXPECT_EQ(sum.load(), kProducers * (per_producer * (per_producer - 1) / 2));
}

TEST(thread_pool, tasks_may_post_more_tasks) {
  std::atomic<int> ran{ 0 };
  std::latch done(1000);
  thread_pool pool(2);
  for (int i = 0; i < 100; ++i) {
    pool.post([&] {
      for (int j = 0; j < 10; ++j) {
        pool.post([&] {
          ran.fetch_add(1);
          done.count_down();
        });
      }
    });
  }
  done.wait();
  EXPECT_EQ(ran.load(), 1000);
}

// Cost grows with the index; a pool that splits the work statically in halves would leave one
// worker idle for most of the run. Expect both workers busy until (nearly) the end: their last
// completions within 10% of the run plus 20 ms (preemption on a shared machine).
TEST(thread_pool, balances_work_whose_cost_grows) {
  const std::size_t count = env_or("CYAN_STRESS_ITEMS", 300000);
  thread_pool pool(2);
  std::mutex mutex;
  std::vector<std::pair<std::thread::id, std::chrono::steady_clock::time_point>> last;
  std::atomic<std::uint64_t> checksum{ 0 };
  std::latch done(static_cast<std::ptrdiff_t>(count));
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < count; ++i) {
    pool.post([&, i] {
      std::uint64_t x = i;
      for (std::size_t k = 0; k < i / 256; ++k) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      }
      checksum.fetch_add(x & 1, std::memory_order_relaxed);
      if (i + 64 >= count || i % 1024 == 0) {
        const std::lock_guard lock(mutex);
        last.emplace_back(std::this_thread::get_id(), std::chrono::steady_clock::now());
      }
      done.count_down();
    });
  }
  done.wait();
  const auto elapsed = std::chrono::steady_clock::now() - start;
  std::map<std::thread::id, std::chrono::steady_clock::time_point> finish;
  for (const auto& [id, when] : last) {
    finish[id] = std::max(finish[id], when);
  }
  ASSERT_EQ(finish.size(), 2u) << "both workers ran tasks";
  const auto gap = std::max(finish.begin()->second, finish.rbegin()->second) -
                   std::min(finish.begin()->second, finish.rbegin()->second);
  EXPECT_LE(gap, elapsed / 10 + 20ms)
      << "gap " << std::chrono::duration<double, std::milli>(gap).count() << " ms of "
      << std::chrono::duration<double, std::milli>(elapsed).count() << " ms, " << count << " tasks";
}

// Measures idleness, so it sleeps: an idle pool must burn < 2% of one core over 1 s.
TEST(thread_pool, an_idle_pool_uses_almost_no_cpu) {
  thread_pool pool(4);
  for (int i = 0; i < 1000; ++i) {
    pool.post([] {});
  }
  pool.post_awaitable([] {}).get();
  std::this_thread::sleep_for(50ms);  // let the workers' spin end
  const auto cpu_before = cyan::test::cpu_time(CLOCK_PROCESS_CPUTIME_ID);
  std::this_thread::sleep_for(1s);
  const auto used = cyan::test::cpu_time(CLOCK_PROCESS_CPUTIME_ID) - cpu_before;
  EXPECT_LT(used, 20ms) << std::chrono::duration<double, std::milli>(used).count()
                        << " ms of CPU in 1 s";
}

// Counts the posting thread's allocations only (the workers' are not counted). An awaitable's
// block comes from the frame pool, which the warm-up filled (ASan builds use operator new).
TEST(thread_pool, posting_allocates_nothing_for_a_small_closure_or_a_warm_awaitable) {
  thread_pool pool(2);
  std::atomic<int> ran{ 0 };
  for (int round = 0; round < 4; ++round) {  // warm up: the queue keeps freed blocks as spares
    for (int i = 0; i < 1000; ++i) {
      pool.post([&ran] { ran.fetch_add(1); });
    }
    pool.post_awaitable([] {}).get();
  }
  cyan::test::start_counting_allocations();
  for (int i = 0; i < 200; ++i) {
    pool.post([&ran, a = 1L, b = 2L, c = 3L] { ran.fetch_add(static_cast<int>(a + b + c)); });
  }
  EXPECT_EQ(cyan::test::stop_counting_allocations(), 0);
  cyan::test::start_counting_allocations();
  auto result = pool.post_awaitable([] { return 5; });
  EXPECT_EQ(cyan::test::stop_counting_allocations(), CYAN_FRAME_POOL ? 0 : 1);
  EXPECT_EQ(result.get(), 5);
  pool.stop();
  pool.join();
  EXPECT_EQ(ran.load(), 4000 + 200 * 6);
}

// A burst of awaitables that runs ahead of the workers, again and again (the factorial
// benchmark's pattern): once the first bursts have grown the frame pool, a burst takes every
// state from it — none from malloc, which would hand the memory back to the system between
// bursts and fault it in again. Tolerance: each worker may still hold up to kFramesKept freed
// blocks in its own list (handed back only when it overflows), so a burst may take a few new
// slabs of 1,024 blocks, and the pool's list of slabs may grow once.
TEST(thread_pool, bursts_of_awaitables_reuse_their_states) {
  if (!CYAN_FRAME_POOL) {
    GTEST_SKIP() << "sanitizer builds allocate every block with operator new";
  }
  constexpr int kBurst = 20'000;
  thread_pool pool(2);
  std::vector<cyan::dispatch::future<int>> results;
  results.reserve(kBurst);
  const auto post_burst = [&] {
    for (int i = 0; i < kBurst; ++i) {
      results.push_back(pool.post_awaitable([i] { return i % 7; }));
    }
  };
  const auto collect = [&] {
    long long sum = 0;
    for (auto& result : results) {
      sum += result.get();
    }
    results.clear();
    return sum;
  };
  const auto burst = [&] {
    post_burst();
    return collect();
  };
  long long expected = 0;
  for (int i = 0; i < kBurst; ++i) {
    expected += i % 7;
  }
  // The first warm-up burst queues in full behind both workers held on a gate: the largest
  // backlog a burst can make, so the queue keeps blocks enough for any later one however far
  // it runs ahead of the workers (a busy machine that preempts them; the queue then grew past
  // what the warm-up had needed, and the burst called operator new for blocks, 10-24 times).
  {
    std::latch held(2);
    std::latch release(1);
    for (int worker = 0; worker < 2; ++worker) {
      pool.post([&] {
        held.count_down();
        release.wait();
      });
    }
    held.wait();
    post_burst();
    release.count_down();
    ASSERT_EQ(collect(), expected);
  }
  for (int warm = 0; warm < 2; ++warm) {
    ASSERT_EQ(burst(), expected);
  }
  cyan::test::start_counting_allocations();
  const long long sum = burst();
  const int allocations = cyan::test::stop_counting_allocations();
  EXPECT_EQ(sum, expected);
  const int tolerance = static_cast<int>(2 * cyan::dispatch::detail::kFramesKept / 1024 + 1);
  EXPECT_LE(allocations, tolerance)
      << "a burst of " << kBurst << " awaitables called operator new " << allocations << " times";
  pool.stop();
  pool.join();
}

// Waits until `count` reaches `target`, for at most 5 s; returns whether it did.
bool reaches(const std::atomic<std::size_t>& count, std::size_t target) {
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (count.load() < target) {
    if (std::chrono::steady_clock::now() >= deadline) {
      return false;
    }
    std::this_thread::yield();
  }
  return true;
}

// Work conservation: N tasks posted to an idle pool(N) run at the same time, one per worker.
TEST(thread_pool, n_long_tasks_on_an_idle_pool_run_on_n_distinct_workers) {
  constexpr std::size_t kWorkers = 4;
  thread_pool pool(kWorkers);
  pool.post_awaitable([] {}).get();
  std::atomic<std::size_t> entered{ 0 };
  std::latch release(1);
  std::mutex mutex;
  std::set<std::thread::id> ids;
  std::vector<future<void>> tasks;
  for (std::size_t i = 0; i < kWorkers; ++i) {
    tasks.push_back(pool.post_awaitable([&] {
      {
        const std::lock_guard lock(mutex);
        ids.insert(std::this_thread::get_id());
      }
      entered.fetch_add(1);
      release.wait();
    }));
  }
  const bool all_running = reaches(entered, kWorkers);
  release.count_down();
  for (auto& task : tasks) {
    task.get();
  }
  EXPECT_TRUE(all_running) << entered.load() << " of " << kWorkers << " tasks running at once";
  EXPECT_EQ(ids.size(), kWorkers);
}

// With N-1 workers blocked, the free worker runs every other task: none waits behind a blocked
// worker (a worker must not hold queued tasks it has not started). The blockers and the tasks
// are posted together, so any worker may be the free one.
TEST(thread_pool, a_free_worker_runs_every_task_while_the_others_are_blocked) {
  constexpr std::size_t kWorkers = 4;
  constexpr int kTasks = 16;
  thread_pool pool(kWorkers);
  std::atomic<std::size_t> entered{ 0 };
  std::latch release(1);
  std::vector<future<void>> blockers;
  std::vector<future<std::thread::id>> tasks;
  for (std::size_t i = 0; i + 1 < kWorkers; ++i) {
    blockers.push_back(pool.post_awaitable([&] {
      entered.fetch_add(1);
      release.wait();
    }));
    for (int j = 0; j < kTasks / static_cast<int>(kWorkers - 1) + 1 && tasks.size() < kTasks; ++j) {
      tasks.push_back(pool.post_awaitable([] { return std::this_thread::get_id(); }));
    }
  }
  const bool blocked = reaches(entered, kWorkers - 1);
  int done_while_blocked = 0;
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  for (auto& task : tasks) {
    done_while_blocked += task.wait_until(deadline) == std::future_status::ready ? 1 : 0;
  }
  release.count_down();
  for (auto& task : tasks) {
    task.get();
  }
  for (auto& blocker : blockers) {
    blocker.get();
  }
  EXPECT_TRUE(blocked) << entered.load() << " of " << kWorkers - 1 << " blockers started";
  EXPECT_EQ(done_while_blocked, kTasks);
}

// Both workers are held until a backlog of 64 tasks is queued, so each then claims a batch of
// it; the first task waits (up to 5 s) until the other 63 ran. The tasks claimed with it sit
// in its worker's batch while that worker waits: the other worker must steal them, or the first
// task times out.
TEST(thread_pool, tasks_claimed_with_a_blocked_task_are_stolen_by_the_free_worker) {
  constexpr int kTasks = 64;
  thread_pool pool(2);
  std::atomic<std::size_t> entered{ 0 };
  std::latch release(1);
  std::vector<future<void>> holders;
  for (int i = 0; i < 2; ++i) {
    holders.push_back(pool.post_awaitable([&] {
      entered.fetch_add(1);
      release.wait();
    }));
  }
  const bool held = reaches(entered, 2);
  std::mutex mutex;
  std::condition_variable others_ran;
  int others = 0;  // guarded by mutex
  std::vector<std::atomic<int>> runs(kTasks);
  std::vector<future<bool>> tasks;
  tasks.push_back(pool.post_awaitable([&] {
    runs[0].fetch_add(1);
    std::unique_lock lock(mutex);
    return others_ran.wait_for(lock, 5s, [&] { return others == kTasks - 1; });
  }));
  for (int i = 1; i < kTasks; ++i) {
    tasks.push_back(pool.post_awaitable([&, i] {
      runs[i].fetch_add(1);
      {
        const std::lock_guard lock(mutex);
        ++others;
      }
      others_ran.notify_all();
      return true;
    }));
  }
  release.count_down();
  EXPECT_TRUE(held);
  EXPECT_TRUE(tasks[0].get()) << "the tasks claimed with the first one were not run meanwhile";
  for (int i = 1; i < kTasks; ++i) {
    EXPECT_TRUE(tasks[i].get());
  }
  for (auto& holder : holders) {
    holder.get();
  }
  for (int i = 0; i < kTasks; ++i) {
    EXPECT_EQ(runs[i].load(), 1) << "task " << i;
  }
}

// A delayed task, once due, runs on whichever worker is free, not on one picked at post time.
TEST(thread_pool, due_delayed_tasks_run_on_a_free_worker) {
  constexpr std::size_t kWorkers = 2;
  constexpr int kTasks = 8;
  thread_pool pool(kWorkers);
  std::atomic<std::size_t> entered{ 0 };
  std::latch release(1);
  auto blocker = pool.post_awaitable([&] {
    entered.fetch_add(1);
    release.wait();
  });
  const bool blocked = reaches(entered, 1);
  std::vector<future<int>> delayed;
  for (int i = 0; i < kTasks; ++i) {
    delayed.push_back(pool.post_awaitable([i] { return i; }, 5ms));
  }
  int done_while_blocked = 0;
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  for (auto& task : delayed) {
    done_while_blocked += task.wait_until(deadline) == std::future_status::ready ? 1 : 0;
  }
  release.count_down();
  blocker.get();
  for (int i = 0; i < kTasks; ++i) {
    EXPECT_EQ(delayed[i].get(), i);
  }
  EXPECT_TRUE(blocked);
  EXPECT_EQ(done_while_blocked, kTasks);
}

TEST(thread_pool, rejects_zero_threads) {
  EXPECT_THROW(thread_pool(0), std::invalid_argument);
}

// Posts to its pool from its destructor, unless moved from: after the pool's stop, that post
// throws executor_stopped out of the destructor.
struct reposter {
  thread_pool* pool;
  explicit reposter(thread_pool* p) : pool(p) {}
  reposter(reposter&& other) noexcept : pool(std::exchange(other.pool, nullptr)) {}
  ~reposter() noexcept(false) {
    if (pool != nullptr) {
      pool->post([] {});
    }
  }
};

// An error callback that counts executor_stopped and anything else.
struct error_counts {
  std::atomic<int> stopped{ 0 };
  std::atomic<int> other{ 0 };

  thread_pool::options options() {
    thread_pool::options result;
    result.on_error = [this](std::exception_ptr error) {
      try {
        std::rethrow_exception(error);
      } catch (const executor_stopped&) {
        stopped.fetch_add(1);
      } catch (...) {
        other.fetch_add(1);
      }
    };
    return result;
  }
};

// A closure whose destructor throws (it posts to the stopped pool) is reported to the error
// callback when stop(discard) destroys it, plain or token task, and the stop goes on: every
// other task is cancelled, nothing leaks. An awaitable's future reports the exception instead.
TEST(thread_pool, a_discarded_closure_whose_destructor_throws_goes_to_the_error_callback) {
  lifecycle::reset();
  error_counts errors;
  thread_pool pool(2, errors.options());
  cyan::dispatch::serial_token token;
  std::atomic<int> ran{ 0 };
  gate blockers(pool);
  pool.post([&ran, r = reposter(&pool)] { ran.fetch_add(1); });
  for (int i = 0; i < 100; ++i) {
    pool.post([&ran, item = lifecycle(i)] { ran.fetch_add(1); });
  }
  pool.post(token, [&ran, r = reposter(&pool)] { ran.fetch_add(1); });
  auto awaited = pool.post_awaitable([&ran, r = reposter(&pool)] { return ran.fetch_add(1); });
  pool.post([&ran, r = reposter(&pool)] { ran.fetch_add(1); });
  pool.stop(stop_mode::discard);
  blockers.open();
  pool.join();
  EXPECT_EQ(ran.load(), 0);
  EXPECT_EQ(errors.stopped.load(), 3);
  EXPECT_EQ(errors.other.load(), 0);
  EXPECT_THROW(awaited.get(), executor_stopped);
  EXPECT_EQ(lifecycle::live(), 0);
}

// The same for closures that ran during stop(drain) and throw when destroyed afterwards: each
// destructor's exception reaches the error callback once, and every other task still runs.
TEST(thread_pool, a_closure_whose_destructor_throws_after_it_ran_goes_to_the_error_callback) {
  error_counts errors;
  thread_pool pool(2, errors.options());
  cyan::dispatch::serial_token token;
  std::atomic<int> ran{ 0 };
  gate blockers(pool);
  pool.post([&ran, r = reposter(&pool)] { ran.fetch_add(1); });
  for (int i = 0; i < 100; ++i) {
    pool.post([&ran] { ran.fetch_add(1); });
  }
  pool.post(token, [&ran, r = reposter(&pool)] { ran.fetch_add(1); });
  auto awaited = pool.post_awaitable([&ran, r = reposter(&pool)] { return ran.fetch_add(1); });
  pool.post([&ran, r = reposter(&pool)] { ran.fetch_add(1); });
  pool.stop(stop_mode::drain);
  blockers.open();
  pool.join();
  EXPECT_EQ(ran.load(), 104);
  EXPECT_EQ(errors.stopped.load(), 3);
  EXPECT_EQ(errors.other.load(), 0);
  EXPECT_THROW(awaited.get(), executor_stopped);  // it ran, then its destructor threw
}

}  // namespace
