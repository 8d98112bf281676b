// Tests for cyan/event/async.h: coalescing, sends while stopped, cross-thread hand-over of work
// (a stress case sized by CYAN_STRESS_ITEMS), sends from a signal handler, and moving.
#include "cyan/event/async.h"

#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "cyan/event/timer.h"
#include "event/loop_support.h"

namespace {

using namespace std::chrono_literals;
using cyan::event::async;
using cyan::test::run_once_until;
using cyan::test::run_until_stopped;

class event_async_test : public cyan::test::fresh_loop_test {};

TEST_F(event_async_test, sends_before_the_loop_runs_coalesce_into_one_callback) {
  int callbacks = 0;
  async a{ loop_ };
  a.set_callback([&] { ++callbacks; });
  a.start();
  for (int i = 0; i < 1000; ++i) {
    a.send();
  }
  ASSERT_TRUE(run_once_until(loop_, [&] { return callbacks > 0; }));
  for (int round = 0; round < 10; ++round) {
    loop_->run_nowait();
  }
  EXPECT_EQ(callbacks, 1);
}

TEST_F(event_async_test, a_send_while_stopped_is_delivered_on_start) {
  int callbacks = 0;
  async a{ loop_ };
  a.set_callback([&] { ++callbacks; });
  a.send();  // never started yet
  for (int round = 0; round < 10; ++round) {
    loop_->run_nowait();
  }
  EXPECT_EQ(callbacks, 0);
  a.start();
  ASSERT_TRUE(run_once_until(loop_, [&] { return callbacks == 1; }));

  a.stop();
  a.send();
  for (int round = 0; round < 10; ++round) {
    loop_->run_nowait();
  }
  EXPECT_EQ(callbacks, 1);
  a.start();
  ASSERT_TRUE(run_once_until(loop_, [&] { return callbacks == 2; }));
}

// Four threads each hand over CYAN_STRESS_ITEMS pieces of work (counted in `handed_over`) and
// send after each. The callback only reads the counter; since every send() publishes what its
// sender did before it, the callback after the last send must see every piece.
TEST_F(event_async_test, every_piece_of_work_handed_over_is_observed) {
  constexpr int kSenders = 4;
  const std::uint64_t per_sender = cyan::test::env_or("CYAN_STRESS_ITEMS", 100'000);
  const std::uint64_t total = per_sender * kSenders;
  std::atomic<std::uint64_t> handed_over{ 0 };
  std::uint64_t observed = 0;
  std::uint64_t callbacks = 0;
  bool on_loop_thread = true;

  async a{ loop_ };
  a.set_callback([&] {
    ++callbacks;
    on_loop_thread = on_loop_thread && loop_->is_loop_thread();
    // relaxed: visibility comes from the send()/callback synchronization under test.
    observed = handed_over.load(std::memory_order_relaxed);
    if (observed == total) {
      loop_->stop();
    }
  });
  a.start();

  // The senders start once the loop runs, so sends race with callbacks.
  std::atomic<bool> loop_running{ false };
  cyan::event::timer gate{ loop_ };
  gate.set_callback([&] { loop_running = true; });
  gate.start();
  std::vector<std::thread> senders;
  for (int s = 0; s < kSenders; ++s) {
    senders.emplace_back([&] {
      while (!loop_running) {
        std::this_thread::yield();
      }
      for (std::uint64_t i = 0; i < per_sender; ++i) {
        // relaxed: published by the send() that follows.
        handed_over.fetch_add(1, std::memory_order_relaxed);
        a.send();
      }
    });
  }
  const bool finished = run_until_stopped(loop_, 120s);
  for (std::thread& sender : senders) {
    sender.join();
  }
  ASSERT_TRUE(finished) << "observed " << observed << " of " << total
                        << " (CYAN_STRESS_ITEMS=" << per_sender << ")";
  EXPECT_EQ(observed, total);
  EXPECT_GE(callbacks, 1u);
  EXPECT_LE(callbacks, total);
  EXPECT_TRUE(on_loop_thread);
  std::printf("async: %llu sends, %llu callbacks\n", static_cast<unsigned long long>(total),
              static_cast<unsigned long long>(callbacks));
}

// libev is not built with ThreadSanitizer, so only cyan's own atomics can show TSan that the
// callback happens after the send(): a plain value handed over this way must not be reported.
TEST_F(event_async_test, a_plain_value_written_before_send_is_visible_in_the_callback) {
  std::vector<int> payload;
  std::vector<int> received;
  async a{ loop_ };
  a.set_callback([&] {
    received = payload;
    loop_->stop();
  });
  a.start();
  std::thread sender([&] {
    payload = { 1, 2, 3 };
    a.send();
  });
  const bool delivered = run_until_stopped(loop_);
  sender.join();
  ASSERT_TRUE(delivered);
  EXPECT_EQ(received, (std::vector<int>{ 1, 2, 3 }));
}

async* g_signalled = nullptr;

extern "C" void send_from_signal_handler(int) {
  g_signalled->send();
}

TEST_F(event_async_test, send_is_safe_from_a_signal_handler) {
  int callbacks = 0;
  async a{ loop_ };
  a.set_callback([&] { ++callbacks; });
  a.start();
  g_signalled = &a;
  struct sigaction action {};
  struct sigaction previous {};
  action.sa_handler = &send_from_signal_handler;
  sigemptyset(&action.sa_mask);
  ASSERT_EQ(::sigaction(SIGUSR2, &action, &previous), 0);
  ASSERT_EQ(std::raise(SIGUSR2), 0);
  const bool delivered = run_once_until(loop_, [&] { return callbacks == 1; });
  ::sigaction(SIGUSR2, &previous, nullptr);
  g_signalled = nullptr;
  EXPECT_TRUE(delivered);
  EXPECT_EQ(callbacks, 1);
}

TEST_F(event_async_test, moving_keeps_the_callback_and_a_pending_send) {
  int original_calls = 0;
  int moved_calls = 0;
  async a{ loop_ };
  a.set_callback([&] { ++original_calls; });
  a.start();
  a.send();
  async moved{ std::move(a) };
  EXPECT_FALSE(a.is_active());  // NOLINT(bugprone-use-after-move): documented state
  EXPECT_TRUE(moved.is_active());
  a.set_callback([&] { ++moved_calls; });  // the moved-from watcher is reusable
  ASSERT_TRUE(run_once_until(loop_, [&] { return original_calls == 1; }));
  for (int round = 0; round < 10; ++round) {
    loop_->run_nowait();
  }
  EXPECT_EQ(original_calls, 1);
  EXPECT_EQ(moved_calls, 0);

  moved.send();
  async assigned{ loop_ };
  assigned = std::move(moved);
  ASSERT_TRUE(run_once_until(loop_, [&] { return original_calls == 2; }));
}

}  // namespace
