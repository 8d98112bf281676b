#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "cyan/event/loop.h"
#include "cyan/event/timer.h"
#include "support/stress_env.h"

namespace cyan::test {

/// Generous bound for "the loop got there": a test that hits it has hung, not run slow.
inline constexpr std::chrono::seconds kWatchdogLimit{ 20 };

/// Runs `loop` until a callback calls stop(). A watchdog timer stops it after `limit` instead;
/// returns false when the watchdog had to, so a broken test fails instead of hanging.
inline bool run_until_stopped(const std::shared_ptr<event::loop>& loop,
                              std::chrono::milliseconds limit = kWatchdogLimit) {
  bool expired = false;
  event::timer watchdog{ loop };
  watchdog.set_timeout(limit);
  watchdog.set_callback([&] {
    expired = true;
    loop->stop();
  });
  watchdog.start();
  loop->run();
  return !expired;
}

/// Calls loop->run_once() until `done()` holds; false when the watchdog expired first.
template <typename Done>
bool run_once_until(const std::shared_ptr<event::loop>& loop, Done done,
                    std::chrono::milliseconds limit = kWatchdogLimit) {
  bool expired = false;
  event::timer watchdog{ loop };
  watchdog.set_timeout(limit);
  watchdog.set_callback([&] { expired = true; });
  watchdog.start();
  while (!done() && !expired) {
    loop->run_once();
  }
  return !expired;
}

/// A test with a loop of its own, which proves at the end that no watcher outlived the test:
/// the fixture's reference to the loop must be the last one.
class fresh_loop_test : public testing::Test {
 protected:
  void TearDown() override {
    std::weak_ptr<event::loop> alive = loop_;
    loop_.reset();
    EXPECT_TRUE(alive.expired()) << "a watcher outlived its test";
  }

  std::shared_ptr<event::loop> loop_ = std::make_shared<event::loop>();
};

/// Keeps the calling thread busy for `work`, without sleeping: from one of a loop's callbacks,
/// makes the time the loop read when it woke up at least that much older than the clock.
inline void busy_for(std::chrono::steady_clock::duration work) {
  const auto until = std::chrono::steady_clock::now() + work;
  while (std::chrono::steady_clock::now() < until) {
  }
}

/// Seconds between two steady_clock points, as double (for readable failure messages).
inline double seconds_between(std::chrono::steady_clock::time_point from,
                              std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace cyan::test
