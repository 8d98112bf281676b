// child_process's environment: the child gets ours with the given "NAME=value" entries added,
// each replacing ours of the same name, and ours stays as it was.

#include "bench/process.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using namespace std::chrono_literals;
using cyan::bench::child_process;

// What `script` prints in /bin/sh, started with `environment` added.
std::string output_of(const std::string& script, const std::vector<std::string>& environment) {
  child_process shell({ "/bin/sh", "-c", script }, -1, false, false, environment);
  std::string output = shell.read_all(10s);
  EXPECT_EQ(shell.wait(10s), 0);
  return output;
}

TEST(child_process, an_added_variable_reaches_the_child) {
  // Expect the child to see the new variable, and our PATH beside it.
  ::unsetenv("CYAN_PROCESS_TEST");
  EXPECT_EQ(output_of("echo \"[$CYAN_PROCESS_TEST]\"", { "CYAN_PROCESS_TEST=added" }), "[added]\n");
  EXPECT_EQ(output_of("test -n \"$PATH\" && echo path", { "CYAN_PROCESS_TEST=added" }), "path\n");
}

TEST(child_process, an_added_variable_replaces_ours_of_the_same_name_only) {
  // Expect exactly one CYAN_PROCESS_TEST in the child, with the added value; a variable whose
  // name merely starts the same is kept; ours is unchanged afterwards.
  ::setenv("CYAN_PROCESS_TEST", "ours", 1);
  ::setenv("CYAN_PROCESS_TEST_LONGER", "kept", 1);
  EXPECT_EQ(output_of("env | grep -c '^CYAN_PROCESS_TEST='; echo \"$CYAN_PROCESS_TEST "
                      "$CYAN_PROCESS_TEST_LONGER\"",
                      { "CYAN_PROCESS_TEST=theirs" }),
            "1\ntheirs kept\n");
  EXPECT_STREQ(std::getenv("CYAN_PROCESS_TEST"), "ours");
  ::unsetenv("CYAN_PROCESS_TEST");
  ::unsetenv("CYAN_PROCESS_TEST_LONGER");
}

TEST(child_process, without_additions_the_child_has_our_environment) {
  // Expect our variable, as it is, in the child.
  ::setenv("CYAN_PROCESS_TEST", "ours", 1);
  EXPECT_EQ(output_of("echo \"$CYAN_PROCESS_TEST\"", {}), "ours\n");
  ::unsetenv("CYAN_PROCESS_TEST");
}

}  // namespace
