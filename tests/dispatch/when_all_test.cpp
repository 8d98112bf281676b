// when_all / when_any.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <tuple>
#include <variant>
#include <vector>

#include "cyan/dispatch.h"

namespace {

using namespace std::chrono_literals;
using cyan::dispatch::co_spawn;
using cyan::dispatch::handler_thread;
using cyan::dispatch::sleep_for;
using cyan::dispatch::task;
using cyan::dispatch::when_all;
using cyan::dispatch::when_any;

task<int> value_after(int value, std::chrono::milliseconds d,
                      std::vector<int>* finished = nullptr) {
  co_await sleep_for(d);
  if (finished != nullptr) {
    finished->push_back(value);
  }
  co_return value;
}

task<> nothing() {
  co_return;
}

task<std::string> text() {
  co_return "t";
}

TEST(when_all, yields_every_result_in_argument_order_while_the_children_interleave) {
  handler_thread h;
  std::vector<int> finished;  // on h only
  const auto result =
      co_spawn(h, [&]() -> task<std::tuple<int, int, std::monostate, std::string>> {
        co_return co_await when_all(value_after(1, 30ms, &finished), value_after(2, 5ms, &finished),
                                    nothing(), text());
      }).get();
  EXPECT_EQ(std::get<0>(result), 1);
  EXPECT_EQ(std::get<1>(result), 2);
  EXPECT_EQ(std::get<3>(result), "t");
  // They ran concurrently: the shorter sleep finished first.
  EXPECT_EQ(finished, (std::vector<int>{ 2, 1 }));
}

TEST(when_all, over_a_vector) {
  handler_thread h;
  const auto results = co_spawn(h, []() -> task<std::vector<int>> {
                         std::vector<task<int>> children;
                         for (int i = 0; i < 20; ++i) {
                           children.push_back(value_after(i, std::chrono::milliseconds(20 - i)));
                         }
                         co_return co_await when_all(std::move(children));
                       }).get();
  ASSERT_EQ(results.size(), 20U);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(results[static_cast<std::size_t>(i)], i);
  }
  const auto none = co_spawn(h, []() -> task<std::size_t> {
                      auto r = co_await when_all(std::vector<task<int>>{});
                      co_return r.size();
                    }).get();
  EXPECT_EQ(none, 0U);
}

task<int> fail_after(std::string what, std::chrono::milliseconds d) {
  co_await sleep_for(d);
  throw std::runtime_error(what);
}

TEST(when_all, the_rest_finish_and_the_first_exception_in_argument_order_is_rethrown) {
  handler_thread h;
  std::vector<int> finished;
  const std::string caught =
      co_spawn(h, [&]() -> task<std::string> {
        try {
          (void)co_await when_all(fail_after("late", 20ms), value_after(7, 30ms, &finished),
                                  fail_after("early", 1ms));
        } catch (const std::runtime_error& e) {
          co_return e.what();
        }
        co_return "nothing";
      }).get();
  EXPECT_EQ(caught, "late");
  EXPECT_EQ(finished, (std::vector<int>{ 7 }));  // finished before when_all returned
}

TEST(when_all, children_that_hop_run_in_parallel_and_the_parent_resumes_home) {
  handler_thread a;
  handler_thread b;
  handler_thread c;
  struct seen {
    std::thread::id first, second;
    bool home = false;
  };
  const seen s = co_spawn(a, [&]() -> task<seen> {
                   auto on = [](handler_thread& t) -> task<std::thread::id> {
                     co_await t.schedule();
                     co_await sleep_for(2ms);
                     co_return std::this_thread::get_id();
                   };
                   auto [x, y] = co_await when_all(on(b), on(c));
                   co_return seen{ x, y, a.is_current() };
                 }).get();
  EXPECT_EQ(s.first, b.get_id());
  EXPECT_EQ(s.second, c.get_id());
  EXPECT_TRUE(s.home);
}

task<int> sleep_or_cancel(int value, std::chrono::milliseconds d, std::atomic<int>& cancelled) {
  try {
    co_await sleep_for(d);
  } catch (const std::system_error& e) {
    if (e.code() == std::errc::operation_canceled) {
      cancelled.fetch_add(1);
    }
    throw;
  }
  co_return value;
}

TEST(when_any, yields_the_first_finisher_and_stops_and_awaits_the_others) {
  handler_thread h;
  std::atomic<int> cancelled{ 0 };
  const auto start = std::chrono::steady_clock::now();
  const auto [index, value, cancelled_when_done] =
      co_spawn(h, [&]() -> task<std::tuple<std::size_t, int, int>> {
        auto r = co_await when_any(sleep_or_cancel(1, 10s, cancelled),
                                   sleep_or_cancel(2, 5ms, cancelled),
                                   sleep_or_cancel(3, 10s, cancelled));
        co_return std::tuple{ r.index(), std::get<1>(r), cancelled.load() };
      }).get();
  EXPECT_EQ(index, 1U);
  EXPECT_EQ(value, 2);
  EXPECT_EQ(cancelled_when_done, 2);  // both losers stopped, and awaited, before it returned
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST(when_any, a_void_child_contributes_monostate_and_an_exception_is_rethrown) {
  handler_thread h;
  std::atomic<int> cancelled{ 0 };
  const std::size_t index = co_spawn(h, [&]() -> task<std::size_t> {
                              auto r =
                                  co_await when_any(sleep_or_cancel(1, 10s, cancelled), nothing());
                              co_return r.index();
                            }).get();
  EXPECT_EQ(index, 1U);
  EXPECT_THROW(co_spawn(h,
                        [&]() -> task<> {
                          (void)co_await when_any(fail_after("x", 1ms),
                                                  sleep_or_cancel(1, 10s, cancelled));
                        })
                   .get(),
               std::runtime_error);
}

// when_any's stop follows the awaiting task's: stopping the spawn stops every child.
TEST(when_any, a_stop_of_the_parent_reaches_the_children) {
  handler_thread h;
  std::atomic<int> cancelled{ 0 };
  std::stop_source stop;
  auto f = co_spawn(
      h,
      [&]() -> task<> {
        (void)co_await when_any(sleep_or_cancel(1, 10s, cancelled),
                                sleep_or_cancel(2, 10s, cancelled));
      },
      stop.get_token());
  while (h.stats().executed == 0) {
    std::this_thread::yield();
  }
  stop.request_stop();
  try {
    f.get();
    FAIL() << "expected operation_canceled";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), std::errc::operation_canceled);
  }
  EXPECT_EQ(cancelled.load(), 2);
}

}  // namespace
