// Stress tests for cyan/dispatch/handler_thread.h: many producers, exact counts and
// per-producer order, stop racing with posts, and wake-ups that must never be lost.
// Sizes: CYAN_STRESS_ITEMS (posts per configuration), CYAN_STRESS_ROUNDS (race rounds),
// CYAN_STRESS_SEED (pause pattern); all printed on failure.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <future>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cyan/dispatch/handler_thread.h"
#include "support/lifecycle.h"
#include "support/stress_env.h"

using cyan::test::env_or;

namespace {

using namespace std::chrono_literals;
using cyan::dispatch::executor_stopped;
using cyan::dispatch::handler_thread;
using cyan::dispatch::stop_mode;

std::string settings() {
  return "CYAN_STRESS_ITEMS=" + std::to_string(env_or("CYAN_STRESS_ITEMS", 1'000'000)) +
         " CYAN_STRESS_ROUNDS=" + std::to_string(env_or("CYAN_STRESS_ROUNDS", 50)) +
         " CYAN_STRESS_SEED=" + std::to_string(env_or("CYAN_STRESS_SEED", 1));
}

class many_producers_test : public testing::TestWithParam<unsigned> {};

// N producers post ITEMS tasks in total; each task checks that its producer's sequence number
// is exactly the previous one plus one (FIFO per producer), on the handler thread.
TEST_P(many_producers_test, exact_count_and_per_producer_order) {
  const unsigned producers = GetParam();
  const std::uint64_t per_producer = env_or("CYAN_STRESS_ITEMS", 1'000'000) / producers;
  handler_thread thread;
  std::vector<std::uint64_t> next(producers, 0);  // handler thread only
  std::uint64_t out_of_order = 0;                 // handler thread only
  std::uint64_t sum = 0;                          // handler thread only
  std::vector<std::thread> threads;
  for (unsigned p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      for (std::uint64_t i = 0; i < per_producer; ++i) {
        thread.post([&next, &out_of_order, &sum, p, i] {
          out_of_order += next[p] != i ? 1 : 0;
          next[p] = i + 1;
          sum += i;
        });
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  thread.stop();
  thread.join();
  EXPECT_EQ(out_of_order, 0u) << settings();
  for (unsigned p = 0; p < producers; ++p) {
    EXPECT_EQ(next[p], per_producer) << "producer " << p << "; " << settings();
  }
  EXPECT_EQ(sum, producers * (per_producer * (per_producer - 1) / 2)) << settings();
  const auto stats = thread.stats();
  EXPECT_EQ(stats.posted, producers * per_producer);
  EXPECT_EQ(stats.executed, producers * per_producer);
  EXPECT_EQ(stats.queued, 0u);
}

INSTANTIATE_TEST_SUITE_P(producers, many_producers_test, testing::Values(1u, 2u, 4u, 8u));

// Producers post until a stop refuses them. Every post that returned must run (drain) or be
// cancelled (discard), exactly once; every refused post must not run and its closure must be
// destroyed. Nothing may be left behind or run twice.
void race_stop_with_posts(stop_mode mode) {
  const std::uint64_t rounds = env_or("CYAN_STRESS_ROUNDS", 50);
  std::mt19937_64 random(env_or("CYAN_STRESS_SEED", 1));
  for (std::uint64_t round = 0; round < rounds; ++round) {
    cyan::test::lifecycle::reset();
    std::atomic<std::uint64_t> ran{ 0 };
    std::atomic<std::uint64_t> accepted{ 0 };
    std::atomic<std::uint64_t> cancelled_awaitables{ 0 };
    const auto stop_after = std::chrono::microseconds(random() % 2000);
    {
      handler_thread thread;
      std::vector<std::thread> producers;
      for (int p = 0; p < 3; ++p) {
        producers.emplace_back([&, p] {
          std::vector<cyan::dispatch::future<void>> futures;
          try {
            for (;;) {
              if (p == 2) {
                futures.push_back(thread.post_awaitable([&ran] { ++ran; }));
              } else {
                thread.post([&ran, item = cyan::test::lifecycle()] { ++ran; });
              }
              ++accepted;
            }
          } catch (const executor_stopped&) {
          }
          for (auto& f : futures) {
            try {
              f.get();
            } catch (const cyan::dispatch::task_cancelled&) {
              ++cancelled_awaitables;
            }
          }
        });
      }
      std::this_thread::sleep_for(stop_after);  // a random moment to stop at, not a sync
      thread.stop(mode);
      for (auto& t : producers) {
        t.join();
      }
      thread.join();
      const auto stats = thread.stats();
      ASSERT_EQ(stats.posted, accepted.load()) << "round " << round << "; " << settings();
      ASSERT_EQ(stats.executed + stats.cancelled, accepted.load()) << "round " << round;
      ASSERT_EQ(stats.executed, ran.load()) << "round " << round << "; " << settings();
      if (mode == stop_mode::drain) {
        ASSERT_EQ(ran.load(), accepted.load()) << "round " << round << "; " << settings();
        ASSERT_EQ(cancelled_awaitables.load(), 0u);
      }
    }
    ASSERT_EQ(cyan::test::lifecycle::live(), 0) << "round " << round << "; " << settings();
  }
}

TEST(handler_thread_stress, stop_drain_racing_with_posts_loses_nothing) {
  race_stop_with_posts(stop_mode::drain);
}

TEST(handler_thread_stress, stop_discard_racing_with_posts_cancels_exactly_the_rest) {
  race_stop_with_posts(stop_mode::discard);
}

// The consumer sleeps between almost every post (no spinning), and every sleep is unbounded
// (no naps, which would end a sleep whose wake-up was lost): a lost wake-up hangs a round,
// which the bounded wait turns into a failure.
TEST(handler_thread_stress, no_lost_wake_ups) {
  const std::uint64_t items = env_or("CYAN_STRESS_ITEMS", 1'000'000) / 50;
  handler_thread::options opts;
  opts.spin_before_sleep = 0ns;
  opts.nap = 0ns;
  handler_thread thread(opts);
  std::mt19937_64 random(env_or("CYAN_STRESS_SEED", 1));
  for (std::uint64_t i = 0; i < items; ++i) {
    auto done = thread.post_awaitable([i] { return i; });
    if (random() % 8 == 0) {
      std::this_thread::yield();  // varies the moment the post meets the consumer's sleep
    }
    ASSERT_EQ(done.wait_for(10s), std::future_status::ready) << "item " << i << "; " << settings();
    ASSERT_EQ(done.get(), i);
  }
}

// Two handler threads bounce a counter back and forth, each hop a post to the other.
TEST(handler_thread_stress, ping_pong_between_two_threads) {
  const std::uint64_t hops = env_or("CYAN_STRESS_ITEMS", 1'000'000) / 20;
  handler_thread ping;
  handler_thread pong;
  std::promise<std::uint64_t> finished;
  std::function<void(std::uint64_t)> hop = [&](std::uint64_t n) {
    if (n == hops) {
      finished.set_value(n);
      return;
    }
    handler_thread& next = (n % 2 == 0) ? pong : ping;
    next.post([&hop, n] { hop(n + 1); });
  };
  ping.post([&] { hop(0); });
  auto result = finished.get_future();
  ASSERT_EQ(result.wait_for(120s), std::future_status::ready) << settings();
  EXPECT_EQ(result.get(), hops);
}

// Producer threads come and go while the consumer is busy: their lanes are retired as they
// exit, and no task is lost or duplicated.
TEST(handler_thread_stress, producers_exiting_while_the_consumer_drains) {
  const std::uint64_t per_thread = 2000;
  const std::uint64_t threads = env_or("CYAN_STRESS_ITEMS", 1'000'000) / 10'000;
  handler_thread thread;
  std::uint64_t ran = 0;  // handler thread only
  for (std::uint64_t t = 0; t < threads; t += 2) {
    std::thread a([&] {
      for (std::uint64_t i = 0; i < per_thread; ++i) {
        thread.post([&ran] { ++ran; });
      }
    });
    std::thread b([&] {
      for (std::uint64_t i = 0; i < per_thread; ++i) {
        thread.post([&ran] { ++ran; });
      }
    });
    a.join();
    b.join();
  }
  thread.stop();
  thread.join();
  const std::uint64_t expected = ((threads + 1) / 2) * 2 * per_thread;
  EXPECT_EQ(ran, expected) << settings();
  EXPECT_EQ(thread.stats().posted, expected);
}

}  // namespace
