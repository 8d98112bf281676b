#include "cyan/dispatch/serial_token.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <latch>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cyan/dispatch/handler_thread.h"
#include "cyan/dispatch/thread_pool.h"
#include "support/lifecycle.h"
#include "support/stress_env.h"

using cyan::test::env_or;

namespace {

using cyan::dispatch::executor_stopped;
using cyan::dispatch::future;
using cyan::dispatch::handler_thread;
using cyan::dispatch::serial_token;
using cyan::dispatch::stop_mode;
using cyan::dispatch::task_cancelled;
using cyan::dispatch::thread_pool;
using namespace std::chrono_literals;

// Records the token tasks that ran, and fails when two of them overlap.
class serial_checker {
 public:
  void enter(int index) {
    if (running_.fetch_add(1) != 0) {
      overlaps_.fetch_add(1);
    }
    const std::lock_guard lock(mutex_);
    order_.push_back(index);
  }
  void leave() { running_.fetch_sub(1); }

  [[nodiscard]] int overlaps() const { return overlaps_.load(); }
  [[nodiscard]] std::vector<int> order() {
    const std::lock_guard lock(mutex_);
    return order_;
  }

 private:
  std::atomic<int> running_{ 0 };
  std::atomic<int> overlaps_{ 0 };
  std::mutex mutex_;
  std::vector<int> order_;
};

std::vector<int> iota(int n) {
  std::vector<int> result;
  for (int i = 0; i < n; ++i) {
    result.push_back(i);
  }
  return result;
}

TEST(serial_token, tasks_never_overlap_keep_order_and_survive_a_throw) {
  serial_checker checker;
  std::atomic<int> errors{ 0 };
  cyan::dispatch::thread_pool_options options;
  options.on_error = [&](std::exception_ptr) { errors.fetch_add(1); };
  {
    thread_pool pool(4, options);
    serial_token token;
    for (int i = 0; i < 20; ++i) {
      pool.post(token, [&checker, i] {
        checker.enter(i);
        std::this_thread::sleep_for(10ms);  // the work: long enough for others to overlap
        checker.leave();
        if (i == 10) {
          throw std::runtime_error("task 10");
        }
      });
    }
  }
  EXPECT_EQ(checker.overlaps(), 0);
  EXPECT_EQ(checker.order(), iota(20));
  EXPECT_EQ(errors.load(), 1);
}

TEST(serial_token, a_busy_token_holds_no_worker) {
  thread_pool pool(2);
  serial_token token;
  std::latch release(1);
  std::latch started(1);
  serial_checker checker;
  pool.post(token, [&] {
    started.count_down();
    release.wait();
  });
  started.wait();
  for (int i = 0; i < 100; ++i) {
    pool.post(token, [&checker, i] {
      checker.enter(i);
      checker.leave();
    });
  }
  EXPECT_EQ(token.pending(), 101u);
  // Expect the second worker free: the queued token tasks wait in the token, not on a worker.
  auto free_worker = pool.post_awaitable([] { return 1; });
  ASSERT_EQ(free_worker.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(free_worker.get(), 1);
  release.count_down();
  pool.post_awaitable(token, [] {}).get();  // after every earlier token task
  EXPECT_EQ(checker.order(), iota(100));
  pool.stop();
  pool.join();  // the last task's turn has passed (its future was ready a moment before)
  EXPECT_EQ(token.pending(), 0u);
}

TEST(serial_token, different_tokens_run_concurrently) {
  thread_pool pool(2);
  serial_token a;
  serial_token b;
  std::latch both(2);
  auto first = pool.post_awaitable(a, [&] { both.arrive_and_wait(); });
  auto second = pool.post_awaitable(b, [&] { both.arrive_and_wait(); });
  EXPECT_EQ(first.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(second.wait_for(10s), std::future_status::ready);
}

TEST(serial_token, destroying_the_last_copy_still_runs_pending_tasks) {
  cyan::test::lifecycle::reset();
  serial_checker checker;
  thread_pool pool(2);
  std::latch release(1);
  {
    serial_token token;
    pool.post(token, [&] { release.wait(); });
    for (int i = 0; i < 50; ++i) {
      pool.post(token, [&checker, i, captured = cyan::test::lifecycle(i)] {
        checker.enter(i);
        checker.leave();
      });
    }
  }
  release.count_down();
  pool.stop();
  pool.join();
  EXPECT_EQ(checker.order(), iota(50));
  EXPECT_EQ(cyan::test::lifecycle::live(), 0);
}

TEST(serial_token, awaitable_tasks_report_results_in_order) {
  thread_pool pool(3);
  serial_token token;
  std::vector<future<int>> results;
  int shared = 0;  // touched by token tasks only: their order makes it race-free
  for (int i = 0; i < 1000; ++i) {
    results.push_back(pool.post_awaitable(token, [&shared, i] {
      if (i == 500) {
        throw std::logic_error("500");
      }
      return shared++;
    }));
  }
  for (int i = 0; i < 1000; ++i) {
    if (i == 500) {
      EXPECT_THROW(results[i].get(), std::logic_error);
    } else {
      EXPECT_EQ(results[i].get(), i < 500 ? i : i - 1);
    }
  }
}

TEST(serial_token, many_producers_share_a_token) {
  const int per_producer = static_cast<int>(env_or("CYAN_STRESS_ITEMS", 20000));
  constexpr int kProducers = 4;
  std::vector<std::vector<int>> seen(kProducers);  // written by token tasks only
  std::atomic<int> overlaps{ 0 };
  std::atomic<int> running{ 0 };
  {
    thread_pool pool(3);
    serial_token token;
    std::vector<std::thread> producers;
    for (int p = 0; p < kProducers; ++p) {
      producers.emplace_back([&, p] {
        for (int i = 0; i < per_producer; ++i) {
          pool.post(token, [&, p, i] {
            overlaps.fetch_add(running.fetch_add(1) != 0 ? 1 : 0);
            seen[p].push_back(i);
            running.fetch_sub(1);
          });
        }
      });
    }
    for (auto& producer : producers) {
      producer.join();
    }
  }
  EXPECT_EQ(overlaps.load(), 0);
  for (int p = 0; p < kProducers; ++p) {
    ASSERT_EQ(seen[p], iota(per_producer)) << "producer " << p;
  }
}

TEST(serial_token, a_token_shared_by_a_pool_and_a_handler_thread_never_overlaps) {
  serial_checker checker;
  std::atomic<int> on_wrong_thread{ 0 };
  {
    thread_pool pool(3);
    handler_thread thread;
    serial_token token;
    for (int i = 0; i < 2000; ++i) {
      const bool to_thread = i % 3 == 0;
      auto task = [&, i, to_thread] {
        checker.enter(i);
        if (thread.is_current() != to_thread || pool.is_current() == to_thread) {
          on_wrong_thread.fetch_add(1);
        }
        checker.leave();
      };
      if (to_thread) {
        thread.post(token, task);
      } else {
        pool.post(token, task);
      }
    }
    pool.post_awaitable(token, [] {}).get();
  }
  EXPECT_EQ(checker.overlaps(), 0);
  EXPECT_EQ(on_wrong_thread.load(), 0);
  EXPECT_EQ(checker.order(), iota(2000));
}

// A token's tasks for a pool that wait behind another executor's task when the pool stops are
// still "posted": drain runs them, discard cancels them; later tasks of the token go on.
TEST(serial_token, a_pool_stop_covers_its_tasks_waiting_in_a_token) {
  for (const stop_mode mode : { stop_mode::drain, stop_mode::discard }) {
    thread_pool first(1);
    auto second = std::make_unique<thread_pool>(1);
    serial_token token;
    std::latch release(1);
    serial_checker checker;
    first.post(token, [&] { release.wait(); });
    auto parked = second->post_awaitable(token, [&] {
      checker.enter(1);
      checker.leave();
      return 1;
    });
    auto after = first.post_awaitable(token, [&] {
      checker.enter(2);
      checker.leave();
      return 2;
    });
    second->stop(mode);
    EXPECT_THROW(second->post(token, [] {}), executor_stopped);
    release.count_down();
    second->join();  // returns once the parked task was handed over (and run or cancelled)
    second.reset();
    EXPECT_EQ(after.get(), 2);
    if (mode == stop_mode::drain) {
      EXPECT_EQ(parked.get(), 1);
      EXPECT_EQ(checker.order(), (std::vector<int>{ 1, 2 }));
    } else {
      EXPECT_THROW(parked.get(), task_cancelled);
      EXPECT_EQ(checker.order(), (std::vector<int>{ 2 }));
    }
  }
}

// A stopped handler_thread refuses the hand-over: each of its waiting token tasks is cancelled
// (a long run of them must not nest one stack frame per task) and the token goes on.
TEST(serial_token, tasks_for_a_stopped_handler_thread_are_cancelled_and_the_token_goes_on) {
  const int parked_count = static_cast<int>(env_or("CYAN_STRESS_ITEMS", 20000));
  thread_pool pool(1);
  handler_thread thread;
  serial_token token;
  std::latch release(1);
  pool.post(token, [&] { release.wait(); });
  std::vector<future<int>> parked;
  for (int i = 0; i < parked_count; ++i) {
    parked.push_back(thread.post_awaitable(token, [i] { return i; }));
  }
  auto after = pool.post_awaitable(token, [] { return -1; });
  thread.stop();
  thread.join();
  EXPECT_THROW(thread.post(token, [] {}), executor_stopped);
  release.count_down();
  EXPECT_EQ(after.get(), -1);
  for (auto& f : parked) {
    EXPECT_THROW(f.get(), task_cancelled);
  }
  pool.stop();
  pool.join();  // the last task's turn has passed (its future was ready a moment before)
  EXPECT_EQ(token.pending(), 0u);
}

TEST(serial_token, copies_are_the_same_token) {
  serial_token a;
  serial_token b = a;
  serial_token c;
  EXPECT_TRUE(a == b);
  EXPECT_FALSE(a == c);
  c = b;
  EXPECT_TRUE(c == a);
  EXPECT_EQ(a.pending(), 0u);
}

}  // namespace
