// schedule() and yield(), and the thread affinity they are the exceptions to: a cyan task
// resumes on the thread it suspended on unless it moves with schedule().

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <latch>
#include <system_error>
#include <thread>
#include <vector>

#include "cyan/dispatch.h"
#include "support/stop_support.h"
#include "support/stress_env.h"
#include "support/sync_wait.h"

namespace {

using namespace std::chrono_literals;
using cyan::dispatch::co_spawn;
using cyan::dispatch::future;
using cyan::dispatch::handler_thread;
using cyan::dispatch::schedule;
using cyan::dispatch::task;
using cyan::dispatch::thread_pool;
using cyan::test::is_canceled;
using outcome = cyan::test::stop_outcome;

TEST(affinity, a_task_resumes_on_its_handler_thread_after_awaiting_a_pool_computation) {
  handler_thread a;
  thread_pool pool(2);
  struct seen {
    std::thread::id computed_on;
    bool home_after = false;
  };
  const seen result = co_spawn(a, [&]() -> task<seen> {
                        seen s;
                        s.computed_on = co_await pool.post_awaitable([] {
                          std::this_thread::sleep_for(2ms);  // completes after the suspension
                          return std::this_thread::get_id();
                        });
                        s.home_after = a.is_current();
                        co_return s;
                      }).get();
  EXPECT_NE(result.computed_on, a.get_id());
  EXPECT_TRUE(result.home_after);
}

TEST(affinity, the_global_pools_async_awaitable_too) {
  handler_thread a;
  const bool home = co_spawn(a, [&a]() -> task<bool> {
                      std::latch computed{ 1 };
                      auto f = cyan::dispatch::async_awaitable([&computed] {
                        computed.wait();
                        return 1;
                      });
                      computed.count_down();
                      co_await f;
                      co_return a.is_current();
                    }).get();
  EXPECT_TRUE(home);
}

task<std::thread::id> hop_to(handler_thread& b) {
  co_await schedule(b);
  co_return std::this_thread::get_id();
}

TEST(affinity, a_parent_stays_home_when_its_child_hops_away_and_returns) {
  handler_thread a;
  handler_thread b;
  struct seen {
    std::thread::id child_ended_on;
    bool home_after = false;
  };
  const seen result = co_spawn(a, [&]() -> task<seen> {
                        seen s;
                        s.child_ended_on = co_await hop_to(b);
                        s.home_after = a.is_current();
                        co_return s;
                      }).get();
  EXPECT_EQ(result.child_ended_on, b.get_id());
  EXPECT_TRUE(result.home_after);
}

TEST(affinity, schedule_moves_the_home_to_the_new_thread) {
  handler_thread a;
  handler_thread b;
  thread_pool pool(2);
  const int checks = co_spawn(a, [&]() -> task<int> {
                       int ok = 0;
                       co_await schedule(b);
                       ok += b.is_current();
                       co_await pool.post_awaitable([] { std::this_thread::sleep_for(1ms); });
                       ok += b.is_current();  // b is home now
                       co_await schedule(pool);
                       ok += pool.is_current();
                       co_await a.post_awaitable([] { std::this_thread::sleep_for(1ms); });
                       ok += pool.is_current();  // any worker of the pool
                       co_await a.schedule();
                       ok += a.is_current();
                       co_return ok;
                     }).get();
  EXPECT_EQ(checks, 5);
}

// yield() goes behind what is queued already: a closure posted before it runs first.
TEST(affinity, yield_goes_to_the_back_of_the_threads_queue) {
  handler_thread h;
  std::vector<int> order;  // touched on h only
  co_spawn(h, [&]() -> task<> {
    order.push_back(1);
    h.post([&order] { order.push_back(2); });
    co_await cyan::dispatch::yield();
    order.push_back(3);
  }).get();
  EXPECT_EQ(order, (std::vector<int>{ 1, 2, 3 }));
}

// Awaits a future and opens `gate` once the task is suspended on it, never before: a future
// completed first would let the task go on where it is, which is not what a test of where the
// completion resumes it wants to see.
template <typename Awaiter>
struct open_once_suspended {
  Awaiter inner;
  std::latch& gate;

  bool await_ready() const noexcept { return false; }
  template <typename Promise>
  bool await_suspend(std::coroutine_handle<Promise> suspended) {
    const bool stays_suspended = inner.await_suspend(suspended);
    gate.count_down();  // from here the frame, and this awaiter, may be resumed elsewhere
    return stays_suspended;
  }
  auto await_resume() { return inner.await_resume(); }
};

// Without a home (a thread that is no executor's) a task resumes where the future completes.
TEST(affinity, a_task_on_a_thread_without_an_executor_resumes_on_the_completing_thread) {
  handler_thread h;
  std::latch gate{ 1 };
  future<int> pending = h.post_awaitable([&gate] {
    gate.wait();
    return 3;
  });
  // sync_wait drives the task on this test's thread, which has no executor.
  std::thread::id resumed_on;
  auto body = [](future<int>& f, std::latch& opens, std::thread::id& where) -> task<int> {
    using awaiter = decltype(f.operator co_await());
    const int value = co_await open_once_suspended<awaiter>{ f.operator co_await(), opens };
    where = std::this_thread::get_id();
    co_return value;
  };
  EXPECT_EQ(cyan::test::sync_wait(body(pending, gate, resumed_on)), 3);
  EXPECT_EQ(resumed_on, h.get_id());
}

// 100,000 tasks, each hopping A -> B -> A -> B -> A and noting where it landed: every landing
// on the expected thread, every task's steps in order, exact totals.
TEST(affinity, many_tasks_hop_between_two_handler_threads_in_order) {
  const std::size_t tasks = cyan::test::env_or("CYAN_STRESS_HOP_TASKS", 100'000);
  constexpr int kHops = 4;
  handler_thread a;
  handler_thread b;
  std::vector<std::uint8_t> steps(tasks, 0);  // per task: how many hops it completed
  std::atomic<std::uint64_t> wrong_thread{ 0 };
  std::atomic<std::uint64_t> out_of_order{ 0 };
  std::vector<future<void>> done;
  done.reserve(tasks);
  for (std::size_t i = 0; i < tasks; ++i) {
    done.push_back(co_spawn(a, [&, i]() -> task<> {
      for (int hop = 0; hop < kHops; ++hop) {
        handler_thread& next = hop % 2 == 0 ? b : a;
        co_await next.schedule();
        if (!next.is_current()) {
          wrong_thread.fetch_add(1, std::memory_order_relaxed);
        }
        if (steps[i] != hop) {
          out_of_order.fetch_add(1, std::memory_order_relaxed);
        }
        steps[i] = static_cast<std::uint8_t>(hop + 1);
      }
    }));
  }
  for (auto& f : done) {
    f.get();
  }
  EXPECT_EQ(wrong_thread.load(), 0U);
  EXPECT_EQ(out_of_order.load(), 0U);
  std::uint64_t total = 0;
  for (std::uint8_t s : steps) {
    total += s;
  }
  EXPECT_EQ(total, tasks * kHops);
  EXPECT_EQ(a.stats().executed + b.stats().executed, tasks * (kHops + 1));
}

TEST(cancel, schedule_after_a_stop_request_throws_without_moving) {
  handler_thread a;
  handler_thread b;
  std::stop_source stop;
  stop.request_stop();
  const outcome o = co_spawn(
                        a,
                        [&]() -> task<outcome> {
                          outcome r;
                          try {
                            co_await b.schedule();
                          } catch (const std::system_error& e) {
                            r.canceled = is_canceled(e);
                          }
                          r.on_home = a.is_current();
                          co_return r;
                        },
                        stop.get_token())
                        .get();
  EXPECT_TRUE(o.canceled);
  EXPECT_TRUE(o.on_home);
}

}  // namespace
