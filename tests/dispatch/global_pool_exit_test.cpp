#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

// Runs global_pool_exit_child (path compiled in as CYAN_GLOBAL_POOL_EXIT_CHILD): a program that
// posts work on the global pool and returns from main. Expect a clean exit (status 0, no
// crash in static destruction) after every posted task ran.
TEST(global_pool_exit, returning_from_main_drains_the_pool_and_exits_cleanly) {
  FILE* child = popen(CYAN_GLOBAL_POOL_EXIT_CHILD, "r");
  ASSERT_NE(child, nullptr);
  std::string output;
  char buffer[256];
  while (std::fgets(buffer, sizeof buffer, child) != nullptr) {
    output += buffer;
  }
  const int status = pclose(child);
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status << ", output: " << output;
  EXPECT_EQ(WEXITSTATUS(status), 0) << output;
  EXPECT_EQ(output, "ran 11000 of 11000\n");
}
