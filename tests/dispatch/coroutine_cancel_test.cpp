// Stop-token cancellation of cyan's suspending operations, and async_scope.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <latch>
#include <stdexcept>
#include <stop_token>
#include <system_error>
#include <thread>
#include <vector>

#include "cyan/dispatch.h"
#include "support/lifecycle.h"
#include "support/stress_env.h"

namespace {

using namespace std::chrono_literals;
using cyan::dispatch::async_scope;
using cyan::dispatch::co_spawn;
using cyan::dispatch::future;
using cyan::dispatch::handler_thread;
using cyan::dispatch::sleep_for;
using cyan::dispatch::task;
using cyan::dispatch::thread_pool;
using cyan::test::lifecycle;
namespace this_task = cyan::dispatch::this_task;

bool is_canceled(const std::system_error& e) {
  return e.code() == std::errc::operation_canceled;
}

// Waits (bounded by the test's timeout) until `h` has started `n` jobs.
void wait_started(handler_thread& h, std::uint64_t n) {
  while (h.stats().executed < n) {
    std::this_thread::yield();
  }
}

struct outcome {
  bool canceled = false;
  bool on_home = false;
};

TEST(cancel, a_stop_request_ends_a_sleep_promptly_on_the_tasks_thread) {
  handler_thread h;
  std::stop_source stop;
  auto f = co_spawn(
      h,
      [&h]() -> task<outcome> {
        outcome o;
        try {
          co_await sleep_for(10s);
        } catch (const std::system_error& e) {
          o.canceled = is_canceled(e);
        }
        o.on_home = h.is_current();
        co_return o;
      },
      stop.get_token());
  wait_started(h, 1);
  const auto start = std::chrono::steady_clock::now();
  stop.request_stop();
  const outcome o = f.get();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_TRUE(o.canceled);
  EXPECT_TRUE(o.on_home);
}

task<> nested_sleep(std::atomic<int>& canceled) {
  try {
    co_await sleep_for(10s);
  } catch (const std::system_error& e) {
    canceled += is_canceled(e);
    throw;
  }
}

TEST(cancel, a_child_task_inherits_its_parents_token) {
  handler_thread h;
  std::stop_source stop;
  std::atomic<int> canceled{ 0 };
  auto f = co_spawn(
      h, [&]() -> task<> { co_await nested_sleep(canceled); }, stop.get_token());
  wait_started(h, 1);
  stop.request_stop();
  EXPECT_THROW(f.get(), std::system_error);
  EXPECT_EQ(canceled.load(), 1);
}

TEST(cancel, this_task_stop_token_is_the_spawns_token) {
  handler_thread h;
  std::stop_source stop;
  const auto [possible, requested] =
      co_spawn(
          h,
          []() -> task<std::pair<bool, bool>> {
            std::stop_token token = co_await this_task::stop_token();
            co_return std::pair{ token.stop_possible(), token.stop_requested() };
          },
          stop.get_token())
          .get();
  EXPECT_TRUE(possible);
  EXPECT_FALSE(requested);
  stop.request_stop();
  EXPECT_TRUE(
      co_spawn(
          h, []() -> task<bool> { co_return (co_await this_task::stop_token()).stop_requested(); },
          stop.get_token())
          .get());
}

TEST(cancel, a_stop_request_ends_a_future_await_and_the_late_completion_is_harmless) {
  handler_thread h;
  thread_pool pool(1);
  std::latch gate{ 1 };
  std::stop_source stop;
  auto f = co_spawn(
      h,
      [&]() -> task<outcome> {
        outcome o;
        future<int> blocked = pool.post_awaitable([&gate] {
          gate.wait();
          return 1;
        });
        try {
          (void)co_await blocked;
        } catch (const std::system_error& e) {
          o.canceled = is_canceled(e);
        }
        o.on_home = h.is_current();
        co_return o;
      },
      stop.get_token());
  wait_started(h, 1);
  stop.request_stop();
  const outcome o = f.get();
  EXPECT_TRUE(o.canceled);
  EXPECT_TRUE(o.on_home);
  gate.count_down();  // the pool task completes a future nobody awaits any more
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

// Completions racing with stop requests: each task sees exactly one outcome.
TEST(cancel, completion_and_stop_race_without_losing_or_doubling_a_resumption) {
  const std::size_t rounds = cyan::test::env_or("CYAN_STRESS_CANCEL_ROUNDS", 2000);
  handler_thread h;
  thread_pool pool(2);
  std::atomic<std::uint64_t> values{ 0 };
  std::atomic<std::uint64_t> canceled{ 0 };
  for (std::size_t i = 0; i < rounds; ++i) {
    std::stop_source stop;
    auto f = co_spawn(
        h,
        [&]() -> task<> {
          try {
            (void)co_await pool.post_awaitable([] { return 1; });
            values.fetch_add(1);
          } catch (const std::system_error& e) {
            canceled += is_canceled(e);
          }
        },
        stop.get_token());
    pool.post([stop]() mutable { stop.request_stop(); });
    f.get();
  }
  EXPECT_EQ(values.load() + canceled.load(), rounds);
}

TEST(async_scope, join_blocking_waits_for_every_child_on_every_executor) {
  handler_thread h;
  thread_pool pool(2);
  std::atomic<int> finished{ 0 };
  async_scope scope;
  for (int i = 0; i < 50; ++i) {
    auto child = [&finished, i]() -> task<> {
      co_await sleep_for(std::chrono::milliseconds(i % 5));
      finished.fetch_add(1);
    };
    if (i % 2 == 0) {
      scope.spawn(h, child);
    } else {
      scope.spawn(pool, child);
    }
  }
  scope.spawn([&finished]() -> task<> {
    finished.fetch_add(1);
    co_return;
  });
  scope.join_blocking();
  EXPECT_EQ(finished.load(), 51);
  EXPECT_EQ(scope.size(), 0U);
}

TEST(async_scope, co_await_join_resumes_on_the_awaiting_tasks_home) {
  handler_thread a;
  thread_pool pool(2);
  async_scope scope;
  std::atomic<int> finished{ 0 };
  const bool home = co_spawn(a, [&]() -> task<bool> {
                      for (int i = 0; i < 10; ++i) {
                        scope.spawn(pool, [&finished]() -> task<> {
                          co_await sleep_for(2ms);
                          finished.fetch_add(1);
                        });
                      }
                      co_await scope.join();
                      co_return a.is_current() && finished.load() == 10;
                    }).get();
  EXPECT_TRUE(home);
}

TEST(async_scope, request_stop_cancels_the_children_and_the_destructor_waits) {
  lifecycle::reset();
  handler_thread h;
  std::atomic<int> canceled{ 0 };
  {
    async_scope scope;
    for (int i = 0; i < 20; ++i) {
      scope.spawn(h, [&canceled, held = lifecycle(i)]() -> task<> {
        try {
          co_await sleep_for(10s);
        } catch (const std::system_error& e) {
          canceled += is_canceled(e);
        }
      });
    }
    wait_started(h, 20);
    scope.request_stop();
    scope.join_blocking();
    EXPECT_EQ(canceled.load(), 20);
    EXPECT_EQ(lifecycle::live(), 0);
    // A scope destroyed with live children stops them and waits.
    for (int i = 0; i < 5; ++i) {
      scope.spawn(h, [&canceled]() -> task<> {
        try {
          co_await sleep_for(10s);
        } catch (const std::system_error& e) {
          canceled += is_canceled(e);
        }
      });
    }
  }
  EXPECT_EQ(canceled.load(), 25);
}

TEST(async_scope, join_blocking_on_a_handler_thread_is_refused) {
  handler_thread h;
  async_scope scope;
  auto refused = h.post_awaitable([&scope] {
    try {
      scope.join_blocking();
    } catch (const std::logic_error&) {
      return true;
    }
    return false;
  });
  EXPECT_TRUE(refused.get());
}

}  // namespace
