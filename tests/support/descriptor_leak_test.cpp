// Run by ctest, which expects this test to fail (tests/support/CMakeLists.txt): it keeps both
// ends of a pipe open, and the descriptor check that every test executable's main installs
// must fail it, naming them.

#include <unistd.h>

#include <gtest/gtest.h>

TEST(descriptor_leak, keeps_a_pipe_open) {
  int ends[2];
  ASSERT_EQ(::pipe(ends), 0);
}
