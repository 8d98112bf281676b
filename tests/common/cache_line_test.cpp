#include "cyan/common/cache_line.h"

#include <gtest/gtest.h>

#include <cstdint>

TEST(cache_line, padded_values_never_share_a_line) {
  // Two adjacent padded counters start exactly one cache line apart.
  cyan::cache_padded<std::uint64_t> pair[2];
  const auto first = reinterpret_cast<std::uintptr_t>(&pair[0].value);
  const auto second = reinterpret_cast<std::uintptr_t>(&pair[1].value);
  EXPECT_EQ(second - first, cyan::cache_line_size);
  EXPECT_EQ(first % cyan::cache_line_size, 0u);
}
