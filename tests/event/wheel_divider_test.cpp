// Tests for cyan/event/detail/wheel_divider.h: division by an invariant divisor, checked against
// the hardware divide for every kind of divisor.
#include "cyan/event/detail/wheel_divider.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>

namespace {

TEST(wheel_divider, matches_hardware_division_for_every_kind_of_divisor) {
  std::mt19937_64 rng(20261129);
  const std::uint64_t divisors[] = { 1,
                                     2,
                                     3,
                                     7,
                                     64,
                                     1000,
                                     1'000'000,
                                     999'999'937,
                                     std::uint64_t{ 1 } << 40,
                                     (std::uint64_t{ 1 } << 63) + 5,
                                     ~std::uint64_t{ 0 } };
  for (const std::uint64_t d : divisors) {
    const cyan::event::detail::wheel_divider divider(d);
    for (int k = 0; k < 20000; ++k) {
      const std::uint64_t n = k < 4 ? std::uint64_t{ static_cast<std::uint64_t>(k) } * (d / 2 + 1)
                                    : rng() >> (rng() % 64);
      ASSERT_EQ(divider.divide(n), n / d) << n << " / " << d;
      if (n <= ~std::uint64_t{ 0 } - d + 1) {  // divide_up's domain
        ASSERT_EQ(divider.divide_up(n), n / d + (n % d != 0 ? 1 : 0)) << n << " / " << d;
      }
    }
    EXPECT_EQ(divider.divide(~std::uint64_t{ 0 }), ~std::uint64_t{ 0 } / d);
  }
}

TEST(wheel_divider, rounds_up_to_the_edge_of_its_domain) {
  for (const std::uint64_t d :
       { std::uint64_t{ 1 }, std::uint64_t{ 3 }, std::uint64_t{ 1'000'000 } }) {
    const cyan::event::detail::wheel_divider divider(d);
    const std::uint64_t last = ~std::uint64_t{ 0 } - d + 1;  // the largest n divide_up takes
    EXPECT_EQ(divider.divide_up(last), last / d + (last % d != 0 ? 1 : 0)) << d;
    EXPECT_EQ(divider.divide_up(0), 0U) << d;
    EXPECT_EQ(divider.divide_up(d), 1U) << d;
    EXPECT_EQ(divider.divide_up(d + 1), 2U) << d;
  }
}

}  // namespace
