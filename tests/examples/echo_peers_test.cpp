// The echo benchmark's peers (examples/peers): the raw epoll floor and the Asio coroutine server
// echo every byte in order and close a connection whose client has ended it, as echo_server
// does. The floor reads once per message (a short read ends the turn) and relies on EPOLLRDHUP
// to see an end of stream that arrived together with the last data.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "bench/process.h"

namespace {

using namespace std::chrono_literals;
using cyan::bench::child_process;
using cyan::bench::port_of_listening_line;

// A blocking loopback connection to `port` (-1 when refused).
int connect_to(unsigned port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ::sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<::sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// What arrives within `limit` until `want` bytes or the end of the stream; `closed` tells which.
std::string receive(int fd, std::size_t want, std::chrono::milliseconds limit, bool& closed) {
  std::string got;
  closed = false;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (got.size() < want) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    ::pollfd ready{ fd, POLLIN, 0 };
    if (left.count() <= 0 || ::poll(&ready, 1, static_cast<int>(left.count())) != 1) {
      break;
    }
    char buffer[8192];
    const ::ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0) {
      closed = true;
      break;
    }
    got.append(buffer, static_cast<std::size_t>(n));
  }
  return got;
}

bool send_all(int fd, const std::string& data) {
  for (std::size_t done = 0; done < data.size();) {
    const ::ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n <= 0) {
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  return true;
}

class EchoPeer : public ::testing::TestWithParam<const char*> {};

// Request/response as load_tester drives them: 64 B, 4 KiB, 16 KiB (the floor's whole buffer: a
// full read, then one that finds nothing) and 40,000 B (more than one read), each echoed exactly
// before the next is sent.
TEST_P(EchoPeer, EchoesEachMessageExactly) {
  child_process server({ GetParam(), "--port", "0", "--threads", "1" }, -1);
  const unsigned port = port_of_listening_line(server.read_line(10s));
  ASSERT_NE(port, 0u);
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
  EXPECT_EQ(server.stop(10s), 0);
}

// The client sends its last message and ends its side at once, so the data and the end of stream
// usually reach the server together (one readiness event): the server must echo the data and
// then close. 30 connections, one at a time, each must see its echo and then the end of stream
// within 5 s; the first that does not ends the test (the child is stopped by its destructor).
TEST_P(EchoPeer, ClosesAConnectionWhoseEndArrivedWithItsLastData) {
  child_process server({ GetParam(), "--port", "0", "--threads", "1" }, -1);
  const unsigned port = port_of_listening_line(server.read_line(10s));
  ASSERT_NE(port, 0u);
  constexpr int kConnections = 30;
  int echoed_then_closed = 0;
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
    ++echoed_then_closed;
  }
  EXPECT_EQ(echoed_then_closed, kConnections);
  EXPECT_EQ(server.stop(10s), 0);
}

INSTANTIATE_TEST_SUITE_P(Peers, EchoPeer,
                         ::testing::Values(CYAN_PROGRAM_EPOLL_ECHO_SERVER,
                                           CYAN_PROGRAM_ASIO_ECHO_SERVER),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return info.index == 0 ? std::string("raw_epoll")
                                                  : std::string("asio_coroutines");
                         });

}  // namespace
