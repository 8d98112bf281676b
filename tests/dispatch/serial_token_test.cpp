#include "cyan/dispatch/serial_token.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
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

// A token spread over a thread_pool and two handler_threads, its current task blocked on a
// gate on one of them (`gated`: 0 the pool, 1 and 2 the threads) while all three stop: every
// later task is parked in the token, to be handed over after the stop.
class spread_token {
 public:
  static constexpr int kTasks = 30;  // after the gate; task i goes to executor i % 3

  explicit spread_token(int gated) {
    post_to(gated, [this] {
      entered_.count_down();
      gate_.wait();
    });
    entered_.wait();  // the gate is the token's current task
    for (int i = 0; i < kTasks; ++i) {
      results_.push_back(post_awaitable_to(i % 3, [this, i] {
        checker_.enter(i);
        if (!on_its_executor(i % 3)) {
          on_wrong_executor_.fetch_add(1);
        }
        checker_.leave();
        return i;
      }));
    }
  }

  void stop_all(stop_mode mode) {
    pool_.stop(mode);
    first_.stop(mode);
    second_.stop(mode);
    EXPECT_THROW(pool_.post(token_, [] {}), executor_stopped);
    EXPECT_THROW(first_.post(token_, [] {}), executor_stopped);
    EXPECT_THROW(second_.post(token_, [] {}), executor_stopped);
  }
  // Opens the gate if the test has not (a check failed): no executor is left blocked on it.
  ~spread_token() { open_gate(); }
  spread_token(const spread_token&) = delete;
  spread_token& operator=(const spread_token&) = delete;

  void open_gate() {
    if (!gate_open_) {
      gate_open_ = true;
      gate_.count_down();
    }
  }
  void join_all() {
    pool_.join();
    first_.join();
    second_.join();
  }

  std::vector<future<int>>& results() { return results_; }
  serial_checker& checker() { return checker_; }
  [[nodiscard]] int on_wrong_executor() const { return on_wrong_executor_.load(); }
  [[nodiscard]] const serial_token& token() const { return token_; }
  handler_thread& thread(int executor) { return executor == 1 ? first_ : second_; }

 private:
  template <typename F>
  void post_to(int executor, F f) {
    if (executor == 0) {
      pool_.post(token_, std::move(f));
    } else {
      thread(executor).post(token_, std::move(f));
    }
  }
  template <typename F>
  future<int> post_awaitable_to(int executor, F f) {
    if (executor == 0) {
      return pool_.post_awaitable(token_, std::move(f));
    }
    return thread(executor).post_awaitable(token_, std::move(f));
  }
  bool on_its_executor(int executor) {
    return executor == 0 ? pool_.is_current() : thread(executor).is_current();
  }

  // What the tasks use comes first: destroyed after the executors, which join their threads.
  std::latch entered_{ 1 };
  std::latch gate_{ 1 };
  bool gate_open_ = false;
  serial_checker checker_;
  std::atomic<int> on_wrong_executor_{ 0 };
  thread_pool pool_{ 2 };
  handler_thread first_;
  handler_thread second_;
  serial_token token_;
  std::vector<future<int>> results_;
};

// stop(drain) on every executor of a token runs every task the token had accepted, in token
// order, each on its own executor: those a handler_thread gets only after its stop included.
TEST(serial_token, stop_drain_on_every_executor_runs_every_parked_task_in_order) {
  for (int gated = 0; gated < 3; ++gated) {
    SCOPED_TRACE("gate on executor " + std::to_string(gated));
    spread_token spread(gated);
    spread.stop_all(stop_mode::drain);
    spread.open_gate();
    for (int i = 0; i < spread_token::kTasks; ++i) {
      EXPECT_EQ(spread.results()[i].get(), i);
    }
    spread.join_all();
    EXPECT_EQ(spread.checker().order(), iota(spread_token::kTasks));
    EXPECT_EQ(spread.checker().overlaps(), 0);
    EXPECT_EQ(spread.on_wrong_executor(), 0);
    for (int executor = 1; executor < 3; ++executor) {
      // kTasks / 3 token tasks each, handed over one by one, plus the gate on one of them.
      const std::uint64_t expected = spread_token::kTasks / 3 + (gated == executor ? 1 : 0);
      const auto stats = spread.thread(executor).stats();
      EXPECT_EQ(stats.posted, expected);
      EXPECT_EQ(stats.executed, expected);
      EXPECT_EQ(stats.cancelled, 0u);
    }
    EXPECT_EQ(spread.token().pending(), 0u);
  }
}

// stop(discard) on every executor cancels every task the token still held, wherever it goes:
// each is handed over and cancelled by its executor, and none of them hangs the stop.
TEST(serial_token, stop_discard_on_every_executor_cancels_every_parked_task) {
  for (int gated = 0; gated < 3; ++gated) {
    SCOPED_TRACE("gate on executor " + std::to_string(gated));
    spread_token spread(gated);
    spread.stop_all(stop_mode::discard);
    spread.open_gate();
    for (int i = 0; i < spread_token::kTasks; ++i) {
      EXPECT_THROW(spread.results()[i].get(), task_cancelled);
    }
    spread.join_all();
    EXPECT_EQ(spread.checker().order(), std::vector<int>{});
    for (int executor = 1; executor < 3; ++executor) {
      const std::uint64_t gate = gated == executor ? 1 : 0;  // it ran: it had started
      const auto stats = spread.thread(executor).stats();
      EXPECT_EQ(stats.posted, spread_token::kTasks / 3 + gate);
      EXPECT_EQ(stats.executed, gate);
      EXPECT_EQ(stats.cancelled, static_cast<std::uint64_t>(spread_token::kTasks / 3));
    }
    EXPECT_EQ(spread.token().pending(), 0u);
  }
}

// A handler_thread stopped with discard still takes the hand-over of each token task it had
// accepted, and cancels it (a long run of them must not nest one stack frame per task); the
// token goes on.
TEST(serial_token,
     tasks_for_a_handler_thread_stopped_with_discard_are_cancelled_and_the_token_goes_on) {
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
  thread.stop(stop_mode::discard);
  EXPECT_THROW(thread.post(token, [] {}), executor_stopped);
  release.count_down();
  EXPECT_EQ(after.get(), -1);
  for (auto& f : parked) {
    EXPECT_THROW(f.get(), task_cancelled);
  }
  thread.join();
  const auto stats = thread.stats();
  EXPECT_EQ(stats.posted, static_cast<std::uint64_t>(parked_count));
  EXPECT_EQ(stats.executed, 0u);
  EXPECT_EQ(stats.cancelled, static_cast<std::uint64_t>(parked_count));
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
