// when_all / when_any.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <latch>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <tuple>
#include <variant>
#include <vector>

#include "cyan/dispatch.h"
#include "support/race_support.h"

namespace {

using namespace std::chrono_literals;
using cyan::dispatch::async_mutex;
using cyan::dispatch::async_semaphore;
using cyan::dispatch::channel;
using cyan::dispatch::co_spawn;
using cyan::dispatch::handler_thread;
using cyan::dispatch::sleep_for;
using cyan::dispatch::task;
using cyan::dispatch::thread_pool;
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

// ---------------------------------------------------------------------------------------------
// when_any over cyan's operations: a select. Exactly one child wins; what a losing operation
// got goes back.

// Keeps a handler thread busy until release(), so that what is handed to its tasks meanwhile
// waits in its queue: grants that all come before any of them resumes.
class held_thread {
 public:
  explicit held_thread(handler_thread& h) {
    h.post([this] { gate_.wait(); });
  }
  void release() { gate_.count_down(); }

 private:
  std::latch gate_{ 1 };
};

// Both channels hold an item: the first child wins at once and the second does not take its
// channel's item.
TEST(when_any, a_select_over_two_ready_receives_takes_one_item_and_leaves_the_other) {
  handler_thread h;
  for (const std::size_t capacity : { std::size_t{ 4 }, channel<int>::unbounded }) {
    channel<int> a(capacity);
    channel<int> b(capacity);
    ASSERT_TRUE(a.try_send(1));
    ASSERT_TRUE(b.try_send(2));
    const auto r = co_spawn(h, [&]() -> task<std::variant<std::optional<int>, std::optional<int>>> {
                     co_return co_await when_any(a.receive(), b.receive());
                   }).get();
    EXPECT_EQ(r.index(), 0U);
    EXPECT_EQ(std::get<0>(r), std::optional<int>(1));
    EXPECT_EQ(a.try_receive(), std::nullopt);
    EXPECT_EQ(b.try_receive(), std::optional<int>(2));  // 2 sent, 1 received, 1 left
  }
}

// Both receives wait and are handed an item before either resumes: the first to resume wins,
// the other gives its item back to the front of its channel, ahead of what came after it.
TEST(when_any, a_receive_that_lost_after_it_was_handed_an_item_puts_it_back_first) {
  handler_thread h;
  channel<int> a(4);
  channel<int> b(4);
  auto selected = co_spawn(h, [&]() -> task<std::variant<std::optional<int>, std::optional<int>>> {
    co_return co_await when_any(a.receive(), b.receive());
  });
  cyan::test::settle(h);  // both children wait
  held_thread held(h);
  ASSERT_TRUE(a.try_send(1));   // handed to the first child
  ASSERT_TRUE(b.try_send(10));  // handed to the second
  ASSERT_TRUE(b.try_send(11));  // buffered behind it
  held.release();
  const auto r = selected.get();
  EXPECT_EQ(r.index(), 0U);
  EXPECT_EQ(std::get<0>(r), std::optional<int>(1));
  EXPECT_EQ(b.try_receive(), std::optional<int>(10));
  EXPECT_EQ(b.try_receive(), std::optional<int>(11));
  EXPECT_EQ(b.try_receive(), std::nullopt);
  EXPECT_EQ(a.try_receive(), std::nullopt);
}

// Receives the rest of `ch` until it is closed and drained.
task<> drain(channel<int>& ch, std::vector<int>& got) {
  while (std::optional<int> item = co_await ch.receive()) {
    got.push_back(*item);
  }
}

// A Go-style select loop while two producers send and then close: every item arrives exactly
// once, each channel's in its order, and nothing is left. On a handler thread and on a pool
// (where the two children may complete on two workers at once). The loop ends when a channel
// ends (the rest of the other is drained), so a lost item fails the test instead of hanging it.
template <typename Executor>
void select_loop_receives_every_item(Executor& consumer_home, thread_pool& producers) {
  constexpr int kItems = 3'000;
  channel<int> a(8);
  channel<int> b(8);
  auto produce = [](channel<int>& ch) -> task<> {
    for (int i = 0; i < kItems; ++i) {
      co_await ch.send(i);
    }
    ch.close();
  };
  auto sent_a = co_spawn(producers, [&] { return produce(a); });
  auto sent_b = co_spawn(producers, [&] { return produce(b); });
  const auto [from_a, from_b] =
      co_spawn(consumer_home, [&]() -> task<std::pair<std::vector<int>, std::vector<int>>> {
        std::vector<int> got_a;
        std::vector<int> got_b;
        for (;;) {  // bounded: both channels end
          auto r = co_await when_any(a.receive(), b.receive());
          const std::optional<int> item = r.index() == 0 ? std::get<0>(r) : std::get<1>(r);
          if (!item) {
            break;
          }
          (r.index() == 0 ? got_a : got_b).push_back(*item);
        }
        co_await drain(a, got_a);
        co_await drain(b, got_b);
        co_return std::pair{ std::move(got_a), std::move(got_b) };
      }).get();
  sent_a.get();
  sent_b.get();
  std::vector<int> expected(kItems);
  for (int i = 0; i < kItems; ++i) {
    expected[static_cast<std::size_t>(i)] = i;
  }
  EXPECT_EQ(from_a.size(), expected.size());  // 3,000 of each, none lost
  EXPECT_EQ(from_b.size(), expected.size());
  EXPECT_TRUE(from_a == expected) << "a's items in their order, each once";
  EXPECT_TRUE(from_b == expected) << "b's items in their order, each once";
  EXPECT_EQ(a.try_receive(), std::nullopt);
  EXPECT_EQ(b.try_receive(), std::nullopt);
}

TEST(when_any, a_select_loop_on_a_handler_thread_receives_every_item_once_in_order) {
  handler_thread h;
  thread_pool producers(2);
  for (int run = 0; run < 5; ++run) {
    select_loop_receives_every_item(h, producers);
  }
}

TEST(when_any, a_select_loop_on_a_pool_receives_every_item_once_in_order) {
  thread_pool consumers(2);
  thread_pool producers(2);
  for (int run = 0; run < 5; ++run) {
    select_loop_receives_every_item(consumers, producers);
  }
}

// On a semaphore of 2 the first acquire wins at once, and the second does not take a unit.
TEST(when_any, a_select_over_two_acquires_holds_one_unit) {
  handler_thread h;
  async_semaphore s(2);
  const std::size_t index = co_spawn(h, [&]() -> task<std::size_t> {
                              co_return (co_await when_any(s.acquire(), s.acquire())).index();
                            }).get();
  EXPECT_EQ(index, 0U);
  EXPECT_EQ(s.available(), 1U);  // the winner holds one
}

// Both acquires wait and are handed a unit before either resumes: the loser gives its unit back.
TEST(when_any, an_acquire_that_lost_after_it_was_handed_a_unit_releases_it) {
  handler_thread h;
  async_semaphore s(0);
  auto selected = co_spawn(h, [&]() -> task<std::size_t> {
    co_return (co_await when_any(s.acquire(), s.acquire())).index();
  });
  cyan::test::settle(h);
  held_thread held(h);
  s.release(2);  // one unit to each child
  held.release();
  EXPECT_EQ(selected.get(), 0U);
  EXPECT_EQ(s.available(), 1U);
}

// Acquires racing on a pool: after each select exactly one unit is held, whichever way the
// children's grants and the loser's stop interleave.
TEST(when_any, selects_over_acquires_racing_releases_never_lose_a_unit) {
  thread_pool pool(2);
  handler_thread releaser;
  async_semaphore s(0);
  constexpr int kRounds = 2'000;
  for (int round = 0; round < kRounds; ++round) {
    auto selected = co_spawn(pool, [&]() -> task<std::size_t> {
      co_return (co_await when_any(s.acquire(), s.acquire())).index();
    });
    co_spawn(releaser, [&s]() -> task<> {
      s.release(2);
      co_return;
    }).get();
    (void)selected.get();
    ASSERT_EQ(s.available(), 1U) << "round " << round;
    ASSERT_TRUE(s.try_acquire());
  }
}

// Locks: the loser never keeps a lock, whether it lost before it started or after it got one.
TEST(when_any, a_select_over_two_locks_holds_only_the_winners) {
  handler_thread h;
  async_mutex m1;
  async_mutex m2;
  const bool second_free = co_spawn(h, [&]() -> task<bool> {
                             auto r = co_await when_any(m1.scoped_lock(), m2.scoped_lock());
                             EXPECT_EQ(r.index(), 0U);
                             EXPECT_TRUE(std::get<0>(r).owns_lock());
                             co_return m2.try_lock();
                           }).get();
  EXPECT_TRUE(second_free);
  m2.unlock();
  EXPECT_TRUE(m1.try_lock());  // the winner's guard unlocked when it went
  m1.unlock();
  ASSERT_TRUE(m1.try_lock());
  ASSERT_TRUE(m2.try_lock());
  auto selected = co_spawn(h, [&]() -> task<std::size_t> {
    co_return (co_await when_any(m1.scoped_lock(), m2.scoped_lock())).index();
  });
  cyan::test::settle(h);
  held_thread held(h);
  m1.unlock();  // handed to the first child
  m2.unlock();  // handed to the second
  held.release();
  EXPECT_EQ(selected.get(), 0U);
  EXPECT_TRUE(m1.try_lock());
  EXPECT_TRUE(m2.try_lock());  // the loser passed it on
}

// Sends: when both have room only the first sends; a send that waited and lost while its room
// came stays sent (a send cannot be taken back) and ends cancelled.
TEST(when_any, a_select_over_two_sends_sends_only_the_winners_item_when_both_have_room) {
  handler_thread h;
  channel<int> a(1);
  channel<int> b(1);
  const std::size_t index = co_spawn(h, [&]() -> task<std::size_t> {
                              co_return (co_await when_any(a.send(1), b.send(2))).index();
                            }).get();
  EXPECT_EQ(index, 0U);
  EXPECT_EQ(a.try_receive(), std::optional<int>(1));
  EXPECT_EQ(b.try_receive(), std::nullopt);
}

// An event's or a latch's wait takes nothing, so it can be a child too: a set event wins at
// once and the receive after it does not start.
TEST(when_any, an_event_wait_or_a_latch_wait_is_a_child_too) {
  handler_thread h;
  cyan::dispatch::async_event ready(true);
  cyan::dispatch::async_latch open(0);
  channel<int> ch(1);
  ASSERT_TRUE(ch.try_send(1));
  const auto [first, second] = co_spawn(h, [&]() -> task<std::pair<std::size_t, std::size_t>> {
                                 const auto r1 = co_await when_any(ready.wait(), ch.receive());
                                 const auto r2 = co_await when_any(ch.receive(), open.wait());
                                 co_return std::pair{ r1.index(), r2.index() };
                               }).get();
  EXPECT_EQ(first, 0U);
  EXPECT_EQ(second, 0U);  // the item went to the second select's receive, the latch not waited
  EXPECT_EQ(ch.try_receive(), std::nullopt);
}

}  // namespace
