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
#if defined(__SANITIZE_ADDRESS__)
  // No leak check in the program: GCC 12's LeakSanitizer does not take its allocator's locks
  // across fork(), so the child's check at exit can wait forever for one that a thread of the
  // parent held (seen: __lsan::LockAllocator in ForceLock); and it would report what only the
  // parent's vanished threads referenced (their thread_local lists, their frame caches).
  ::setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
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

// ThreadSanitizer cannot run a child of a multi-threaded process that starts threads: it dies
// by default (die_after_fork), and without that it stops at the first new thread, whose id is
// that of one of the parent's in its registry ("dup thread with used id", exit 66).
#if defined(__SANITIZE_THREAD__)
#define SKIP_A_CHILD_THAT_STARTS_THREADS() \
  GTEST_SKIP() << "ThreadSanitizer does not support threads started after a multi-threaded fork"
#else
#define SKIP_A_CHILD_THAT_STARTS_THREADS()
#endif

TEST(fork, a_child_runs_its_tasks_on_a_global_pool_of_its_own_and_exits_zero) {
  SKIP_A_CHILD_THAT_STARTS_THREADS();
  EXPECT_EQ(run_child("global_pool"),
            "ran 101 of 101\nchild exited 0\nparent ran 64 of 64\nexit 0\n");
}

TEST(fork, a_child_echoes_over_a_socket_on_its_own_handler_thread_and_exits_zero) {
  SKIP_A_CHILD_THAT_STARTS_THREADS();
  EXPECT_EQ(run_child("handler_thread"),
            "echoed 5 bytes\nchild exited 0\nparent ran 64 of 64\nexit 0\n");
}

}  // namespace
