// async_scope: it owns its children on every executor, joins them (blocking or by co_await)
// and stops them.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
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

}  // namespace
