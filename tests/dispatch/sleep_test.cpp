// sleep_for / sleep_until: on the thread's loop, never early, many at once; a stop request ends
// a sleep; a sleep whose thread finishes first ends with it, also when a stop request races the
// finish.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <stop_token>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "cyan/dispatch.h"
#include "event/loop_support.h"
#include "support/stop_support.h"
#include "support/stress_env.h"
#include "support/sync_wait.h"

namespace {

using namespace std::chrono_literals;
using cyan::dispatch::async_scope;
using cyan::dispatch::co_spawn;
using cyan::dispatch::future;
using cyan::dispatch::handler;
using cyan::dispatch::handler_thread;
using cyan::dispatch::sleep_for;
using cyan::dispatch::sleep_until;
using cyan::dispatch::task;
using cyan::dispatch::thread_pool;
using cyan::test::is_canceled;
using cyan::test::wait_started;
using clock_type = std::chrono::steady_clock;
using outcome = cyan::test::stop_outcome;

TEST(sleep, sleep_for_is_never_early_and_resumes_on_its_thread) {
  handler_thread h;
  for (auto d : { 0us, 100us, 1000us, 2500us, 10000us }) {
    const auto measured = co_spawn(h, [&h, d]() -> task<clock_type::duration> {
                            const auto start = clock_type::now();
                            co_await sleep_for(d);
                            EXPECT_TRUE(h.is_current());
                            co_return clock_type::now() - start;
                          }).get();
    EXPECT_GE(measured, d) << "slept " << d.count() << " us";
  }
}

// Resumed by the timer wheel, a task runs inside one of the loop's rounds; after 5 ms of work
// the round's time is that old. Sleeps started then still last their full duration from the
// call, by steady_clock.
TEST(sleep, a_sleep_started_late_in_a_loop_round_is_never_early) {
  handler_thread h;
  struct slept {
    bool in_round = true;
    std::vector<clock_type::duration> for_10ms;
    std::vector<clock_type::duration> until_10ms;
  };
  const slept result = co_spawn(h, []() -> task<slept> {
                         slept s;
                         for (int i = 0; i < 5; ++i) {
                           co_await sleep_for(1ms);
                           s.in_round =
                               s.in_round && cyan::this_thread::get_event_loop()->in_round();
                           cyan::test::busy_for(5ms);
                           auto start = clock_type::now();
                           co_await sleep_for(10ms);
                           s.for_10ms.push_back(clock_type::now() - start);
                           cyan::test::busy_for(5ms);
                           start = clock_type::now();
                           co_await sleep_until(start + 10ms);
                           s.until_10ms.push_back(clock_type::now() - start);
                         }
                         co_return s;
                       }).get();
  EXPECT_TRUE(result.in_round) << "the scenario needs the task resumed inside a loop round";
  ASSERT_EQ(result.for_10ms.size(), 5u);
  ASSERT_EQ(result.until_10ms.size(), 5u);
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_GE(result.for_10ms[i], 10ms) << "sleep_for " << i;
    EXPECT_GE(result.until_10ms[i], 10ms) << "sleep_until " << i;
  }
}

TEST(sleep, sleep_until_a_time_in_the_past_does_not_suspend) {
  handler_thread h;
  const bool same = co_spawn(h, []() -> task<bool> {
                      const auto id = std::this_thread::get_id();
                      co_await sleep_until(clock_type::now() - 1s);
                      co_await sleep_for(-5ms);
                      co_return id == std::this_thread::get_id();
                    }).get();
  EXPECT_TRUE(same);
}

TEST(sleep, a_sleep_on_a_pool_worker_resumes_on_that_pool) {
  thread_pool pool(2);
  const auto result = co_spawn(pool, [&pool]() -> task<bool> {
                        const auto start = clock_type::now();
                        co_await sleep_for(3ms);
                        co_return pool.is_current() && clock_type::now() - start >= 3ms;
                      }).get();
  EXPECT_TRUE(result);
}

TEST(sleep, off_a_loop_thread_it_waits_on_the_global_pool) {
  const auto start = clock_type::now();
  cyan::test::sync_wait([]() -> task<> { co_await sleep_for(3ms); }());
  EXPECT_GE(clock_type::now() - start, 3ms);
}

// 100,000 tasks sleeping at once on one handler thread (the timer wheel): every one wakes, on
// that thread, none early.
TEST(sleep, many_concurrent_sleepers_on_one_handler_thread) {
  const std::size_t sleepers = cyan::test::env_or("CYAN_STRESS_SLEEPERS", 100'000);
  handler_thread h;
  std::atomic<std::uint64_t> early{ 0 };
  std::atomic<std::uint64_t> woke{ 0 };
  std::atomic<std::uint64_t> elsewhere{ 0 };
  std::vector<future<void>> done;
  done.reserve(sleepers);
  for (std::size_t i = 0; i < sleepers; ++i) {
    const int delay_ms = 1 + static_cast<int>(i % 50);
    done.push_back(co_spawn(h, [&, delay_ms]() -> task<> {
      const auto due = clock_type::now() + std::chrono::milliseconds(delay_ms);
      co_await sleep_until(due);
      if (clock_type::now() < due) {
        early.fetch_add(1, std::memory_order_relaxed);
      }
      if (!h.is_current()) {
        elsewhere.fetch_add(1, std::memory_order_relaxed);
      }
      woke.fetch_add(1, std::memory_order_relaxed);
    }));
  }
  for (auto& f : done) {
    f.get();
  }
  EXPECT_EQ(woke.load(), sleepers);
  EXPECT_EQ(early.load(), 0U);
  EXPECT_EQ(elsewhere.load(), 0U);
}

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

// Counts the frames that hold one as they are destroyed.
struct counting_sentinel {
  std::atomic<int>* count;
  ~counting_sentinel() { count->fetch_add(1); }
};

// Sets `flag` when the frame that holds it is destroyed.
struct frame_sentinel {
  std::atomic<bool>* flag;
  ~frame_sentinel() { flag->store(true); }
};

// Calls `at_finalize` in thread B's on_finalize(): after B's inbox refuses posts, before its
// teardown destroys its timer wheel.
class finalize_hook final : public handler {
 public:
  std::function<void()> at_finalize;

 private:
  void on_finalize() override {
    if (at_finalize) {
      at_finalize();
    }
  }
};

// A task spawned in a scope on thread A hops to thread B and sleeps there for an hour. B is
// stopped and joined first: A's stop(drain) does not wait for B.
class hopped_sleeper {
 public:
  hopped_sleeper() {
    scope_.spawn(a_, [this]() -> task<> {
      const frame_sentinel sentinel{ &destroyed };
      co_await b_->schedule();
      waiting = true;
      co_await sleep_for(1h);
      resumed = true;
    });
    // The task sleeps once a job posted to B after `waiting` was set has run there.
    while (!waiting.load()) {
      std::this_thread::yield();
    }
    b_->post_awaitable([] {}).get();
  }

  handler_thread& a() { return a_; }
  handler_thread& b() { return *b_; }
  finalize_hook& b_handler() { return hook_; }
  async_scope& scope() { return scope_; }

  std::atomic<bool> waiting{ false };
  std::atomic<bool> resumed{ false };
  std::atomic<bool> destroyed{ false };

 private:
  finalize_hook hook_;
  handler_thread a_;
  std::optional<handler_thread> b_{ std::in_place, hook_ };
  async_scope scope_;
};

TEST(sleep, a_sleep_whose_thread_finishes_first_ends_and_its_task_is_destroyed) {
  hopped_sleeper program;
  program.b().stop();
  program.b().join();
  EXPECT_TRUE(program.destroyed.load()) << "the task outlived the thread it slept on";
  EXPECT_EQ(program.scope().size(), 0u);
  program.a().stop();
  program.a().join();  // drains: nothing of the task is left to wait for
  EXPECT_FALSE(program.resumed.load());
}

// The stop request comes from another thread while B finishes, after B refuses posts (its
// cancel job is refused) and before B's teardown destroys the wheel that holds the sleep's
// entry: the teardown ends the sleep, once, on B (the ASan lane checks that nothing touches
// the freed frame).
TEST(sleep, a_stop_request_refused_by_the_finishing_thread_leaves_the_end_to_its_teardown) {
  hopped_sleeper program;
  program.b_handler().at_finalize = [&program] {
    std::thread stopper([&program] { program.scope().request_stop(); });
    stopper.join();
    EXPECT_FALSE(program.destroyed.load()) << "the task was destroyed off its thread";
  };
  program.b().stop();
  program.b().join();
  EXPECT_TRUE(program.destroyed.load());
  program.scope().join_blocking();
  EXPECT_EQ(program.scope().size(), 0u);
  EXPECT_FALSE(program.resumed.load());
}

// A stop request from another thread races the thread's finish: whichever comes first ends the
// sleep, exactly once.
TEST(sleep, a_stop_request_racing_the_finish_ends_the_sleep_once) {
  for (int round = 0; round < 20; ++round) {
    hopped_sleeper program;
    std::thread stopper([&] { program.scope().request_stop(); });
    program.b().stop();
    program.b().join();
    stopper.join();
    program.scope().join_blocking();
    EXPECT_TRUE(program.destroyed.load()) << "round " << round;
    EXPECT_FALSE(program.resumed.load()) << "round " << round;
  }
}

// Many tasks hop from A to B and sleep there, each with a stop source of its own. Half of the
// stops are requested by a thread racing B's finish, the other half by a thread B's
// on_finalize() starts and joins (after B refuses posts, before its teardown destroys the
// wheel: their cancel jobs are refused). Each sleep ends exactly once: by its stop (the task
// resumes on B and reports operation_canceled) or by B's teardown (the task is destroyed and its
// spawn reports task_cancelled); none resumes as if its sleep had passed, every frame is
// destroyed (the ASan and TSan lanes check that nothing touches a freed one).
TEST(sleep, stop_requests_racing_the_finish_end_every_sleep_once) {
  constexpr int kSleepers = 16;
  for (int round = 0; round < 20; ++round) {
    finalize_hook hook;
    handler_thread a;
    std::optional<handler_thread> b(std::in_place, hook);
    std::vector<std::stop_source> stops(kSleepers);
    std::vector<future<void>> ends;
    std::atomic<int> sleeping{ 0 };
    std::atomic<int> destroyed{ 0 };
    std::atomic<int> slept_through{ 0 };
    for (int i = 0; i < kSleepers; ++i) {
      ends.push_back(co_spawn(
          a,
          [&, target = &*b]() -> task<> {
            const counting_sentinel sentinel{ &destroyed };
            co_await target->schedule();
            sleeping.fetch_add(1);
            co_await sleep_for(1h);
            slept_through.fetch_add(1);
          },
          stops[static_cast<std::size_t>(i)].get_token()));
    }
    // Every task sleeps once a job posted to B after the last one counted itself has run there.
    const auto limit = clock_type::now() + 10s;
    while (sleeping.load() < kSleepers && clock_type::now() < limit) {
      std::this_thread::yield();
    }
    ASSERT_EQ(sleeping.load(), kSleepers) << "round " << round;
    b->post_awaitable([] {}).get();
    auto request_stops = [&stops](int first) {
      for (int i = first; i < kSleepers; i += 2) {
        stops[static_cast<std::size_t>(i)].request_stop();
      }
    };
    hook.at_finalize = [&request_stops] { std::thread(request_stops, 1).join(); };
    std::thread even(request_stops, 0);
    b->stop();
    b->join();
    even.join();
    int canceled = 0;
    int destroyed_by_finish = 0;
    for (future<void>& end : ends) {
      try {
        end.get();
      } catch (const std::system_error& e) {
        canceled += is_canceled(e) ? 1 : 0;
      } catch (const cyan::dispatch::task_cancelled&) {
        ++destroyed_by_finish;
      }
    }
    EXPECT_EQ(canceled + destroyed_by_finish, kSleepers) << "round " << round;
    EXPECT_EQ(destroyed.load(), kSleepers) << "round " << round;
    EXPECT_EQ(slept_through.load(), 0) << "round " << round;
  }
}

}  // namespace
