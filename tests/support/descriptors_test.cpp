// The descriptor checks themselves (support/descriptors.h, support/descriptor_check.h): a
// descriptor opened and kept is found and named, a thread's own loop and ring descriptors count
// only beyond what the threads can own, and the listener fails the test that kept one.

#include <unistd.h>

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <ostream>
#include <string>
#include <vector>

#include "support/descriptor_check.h"
#include "support/descriptors.h"

namespace cyan::test {

// How GoogleTest shows one in a failed comparison.
void PrintTo(const open_descriptor& d, std::ostream* out) {
  *out << "fd " << d.fd << " -> " << d.target;
}

}  // namespace cyan::test

namespace {

using cyan::test::descriptor_check;
using cyan::test::descriptor_table;
using cyan::test::descriptors_beyond;
using cyan::test::open_descriptor;
using cyan::test::read_descriptor_table;

constexpr const char* kEpoll = "anon_inode:[eventpoll]";
constexpr const char* kEventfd = "anon_inode:[eventfd]";

TEST(descriptors, a_pipe_kept_is_two_descriptors_beyond_the_baseline_until_closed) {
  const descriptor_table before = read_descriptor_table();
  int ends[2];
  ASSERT_EQ(::pipe(ends), 0);
  const std::vector<open_descriptor> beyond = descriptors_beyond(before, read_descriptor_table());
  ::close(ends[0]);
  ::close(ends[1]);
  ASSERT_EQ(beyond.size(), 2u);
  EXPECT_EQ(beyond[0].fd, std::min(ends[0], ends[1]));
  EXPECT_EQ(beyond[1].fd, std::max(ends[0], ends[1]));
  EXPECT_TRUE(beyond[0].target.starts_with("pipe:[")) << beyond[0].target;
  EXPECT_EQ(beyond[1].target, beyond[0].target);  // both ends of one pipe
  EXPECT_EQ(descriptors_beyond(before, read_descriptor_table()), std::vector<open_descriptor>{});
}

// A number closed and opened again for something else is a new descriptor.
TEST(descriptors, a_number_reused_for_another_socket_is_beyond_the_baseline) {
  const descriptor_table before{ { { 5, "socket:[100]" } }, 1 };
  const descriptor_table now{ { { 5, "socket:[101]" } }, 1 };
  EXPECT_EQ(descriptors_beyond(before, now),
            (std::vector<open_descriptor>{ { 5, "socket:[101]" } }));
}

// Two threads own at most two epolls and four eventfds; a third epoll, or a fifth eventfd, is
// beyond (all of its kind opened since are named: which one is the thread's is unknowable).
// A socket is beyond however many threads there are.
TEST(descriptors, per_thread_kinds_count_only_beyond_what_the_threads_can_own) {
  const descriptor_table before{ { { 3, kEpoll }, { 4, kEventfd } }, 1 };
  const descriptor_table owned{ { { 3, kEpoll },
                                  { 4, kEventfd },
                                  { 5, kEpoll },
                                  { 6, kEventfd },
                                  { 7, kEventfd },
                                  { 8, kEventfd } },
                                2 };
  EXPECT_EQ(descriptors_beyond(before, owned), std::vector<open_descriptor>{});

  descriptor_table more = owned;
  more.descriptors.push_back({ 9, kEpoll });
  more.descriptors.push_back({ 10, kEventfd });
  EXPECT_EQ(descriptors_beyond(before, more), (std::vector<open_descriptor>{ { 5, kEpoll },
                                                                             { 6, kEventfd },
                                                                             { 7, kEventfd },
                                                                             { 8, kEventfd },
                                                                             { 9, kEpoll },
                                                                             { 10, kEventfd } }));

  const descriptor_table socket{ { { 3, kEpoll }, { 4, kEventfd }, { 5, "socket:[7]" } }, 64 };
  EXPECT_EQ(descriptors_beyond(before, socket),
            (std::vector<open_descriptor>{ { 5, "socket:[7]" } }));
}

// The listener every test executable has: a test that keeps a pipe fails, naming both ends;
// closed, it passes.
TEST(descriptor_check, fails_a_test_that_keeps_a_pipe_naming_its_ends) {
  const ::testing::TestInfo& test = *::testing::UnitTest::GetInstance()->current_test_info();
  descriptor_check check(std::chrono::milliseconds(0));
  check.OnTestStart(test);
  int ends[2];
  ASSERT_EQ(::pipe(ends), 0);
  const std::string named =
      "fails_a_test_that_keeps_a_pipe_naming_its_ends left these "
      "descriptors open:\nfd " +
      std::to_string(std::min(ends[0], ends[1])) + " -> pipe:[";
  EXPECT_NONFATAL_FAILURE(check.OnTestEnd(test), named);
  ::close(ends[0]);
  ::close(ends[1]);
  check.OnTestEnd(test);  // nothing left: no failure
}

}  // namespace
