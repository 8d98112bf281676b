// fork() after the global pool ran: the child (tests/net/fork_child.cpp, path compiled in as
// CYAN_FORK_CHILD) returns from main and exits 0 whether it uses cyan or not; it gets a global
// pool of its own, and may start a handler_thread and use sockets on it (on either backend).
// The parent's pool goes on and drains as usual.

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

// Runs the child program in `mode` and returns what it printed, then its exit status.
std::string run_child(const std::string& mode) {
#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer refuses a child of a multi-threaded process that starts threads unless told
  // it may (its own runtime is not fork-safe there; cyan's is what these tests check).
  ::setenv("TSAN_OPTIONS", "die_after_fork=0", 1);
#endif
  const std::string command = std::string(CYAN_FORK_CHILD) + " " + mode;
  FILE* child = ::popen(command.c_str(), "r");
  if (child == nullptr) {
    return "popen failed";
  }
  std::string output;
  char buffer[256];
  while (std::fgets(buffer, sizeof buffer, child) != nullptr) {
    output += buffer;
  }
  const int status = ::pclose(child);
  output += WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status)) + "\n"
                              : "status " + std::to_string(status) + "\n";
  return output;
}

TEST(fork, a_child_that_does_not_use_cyan_returns_from_main_and_exits_zero) {
  EXPECT_EQ(run_child("plain"), "plain\nchild exited 0\nparent ran 64 of 64\nexit 0\n");
}

TEST(fork, a_child_runs_its_tasks_on_a_global_pool_of_its_own_and_exits_zero) {
  EXPECT_EQ(run_child("global_pool"),
            "ran 101 of 101\nchild exited 0\nparent ran 64 of 64\nexit 0\n");
}

TEST(fork, a_child_echoes_over_a_socket_on_its_own_handler_thread_and_exits_zero) {
  EXPECT_EQ(run_child("handler_thread"),
            "echoed 5 bytes\nchild exited 0\nparent ran 64 of 64\nexit 0\n");
}

}  // namespace
