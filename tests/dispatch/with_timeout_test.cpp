// with_timeout().

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <stop_token>
#include <system_error>

#include "../support/stop_support.h"
#include "cyan/dispatch.h"

namespace {

using namespace std::chrono_literals;
using cyan::dispatch::async_event;
using cyan::dispatch::co_spawn;
using cyan::dispatch::handler_thread;
using cyan::dispatch::sleep_for;
using cyan::dispatch::task;
using cyan::dispatch::with_timeout;

task<int> value_after(int value, std::chrono::milliseconds d) {
  co_await sleep_for(d);
  co_return value;
}

TEST(with_timeout, returns_the_value_of_a_task_that_finishes_in_time) {
  handler_thread h;
  // An hour's limit: if the clock were not stopped when the task finished, this would hang.
  EXPECT_EQ(
      co_spawn(h, []() -> task<int> { co_return co_await with_timeout(value_after(5, 1ms), 1h); })
          .get(),
      5);
}

TEST(with_timeout, stops_a_late_task_waits_for_it_and_throws_timed_out) {
  handler_thread h;
  std::atomic<bool> saw_stop{ false };
  auto late = [](std::atomic<bool>& flag) -> task<int> {
    try {
      co_await sleep_for(1h);
    } catch (const std::system_error& e) {
      flag = cyan::test::is_canceled(e);
      throw;
    }
    co_return 1;
  };
  auto outcome = co_spawn(h, [&]() -> task<std::error_code> {
    try {
      (void)co_await with_timeout(late(saw_stop), 20ms);
    } catch (const std::system_error& e) {
      EXPECT_TRUE(saw_stop.load());  // it was stopped and had ended before the throw
      co_return e.code();
    }
    co_return std::error_code{};
  });
  EXPECT_EQ(outcome.get(), std::make_error_code(std::errc::timed_out));
}

TEST(with_timeout, a_value_that_arrives_while_the_task_is_being_cancelled_is_returned) {
  handler_thread h;
  auto insists = []() -> task<int> {
    try {
      co_await sleep_for(1h);
    } catch (const std::system_error&) {
      co_return 42;  // finishes with a value although it was stopped
    }
    co_return 0;
  };
  EXPECT_EQ(
      co_spawn(h, [&]() -> task<int> { co_return co_await with_timeout(insists(), 10ms); }).get(),
      42);
}

// The reproduction: a task that completes exactly at the deadline (its own sleep of the
// same length, started first, ends in the same tick as the clock) returns its value.
TEST(with_timeout, a_task_that_completes_exactly_at_the_deadline_returns_its_value) {
  handler_thread h;
  for (int round = 0; round < 50; ++round) {
    const int got = co_spawn(h, [round]() -> task<int> {
                      co_return co_await with_timeout(value_after(round, 3ms), 3ms);
                    }).get();
    ASSERT_EQ(got, round);
  }
}

TEST(with_timeout, rethrows_the_tasks_own_exception) {
  handler_thread h;
  auto fails = []() -> task<int> {
    co_await sleep_for(1ms);
    throw std::runtime_error("own failure");
  };
  auto outcome = co_spawn(h, [&]() -> task<int> { co_return co_await with_timeout(fails(), 1h); });
  EXPECT_THROW(outcome.get(), std::runtime_error);
}

TEST(with_timeout, a_stop_of_the_awaiting_task_is_a_cancellation_not_a_timeout) {
  handler_thread h;
  std::stop_source stop;
  auto outcome = co_spawn(
      h,
      [&]() -> task<std::error_code> {
        try {
          (void)co_await with_timeout(value_after(1, 1h), 1h);
        } catch (const std::system_error& e) {
          co_return e.code();
        }
        co_return std::error_code{};
      },
      stop.get_token());
  co_spawn(h, [&]() -> task<> {
    stop.request_stop();
    co_return;
  }).get();
  EXPECT_EQ(outcome.get(), std::make_error_code(std::errc::operation_canceled));
}

TEST(with_timeout, works_for_void_tasks) {
  handler_thread h;
  async_event never;
  auto wait_forever = [&]() -> task<> { co_await never.wait(); };
  auto quick = []() -> task<> { co_await sleep_for(1ms); };
  auto outcome = co_spawn(h, [&]() -> task<int> {
    co_await with_timeout(quick(), 1h);
    try {
      co_await with_timeout(wait_forever(), 5ms);
    } catch (const std::system_error& e) {
      co_return e.code() == std::errc::timed_out ? 1 : 2;
    }
    co_return 3;
  });
  EXPECT_EQ(outcome.get(), 1);
}

}  // namespace
