// async_scope: it owns its children on every executor, joins them (blocking or by co_await,
// with or without a time limit) and stops them.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <stdexcept>
#include <stop_token>
#include <system_error>

#include "cyan/dispatch.h"
#include "support/lifecycle.h"
#include "support/stop_support.h"

namespace {

using namespace std::chrono_literals;
using cyan::dispatch::async_scope;
using cyan::dispatch::co_spawn;
using cyan::dispatch::handler_thread;
using cyan::dispatch::sleep_for;
using cyan::dispatch::task;
using cyan::dispatch::thread_pool;
using cyan::test::is_canceled;
using cyan::test::lifecycle;
using cyan::test::wait_started;

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

using clock_type = std::chrono::steady_clock;

// A child that finishes only when its scope's stop is requested.
task<> blocked_child(std::atomic<int>& canceled) {
  try {
    co_await sleep_for(1h);
  } catch (const std::system_error& e) {
    canceled += is_canceled(e);
  }
}

TEST(async_scope, join_for_is_true_when_every_child_finishes_in_time) {
  handler_thread a;
  thread_pool pool(2);
  async_scope scope;
  std::atomic<int> finished{ 0 };
  struct outcome {
    bool joined;
    int finished;
    std::size_t size;
    bool home;
    clock_type::duration took;
  };
  const outcome seen = co_spawn(a, [&]() -> task<outcome> {
                         for (int i = 0; i < 20; ++i) {
                           scope.spawn(pool, [&finished, i]() -> task<> {
                             co_await sleep_for(std::chrono::milliseconds(1 + i % 4));
                             finished.fetch_add(1);
                           });
                         }
                         const auto start = clock_type::now();
                         const bool joined = co_await scope.join_for(30s);
                         co_return outcome{ joined, finished.load(), scope.size(), a.is_current(),
                                            clock_type::now() - start };
                       }).get();
  EXPECT_TRUE(seen.joined);
  EXPECT_EQ(seen.finished, 20);
  EXPECT_EQ(seen.size, 0U);
  EXPECT_TRUE(seen.home);
  EXPECT_LT(seen.took, 10s);  // it ended with the children, not with the limit
}

TEST(async_scope, join_for_a_scope_with_no_child_is_true_at_once) {
  handler_thread a;
  async_scope scope;
  EXPECT_TRUE(co_spawn(a, [&]() -> task<bool> { co_return co_await scope.join_for(1h); }).get());
}

TEST(async_scope, join_for_is_false_after_the_limit_and_a_later_join_still_works) {
  handler_thread a;
  handler_thread b;
  async_scope scope;
  std::atomic<int> canceled{ 0 };
  scope.spawn(b, [&canceled] { return blocked_child(canceled); });
  scope.spawn(b, [&canceled] { return blocked_child(canceled); });
  struct outcome {
    bool joined;
    bool home;
    clock_type::duration took;
    std::size_t left;
  };
  const outcome first =
      co_spawn(a, [&]() -> task<outcome> {
        const auto start = clock_type::now();
        const bool joined = co_await scope.join_for(50ms);
        co_return outcome{ joined, a.is_current(), clock_type::now() - start, scope.size() };
      }).get();
  EXPECT_FALSE(first.joined);
  EXPECT_TRUE(first.home);
  EXPECT_GE(first.took, 50ms);
  EXPECT_EQ(first.left, 2U);  // the children go on
  EXPECT_EQ(canceled.load(), 0);
  // The timed-out waiter left nothing behind: a join after a stop request ends normally.
  const bool joined_later = co_spawn(a, [&]() -> task<bool> {
                              scope.request_stop();
                              co_await scope.join();
                              co_return scope.size() == 0;
                            }).get();
  EXPECT_TRUE(joined_later);
  EXPECT_EQ(canceled.load(), 2);
}

TEST(async_scope, a_stop_request_ends_join_for_with_operation_canceled) {
  handler_thread a;
  handler_thread b;
  async_scope scope;
  std::atomic<int> canceled{ 0 };
  scope.spawn(b, [&canceled] { return blocked_child(canceled); });
  std::stop_source stop;
  std::promise<void> waiting;
  auto joiner = co_spawn(
      a,
      [&]() -> task<bool> {
        waiting.set_value();
        co_return co_await scope.join_for(1h);
      },
      stop.get_token());
  waiting.get_future().wait();
  const auto start = clock_type::now();
  stop.request_stop();
  bool threw_canceled = false;
  try {
    (void)joiner.get();
  } catch (const std::system_error& e) {
    threw_canceled = is_canceled(e);
  }
  EXPECT_TRUE(threw_canceled);
  EXPECT_LT(clock_type::now() - start, 10s);
  EXPECT_EQ(scope.size(), 1U);  // the child was not the joiner's to stop
  scope.request_stop();
  scope.join_blocking();
  EXPECT_EQ(canceled.load(), 1);
}

// The children's end and the limit race in every round: whatever join_for says is the truth
// at that moment, and a join afterwards always ends.
TEST(async_scope, join_for_racing_the_last_child_tells_the_truth) {
  handler_thread a;
  thread_pool pool(2);
  int true_count = 0;
  for (int round = 0; round < 300; ++round) {
    async_scope scope;
    scope.spawn(pool, []() -> task<> { co_await sleep_for(1ms); });
    const auto [joined, size_then] = co_spawn(a, [&]() -> task<std::pair<bool, std::size_t>> {
                                       const bool joined = co_await scope.join_for(1ms);
                                       co_return std::pair{ joined, scope.size() };
                                     }).get();
    if (joined) {
      ++true_count;
      EXPECT_EQ(size_then, 0U) << "round " << round;
    }
    scope.join_blocking();
    EXPECT_EQ(scope.size(), 0U);
  }
  RecordProperty("rounds_joined_in_time", true_count);
}

TEST(async_scope, join_blocking_for_is_true_in_time_and_false_after_the_limit) {
  handler_thread h;
  async_scope scope;
  std::atomic<int> canceled{ 0 };
  scope.spawn(h, []() -> task<> { co_await sleep_for(2ms); });
  EXPECT_TRUE(scope.join_blocking_for(30s));
  EXPECT_EQ(scope.size(), 0U);
  scope.spawn(h, [&canceled] { return blocked_child(canceled); });
  const auto start = clock_type::now();
  EXPECT_FALSE(scope.join_blocking_for(50ms));
  EXPECT_GE(clock_type::now() - start, 50ms);
  EXPECT_EQ(scope.size(), 1U);
  scope.request_stop();
  EXPECT_TRUE(scope.join_blocking_for(30s));
  EXPECT_EQ(canceled.load(), 1);
}

TEST(async_scope, join_blocking_for_on_a_handler_thread_is_refused) {
  handler_thread h;
  async_scope scope;
  auto refused = h.post_awaitable([&scope] {
    try {
      (void)scope.join_blocking_for(1s);
    } catch (const std::logic_error&) {
      return true;
    }
    return false;
  });
  EXPECT_TRUE(refused.get());
}

}  // namespace
