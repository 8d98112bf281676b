// Every test executable's main (cyan_add_test links it in place of GTest::gtest_main):
// GoogleTest's, with descriptor_check after each test.

#include <gtest/gtest.h>

#include "support/descriptor_check.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // Appended after GoogleTest's printer: OnTestEnd runs in reverse order, so a failure it adds
  // is reported with the test.
  ::testing::UnitTest::GetInstance()->listeners().Append(new cyan::test::descriptor_check());
  return RUN_ALL_TESTS();
}
