// adaptive_attempts (cyan/common/detail/adaptive_attempts.h): after two attempts in a row that
// missed, occasions skip the attempt, except a retry after 16 of them, then after twice as many
// each time a retry misses (up to 256); one attempt that hits restores them all.

#include "cyan/common/detail/adaptive_attempts.h"

#include <gtest/gtest.h>

#include <vector>

namespace {

using cyan::detail::adaptive_attempts;

TEST(adaptive_attempts, stop_after_two_misses_and_retry_less_and_less_often) {
  adaptive_attempts policy;
  EXPECT_TRUE(policy.should_try());
  policy.record(false);
  EXPECT_TRUE(policy.should_try());  // one miss is not a pattern
  policy.record(true);
  policy.record(false);
  EXPECT_TRUE(policy.should_try());  // a hit in between starts the count again
  policy.record(false);
  std::vector<int> tried;
  for (int occasion = 1; occasion <= 16 + 32 + 64 + 128 + 256 + 256 + 256; ++occasion) {
    if (policy.should_try()) {
      tried.push_back(occasion);
      policy.record(false);  // still nothing
    }
  }
  EXPECT_EQ(tried, (std::vector<int>{ 16, 48, 112, 240, 496, 752, 1008 }));
  policy.record(true);  // one retry hit
  for (int occasion = 0; occasion < 20; ++occasion) {
    EXPECT_TRUE(policy.should_try());
    policy.record(true);
  }
  // The pattern again: retries start over at 16.
  policy.record(false);
  policy.record(false);
  tried.clear();
  for (int occasion = 1; occasion <= 48; ++occasion) {
    if (policy.should_try()) {
      tried.push_back(occasion);
      policy.record(false);
    }
  }
  EXPECT_EQ(tried, (std::vector<int>{ 16, 48 }));
}

}  // namespace
