// The echo benchmark's peers (examples/peers): the raw epoll and io_uring floors and the Asio
// coroutine server (on epoll and on io_uring) echo every byte in order and close a connection
// whose client has ended it, as echo_server does. The epoll floor reads once per message (a
// short read ends the turn) and relies on EPOLLRDHUP to see an end of stream that arrived
// together with the last data; the io_uring floor's multishot receive must end with it.

#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "bench/process.h"
#include "loopback_client.h"
#include "support/descriptor_check.h"

namespace {

using namespace std::chrono_literals;
using cyan::bench::child_process;
using cyan::bench::port_of_listening_line;
using cyan::test::connect_to;
using cyan::test::descriptor_table;
using cyan::test::expect_descriptors_back_to_baseline;
using cyan::test::read_descriptor_table;
using cyan::test::receive;
using cyan::test::send_all;

class echo_peer_test : public ::testing::TestWithParam<const char*> {};

// Request/response as load_tester drives them: 64 B, 4 KiB, 16 KiB (the floor's whole buffer: a
// full read, then one that finds nothing) and 40,000 B (more than one read), each echoed exactly
// before the next is sent.
TEST_P(echo_peer_test, echoes_each_message_exactly) {
  child_process server({ GetParam(), "--port", "0", "--threads", "1" }, -1);
  const unsigned port = port_of_listening_line(server.read_line(10s));
  ASSERT_NE(port, 0u);
  const descriptor_table listening = read_descriptor_table(server.pid());
  const int fd = connect_to(port);
  ASSERT_GE(fd, 0);
  bool closed = false;
  int round = 0;
  for (const std::size_t size : { 64u, 4096u, 16384u, 40000u, 64u }) {
    std::string message(size, '\0');
    for (std::size_t i = 0; i < size; ++i) {
      message[i] = static_cast<char>('a' + (i * 7 + static_cast<std::size_t>(round)) % 26);
    }
    ASSERT_TRUE(send_all(fd, message));
    EXPECT_EQ(receive(fd, size, 5s, closed), message) << "message " << round << " of " << size;
    EXPECT_FALSE(closed);
    ++round;
  }
  ::close(fd);
  expect_descriptors_back_to_baseline(server.pid(), listening, 5s, GetParam());
  EXPECT_EQ(server.stop(10s), 0);
}

// The client sends its last message and ends its side at once, so the data and the end of stream
// usually reach the server together (one readiness event): the server must echo the data and
// then close. 30 connections, one at a time, each must see its echo and then the end of stream
// within 5 s; the first that does not ends the test (the child is stopped by its destructor).
TEST_P(echo_peer_test, closes_a_connection_whose_end_arrived_with_its_last_data) {
  child_process server({ GetParam(), "--port", "0", "--threads", "1" }, -1);
  const unsigned port = port_of_listening_line(server.read_line(10s));
  ASSERT_NE(port, 0u);
  const descriptor_table listening = read_descriptor_table(server.pid());
  constexpr int kConnections = 30;
  for (int i = 0; i < kConnections; ++i) {
    const int fd = connect_to(port);
    ASSERT_GE(fd, 0);
    const std::string last = "last words " + std::to_string(i);
    ASSERT_TRUE(send_all(fd, last));
    ASSERT_EQ(::shutdown(fd, SHUT_WR), 0);
    bool closed = false;
    const std::string echoed = receive(fd, last.size(), 5s, closed);
    const std::string more = echoed == last ? receive(fd, 1, 5s, closed) : std::string();
    ::close(fd);
    ASSERT_EQ(echoed, last) << "connection " << i;
    ASSERT_EQ(more, "") << "connection " << i;
    ASSERT_TRUE(closed) << "connection " << i << " was not closed within 5 s";
  }
  expect_descriptors_back_to_baseline(server.pid(), listening, 5s, GetParam());
  EXPECT_EQ(server.stop(10s), 0);
}

// The test names of the peers, in the order of their instantiation below.
std::string peer_name(const ::testing::TestParamInfo<const char*>& info) {
  constexpr const char* kNames[] = { "raw_epoll", "raw_io_uring", "asio_coroutines",
                                     "asio_coroutines_io_uring" };
  return kNames[info.index];
}

INSTANTIATE_TEST_SUITE_P(peers, echo_peer_test,
                         ::testing::Values(CYAN_PROGRAM_EPOLL_ECHO_SERVER,
                                           CYAN_PROGRAM_URING_ECHO_SERVER,
                                           CYAN_PROGRAM_ASIO_ECHO_SERVER,
                                           CYAN_PROGRAM_ASIO_URING_ECHO_SERVER),
                         peer_name);

}  // namespace
