#include "cyan/common/version.h"

#include <gtest/gtest.h>

#include <string>

TEST(version, library_matches_headers) {
  // The string compiled into the library is the one the headers were generated with.
  EXPECT_EQ(cyan::version(), CYAN_VERSION_STRING);
  const std::string expected = std::to_string(CYAN_VERSION_MAJOR) + "." +
                               std::to_string(CYAN_VERSION_MINOR) + "." +
                               std::to_string(CYAN_VERSION_PATCH);
  EXPECT_EQ(cyan::version(), expected);
  EXPECT_EQ(CYAN_VERSION,
            CYAN_VERSION_MAJOR * 10000 + CYAN_VERSION_MINOR * 100 + CYAN_VERSION_PATCH);
}
