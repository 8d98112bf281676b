// wake_poll_policy (see cyan/dispatch/detail/wake_poll.h): after two wake-ups in a row whose
// first non-blocking turn found nothing, wake-ups skip that turn, except a retry after 16 of
// them, then after twice as many each time a retry misses (up to 256); one turn that finds an
// event restores the turns.

#include "cyan/dispatch/detail/wake_poll.h"

#include <gtest/gtest.h>

#include <vector>

namespace {

using cyan::dispatch::detail::wake_poll_policy;

TEST(wake_poll_policy, turns_stop_after_two_empty_ones_and_retry_less_and_less_often) {
  wake_poll_policy policy;
  EXPECT_TRUE(policy.should_poll());
  policy.polled(false);
  EXPECT_TRUE(policy.should_poll());  // one empty turn is not a pattern
  policy.polled(true);
  policy.polled(false);
  EXPECT_TRUE(policy.should_poll());  // an event in between starts the count again
  policy.polled(false);
  std::vector<int> tried;
  for (int wake = 1; wake <= 16 + 32 + 64 + 128 + 256 + 256 + 256; ++wake) {
    if (policy.should_poll()) {
      tried.push_back(wake);
      policy.polled(false);  // still nothing
    }
  }
  EXPECT_EQ(tried, (std::vector<int>{ 16, 48, 112, 240, 496, 752, 1008 }));
  policy.polled(true);  // one retry found an event
  for (int wake = 0; wake < 20; ++wake) {
    EXPECT_TRUE(policy.should_poll());
    policy.polled(true);
  }
  // The pattern again: retries start over at 16.
  policy.polled(false);
  policy.polled(false);
  tried.clear();
  for (int wake = 1; wake <= 48; ++wake) {
    if (policy.should_poll()) {
      tried.push_back(wake);
      policy.polled(false);
    }
  }
  EXPECT_EQ(tried, (std::vector<int>{ 16, 48 }));
}

}  // namespace
