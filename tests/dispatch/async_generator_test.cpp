// async_generator<T>.

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <system_error>
#include <vector>

#include "../support/stop_support.h"
#include "cyan/dispatch.h"

namespace {

using namespace std::chrono_literals;
using cyan::dispatch::async_generator;
using cyan::dispatch::co_spawn;
using cyan::dispatch::handler_thread;
using cyan::dispatch::sleep_for;
using cyan::dispatch::task;
using cyan::dispatch::yield;

async_generator<int> counting(int n, int& started) {
  ++started;
  for (int i = 0; i < n; ++i) {
    co_yield i;
  }
}

TEST(async_generator, is_lazy_and_yields_in_order_then_nullopt) {
  handler_thread h;
  int started = 0;
  const auto got = co_spawn(h, [&]() -> task<std::vector<int>> {
                     async_generator<int> gen = counting(5, started);
                     EXPECT_EQ(started, 0);  // nothing ran before the first next()
                     std::vector<int> values;
                     while (auto v = co_await gen.next()) {
                       values.push_back(*v);
                     }
                     EXPECT_FALSE((co_await gen.next()).has_value());  // stays ended
                     co_return values;
                   }).get();
  EXPECT_EQ(started, 1);
  EXPECT_EQ(got, (std::vector<int>{ 0, 1, 2, 3, 4 }));
}

task<int> twice(int v) {
  co_return v * 2;
}

// Counts live frames' locals: the generator's destruction half way must destroy its locals.
struct live_counter {
  int& live;
  explicit live_counter(int& n) : live(n) { ++live; }
  ~live_counter() { --live; }
  live_counter(const live_counter&) = delete;
  live_counter& operator=(const live_counter&) = delete;
};

async_generator<long> doubled_with_awaits(long n, int& live) {
  live_counter guard(live);
  for (long i = 0; i < n; ++i) {
    const long d = co_await twice(static_cast<int>(i % 1000));
    if (i % 4096 == 0) {
      co_await yield();  // a real suspension now and then
    }
    co_yield d;
  }
}

// The reproduction: a generator of 1M values with co_await inside, destroyed half way
// (ASan checks that nothing leaks; the locals' count checks that they were destroyed).
TEST(async_generator, a_million_values_with_awaits_then_destroyed_half_way) {
  handler_thread h;
  int live = 0;
  const long sum = co_spawn(h, [&]() -> task<long> {
                     long total = 0;
                     {
                       async_generator<long> gen = doubled_with_awaits(1'000'000, live);
                       for (long i = 0; i < 500'000; ++i) {
                         auto v = co_await gen.next();
                         EXPECT_TRUE(h.is_current());
                         if (!v || *v != (i % 1000) * 2) {
                           ADD_FAILURE() << "value " << i;
                           co_return -1;
                         }
                         total += *v;
                       }
                       EXPECT_EQ(live, 1);
                     }
                     EXPECT_EQ(live, 0);  // destroyed at its co_yield: locals gone
                     co_return total;
                   }).get();
  long expected = 0;
  for (long i = 0; i < 500'000; ++i) {
    expected += (i % 1000) * 2;
  }
  EXPECT_EQ(sum, expected);
  EXPECT_EQ(live, 0);
}

async_generator<std::string> fails_after(int n) {
  for (int i = 0; i < n; ++i) {
    co_yield std::to_string(i);
  }
  throw std::runtime_error("generator failed");
}

TEST(async_generator, its_exception_is_rethrown_by_next_then_it_has_ended) {
  handler_thread h;
  const auto outcome = co_spawn(h, []() -> task<std::string> {
                         async_generator<std::string> gen = fails_after(2);
                         std::string seen;
                         seen += *co_await gen.next();
                         seen += *co_await gen.next();
                         try {
                           (void)co_await gen.next();
                           seen += "no throw";
                         } catch (const std::runtime_error& e) {
                           seen += e.what();
                         }
                         seen += (co_await gen.next()).has_value() ? "more" : "|end";
                         co_return seen;
                       }).get();
  EXPECT_EQ(outcome, "01generator failed|end");
}

async_generator<int> sleepy(int n) {
  for (int i = 0; i < n; ++i) {
    co_await sleep_for(1ms);
    co_yield i;
  }
}

TEST(async_generator, suspends_inside_and_resumes_its_consumer_on_its_home) {
  handler_thread h;
  const auto got = co_spawn(h, [&]() -> task<std::vector<int>> {
                     std::vector<int> values;
                     async_generator<int> gen = sleepy(5);
                     while (auto v = co_await gen.next()) {
                       EXPECT_TRUE(h.is_current());
                       values.push_back(*v);
                     }
                     co_return values;
                   }).get();
  EXPECT_EQ(got, (std::vector<int>{ 0, 1, 2, 3, 4 }));
}

async_generator<int> forever() {
  for (int i = 0;; ++i) {
    co_await sleep_for(1h);
    co_yield i;
  }
}

TEST(async_generator, inherits_its_consumers_stop_token) {
  handler_thread h;
  std::stop_source stop;
  auto consumer = co_spawn(
      h,
      [&]() -> task<bool> {
        async_generator<int> gen = forever();
        try {
          (void)co_await gen.next();
        } catch (const std::system_error& e) {
          co_return cyan::test::is_canceled(e) && h.is_current();
        }
        co_return false;
      },
      stop.get_token());
  co_spawn(h,
           [&]() -> task<> {  // behind the consumer's start: it waits in the sleep
             stop.request_stop();
             co_return;
           })
      .get();
  EXPECT_TRUE(consumer.get());
}

TEST(async_generator, next_on_an_empty_generator_throws) {
  async_generator<int> empty;
  EXPECT_THROW((void)empty.next(), std::logic_error);
}

}  // namespace
