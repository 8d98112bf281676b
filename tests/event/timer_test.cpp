// Tests for cyan/event/timer.h. Timing checks are lower bounds ("not before the timeout"), which
// load cannot break; no test asserts how late a timer may be beyond a generous watchdog.
#include "cyan/event/timer.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include "event/loop_support.h"

namespace {

using namespace std::chrono_literals;
using cyan::event::loop;
using cyan::event::timer;
using cyan::test::run_until_stopped;
using clock_type = loop::clock;

class timer_test : public cyan::test::fresh_loop_test {
 protected:
  // Stops the loop `after` from now; the timer must live until the run ends.
  timer stopper(clock_type::duration after) {
    timer t{ loop_ };
    t.set_timeout(after);
    t.set_callback([l = loop_.get()] { l->stop(); });
    t.start();
    return t;
  }
};

TEST_F(timer_test, one_shot_fires_once_not_before_its_timeout) {
  int fired = 0;
  clock_type::time_point fired_at;
  timer t{ loop_ };
  t.set_timeout(20ms);
  t.set_callback([&] {
    ++fired;
    fired_at = clock_type::now();
  });
  const clock_type::time_point started = clock_type::now();
  t.start();
  timer stop = stopper(60ms);
  ASSERT_TRUE(run_until_stopped(loop_));
  EXPECT_EQ(fired, 1);
  EXPECT_GE(fired_at - started, 20ms);
  EXPECT_FALSE(t.is_active());
  EXPECT_FALSE(t.is_pending());
}

TEST_F(timer_test, sub_millisecond_timeouts_are_kept) {
  timer t{ loop_ };
  t.set_timeout(300us);
  EXPECT_DOUBLE_EQ(t.timeout().count(), 0.0003);
  clock_type::time_point fired_at;
  t.set_callback([&] {
    fired_at = clock_type::now();
    loop_->stop();
  });
  const clock_type::time_point started = clock_type::now();
  t.start();
  ASSERT_TRUE(run_until_stopped(loop_));
  EXPECT_GE(fired_at - started, 300us) << "a sub-millisecond timeout was rounded down";
}

// A repeating sub-millisecond timer takes the loop's precise-wake path (a timerfd on epoll and
// poll) on every expiry; a stopped one leaves it armed for nothing. Expect exactly 20 expiries,
// the k-th no earlier than k intervals after the start, and a stopped timer silent.
TEST_F(timer_test, sub_millisecond_repeats_fire_every_interval_never_early) {
  constexpr int kExpiries = 20;
  timer t{ loop_ };
  timer stopped{ loop_ };
  bool stopped_fired = false;
  stopped.set_timeout(100us);
  stopped.set_callback([&] { stopped_fired = true; });
  stopped.start();
  stopped.stop();
  t.set_timeout(300us);
  t.set_repeat(300us);
  std::vector<clock_type::duration> fired;
  clock_type::time_point started;
  t.set_callback([&] {
    fired.push_back(clock_type::now() - started);
    if (fired.size() == kExpiries) {
      t.stop();
      loop_->stop();
    }
  });
  started = clock_type::now();
  t.start();
  ASSERT_TRUE(run_until_stopped(loop_));
  ASSERT_EQ(fired.size(), static_cast<std::size_t>(kExpiries));
  for (int k = 0; k < kExpiries; ++k) {
    EXPECT_GE(fired[k], (k + 1) * 300us) << "expiry " << k << " came early";
  }
  EXPECT_FALSE(stopped_fired);
}

TEST_F(timer_test, repeats_until_stopped_inside_its_own_callback) {
  int ticks = 0;
  timer t{ loop_ };
  t.set_timeout(1ms);
  t.set_repeat(2ms);
  EXPECT_DOUBLE_EQ(t.repeat().count(), 0.002);
  timer grace{ loop_ };  // five more repeat periods in which no sixth tick may come
  grace.set_timeout(10ms);
  grace.set_callback([&] { loop_->stop(); });
  t.set_callback([&] {
    if (++ticks == 5) {
      t.stop();
      grace.start();
    }
  });
  t.start();
  ASSERT_TRUE(run_until_stopped(loop_));
  EXPECT_EQ(ticks, 5);
  EXPECT_FALSE(t.is_active());
}

TEST_F(timer_test, zero_timeout_fires_in_the_next_round) {
  bool fired = false;
  timer t{ loop_ };
  t.set_callback([&] {
    fired = true;
    loop_->stop();
  });
  t.start();
  ASSERT_TRUE(run_until_stopped(loop_));
  EXPECT_TRUE(fired);
}

TEST_F(timer_test, starting_twice_fires_once) {
  int fired = 0;
  timer t{ loop_ };
  t.set_timeout(5ms);
  t.set_callback([&] { ++fired; });
  t.start();
  t.start();
  EXPECT_TRUE(t.is_active());
  timer stop = stopper(30ms);
  ASSERT_TRUE(run_until_stopped(loop_));
  EXPECT_EQ(fired, 1);
}

TEST_F(timer_test, stopped_timer_never_fires_and_can_be_restarted) {
  int fired = 0;
  timer t{ loop_ };
  t.set_timeout(5ms);
  t.set_callback([&] { ++fired; });
  t.start();
  t.stop();
  EXPECT_FALSE(t.is_active());
  {
    timer stop = stopper(20ms);
    ASSERT_TRUE(run_until_stopped(loop_));
  }
  EXPECT_EQ(fired, 0);

  t.set_callback([&] {
    ++fired;
    loop_->stop();
  });
  t.start();
  ASSERT_TRUE(run_until_stopped(loop_));
  EXPECT_EQ(fired, 1);
}

TEST_F(timer_test, reset_pushes_the_deadline) {
  // An inactivity timeout of 50 ms, reset three times 20 ms apart, may only fire 50 ms after
  // the last reset.
  timer inactivity{ loop_ };
  inactivity.set_timeout(50ms);
  clock_type::time_point fired_at;
  inactivity.set_callback([&] {
    fired_at = clock_type::now();
    loop_->stop();
  });
  inactivity.start();

  int resets = 0;
  clock_type::time_point last_reset;
  timer activity{ loop_ };
  activity.set_timeout(20ms);
  activity.set_repeat(20ms);
  activity.set_callback([&] {
    inactivity.reset();
    last_reset = loop_->now();  // the clock reading the reset counts from
    if (++resets == 3) {
      activity.stop();
    }
  });
  activity.start();
  ASSERT_TRUE(run_until_stopped(loop_));
  EXPECT_EQ(resets, 3) << "the timer fired before the last reset";
  EXPECT_GE(fired_at - last_reset, 50ms);
  EXPECT_FALSE(inactivity.is_active());
}

TEST_F(timer_test, reset_starts_an_inactive_timer_and_drops_an_undelivered_expiry) {
  int fired = 0;
  timer t{ loop_ };
  t.set_timeout(2ms);
  t.set_callback([&] {
    ++fired;
    loop_->stop();
  });
  t.reset();
  EXPECT_TRUE(t.is_active());
  ASSERT_TRUE(run_until_stopped(loop_));
  EXPECT_EQ(fired, 1);
}

TEST_F(timer_test, equal_deadlines_fire_in_start_order) {
  // Timers started by one callback with equal timeouts mostly expire in the same round, whose
  // events libev alone would not run in start order.
  constexpr int kTimers = 16;
  std::vector<int> order;
  std::vector<timer> timers;
  for (int i = 0; i < kTimers; ++i) {
    timers.emplace_back(loop_);
    timers.back().set_callback([&order, i] { order.push_back(i); });
  }
  timer stop{ loop_ };  // started after the timers, so it sorts after them under any load
  stop.set_timeout(30ms);
  stop.set_callback([&] { loop_->stop(); });
  timer starter{ loop_ };
  starter.set_callback([&] {
    for (int i = 0; i < kTimers; ++i) {
      timers[i].set_timeout(i % 2 == 0 ? 10ms : 5ms);
      timers[i].start();
    }
    stop.start();
  });
  starter.start();
  ASSERT_TRUE(run_until_stopped(loop_));
  std::vector<int> expected;
  for (int i = 1; i < kTimers; i += 2) {
    expected.push_back(i);  // 5 ms first, in start order
  }
  for (int i = 0; i < kTimers; i += 2) {
    expected.push_back(i);
  }
  EXPECT_EQ(order, expected);
}

TEST_F(timer_test, a_stopped_timer_does_not_fire_from_the_same_round) {
  // Both mostly expire in one round; whichever runs first stops the other, which must not run.
  int first = 0;
  int second = 0;
  timer a{ loop_ };
  timer b{ loop_ };
  a.set_callback([&] {
    ++first;
    b.stop();
  });
  b.set_callback([&] { ++second; });
  timer stop{ loop_ };
  stop.set_timeout(20ms);
  stop.set_callback([&] { loop_->stop(); });
  timer starter{ loop_ };
  starter.set_callback([&] {
    a.set_timeout(5ms);
    b.set_timeout(5ms);
    a.start();
    b.start();
    stop.start();
  });
  starter.start();
  ASSERT_TRUE(run_until_stopped(loop_));
  EXPECT_EQ(first, 1);
  EXPECT_EQ(second, 0);
}

TEST_F(timer_test, moving_an_active_timer_keeps_its_deadline_and_callback) {
  int fired = 0;
  clock_type::time_point fired_at;
  timer original{ loop_ };
  original.set_timeout(20ms);
  original.set_callback([&] {
    ++fired;
    fired_at = clock_type::now();
  });
  const clock_type::time_point started = clock_type::now();
  original.start();
  timer moved{ std::move(original) };
  EXPECT_FALSE(original.is_active());  // NOLINT(bugprone-use-after-move): documented state
  EXPECT_TRUE(moved.is_active());
  EXPECT_GT(moved.remaining(), 10ms);

  std::optional<timer> assigned;
  assigned.emplace(loop_);
  *assigned = std::move(moved);
  EXPECT_TRUE(assigned->is_active());
  EXPECT_FALSE(moved.is_active());  // NOLINT(bugprone-use-after-move)

  timer stop = stopper(60ms);
  ASSERT_TRUE(run_until_stopped(loop_));
  EXPECT_EQ(fired, 1);
  EXPECT_GE(fired_at - started, 20ms);
}

TEST_F(timer_test, a_timer_may_destroy_itself_in_its_callback) {
  int fired = 0;
  auto owned = std::make_unique<timer>(loop_);
  owned->set_timeout(1ms);
  owned->set_repeat(1ms);
  owned->set_callback([&] {
    ++fired;
    loop_->stop();
    owned.reset();  // destroys this closure too: nothing after may touch its captures
  });
  owned->start();
  ASSERT_TRUE(run_until_stopped(loop_));
  EXPECT_EQ(fired, 1);
  EXPECT_EQ(owned, nullptr);
}

TEST_F(timer_test, remaining_counts_down) {
  timer t{ loop_ };
  EXPECT_EQ(t.remaining(), timer::duration(0));
  t.set_timeout(10s);
  t.start();
  EXPECT_GT(t.remaining(), 9s);
  EXPECT_LE(t.remaining(), 10s);
  t.stop();
  EXPECT_EQ(t.remaining(), timer::duration(0));
}

// A callback that keeps the loop thread for 200 ms: remaining() counts that time, though the
// loop's time is still its round's start. The deadline lies between the clock readings just
// before and after start(); remaining() is the deadline less a reading between those around
// the call. Tolerance: 10 ms either way.
TEST_F(timer_test, remaining_counts_the_time_a_callback_keeps_the_loop_thread) {
  constexpr auto kBusy = 200ms;
  constexpr auto kTolerance = 10ms;
  timer t{ loop_ };
  t.set_timeout(10s);
  clock_type::time_point before_start;
  clock_type::time_point after_start;
  clock_type::time_point before_remaining;
  clock_type::time_point after_remaining;
  timer::duration left{};
  timer busy{ loop_ };
  busy.set_callback([&] {
    while (clock_type::now() - after_start < kBusy) {
    }
    before_remaining = clock_type::now();
    left = t.remaining();
    after_remaining = clock_type::now();
    loop_->stop();
  });
  before_start = clock_type::now();
  t.start();
  after_start = clock_type::now();
  busy.start();  // zero timeout: the next round
  ASSERT_TRUE(run_until_stopped(loop_));
  const timer::duration most = 10s - (before_remaining - after_start) + kTolerance;
  const timer::duration least = 10s - (after_remaining - before_start) - kTolerance;
  EXPECT_LE(left, most) << "remaining() did not count the " << kBusy.count() << " ms spent";
  EXPECT_GE(left, least);
}

TEST_F(timer_test, rejects_negative_durations_and_null_loops) {
  timer t{ loop_ };
  EXPECT_THROW(t.set_timeout(-1ms), std::invalid_argument);
  EXPECT_THROW(t.set_repeat(-1ms), std::invalid_argument);
  EXPECT_THROW(timer{ nullptr }, std::invalid_argument);
}

}  // namespace
