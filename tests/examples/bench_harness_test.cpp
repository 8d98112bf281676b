// The benchmark harness's schedule: which arm runs when, and which runs it keeps.

#include "bench/harness.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace {

using cyan::bench::sample;
using cyan::bench::suite;

// Two arms, "a" and "b", that log each call; a run's sample is its call number (from 1), so the
// kept samples say which calls were kept.
struct logged_arms {
  std::vector<std::string> calls;

  void add_to(suite& s) {
    for (const char* name : { "a", "b" }) {
      s.add(name, [this, name] {
        calls.emplace_back(name);
        return sample{ static_cast<double>(calls.size()), 7 };
      });
    }
  }
};

class bench_harness : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(setenv("CYAN_BENCH_REPS", "3", 1), 0);
    ASSERT_EQ(unsetenv("CYAN_BENCH_CSV"), 0);
  }
  void TearDown() override { unsetenv("CYAN_BENCH_REPS"); }
};

TEST_F(bench_harness, arms_alternate_and_each_repetition_starts_one_arm_later) {
  suite s{ "test", "plain" };
  logged_arms arms;
  arms.add_to(s);
  ASSERT_TRUE(s.run());
  EXPECT_EQ(arms.calls, (std::vector<std::string>{ "a", "b", "b", "a", "a", "b" }));
  EXPECT_DOUBLE_EQ(s.median("a"), 4);  // calls 1, 4, 5
  EXPECT_DOUBLE_EQ(s.median("b"), 3);  // calls 2, 3, 6
}

TEST_F(bench_harness, each_kept_sample_comes_right_after_an_untimed_run_of_the_same_arm) {
  suite s{ "test", "rerun" };
  s.warm_up_each_arm();
  s.rerun_before_each_sample();
  logged_arms arms;
  arms.add_to(s);
  ASSERT_TRUE(s.run());
  EXPECT_EQ(arms.calls, (std::vector<std::string>{ "a", "b",                // warm-up
                                                   "a", "a", "b", "b",      // repetition 1
                                                   "b", "b", "a", "a",      // repetition 2
                                                   "a", "a", "b", "b" }));  // repetition 3
  // Kept: the second call of each pair. a: calls 4, 10, 12; b: calls 6, 8, 14.
  EXPECT_DOUBLE_EQ(s.median("a"), 10);
  EXPECT_DOUBLE_EQ(s.spread("a"), 12.0 / 4.0);
  EXPECT_DOUBLE_EQ(s.median("b"), 8);
  EXPECT_DOUBLE_EQ(s.spread("b"), 14.0 / 6.0);
}

}  // namespace
