// async_mutex, async_semaphore, async_event, async_latch.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <future>
#include <latch>
#include <stdexcept>
#include <stop_token>
#include <system_error>
#include <thread>
#include <vector>

#include "cyan/dispatch.h"
#include "support/owned_coroutine.h"
#include "support/race_support.h"
#include "support/stop_support.h"

namespace {

using namespace std::chrono_literals;
using cyan::dispatch::async_event;
using cyan::dispatch::async_latch;
using cyan::dispatch::async_mutex;
using cyan::dispatch::async_semaphore;
using cyan::dispatch::co_spawn;
using cyan::dispatch::handler_thread;
using cyan::dispatch::task;
using cyan::dispatch::thread_pool;
using cyan::dispatch::yield;
using cyan::test::is_canceled;
using cyan::test::race_stop_against_grant;

// ---------------------------------------------------------------------------------------------
// async_mutex

TEST(async_mutex, try_lock_takes_a_free_lock_only) {
  async_mutex m;
  EXPECT_TRUE(m.try_lock());
  EXPECT_FALSE(m.try_lock());
  m.unlock();
  EXPECT_TRUE(m.try_lock());
  m.unlock();
}

TEST(async_mutex, the_guard_unlocks_and_can_unlock_early) {
  handler_thread h;
  async_mutex m;
  co_spawn(h, [&]() -> task<> {
    {
      auto guard = co_await m.scoped_lock();
      EXPECT_TRUE(guard.owns_lock());
      EXPECT_FALSE(m.try_lock());
    }
    EXPECT_TRUE(m.try_lock());
    m.unlock();
    auto guard = co_await m.scoped_lock();
    guard.unlock();
    EXPECT_FALSE(guard.owns_lock());
    EXPECT_TRUE(m.try_lock());
    m.unlock();
  }).get();
}

// One handler thread runs its posts in order: the holder takes the lock and waits for `go`,
// then each locker suspends on the lock in spawn order, then `go` is set.
TEST(async_mutex, hands_the_lock_to_waiters_in_arrival_order) {
  handler_thread h;
  async_mutex m;
  async_event go;
  std::vector<int> order;  // on h only
  auto holder = co_spawn(h, [&]() -> task<> {
    auto guard = co_await m.scoped_lock();
    co_await go.wait();
    order.push_back(0);
  });
  std::vector<cyan::dispatch::future<void>> lockers;
  for (int i = 1; i <= 5; ++i) {
    lockers.push_back(co_spawn(h, [&m, &order, i]() -> task<> {
      auto guard = co_await m.scoped_lock();
      order.push_back(i);
      co_await yield();  // holds the lock across a suspension: no one may overtake
    }));
  }
  co_spawn(h, [&]() -> task<> {
    EXPECT_FALSE(m.try_lock());  // the waiters queued up behind the holder
    go.set();
    co_return;
  }).get();
  holder.get();
  for (auto& f : lockers) {
    f.get();
  }
  EXPECT_EQ(order, (std::vector<int>{ 0, 1, 2, 3, 4, 5 }));
  EXPECT_TRUE(m.try_lock());
}

TEST(async_mutex, a_moved_guard_unlocks_once) {
  handler_thread h;
  async_mutex m;
  co_spawn(h, [&]() -> task<> {
    cyan::dispatch::async_mutex_lock outer;
    EXPECT_FALSE(outer.owns_lock());
    {
      auto guard = co_await m.scoped_lock();
      outer = std::move(guard);
      EXPECT_FALSE(guard.owns_lock());  // NOLINT(bugprone-use-after-move): moved-from is empty
    }
    EXPECT_TRUE(outer.owns_lock());
    EXPECT_FALSE(m.try_lock());  // the moved-from guard did not unlock
    outer.unlock();
    EXPECT_TRUE(m.try_lock());
    m.unlock();
  }).get();
}

// A counter that is not atomic: TSan reports any access outside mutual exclusion, and the
// inside count catches two holders at once.
TEST(async_mutex, excludes_mutually_across_a_pool_and_a_handler_thread) {
  thread_pool pool(2);
  handler_thread h;
  async_mutex m;
  long counter = 0;
  std::atomic<int> inside{ 0 };
  std::atomic<int> overlaps{ 0 };
  constexpr int kTasks = 4;
  constexpr int kRounds = 20'000;
  auto body = [&]() -> task<> {
    for (int i = 0; i < kRounds; ++i) {
      auto guard = co_await m.scoped_lock();
      if (inside.fetch_add(1) != 0) {
        overlaps.fetch_add(1);
      }
      ++counter;
      if (i % 256 == 0) {
        co_await yield();  // hold it across a suspension now and then: the others must wait
      }
      inside.fetch_sub(1);
    }
  };
  std::vector<cyan::dispatch::future<void>> done;
  for (int t = 0; t < kTasks; ++t) {
    done.push_back(co_spawn(pool, body));
  }
  done.push_back(co_spawn(h, body));
  for (auto& f : done) {
    f.get();
  }
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(counter, static_cast<long>(kTasks + 1) * kRounds);
  EXPECT_TRUE(m.try_lock());
}

TEST(async_mutex, a_stop_request_cancels_a_waiter_which_then_holds_nothing) {
  handler_thread h;
  async_mutex m;
  ASSERT_TRUE(m.try_lock());
  std::stop_source stop;
  auto waiter = co_spawn(
      h,
      [&]() -> task<bool> {
        try {
          auto guard = co_await m.scoped_lock();
          co_return false;
        } catch (const std::system_error& e) {
          co_return is_canceled(e) && h.is_current();
        }
      },
      stop.get_token());
  // Queued behind the waiter's start on h: the waiter is suspended on the lock by then.
  co_spawn(h, [&]() -> task<> {
    stop.request_stop();
    co_return;
  }).get();
  EXPECT_TRUE(waiter.get());
  EXPECT_FALSE(m.try_lock());  // still the first holder's
  m.unlock();
  EXPECT_TRUE(m.try_lock());  // the cancelled waiter was not handed it
  m.unlock();
}

TEST(async_mutex, a_stopped_task_does_not_wait_at_all) {
  handler_thread h;
  async_mutex m;
  ASSERT_TRUE(m.try_lock());
  std::stop_source stop;
  stop.request_stop();
  auto waiter = co_spawn(
      h,
      [&]() -> task<bool> {
        try {
          auto guard = co_await m.scoped_lock();
        } catch (const std::system_error& e) {
          co_return is_canceled(e);
        }
        co_return false;
      },
      stop.get_token());
  EXPECT_TRUE(waiter.get());
  m.unlock();
  EXPECT_TRUE(m.try_lock());
  m.unlock();
}

cyan::test::owned_coroutine lock_then_count(async_mutex& m, int& got) {
  auto guard = co_await m.scoped_lock();
  ++got;
}

TEST(async_mutex, destroying_a_waiting_coroutine_withdraws_it) {
  async_mutex m;
  ASSERT_TRUE(m.try_lock());
  int got = 0;
  {
    cyan::test::owned_coroutine first = lock_then_count(m, got);
    cyan::test::owned_coroutine second = lock_then_count(m, got);
    first.destroy();  // withdrawn: the unlock below must skip it
    m.unlock();       // hands the lock to `second`, which runs here (no home) and unlocks
    EXPECT_EQ(got, 1);
    EXPECT_TRUE(second.done());
  }
  EXPECT_TRUE(m.try_lock());
  m.unlock();
}

// The race the rule is about: a waiter's stop request and the holder's unlock at the same
// moment. Either the waiter got the lock (and released it) or it was cancelled holding nothing;
// after every round the lock is free.
TEST(async_mutex, a_cancellation_racing_an_unlock_never_loses_the_lock) {
  handler_thread holder_thread;
  handler_thread waiter_thread;
  async_mutex m;
  int acquired = 0;
  constexpr int kRounds = 10'000;
  for (int round = 0; round < kRounds; ++round) {
    ASSERT_TRUE(m.try_lock());
    const bool got = race_stop_against_grant(
        waiter_thread, holder_thread, round,
        [&m]() -> task<> { auto guard = co_await m.scoped_lock(); },
        [&m]() -> task<> {
          m.unlock();
          co_return;
        });
    acquired += got ? 1 : 0;
    ASSERT_TRUE(got || round % 4 != 2) << "round " << round;  // granted first: it holds it
    ASSERT_TRUE(m.try_lock()) << "round " << round;  // held by no one: not lost to a cancel
    m.unlock();
  }
  EXPECT_LE(acquired, kRounds);
}

// ---------------------------------------------------------------------------------------------
// async_semaphore

TEST(async_semaphore, counts_units) {
  async_semaphore s(2);
  EXPECT_EQ(s.available(), 2U);
  EXPECT_TRUE(s.try_acquire());
  EXPECT_TRUE(s.try_acquire());
  EXPECT_FALSE(s.try_acquire());
  s.release(3);
  EXPECT_EQ(s.available(), 3U);
  EXPECT_THROW(async_semaphore(async_semaphore::max() + 1), std::invalid_argument);
  async_semaphore full(async_semaphore::max());
  EXPECT_THROW(full.release(), std::overflow_error);
  EXPECT_EQ(full.available(), async_semaphore::max());
}

TEST(async_semaphore, release_hands_units_to_waiters_in_arrival_order_then_to_the_count) {
  handler_thread h;
  async_semaphore s(0);
  std::vector<int> order;  // on h only
  std::vector<cyan::dispatch::future<void>> waiters;
  for (int i = 0; i < 4; ++i) {
    waiters.push_back(co_spawn(h, [&s, &order, i]() -> task<> {
      co_await s.acquire();
      order.push_back(i);
    }));
  }
  co_spawn(h, [&]() -> task<> {
    EXPECT_FALSE(s.try_acquire());  // no unit: the four wait
    s.release(3);                   // to the first three, in order
    EXPECT_FALSE(s.try_acquire());  // the fourth still waits, and nothing is free
    co_return;
  }).get();
  for (int i = 0; i < 3; ++i) {
    waiters[static_cast<std::size_t>(i)].get();
  }
  EXPECT_EQ(order, (std::vector<int>{ 0, 1, 2 }));
  s.release(2);  // one to the last waiter, one to the count
  waiters[3].get();
  EXPECT_EQ(order, (std::vector<int>{ 0, 1, 2, 3 }));
  EXPECT_EQ(s.available(), 1U);
}

TEST(async_semaphore, bounds_concurrency_on_a_pool) {
  thread_pool pool(2);
  async_semaphore s(1);
  int inside = 0;  // not atomic: one unit means one holder (TSan checks)
  int most = 0;
  long total = 0;
  std::vector<cyan::dispatch::future<void>> done;
  for (int t = 0; t < 4; ++t) {
    done.push_back(co_spawn(pool, [&]() -> task<> {
      for (int i = 0; i < 5'000; ++i) {
        co_await s.acquire();
        most = std::max(most, ++inside);
        ++total;
        if (i % 128 == 0) {
          co_await yield();
        }
        --inside;
        s.release();
      }
    }));
  }
  for (auto& f : done) {
    f.get();
  }
  EXPECT_EQ(most, 1);
  EXPECT_EQ(total, 20'000);
  EXPECT_EQ(s.available(), 1U);
}

cyan::test::owned_coroutine acquire_then_count(async_semaphore& s, int& got) {
  co_await s.acquire();
  ++got;
}

TEST(async_semaphore, destroying_a_waiting_coroutine_withdraws_it) {
  async_semaphore s(0);
  int got = 0;
  cyan::test::owned_coroutine gone = acquire_then_count(s, got);
  cyan::test::owned_coroutine stays = acquire_then_count(s, got);
  gone.destroy();
  s.release(2);  // one to `stays` (resumed here: no home), one to the count, none to `gone`
  EXPECT_EQ(got, 1);
  EXPECT_TRUE(stays.done());
  EXPECT_EQ(s.available(), 1U);
}

// A release past max() throws and changes nothing, whether or not tasks wait: the units a
// release hands to waiters count, only the rest must fit in the count.
TEST(async_semaphore, a_release_past_max_with_a_waiter_throws_and_changes_nothing) {
  async_semaphore s(0);
  int got = 0;
  cyan::test::owned_coroutine waiter = acquire_then_count(s, got);
  EXPECT_THROW(s.release(SIZE_MAX), std::overflow_error);
  EXPECT_THROW(s.release(async_semaphore::max() + 2), std::overflow_error);
  EXPECT_EQ(got, 0);
  EXPECT_FALSE(waiter.done());
  EXPECT_EQ(s.available(), 0U);
  s.release(async_semaphore::max() + 1);  // one to the waiter, max() to the count
  EXPECT_EQ(got, 1);
  EXPECT_TRUE(waiter.done());
  EXPECT_EQ(s.available(), async_semaphore::max());
  EXPECT_THROW(s.release(), std::overflow_error);
  EXPECT_EQ(s.available(), async_semaphore::max());
}

TEST(async_semaphore, a_cancellation_racing_a_release_never_loses_a_unit) {
  handler_thread releaser;
  handler_thread waiter_thread;
  async_semaphore s(0);
  constexpr int kRounds = 10'000;
  for (int round = 0; round < kRounds; ++round) {
    const bool got = race_stop_against_grant(
        waiter_thread, releaser, round, [&s]() -> task<> { co_await s.acquire(); },
        [&s]() -> task<> {
          s.release();
          co_return;
        });
    ASSERT_TRUE(got || round % 4 != 2) << "round " << round;  // released first: it has it
    // The unit went to the waiter or to the count, never nowhere (and never to both).
    ASSERT_EQ(s.available(), got ? 0U : 1U) << "round " << round;
    if (!got) {
      ASSERT_TRUE(s.try_acquire());
    }
  }
}

// ---------------------------------------------------------------------------------------------
// async_event and async_latch

TEST(async_event, set_wakes_every_waiter_and_reset_makes_later_waits_suspend) {
  handler_thread h;
  thread_pool pool(2);
  async_event e;
  EXPECT_FALSE(e.is_set());
  std::atomic<int> woken{ 0 };
  std::vector<cyan::dispatch::future<void>> waiters;
  for (int i = 0; i < 3; ++i) {
    waiters.push_back(co_spawn(h, [&]() -> task<> {
      co_await e.wait();
      EXPECT_TRUE(h.is_current());  // resumed on its home
      woken.fetch_add(1);
    }));
  }
  waiters.push_back(co_spawn(pool, [&]() -> task<> {
    co_await e.wait();
    EXPECT_TRUE(pool.is_current());
    woken.fetch_add(1);
  }));
  co_spawn(h, [&]() -> task<> {
    EXPECT_EQ(woken.load(), 0);
    co_return;
  }).get();
  e.set();
  for (auto& f : waiters) {
    f.get();
  }
  EXPECT_EQ(woken.load(), 4);
  EXPECT_TRUE(e.is_set());
  co_spawn(h, [&]() -> task<> { co_await e.wait(); }).get();  // set: no wait
  e.reset();
  EXPECT_FALSE(e.is_set());
  auto later = co_spawn(h, [&]() -> task<int> {
    co_await e.wait();
    co_return 7;
  });
  co_spawn(h, [&]() -> task<> {
    EXPECT_FALSE(later.is_ready());
    e.set();
    co_return;
  }).get();
  EXPECT_EQ(later.get(), 7);
}

TEST(async_event, a_stop_request_cancels_a_waiter) {
  handler_thread h;
  async_event e;
  std::stop_source stop;
  auto waiter = co_spawn(
      h,
      [&]() -> task<bool> {
        try {
          co_await e.wait();
        } catch (const std::system_error& error) {
          co_return is_canceled(error) && h.is_current();
        }
        co_return false;
      },
      stop.get_token());
  co_spawn(h, [&]() -> task<> {
    stop.request_stop();
    co_return;
  }).get();
  EXPECT_TRUE(waiter.get());
  e.set();  // no one waits any more
  EXPECT_TRUE(e.is_set());
}

cyan::test::owned_coroutine wait_then_count(async_event& e, int& woken) {
  co_await e.wait();
  ++woken;
}

TEST(async_event, destroying_a_waiting_coroutine_withdraws_it) {
  async_event e;
  int woken = 0;
  cyan::test::owned_coroutine gone = wait_then_count(e, woken);
  cyan::test::owned_coroutine stays = wait_then_count(e, woken);
  gone.destroy();
  e.set();  // wakes `stays` here (no home); `gone` is not touched (ASan would see it)
  EXPECT_EQ(woken, 1);
  EXPECT_TRUE(stays.done());
}

TEST(async_event, a_set_racing_a_stop_request_resumes_the_waiter_once_either_way) {
  handler_thread setter;
  handler_thread waiter_thread;
  int woken = 0;
  int cancelled = 0;
  for (int round = 0; round < 5'000; ++round) {
    async_event e;
    const bool got = race_stop_against_grant(
        waiter_thread, setter, round, [&e]() -> task<> { co_await e.wait(); },
        [&e]() -> task<> {
          e.set();
          co_return;
        });
    ASSERT_TRUE(got || round % 4 != 2) << "round " << round;  // set first: it was woken
    (got ? woken : cancelled) += 1;
  }
  EXPECT_EQ(woken + cancelled, 5'000);
}

TEST(async_latch, opens_when_the_count_reaches_zero) {
  handler_thread h;
  thread_pool pool(2);
  async_latch latch(3);
  EXPECT_FALSE(latch.try_wait());
  auto waiter = co_spawn(h, [&]() -> task<bool> {
    co_await latch.wait();
    co_return h.is_current();
  });
  std::vector<cyan::dispatch::future<void>> counters;
  for (int i = 0; i < 2; ++i) {
    counters.push_back(co_spawn(pool, [&]() -> task<> {
      latch.count_down();
      co_return;
    }));
  }
  for (auto& f : counters) {
    f.get();
  }
  EXPECT_FALSE(latch.try_wait());
  EXPECT_FALSE(waiter.is_ready());
  EXPECT_THROW(latch.count_down(2), std::invalid_argument);  // unchanged: one left
  latch.count_down();
  EXPECT_TRUE(waiter.get());
  EXPECT_TRUE(latch.try_wait());
  co_spawn(h, [&]() -> task<> { co_await latch.wait(); }).get();  // open: no wait
  async_latch open(0);
  EXPECT_TRUE(open.try_wait());
}

// ---------------------------------------------------------------------------------------------
// Wake-ups on a pool: a waiter woken by a task of its own pool becomes that worker's next task
// (see "The next task" in dispatch/src/pool_worker_round.cpp). It must not wait there while the
// worker stays busy, nor let a chain of such wake-ups starve the pool's queue, nor be lost
// when one task wakes several.

// The holder hands the lock to a waiter and then blocks its worker until the waiter has run:
// the pool's other worker must take the waiter over (each round fails after 5 s otherwise).
// 100 rounds, so that in most the waiter is queued on the lock before the unlock.
TEST(pool_wake_ups, a_waiter_woken_by_a_worker_that_stays_busy_runs_on_another_worker) {
  thread_pool pool(2);
  async_mutex m;
  constexpr int kRounds = 100;
  int took_over = 0;
  for (int round = 0; round < kRounds; ++round) {
    std::latch waiting(1);
    std::promise<std::thread::id> waiter_ran;
    auto ran = waiter_ran.get_future();
    cyan::dispatch::future<void> waiter;
    auto holder = co_spawn(pool, [&]() -> task<bool> {
      auto guard = co_await m.scoped_lock();
      waiter = co_spawn(pool, [&]() -> task<> {
        waiting.count_down();
        auto second = co_await m.scoped_lock();
        waiter_ran.set_value(std::this_thread::get_id());
      });
      waiting.wait();
      guard.unlock();  // the waiter, most often queued by now, is granted the lock
      const bool ran_meanwhile = ran.wait_for(5s) == std::future_status::ready;
      co_return ran_meanwhile&& ran.get() != std::this_thread::get_id();
    });
    const bool taken_over = holder.get();
    waiter.get();  // its worker is free again now
    if (!taken_over) {
      break;  // each later round would wait its 5 s too
    }
    ++took_over;
  }
  EXPECT_EQ(took_over, kRounds);
  EXPECT_TRUE(m.try_lock());
}

// On a pool of one worker, two tasks hand a lock back and forth (each hand-over the worker's
// next task); a task posted to the pool from inside the chain must run within one batch of
// the worker's round (64 tasks), not after the chain ends.
TEST(pool_wake_ups, a_chain_of_hand_overs_does_not_starve_the_pools_queue) {
  thread_pool pool(1);
  async_mutex m;
  constexpr long kRounds = 100'000;
  constexpr long kPostAt = 1'000;
  long hand_overs = 0;  // under the lock
  long posted_at = -1;
  long ran_at = -1;
  std::atomic<bool> posted_ran{ false };
  async_event second_started;
  // The first task (it runs first: one worker, posted first) takes the lock and waits holding
  // it until the second has started; the second then queues on the lock: from there on each
  // unlock hands the lock over.
  auto body = [&](bool first) -> task<> {
    for (long i = 0; i < kRounds && !posted_ran.load(); ++i) {
      if (!first && i == 0) {
        second_started.set();
      }
      auto guard = co_await m.scoped_lock();
      if (++hand_overs == kPostAt) {
        posted_at = hand_overs;
        pool.post([&] {
          ran_at = hand_overs;
          posted_ran.store(true);
        });
      }
      if (first && i == 0) {
        co_await second_started.wait();
      }
    }
  };
  auto first = co_spawn(pool, [&]() -> task<> { co_await body(true); });
  auto second = co_spawn(pool, [&]() -> task<> { co_await body(false); });
  first.get();
  second.get();
  ASSERT_TRUE(posted_ran.load()) << "the posted task waited until the chain ended";
  EXPECT_EQ(posted_at, kPostAt);
  EXPECT_LE(ran_at - posted_at, 64) << "hand-overs between the post and its run";
}

// One task on a pool of one worker wakes 5 waiters of an event: the next-task slot holds one,
// each later wake-up moves the one before it to the queue; every waiter runs exactly once.
TEST(pool_wake_ups, one_task_waking_several_waiters_resumes_each_exactly_once) {
  thread_pool pool(1);
  async_event event;
  constexpr int kWaiters = 5;
  std::vector<std::atomic<int>> resumed(kWaiters);
  std::atomic<int> waiting{ 0 };
  std::vector<cyan::dispatch::future<void>> waiters;
  for (int w = 0; w < kWaiters; ++w) {
    waiters.push_back(co_spawn(pool, [&, w]() -> task<> {
      waiting.fetch_add(1);
      co_await event.wait();
      resumed[w].fetch_add(1);
    }));
  }
  // Each waiter counts itself before it suspends on the worker, and the worker runs the next
  // task only after that suspension: once all counted, a task posted behind them finds them
  // all waiting.
  const auto started = std::chrono::steady_clock::now();
  while (waiting.load() < kWaiters && std::chrono::steady_clock::now() - started < 5s) {
    std::this_thread::yield();
  }
  ASSERT_EQ(waiting.load(), kWaiters);
  pool.post_awaitable([&] { event.set(); }).get();
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  for (auto& w : waiters) {
    ASSERT_EQ(w.wait_until(deadline), std::future_status::ready) << "a waiter was lost";
    w.get();
  }
  for (int w = 0; w < kWaiters; ++w) {
    EXPECT_EQ(resumed[w].load(), 1) << "waiter " << w;
  }
}

}  // namespace
