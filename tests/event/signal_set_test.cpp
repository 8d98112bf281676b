// event::signal_set: signals reach any thread's loop through a signalfd, once per raise, by
// callback or co_await; cyan's threads are born with asynchronous signals blocked.
//
// Every test blocks its signals in the main thread first (block_signals), as the header asks a
// program to: a thread that does not block them would take them itself.

#include <gtest/gtest.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <system_error>
#include <vector>

#include "cyan/dispatch.h"
#include "cyan/event/signal_set.h"

namespace {

using namespace std::chrono_literals;
using cyan::dispatch::co_spawn;
using cyan::dispatch::handler_thread;
using cyan::dispatch::task;
using cyan::event::block_signals;
using cyan::event::signal_set;

bool blocked_here(int number) {
  sigset_t current;
  ::pthread_sigmask(SIG_BLOCK, nullptr, &current);
  return sigismember(&current, number) == 1;
}

bool is_canceled(const std::system_error& e) {
  return e.code() == std::errc::operation_canceled;
}

// Counts deliveries; the main thread waits for a count with a bound.
class deliveries {
 public:
  void add(int number, bool on_handler_thread) {
    const std::lock_guard lock(mutex_);
    numbers_.push_back(number);
    all_on_handler_thread_ = all_on_handler_thread_ && on_handler_thread;
    changed_.notify_all();
  }
  [[nodiscard]] bool wait_for_count(std::size_t n) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, 10s, [&] { return numbers_.size() >= n; });
  }
  [[nodiscard]] std::vector<int> numbers() {
    const std::lock_guard lock(mutex_);
    return numbers_;
  }
  [[nodiscard]] bool all_on_handler_thread() {
    const std::lock_guard lock(mutex_);
    return all_on_handler_thread_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<int> numbers_;
  bool all_on_handler_thread_ = true;
};

TEST(signal_set, kill_reaches_a_handler_threads_loop_once_per_raise) {
  block_signals({ SIGUSR1, SIGUSR2 });
  handler_thread h;
  deliveries seen;
  std::unique_ptr<signal_set> signals;
  h.post_awaitable([&] {
     signals = std::make_unique<signal_set>(h.get_event_loop(),
                                            std::initializer_list<int>{ SIGUSR1, SIGUSR2 });
     signals->set_callback([&](int number) { seen.add(number, h.is_current()); });
     signals->start();
   }).get();
  for (std::size_t raise = 1; raise <= 20; ++raise) {
    ASSERT_EQ(::kill(::getpid(), SIGUSR1), 0);
    ASSERT_TRUE(seen.wait_for_count(raise)) << "raise " << raise;
  }
  // A SIGUSR1 still pending would be read before SIGUSR2 (the kernel hands the lower number
  // out first): after SIGUSR2 has come, none was left over.
  ASSERT_EQ(::kill(::getpid(), SIGUSR2), 0);
  ASSERT_TRUE(seen.wait_for_count(21));
  std::vector<int> expected(20, SIGUSR1);
  expected.push_back(SIGUSR2);
  EXPECT_EQ(seen.numbers(), expected);
  EXPECT_TRUE(seen.all_on_handler_thread());
  h.post_awaitable([&] { signals.reset(); }).get();
}

TEST(signal_set, co_await_wait_yields_the_number_on_the_tasks_home) {
  block_signals({ SIGUSR2 });
  handler_thread h;
  std::atomic<bool> waiting{ false };
  auto waited = co_spawn(h, [&]() -> task<std::pair<int, bool>> {
    signal_set signals{ h.get_event_loop(), { SIGUSR2 } };
    waiting = true;
    const int number = co_await signals.wait();
    co_return std::pair{ number, h.is_current() };
  });
  while (!waiting.load()) {
    std::this_thread::yield();
  }
  // Raised before or after the task suspends: either way the signalfd has it.
  ASSERT_EQ(::kill(::getpid(), SIGUSR2), 0);
  ASSERT_EQ(waited.wait_for(10s), std::future_status::ready);
  const auto [number, home] = waited.get();
  EXPECT_EQ(number, SIGUSR2);
  EXPECT_TRUE(home);
}

TEST(signal_set, signals_raised_before_anyone_waits_are_not_lost) {
  block_signals({ SIGUSR1, SIGUSR2 });
  handler_thread h;
  // Pending in the kernel before the set exists: the signalfd reads them, lowest number first.
  ASSERT_EQ(::kill(::getpid(), SIGUSR2), 0);
  ASSERT_EQ(::kill(::getpid(), SIGUSR1), 0);
  auto numbers = co_spawn(h, [&]() -> task<std::vector<int>> {
    signal_set signals{ h.get_event_loop(), { SIGUSR1, SIGUSR2 } };
    std::vector<int> got;
    got.push_back(co_await signals.wait());
    got.push_back(co_await signals.wait());
    co_return got;
  });
  ASSERT_EQ(numbers.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(numbers.get(), (std::vector<int>{ SIGUSR1, SIGUSR2 }));
}

TEST(signal_set, a_stop_request_ends_a_wait_with_operation_canceled) {
  block_signals({ SIGUSR1 });
  handler_thread h;
  std::stop_source stop;
  std::atomic<bool> waiting{ false };
  auto waited = co_spawn(
      h,
      [&]() -> task<bool> {
        signal_set signals{ h.get_event_loop(), { SIGUSR1 } };
        waiting = true;
        try {
          (void)co_await signals.wait();
        } catch (const std::system_error& e) {
          co_return is_canceled(e) && h.is_current();
        }
        co_return false;
      },
      stop.get_token());
  while (!waiting.load()) {
    std::this_thread::yield();
  }
  stop.request_stop();
  ASSERT_EQ(waited.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(waited.get());
}

TEST(signal_set, stop_and_destruction_end_pending_waits_with_operation_canceled) {
  block_signals({ SIGUSR1 });
  handler_thread h;
  std::optional<signal_set> signals;
  h.post_awaitable([&] {
     signals.emplace(h.get_event_loop(), std::initializer_list<int>{ SIGUSR1 });
   }).get();
  const auto canceled_wait = [&]() -> task<bool> {
    try {
      (void)co_await signals->wait();
    } catch (const std::system_error& e) {
      co_return is_canceled(e);
    }
    co_return false;
  };
  auto first = co_spawn(h, canceled_wait);
  auto second = co_spawn(h, canceled_wait);
  h.post_awaitable([&] {
     EXPECT_TRUE(signals->is_active());  // wait() started it
     signals->stop();
     EXPECT_FALSE(signals->is_active());
   }).get();
  ASSERT_EQ(first.wait_for(10s), std::future_status::ready);
  ASSERT_EQ(second.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(first.get());
  EXPECT_TRUE(second.get());
  auto third = co_spawn(h, canceled_wait);
  h.post_awaitable([&] { signals.reset(); }).get();
  ASSERT_EQ(third.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(third.get());
}

TEST(signal_set, numbers_it_cannot_watch_are_refused) {
  handler_thread h;
  const auto loop = h.get_event_loop();
  EXPECT_THROW(signal_set(loop, {}), std::invalid_argument);
  EXPECT_THROW(signal_set(loop, { 0 }), std::invalid_argument);
  EXPECT_THROW(signal_set(loop, { NSIG }), std::invalid_argument);
  EXPECT_THROW(signal_set(loop, { SIGUSR1, SIGKILL }), std::invalid_argument);
  EXPECT_THROW(signal_set(loop, { SIGSTOP }), std::invalid_argument);
  EXPECT_THROW(signal_set(nullptr, { SIGUSR1 }), std::invalid_argument);
  EXPECT_THROW(block_signals({ -1 }), std::invalid_argument);
}

TEST(signal_set, cyan_threads_are_born_with_asynchronous_signals_blocked) {
  // The main thread's mask is its own before and after a handler thread starts.
  sigset_t unblock;
  sigemptyset(&unblock);
  sigaddset(&unblock, SIGHUP);
  ASSERT_EQ(::pthread_sigmask(SIG_UNBLOCK, &unblock, nullptr), 0);
  handler_thread h;
  EXPECT_FALSE(blocked_here(SIGHUP));
  const auto inside = h.post_awaitable([] {
                         return std::vector<bool>{ blocked_here(SIGINT),  blocked_here(SIGTERM),
                                                   blocked_here(SIGHUP),  blocked_here(SIGUSR1),
                                                   blocked_here(SIGCHLD), blocked_here(SIGSEGV),
                                                   blocked_here(SIGBUS) };
                       }).get();
  EXPECT_EQ(inside, (std::vector<bool>{ true, true, true, true, true, false, false }));
  cyan::dispatch::thread_pool pool(1);
  const bool worker_blocks_sigterm =
      co_spawn(pool, []() -> task<bool> { co_return blocked_here(SIGTERM); }).get();
  EXPECT_TRUE(worker_blocks_sigterm);
}

}  // namespace
