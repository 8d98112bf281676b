// channel<T>.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <latch>
#include <memory>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "cyan/dispatch.h"
#include "support/owned_coroutine.h"
#include "support/race_support.h"
#include "support/stop_support.h"

namespace {

using namespace std::chrono_literals;
using cyan::dispatch::channel;
using cyan::dispatch::channel_closed;
using cyan::dispatch::co_spawn;
using cyan::dispatch::handler_thread;
using cyan::dispatch::task;
using cyan::dispatch::thread_pool;
using cyan::test::is_canceled;
using cyan::test::race_stop_against_grant;

TEST(channel, try_send_and_try_receive_respect_the_capacity_and_the_order) {
  channel<std::unique_ptr<int>> ch(2);
  EXPECT_EQ(ch.capacity(), 2U);
  EXPECT_TRUE(ch.try_send(std::make_unique<int>(1)));
  EXPECT_TRUE(ch.try_send(std::make_unique<int>(2)));
  auto third = std::make_unique<int>(3);
  EXPECT_FALSE(ch.try_send(std::move(third)));
  ASSERT_NE(third, nullptr);  // refused: left intact
  EXPECT_EQ(*third, 3);
  EXPECT_EQ(**ch.try_receive(), 1);
  EXPECT_TRUE(ch.try_send(std::move(third)));
  EXPECT_EQ(**ch.try_receive(), 2);
  EXPECT_EQ(**ch.try_receive(), 3);
  EXPECT_FALSE(ch.try_receive().has_value());
}

TEST(channel, a_capacity_of_zero_is_refused) {
  EXPECT_THROW(channel<int>(0), std::invalid_argument);
}

TEST(channel, the_ring_wraps_many_laps) {
  channel<std::uint64_t> ch(3);
  std::uint64_t next_in = 0;
  std::uint64_t next_out = 0;
  for (int round = 0; round < 10'000; ++round) {
    while (ch.try_send(std::uint64_t{ next_in })) {
      ++next_in;
    }
    for (int k = 0; k < 1 + round % 3; ++k) {
      auto item = ch.try_receive();
      ASSERT_TRUE(item.has_value());
      ASSERT_EQ(*item, next_out++);
    }
  }
  EXPECT_LE(next_in - next_out, 3U);
  EXPECT_GT(next_in, 20'000U);
}

TEST(channel, an_unbounded_channel_never_makes_a_sender_wait) {
  handler_thread h;
  channel<std::string> ch(channel<std::string>::unbounded);
  EXPECT_EQ(ch.capacity(), channel<std::string>::unbounded);
  co_spawn(h, [&]() -> task<> {
    for (int i = 0; i < 100'000; ++i) {
      co_await ch.send(std::to_string(i));
    }
  }).get();
  for (int i = 0; i < 100'000; ++i) {
    auto item = ch.try_receive();
    ASSERT_TRUE(item.has_value());
    ASSERT_EQ(*item, std::to_string(i));
  }
  EXPECT_FALSE(ch.try_receive().has_value());
  ch.close();
  EXPECT_FALSE(ch.try_send("late"));
  auto drained =
      co_spawn(h, [&]() -> task<std::optional<std::string>> { co_return co_await ch.receive(); });
  EXPECT_FALSE(drained.get().has_value());
}

TEST(channel, a_receiver_waits_for_a_sender_on_another_thread_and_resumes_on_its_home) {
  handler_thread receiver_thread;
  handler_thread sender_thread;
  channel<int> ch(1);
  auto receiver = co_spawn(receiver_thread, [&]() -> task<std::vector<int>> {
    std::vector<int> got;
    while (auto item = co_await ch.receive()) {
      EXPECT_TRUE(receiver_thread.is_current());
      got.push_back(*item);
    }
    co_return got;
  });
  co_spawn(sender_thread, [&]() -> task<> {
    for (int i = 0; i < 1'000; ++i) {
      co_await ch.send(i);
      EXPECT_TRUE(sender_thread.is_current());
    }
    ch.close();
  }).get();
  const std::vector<int> got = receiver.get();
  ASSERT_EQ(got.size(), 1'000U);
  for (int i = 0; i < 1'000; ++i) {
    ASSERT_EQ(got[static_cast<std::size_t>(i)], i);
  }
}

// The reproduction: 4 producers x 250,000 items through a bounded channel to 3
// consumers on mixed executors. Every item arrives exactly once, and each consumer sees each
// producer's items in increasing order.
TEST(channel, every_item_arrives_exactly_once_in_each_producers_order) {
  constexpr int kProducers = 4;
  constexpr std::uint32_t kItems = 250'000;
  thread_pool pool(2);
  handler_thread producer_thread;
  handler_thread consumer_thread;
  channel<std::uint64_t> ch(64);

  auto produce = [&ch](std::uint64_t producer) -> task<> {
    for (std::uint32_t i = 0; i < kItems; ++i) {
      co_await ch.send((producer << 32) | i);
    }
  };
  struct tally {
    std::vector<std::uint32_t> counts;  // per item
    bool in_order = true;
    tally() : counts(static_cast<std::size_t>(kProducers) * kItems) {}
  };
  auto record = [](tally& t, std::int64_t(&last)[kProducers], std::uint64_t item) {
    const auto producer = static_cast<std::size_t>(item >> 32);
    const auto index = static_cast<std::uint32_t>(item);
    if (static_cast<std::int64_t>(index) <= last[producer]) {
      t.in_order = false;
    }
    last[producer] = index;
    ++t.counts[producer * kItems + index];
  };
  auto consume = [&ch, &record](tally& t) -> task<> {
    std::int64_t last[kProducers] = { -1, -1, -1, -1 };
    while (auto item = co_await ch.receive()) {
      record(t, last, *item);
    }
  };

  tally on_pool;
  tally on_handler;
  tally on_thread;
  auto pool_consumer = co_spawn(pool, [&]() -> task<> { co_await consume(on_pool); });
  auto handler_consumer =
      co_spawn(consumer_thread, [&]() -> task<> { co_await consume(on_handler); });
  // A plain thread: try_receive until the channel is closed and drained.
  std::thread plain_consumer([&] {
    std::int64_t last[kProducers] = { -1, -1, -1, -1 };
    for (;;) {
      const bool closed = ch.is_closed();
      if (auto item = ch.try_receive()) {
        record(on_thread, last, *item);
      } else if (closed) {
        return;  // closed before it found nothing: drained
      } else {
        std::this_thread::yield();
      }
    }
  });

  std::vector<cyan::dispatch::future<void>> producers;
  producers.push_back(co_spawn(pool, [&]() -> task<> { co_await produce(0); }));
  producers.push_back(co_spawn(pool, [&]() -> task<> { co_await produce(1); }));
  producers.push_back(co_spawn(producer_thread, [&]() -> task<> { co_await produce(2); }));
  // The fourth on a plain thread with try_send.
  std::thread plain_producer([&] {
    for (std::uint32_t i = 0; i < kItems; ++i) {
      std::uint64_t item = (std::uint64_t{ 3 } << 32) | i;
      while (!ch.try_send(std::move(item))) {
        std::this_thread::yield();
      }
    }
  });
  for (auto& f : producers) {
    f.get();
  }
  plain_producer.join();
  ch.close();
  pool_consumer.get();
  handler_consumer.get();
  plain_consumer.join();

  EXPECT_TRUE(on_pool.in_order);
  EXPECT_TRUE(on_handler.in_order);
  EXPECT_TRUE(on_thread.in_order);
  std::size_t missing = 0;
  std::size_t duplicated = 0;
  std::size_t received = 0;
  for (std::size_t i = 0; i < on_pool.counts.size(); ++i) {
    const std::uint32_t n = on_pool.counts[i] + on_handler.counts[i] + on_thread.counts[i];
    missing += n == 0 ? 1 : 0;
    duplicated += n > 1 ? 1 : 0;
    received += n;
  }
  EXPECT_EQ(missing, 0U);
  EXPECT_EQ(duplicated, 0U);
  EXPECT_EQ(received, static_cast<std::size_t>(kProducers) * kItems);
}

// The unbounded channel's queue under the same load: 3 producers on a pool and a handler
// thread, 2 consumers; every item once, each producer's items in order.
TEST(channel, an_unbounded_channel_keeps_every_item_and_each_producers_order) {
  constexpr std::uint64_t kProducers = 3;
  constexpr std::uint32_t kItems = 100'000;
  thread_pool pool(2);
  handler_thread producer_thread;
  handler_thread consumer_thread;
  channel<std::uint64_t> ch(channel<std::uint64_t>::unbounded);
  auto produce = [&ch](std::uint64_t producer) -> task<> {
    for (std::uint32_t i = 0; i < kItems; ++i) {
      co_await ch.send((producer << 32) | i);
    }
  };
  struct seen {
    std::vector<std::uint32_t> counts = std::vector<std::uint32_t>(kProducers * kItems);
    bool in_order = true;
  };
  auto consume = [&ch](seen& out) -> task<> {
    std::int64_t last[kProducers] = { -1, -1, -1 };
    while (auto item = co_await ch.receive()) {
      const auto producer = static_cast<std::size_t>(*item >> 32);
      const auto index = static_cast<std::uint32_t>(*item);
      out.in_order = out.in_order && static_cast<std::int64_t>(index) > last[producer];
      last[producer] = index;
      ++out.counts[producer * kItems + index];
    }
  };
  seen a;
  seen b;
  auto consumer_a = co_spawn(consumer_thread, [&]() -> task<> { co_await consume(a); });
  auto consumer_b = co_spawn(pool, [&]() -> task<> { co_await consume(b); });
  std::vector<cyan::dispatch::future<void>> producers;
  producers.push_back(co_spawn(pool, [&]() -> task<> { co_await produce(0); }));
  producers.push_back(co_spawn(pool, [&]() -> task<> { co_await produce(1); }));
  producers.push_back(co_spawn(producer_thread, [&]() -> task<> { co_await produce(2); }));
  for (auto& f : producers) {
    f.get();
  }
  ch.close();
  consumer_a.get();
  consumer_b.get();
  EXPECT_TRUE(a.in_order);
  EXPECT_TRUE(b.in_order);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < a.counts.size(); ++i) {
    wrong += a.counts[i] + b.counts[i] == 1 ? 0 : 1;
  }
  EXPECT_EQ(wrong, 0U);
}

// Close while senders wait (the channel is full) and receivers drain: the waiting senders get
// channel_closed and their items are not sent; every item sent before is received, then
// std::nullopt.
TEST(channel, close_fails_waiting_senders_and_lets_receivers_drain) {
  handler_thread h;
  handler_thread receiver_thread;
  channel<int> ch(4);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(ch.try_send(int{ i }));
  }
  std::vector<cyan::dispatch::future<bool>> senders;
  for (int i = 0; i < 3; ++i) {
    senders.push_back(co_spawn(h, [&ch, i]() -> task<bool> {
      try {
        co_await ch.send(100 + i);  // full: waits
        co_return false;
      } catch (const channel_closed&) {
        co_return true;
      }
    }));
  }
  co_spawn(h,
           [&]() -> task<> {  // after the senders suspended (h runs posts in order)
             ch.close();
             co_return;
           })
      .get();
  for (auto& s : senders) {
    EXPECT_TRUE(s.get());
  }
  EXPECT_TRUE(ch.is_closed());
  EXPECT_FALSE(ch.try_send(7));
  auto send_after_close = co_spawn(h, [&]() -> task<bool> {
    try {
      co_await ch.send(8);
    } catch (const channel_closed&) {
      co_return true;
    }
    co_return false;
  });
  EXPECT_TRUE(send_after_close.get());
  auto drained = co_spawn(receiver_thread, [&]() -> task<std::vector<int>> {
    std::vector<int> got;
    while (auto item = co_await ch.receive()) {
      got.push_back(*item);
    }
    co_return got;
  });
  EXPECT_EQ(drained.get(), (std::vector<int>{ 0, 1, 2, 3 }));
}

TEST(channel, close_wakes_waiting_receivers_with_nullopt) {
  handler_thread h;
  channel<int> ch(2);
  std::vector<cyan::dispatch::future<bool>> receivers;
  for (int i = 0; i < 3; ++i) {
    receivers.push_back(co_spawn(h, [&]() -> task<bool> {
      auto item = co_await ch.receive();
      co_return !item.has_value() && h.is_current();
    }));
  }
  co_spawn(h, [&]() -> task<> {
    ch.close();
    co_return;
  }).get();
  for (auto& r : receivers) {
    EXPECT_TRUE(r.get());
  }
}

// The reproduction: a receive cancelled by a stop request racing a send, 10,000
// rounds. The item is received by exactly one party — the waiting receiver, or whoever looks
// after the race — never lost, never twice.
TEST(channel, a_cancelled_receive_never_consumes_the_item_it_races) {
  handler_thread receiver_thread;
  handler_thread sender_thread;
  channel<int> ch(1);
  constexpr int kRounds = 10'000;
  for (int round = 0; round < kRounds; ++round) {
    std::optional<int> got;  // on receiver_thread until the round ends
    const bool received = race_stop_against_grant(
        receiver_thread, sender_thread, round,
        [&ch, &got]() -> task<> { got = co_await ch.receive(); },
        [&ch, round]() -> task<> { co_await ch.send(round); });
    const std::optional<int> left = ch.try_receive();
    ASSERT_EQ(received, got.has_value()) << "round " << round;
    ASSERT_TRUE(received || round % 4 != 2) << "round " << round;       // handed first: it has it
    ASSERT_NE(got.has_value(), left.has_value()) << "round " << round;  // exactly one has it
    ASSERT_EQ(got.has_value() ? *got : *left, round);
  }
}

// The sending side: a send waiting on a full channel, cancelled while a receive makes room. The
// item is in the channel exactly when the send returned normally.
TEST(channel, a_cancelled_send_never_enqueues_its_item) {
  handler_thread sender_thread;
  handler_thread receiver_thread;
  channel<int> ch(1);
  constexpr int kRounds = 10'000;
  for (int round = 0; round < kRounds; ++round) {
    ASSERT_TRUE(ch.try_send(-1));  // full: the send waits
    std::optional<int> first;      // on receiver_thread until the round ends
    const bool delivered = race_stop_against_grant(
        sender_thread, receiver_thread, round,
        [&ch, round]() -> task<> { co_await ch.send(round); },
        [&ch, &first]() -> task<> { first = co_await ch.receive(); });
    ASSERT_EQ(first, std::optional<int>(-1));
    const std::optional<int> left = ch.try_receive();
    ASSERT_EQ(left.has_value(), delivered) << "round " << round;    // in the channel iff sent
    ASSERT_TRUE(delivered || round % 4 != 2) << "round " << round;  // room came first: sent
    if (delivered) {
      ASSERT_EQ(*left, round);
    }
    ASSERT_FALSE(ch.try_receive().has_value());
  }
}

cyan::test::owned_coroutine receive_into(channel<int>& ch, std::optional<int>& out) {
  out = co_await ch.receive();
}

TEST(channel, destroying_a_waiting_receiver_withdraws_it) {
  channel<int> ch(4);
  std::optional<int> first;
  std::optional<int> second;
  {
    cyan::test::owned_coroutine gone = receive_into(ch, first);
    cyan::test::owned_coroutine stays = receive_into(ch, second);
    gone.destroy();
    ASSERT_TRUE(ch.try_send(5));  // handed to `stays` (resumed here: no home), not to `gone`
    EXPECT_TRUE(stays.done());
  }
  EXPECT_FALSE(first.has_value());
  EXPECT_EQ(second, std::optional<int>(5));
  ASSERT_TRUE(ch.try_send(6));
  EXPECT_EQ(ch.try_receive(), std::optional<int>(6));
}

// A receiver is handed an item, then its task is discarded before it resumes (the hand-off's
// resumption waits in its thread's queue, behind a task that holds the thread, when
// stop(discard) comes): the item goes back to the front, ahead of the items sent after it.
TEST(channel, an_item_given_back_by_a_discarded_receiver_leaves_first) {
  for (const std::size_t capacity : { std::size_t{ 4 }, channel<int>::unbounded }) {
    channel<int> ch(capacity);
    std::atomic<bool> resumed{ false };
    cyan::dispatch::future<void> receiver;
    {
      handler_thread h;
      receiver = co_spawn(h, [&]() -> task<> {
        (void)co_await ch.receive();
        resumed.store(true);
      });
      cyan::test::settle(h);  // it waits
      std::latch gate(1);
      h.post([&gate] { gate.wait(); });
      ASSERT_TRUE(ch.try_send(1));  // handed to the receiver, whose resumption is queued
      ASSERT_TRUE(ch.try_send(2));
      ASSERT_TRUE(ch.try_send(3));
      h.stop(cyan::dispatch::stop_mode::discard);
      gate.count_down();
      h.join();
    }
    EXPECT_THROW(receiver.get(), cyan::dispatch::task_cancelled);
    EXPECT_FALSE(resumed.load());
    EXPECT_EQ(ch.try_receive(), std::optional<int>(1));
    EXPECT_EQ(ch.try_receive(), std::optional<int>(2));
    EXPECT_EQ(ch.try_receive(), std::optional<int>(3));
    EXPECT_EQ(ch.try_receive(), std::nullopt);
  }
}

TEST(channel, a_stopped_task_is_cancelled_where_it_would_wait_and_only_there) {
  handler_thread h;
  channel<int> ch(1);
  ASSERT_TRUE(ch.try_send(1));
  std::stop_source stop;
  stop.request_stop();
  auto both = co_spawn(
      h,
      [&]() -> task<int> {
        int cancelled = 0;
        try {
          (void)co_await ch.receive();  // an item is there, but the task is stopped
        } catch (const std::system_error& e) {
          cancelled += is_canceled(e) ? 1 : 0;
        }
        try {
          co_await ch.send(2);
        } catch (const std::system_error& e) {
          cancelled += is_canceled(e) ? 1 : 0;
        }
        co_return cancelled;
      },
      stop.get_token());
  // A ready operation does not look at the stop token; only a wait does: the receive took the
  // item, the send found room.
  EXPECT_EQ(both.get(), 0);
  EXPECT_EQ(ch.try_receive(), std::optional<int>(2));
  auto waits = co_spawn(
      h,
      [&]() -> task<bool> {
        try {
          (void)co_await ch.receive();  // empty: would wait
        } catch (const std::system_error& e) {
          co_return is_canceled(e);
        }
        co_return false;
      },
      stop.get_token());
  EXPECT_TRUE(waits.get());
}

TEST(channel, ping_pong_between_two_handler_threads) {
  handler_thread a;
  handler_thread b;
  channel<int> there(1);
  channel<int> back(1);
  constexpr int kRounds = 20'000;
  auto echo = co_spawn(b, [&]() -> task<int> {
    int n = 0;
    while (auto v = co_await there.receive()) {
      co_await back.send(*v + 1);
      ++n;
    }
    co_return n;
  });
  const int last = co_spawn(a, [&]() -> task<int> {
                     int v = 0;
                     for (int i = 0; i < kRounds; ++i) {
                       co_await there.send(v);
                       v = *co_await back.receive();
                     }
                     there.close();
                     co_return v;
                   }).get();
  EXPECT_EQ(last, kRounds);
  EXPECT_EQ(echo.get(), kRounds);
}

}  // namespace
