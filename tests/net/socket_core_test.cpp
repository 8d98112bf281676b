// socket_core's adaptive speculation of reads (see net/detail/socket_core.h): after two
// speculative reads in a row that would have blocked, reads wait for readiness first, except
// a retry after 16 of them, then after twice as many each time a retry misses (up to 256), and
// one speculative read that finds data restores speculation.

#include "cyan/net/detail/socket_core.h"

#include <sys/socket.h>

#include <gtest/gtest.h>

#include <vector>

namespace {

using cyan::net::detail::socket_core;

TEST(socket_core, reads_speculate_until_two_in_a_row_would_block) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
  socket_core a(fds[0]);
  socket_core b(fds[1]);
  EXPECT_TRUE(a.speculate_read());
  a.speculated_read(true);
  EXPECT_TRUE(a.speculate_read());  // one miss is not a pattern
  a.speculated_read(false);
  a.speculated_read(true);
  EXPECT_TRUE(a.speculate_read());  // a hit in between starts the count again
  a.speculated_read(true);
  std::vector<int> tried;
  for (int read = 1; read <= 16 + 32 + 64 + 128 + 256 + 256 + 256; ++read) {
    if (a.speculate_read()) {
      tried.push_back(read);
      a.speculated_read(true);  // still nothing there
    }
  }
  EXPECT_EQ(tried, (std::vector<int>{ 16, 48, 112, 240, 496, 752, 1008 }));
  a.speculated_read(false);  // one try found data
  for (int read = 0; read < 20; ++read) {
    EXPECT_TRUE(a.speculate_read());
    a.speculated_read(false);
  }
  // The pattern again: retries start over at 16.
  a.speculated_read(true);
  a.speculated_read(true);
  tried.clear();
  for (int read = 1; read <= 48; ++read) {
    if (a.speculate_read()) {
      tried.push_back(read);
      a.speculated_read(true);
    }
  }
  EXPECT_EQ(tried, (std::vector<int>{ 16, 48 }));
  EXPECT_TRUE(b.speculate_read());  // per socket
}

}  // namespace
