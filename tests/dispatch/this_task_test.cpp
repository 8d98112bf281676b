// this_task::stop_token(): a task's stop token is its spawn's, and the tasks it awaits inherit
// it.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stop_token>
#include <system_error>
#include <utility>

#include "cyan/dispatch.h"
#include "support/stop_support.h"

namespace {

using namespace std::chrono_literals;
using cyan::dispatch::co_spawn;
using cyan::dispatch::handler_thread;
using cyan::dispatch::sleep_for;
using cyan::dispatch::task;
using cyan::test::is_canceled;
using cyan::test::wait_started;
namespace this_task = cyan::dispatch::this_task;

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

}  // namespace
