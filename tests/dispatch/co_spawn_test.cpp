#include "cyan/dispatch/co_spawn.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <latch>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "cyan/dispatch.h"
#include "support/lifecycle.h"

namespace {

using namespace std::chrono_literals;
using cyan::dispatch::co_spawn;
using cyan::dispatch::detached;
using cyan::dispatch::future;
using cyan::dispatch::handler;
using cyan::dispatch::handler_thread;
using cyan::dispatch::sleep_for;
using cyan::dispatch::stop_mode;
using cyan::dispatch::task;
using cyan::dispatch::task_cancelled;
using cyan::dispatch::thread_pool;
using cyan::test::lifecycle;

task<int> add(int a, int b) {
  co_return a + b;
}

task<std::thread::id> where_am_i() {
  co_return std::this_thread::get_id();
}

TEST(co_spawn, runs_a_task_on_a_handler_thread_and_its_future_gets_the_result) {
  handler_thread h;
  future<int> sum = co_spawn(h, add(2, 3));
  EXPECT_EQ(sum.get(), 5);
  EXPECT_EQ(co_spawn(h, where_am_i()).get(), h.get_id());
}

TEST(co_spawn, runs_a_task_on_a_pool_worker_and_on_the_global_pool) {
  thread_pool pool(2);
  EXPECT_EQ(co_spawn(pool, add(20, 22)).get(), 42);
  const std::thread::id worker = co_spawn(pool, where_am_i()).get();
  EXPECT_NE(worker, std::this_thread::get_id());
  EXPECT_EQ(co_spawn(add(1, 1)).get(), 2);
  auto& global = cyan::dispatch::global_concurrent_pool();
  EXPECT_TRUE(co_spawn([&global]() -> task<bool> { co_return global.is_current(); }).get());
}

TEST(co_spawn, the_future_can_be_co_awaited_by_another_task) {
  handler_thread a;
  handler_thread b;
  future<int> outer = co_spawn(a, [&b]() -> task<int> {
    future<int> inner = co_spawn(b, add(40, 2));
    const int value = co_await inner;
    co_return value + 1;
  });
  EXPECT_EQ(outer.get(), 43);
}

TEST(co_spawn, an_exception_reaches_the_future) {
  handler_thread h;
  future<int> failing = co_spawn(h, []() -> task<int> {
    co_await sleep_for(1ms);
    throw std::runtime_error("boom");
  });
  try {
    (void)failing.get();
    FAIL() << "expected the task's exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "boom");
  }
}

// The callable form keeps the callable's captures until the task has finished, across
// suspensions and a hop to another thread.
TEST(co_spawn, a_callables_captures_live_until_the_task_finishes) {
  lifecycle::reset();
  handler_thread a;
  handler_thread b;
  auto conn = std::make_unique<lifecycle>(17);
  future<std::int64_t> read = co_spawn(a, [c = std::move(conn), &b]() -> task<std::int64_t> {
    co_await sleep_for(2ms);
    co_await b.schedule();
    co_await sleep_for(1ms);
    co_return c->value + lifecycle::live();
  });
  // Expect the capture alive (live() == 1) at the task's end, and gone once the future is ready.
  EXPECT_EQ(read.get(), 18);
  EXPECT_EQ(lifecycle::live(), 0);
  EXPECT_EQ(lifecycle::constructed.load(), 1);
}

TEST(co_spawn, a_task_handed_to_a_stopped_executor_is_destroyed_unrun_and_reports_cancelled) {
  lifecycle::reset();
  handler_thread h;
  h.stop();
  h.join();
  bool ran = false;
  future<int> refused = co_spawn(h, [](lifecycle, bool& ran) -> task<int> {
    ran = true;
    co_return 1;
  }(lifecycle(1), ran));
  EXPECT_THROW((void)refused.get(), task_cancelled);
  EXPECT_FALSE(ran);
  EXPECT_EQ(lifecycle::live(), 0);

  thread_pool pool(1);
  pool.stop();
  future<int> refused_too = co_spawn(pool, add(1, 2));
  EXPECT_THROW((void)refused_too.get(), task_cancelled);
}

// stop(drain) waits for spawned tasks that are suspended: here on the thread's own timer.
TEST(co_spawn, drain_waits_for_a_spawned_task_suspended_on_a_timer) {
  handler_thread h;
  std::atomic<bool> finished{ false };
  future<int> sleeper = co_spawn(h, [&finished]() -> task<int> {
    co_await sleep_for(50ms);
    finished = true;
    co_return 9;
  });
  std::this_thread::sleep_for(5ms);  // let it reach its sleep (not needed for the assertion)
  h.stop(stop_mode::drain);
  h.join();
  EXPECT_TRUE(finished.load());
  EXPECT_EQ(sleeper.get(), 9);
}

// A task spawned on the pool, suspended on a future that a handler thread completes later.
TEST(co_spawn, pool_drain_waits_for_a_spawned_task_suspended_on_a_future) {
  handler_thread other;
  std::latch gate{ 1 };
  future<int> pending = other.post_awaitable([&gate] {
    gate.wait();
    return 4;
  });
  thread_pool pool(2);
  future<int> waiting = co_spawn(pool, [&pending]() -> task<int> {
    const int value = co_await pending;
    co_return value * 10;
  });
  pool.stop(stop_mode::drain);
  std::thread opener([&gate] {
    std::this_thread::sleep_for(20ms);
    gate.count_down();
  });
  pool.join();  // returns only once the task finished
  EXPECT_TRUE(waiting.is_ready());
  EXPECT_EQ(waiting.get(), 40);
  opener.join();
}

task<int> sleep_then_mark(lifecycle, std::atomic<int>& after, std::chrono::milliseconds d) {
  lifecycle local(5);
  co_await sleep_for(d);
  after.fetch_add(1);
  co_return 1;
}

TEST(co_spawn, discard_destroys_suspended_spawned_tasks_with_their_locals) {
  lifecycle::reset();
  std::atomic<int> after{ 0 };
  handler_thread h;
  std::vector<future<int>> sleepers;
  for (int i = 0; i < 10; ++i) {
    sleepers.push_back(co_spawn(h, sleep_then_mark(lifecycle(i), after, 10s)));
  }
  // Wait until every task has reached its sleep: a parameter and a local each.
  while (lifecycle::live() != 20) {
    std::this_thread::yield();
  }
  const auto start = std::chrono::steady_clock::now();
  h.stop(stop_mode::discard);
  h.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);  // not the 10 s sleep
  EXPECT_EQ(after.load(), 0);
  EXPECT_EQ(lifecycle::live(), 0);
  for (auto& f : sleepers) {
    EXPECT_THROW((void)f.get(), task_cancelled);
  }
}

TEST(co_spawn, pool_discard_destroys_suspended_spawned_tasks) {
  lifecycle::reset();
  std::atomic<int> after{ 0 };
  std::vector<future<int>> sleepers;
  {
    thread_pool pool(2);
    for (int i = 0; i < 6; ++i) {
      sleepers.push_back(co_spawn(pool, sleep_then_mark(lifecycle(i), after, 10s)));
    }
    while (lifecycle::live() != 12) {
      std::this_thread::yield();
    }
    pool.stop(stop_mode::discard);
  }
  EXPECT_EQ(after.load(), 0);
  EXPECT_EQ(lifecycle::live(), 0);
  for (auto& f : sleepers) {
    EXPECT_THROW((void)f.get(), task_cancelled);
  }
}

// A task spawned on a pool that made handler thread `a` its home, and is suspended when `a`
// finishes: its resumption is refused there, so it is destroyed (not resumed elsewhere), and its
// future says so.
TEST(co_spawn, a_task_whose_home_has_finished_is_destroyed_when_it_would_resume) {
  lifecycle::reset();
  thread_pool pool(2);
  auto a = std::make_unique<handler_thread>();
  std::latch gate{ 1 };
  std::latch suspended{ 1 };
  std::atomic<bool> resumed{ false };
  future<int> pending = pool.post_awaitable([&gate] {
    gate.wait();
    return 1;
  });
  future<int> homeless = co_spawn(pool, [&]() -> task<int> {
    lifecycle local(3);
    co_await a->schedule();
    suspended.count_down();
    const int value = co_await pending;
    resumed = true;
    co_return value;
  });
  suspended.wait();
  a->stop();
  a->join();  // it does not wait: the task was not spawned on it
  gate.count_down();
  EXPECT_THROW((void)homeless.get(), task_cancelled);
  EXPECT_FALSE(resumed.load());
  EXPECT_EQ(lifecycle::live(), 0);
}

class recording_handler : public handler {
 public:
  void on_error(std::exception& error) noexcept override {
    const std::lock_guard lock(mutex);
    errors.emplace_back(error.what());
    threads.push_back(std::this_thread::get_id());
  }
  std::mutex mutex;
  std::vector<std::string> errors;
  std::vector<std::thread::id> threads;
};

TEST(co_spawn, a_detached_tasks_exception_goes_to_the_handlers_on_error_on_its_thread) {
  recording_handler recorder;
  handler_thread elsewhere;
  {
    handler_thread h(recorder);
    co_spawn(
        h, []() -> task<> { throw std::runtime_error("first"); }, detached);
    // This one throws on another thread: the error is still delivered on h's thread.
    co_spawn(
        h,
        [&elsewhere]() -> task<> {
          co_await elsewhere.schedule();
          throw std::runtime_error("second");
        },
        detached);
    h.stop();
    h.join();
    ASSERT_EQ(recorder.errors.size(), 2U);
    std::vector<std::string> sorted = recorder.errors;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, (std::vector<std::string>{ "first", "second" }));
    EXPECT_EQ(recorder.threads[0], h.get_id());
    EXPECT_EQ(recorder.threads[1], h.get_id());
  }
}

TEST(co_spawn, a_detached_tasks_exception_goes_to_the_pools_error_callback) {
  std::mutex mutex;
  std::vector<std::string> errors;
  {
    thread_pool::options opts;
    opts.on_error = [&](std::exception_ptr error) {
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        const std::lock_guard lock(mutex);
        errors.emplace_back(e.what());
      }
    };
    thread_pool pool(2, opts);
    for (int i = 0; i < 3; ++i) {
      co_spawn(
          pool, [i]() -> task<> { throw std::runtime_error(std::to_string(i)); }, detached);
    }
  }  // drain: every detached task has finished
  std::sort(errors.begin(), errors.end());
  EXPECT_EQ(errors, (std::vector<std::string>{ "0", "1", "2" }));
}

TEST(co_spawn, a_detached_task_stopped_by_its_token_reports_nothing) {
  recording_handler recorder;
  // On the heap: GCC 12 with -O1 and ASan warns (wrongly) that a local one is uninitialized.
  const auto stop = std::make_unique<std::stop_source>();
  const std::stop_token token = stop->get_token();
  std::atomic<bool> cancelled{ false };
  {
    handler_thread h(recorder);
    co_spawn(
        h,
        [&cancelled]() -> task<> {
          try {
            co_await sleep_for(10s);
          } catch (const std::system_error& e) {
            cancelled = e.code() == std::errc::operation_canceled;
            throw;
          }
        },
        token, detached);
    std::this_thread::sleep_for(5ms);
    stop->request_stop();
  }
  EXPECT_TRUE(cancelled.load());
  EXPECT_TRUE(recorder.errors.empty());
}

}  // namespace
