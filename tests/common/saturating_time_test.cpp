// saturating_ceil / saturating_add (cyan/common/detail/saturating_time.h): a delay rounds up to
// the target's tick, and one the target cannot hold saturates at its maximum ("never").

#include "cyan/common/detail/saturating_time.h"

#include <gtest/gtest.h>

#include <chrono>

namespace {

using namespace std::chrono_literals;
using cyan::detail::saturating_add;
using cyan::detail::saturating_ceil;
using clock_type = std::chrono::steady_clock;

TEST(saturating_time, ceil_rounds_up_and_saturates_at_the_limit) {
  EXPECT_EQ(saturating_ceil<std::chrono::milliseconds>(1500us), 2ms);
  EXPECT_EQ(saturating_ceil<std::chrono::milliseconds>(2000us), 2ms);
  EXPECT_EQ(saturating_ceil<std::chrono::nanoseconds>(std::chrono::duration<double>(0.5)), 500ms);
  EXPECT_EQ(saturating_ceil<std::chrono::nanoseconds>(std::chrono::hours::max()),
            std::chrono::nanoseconds::max());
  EXPECT_EQ(saturating_ceil<std::chrono::nanoseconds>(3h, 2h), 2h);  // at or past the limit
  EXPECT_EQ(saturating_ceil<std::chrono::nanoseconds>(2h, 2h), 2h);
  EXPECT_EQ(saturating_ceil<std::chrono::nanoseconds>(1h, 2h), 1h);
}

TEST(saturating_time, add_saturates_at_the_clocks_end) {
  const clock_type::time_point now = clock_type::now();
  EXPECT_EQ(saturating_add(now, 1500us), now + 1500us);
  EXPECT_EQ(saturating_add(now, std::chrono::duration<double>(1e-9 / 2)), now + 1ns);
  EXPECT_EQ(saturating_add(now, std::chrono::hours::max()), clock_type::time_point::max());
  EXPECT_EQ(saturating_add(now, clock_type::time_point::max() - now),
            clock_type::time_point::max());
}

}  // namespace
