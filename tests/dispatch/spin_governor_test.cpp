// detail/spin_governor.h with a fake clock (times passed in) and a fake switch counter: the
// budget's halving and doubling within its bounds, the rest after a lost CPU and its doubling
// and reset, and how often the switch count is read.

#include "cyan/dispatch/detail/spin_governor.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>

namespace {

using namespace std::chrono_literals;

// Involuntary switches as the test sets them; counts its reads.
struct fake_switches {
  std::int64_t value = 0;
  unsigned reads = 0;
  std::int64_t operator()() noexcept {
    ++reads;
    return value;
  }
};

using governor = cyan::dispatch::detail::basic_spin_governor<fake_switches>;
using clock_type = governor::clock;

constexpr clock_type::time_point at(std::chrono::nanoseconds since) {
  return clock_type::time_point{ since };
}

// One spin that reads the clock every 1 µs from `start` until its deadline, finding nothing.
void spin_to_deadline(governor& g, clock_type::time_point start) {
  const auto deadline = g.start_spin(start);
  for (auto now = start + 1us; now < deadline; now += 1us) {
    ASSERT_FALSE(g.lost_cpu(now));
  }
  g.end_spin(false);
}

// Idle periods that do not spin before the first that does (bounded: at most `limit`).
unsigned periods_without_spin(governor& g, unsigned limit = 10'000) {
  unsigned skipped = 0;
  while (skipped < limit && !g.start_idle()) {
    ++skipped;
  }
  return skipped;
}

TEST(spin_governor, the_budget_starts_full_halves_on_each_empty_spin_and_stops_at_one_us) {
  governor g;
  EXPECT_EQ(g.budget(), 50us);
  const std::chrono::nanoseconds expected[] = { 25us, 12500ns, 6250ns, 3125ns, 1562ns, 1us, 1us };
  for (const auto want : expected) {
    ASSERT_TRUE(g.start_idle());
    spin_to_deadline(g, at(1ms));
    EXPECT_EQ(g.budget(), want);
  }
}

TEST(spin_governor, the_budget_doubles_on_each_spin_that_found_work_up_to_fifty_us) {
  governor g;
  for (int i = 0; i < 10; ++i) {
    g.end_spin(false);
  }
  ASSERT_EQ(g.budget(), 1us);
  const std::chrono::nanoseconds expected[] = { 2us, 4us, 8us, 16us, 32us, 50us, 50us };
  for (const auto want : expected) {
    ASSERT_TRUE(g.start_idle());
    (void)g.start_spin(at(1ms));
    g.end_spin(true);
    EXPECT_EQ(g.budget(), want);
  }
}

TEST(spin_governor, a_spin_ends_at_its_budget) {
  governor g;
  EXPECT_EQ(g.start_spin(at(7ms)), at(7ms + 50us));
  g.end_spin(false);
  EXPECT_EQ(g.start_spin(at(9ms)), at(9ms + 25us));
}

TEST(spin_governor, the_maximum_is_capped_at_fifty_us_and_zero_never_spins) {
  EXPECT_EQ(governor{ 200us }.budget(), 50us);
  governor small{ 500ns };
  EXPECT_EQ(small.budget(), 500ns);
  small.end_spin(false);
  EXPECT_EQ(small.budget(), 500ns);  // the minimum is never above the maximum
  small.grow();
  EXPECT_EQ(small.budget(), 500ns);
  governor off{ 0ns };
  for (int i = 0; i < 200; ++i) {
    ASSERT_FALSE(off.start_idle()) << "period " << i;
  }
}

TEST(spin_governor, grow_to_raises_the_budget_only_up_to_the_maximum) {
  governor g;
  for (int i = 0; i < 10; ++i) {
    g.end_spin(false);
  }
  g.grow_to(20us);
  EXPECT_EQ(g.budget(), 20us);
  g.grow_to(5us);
  EXPECT_EQ(g.budget(), 20us);  // never lowers it
  g.grow_to(1s);
  EXPECT_EQ(g.budget(), 50us);
}

TEST(spin_governor, a_gap_over_one_hundred_us_between_clock_reads_is_a_lost_cpu) {
  governor g;
  ASSERT_TRUE(g.start_idle());
  (void)g.start_spin(at(1ms));
  EXPECT_FALSE(g.lost_cpu(at(1ms + 100us)));       // exactly the limit: still on its CPU
  EXPECT_TRUE(g.lost_cpu(at(1ms + 200us + 1ns)));  // 100 µs + 1 ns after the last read
  EXPECT_TRUE(g.resting());
  EXPECT_EQ(g.rest_left(), 16u);
  EXPECT_EQ(g.counter().reads, 1u);  // the count read afresh once, at the loss
}

TEST(spin_governor, after_a_lost_cpu_it_rests_sixteen_idle_periods_then_spins_again) {
  governor g;
  ASSERT_TRUE(g.start_idle());
  (void)g.start_spin(at(1ms));
  ASSERT_TRUE(g.lost_cpu(at(2ms)));
  EXPECT_EQ(periods_without_spin(g), 16u);
  EXPECT_FALSE(g.resting());
  const auto budget = g.budget();
  EXPECT_EQ(budget, 50us);  // the budget itself is untouched by the rest
}

TEST(spin_governor, the_rest_doubles_while_the_cpu_keeps_being_lost_and_resets_after_a_clean_spin) {
  governor g;
  const unsigned expected[] = { 16, 32, 64, 128, 256, 256 };
  auto now = at(1ms);
  ASSERT_TRUE(g.start_idle());
  for (const unsigned want : expected) {
    (void)g.start_spin(now);
    now += 1ms;
    ASSERT_TRUE(g.lost_cpu(now));
    EXPECT_EQ(g.rest_left(), want);
    EXPECT_EQ(periods_without_spin(g), want);  // the period that ends the rest spins
  }
  // A spin that kept its CPU: the next loss rests 16 periods again.
  spin_to_deadline(g, now);
  ASSERT_TRUE(g.start_idle());
  (void)g.start_spin(now + 1ms);
  ASSERT_TRUE(g.lost_cpu(now + 2ms));
  EXPECT_EQ(g.rest_left(), 16u);
}

TEST(spin_governor, the_switch_count_is_read_once_every_sixty_four_idle_periods) {
  governor g;
  for (int period = 1; period <= 64 * 3; ++period) {
    ASSERT_TRUE(g.start_idle()) << "period " << period;
    EXPECT_EQ(g.counter().reads, static_cast<unsigned>(period / 64)) << "period " << period;
  }
}

TEST(spin_governor, rising_involuntary_switches_start_a_rest_and_the_first_reading_is_a_baseline) {
  governor g;
  g.counter().value = 1000;  // switches before the governor's thread ever sampled: no rest
  for (int period = 1; period <= 64; ++period) {
    ASSERT_TRUE(g.start_idle()) << "period " << period;
  }
  ASSERT_EQ(g.counter().reads, 1u);
  for (int period = 1; period < 64; ++period) {
    ASSERT_TRUE(g.start_idle()) << "period " << period;
  }
  g.counter().value = 1001;      // preempted once since the last reading
  EXPECT_FALSE(g.start_idle());  // the 64th period reads the count and rests at once
  EXPECT_EQ(g.counter().reads, 2u);
  EXPECT_EQ(periods_without_spin(g), 15u);  // 16 periods in all, that one included
}

TEST(spin_governor, a_rise_still_seen_after_a_rest_doubles_the_next_rest) {
  governor g;
  for (int period = 0; period < 64; ++period) {
    (void)g.start_idle();  // baseline at period 64
  }
  g.counter().value = 5;
  unsigned skipped = 0;
  for (int period = 0; period < 64; ++period) {
    skipped += g.start_idle() ? 0 : 1;  // a rise at period 128: 16 periods' rest
  }
  EXPECT_EQ(skipped, 1u);
  g.counter().value = 9;  // still rising at the next reading, no clean spin in between
  skipped = 0;
  for (int period = 0; period < 64; ++period) {
    skipped += g.start_idle() ? 0 : 1;
  }
  EXPECT_EQ(skipped, 15u + 1u);  // what was left of the first rest, then the doubled one begins
  EXPECT_EQ(g.rest_left(), 31u);
}

TEST(spin_governor, switches_the_spin_expected_are_not_a_lost_cpu) {
  governor g;
  for (int period = 0; period < 64; ++period) {
    (void)g.start_idle();
  }
  g.counter().value = 3;
  g.expect_switch();
  g.expect_switch();
  g.expect_switch();  // three hand-off yields: three switches
  for (int period = 0; period < 64; ++period) {
    ASSERT_TRUE(g.start_idle()) << "period " << period;
  }
  g.counter().value = 5;
  g.expect_switch();  // one expected, two seen: preempted once
  for (int period = 0; period < 63; ++period) {
    ASSERT_TRUE(g.start_idle()) << "period " << period;
  }
  EXPECT_FALSE(g.start_idle());
}

}  // namespace
