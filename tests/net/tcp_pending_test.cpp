// One read and one write at a time per socket: a second read (or write, or accept) while one
// is pending throws std::logic_error before it moves any byte, and the pending one goes on
// undisturbed. Over TCP and Unix-domain connections whose far end is a plain descriptor that
// the test reads and writes itself.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "cyan/dispatch.h"
#include "cyan/net.h"
#include "net/net_support.h"

namespace {

using namespace std::chrono_literals;
using cyan::dispatch::co_spawn;
using cyan::dispatch::handler_thread;
using cyan::dispatch::task;
using cyan::net::endpoint;
using cyan::net::socket_handle;
using cyan::net::tcp_listener;
using cyan::net::tcp_socket;
using cyan::test::first_mismatch;
using cyan::test::pattern;
using cyan::test::run_on;

enum class transport { tcp, unix_stream };

// A connected pair: `ours` for tcp_socket::adopt(), `peer` a blocking descriptor of the test's.
struct raw_pair {
  socket_handle ours;
  socket_handle peer;
};

raw_pair connected_pair(transport kind) {
  if (kind == transport::unix_stream) {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
      throw std::system_error(errno, std::generic_category(), "socketpair");
    }
    return { socket_handle(fds[0]), socket_handle(fds[1]) };
  }
  socket_handle listening(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ::sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::socklen_t size = sizeof address;
  auto* generic = reinterpret_cast<::sockaddr*>(&address);
  if (::bind(listening.native_handle(), generic, size) != 0 ||
      ::listen(listening.native_handle(), 1) != 0 ||
      ::getsockname(listening.native_handle(), generic, &size) != 0) {
    throw std::system_error(errno, std::generic_category(), "listen");
  }
  socket_handle ours(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (::connect(ours.native_handle(), generic, size) != 0) {
    throw std::system_error(errno, std::generic_category(), "connect");
  }
  socket_handle peer(::accept4(listening.native_handle(), nullptr, nullptr, SOCK_CLOEXEC));
  return { std::move(ours), std::move(peer) };
}

// Reads exactly `size` bytes from a blocking descriptor (fewer only at end of stream).
std::vector<std::byte> read_raw(int fd, std::size_t size) {
  std::vector<std::byte> bytes(size);
  std::size_t got = 0;
  while (got < size) {
    const long n = ::recv(fd, bytes.data() + got, size - got, 0);
    if (n <= 0) {
      break;
    }
    got += static_cast<std::size_t>(n);
  }
  bytes.resize(got);
  return bytes;
}

void write_raw(int fd, const std::string& text) {
  ASSERT_EQ(::send(fd, text.data(), text.size(), MSG_NOSIGNAL), static_cast<long>(text.size()));
}

class tcp_pending : public ::testing::TestWithParam<transport> {};

// Task A writes 8 MiB and waits for room; the peer reads 64 KiB, and right then (on the
// socket's thread, before A's wake-up) task B writes a marker: B is refused, and the peer
// reads A's 8 MiB exactly, with nothing in between.
TEST_P(tcp_pending, a_second_write_is_refused_before_any_byte_moves) {
  constexpr std::size_t kTotal = 8 << 20;
  constexpr std::size_t kFirstRead = 64 << 10;
  handler_thread h;
  raw_pair pair = connected_pair(GetParam());
  tcp_socket socket =
      run_on(h, [&]() -> task<tcp_socket> { co_return tcp_socket::adopt(std::move(pair.ours)); });
  const std::vector<std::byte> data = pattern(3, kTotal);
  std::atomic<bool> written{ false };
  auto writer = co_spawn(h, [&]() -> task<> {
    co_await socket.write_all(data, 30s);
    written = true;
  });
  run_on(h, []() -> task<> { co_return; });  // A ran first and waits for room
  ASSERT_FALSE(written.load()) << "8 MiB fitted in the socket buffers";
  const int peer = pair.peer.native_handle();
  // On io_uring A's first send reaches the kernel at h's next drain of its ring, which may come
  // after the no-op above: the task below blocks h in read_raw(), so wait for A's bytes first.
  ::pollfd readable{ peer, POLLIN, 0 };
  ASSERT_EQ(::poll(&readable, 1, 5000), 1) << "A's first bytes did not arrive";
  std::vector<std::byte> received;
  const bool refused = run_on(h, [&]() -> task<bool> {
    received = read_raw(peer, kFirstRead);
    try {
      co_await socket.write_all(cyan::net::buffer("<BBBBBBBB>"), 5s);
    } catch (const std::logic_error&) {
      co_return true;
    }
    co_return false;
  });
  EXPECT_TRUE(refused);
  std::vector<std::byte> rest = read_raw(peer, kTotal - kFirstRead);
  received.insert(received.end(), rest.begin(), rest.end());
  writer.get();
  EXPECT_TRUE(written.load());
  ASSERT_EQ(received.size(), kTotal);
  EXPECT_EQ(first_mismatch(3, received), kTotal) << "bytes interleaved into the stream";
  run_on(h, [&]() -> task<> {
    socket.close();
    co_return;
  });
  EXPECT_EQ(read_raw(peer, 1).size(), 0u) << "nothing after the 8 MiB";
}

// Task A waits in read_exact(20) holding 10 bytes; the next 10 arrive, and right then task B
// calls read_some: B is refused, and A gets all 20 in order.
TEST_P(tcp_pending, a_second_read_is_refused_and_the_pending_one_gets_every_byte) {
  handler_thread h;
  raw_pair pair = connected_pair(GetParam());
  const int peer = pair.peer.native_handle();
  tcp_socket socket =
      run_on(h, [&]() -> task<tcp_socket> { co_return tcp_socket::adopt(std::move(pair.ours)); });
  write_raw(peer, "0123456789");
  std::string text(20, '\0');
  auto reader =
      co_spawn(h, [&]() -> task<> { co_await socket.read_exact(cyan::net::buffer(text), 30s); });
  run_on(h, []() -> task<> { co_return; });  // A ran first: it holds 10 bytes and waits
  const auto second = run_on(h, [&]() -> task<std::string> {
    write_raw(peer, "ABCDEFGHIJ");
    std::string stolen(10, '\0');
    try {
      const std::size_t n = co_await socket.read_some(cyan::net::buffer(stolen), 5s);
      co_return "read " + stolen.substr(0, n);
    } catch (const std::logic_error&) {
      co_return "refused";
    }
  });
  EXPECT_EQ(second, "refused");
  reader.get();
  EXPECT_EQ(text, "0123456789ABCDEFGHIJ");
  run_on(h, [&]() -> task<> {  // on its thread: closed before the test ends
    socket.close();
    co_return;
  });
}

INSTANTIATE_TEST_SUITE_P(transports, tcp_pending,
                         ::testing::Values(transport::tcp, transport::unix_stream),
                         [](const auto& info) {
                           return info.param == transport::tcp ? "tcp" : "unix_stream";
                         });

// A second accept() on a listener with one pending is refused; the pending one gets the next
// connection.
TEST(tcp_pending_accept, a_second_accept_is_refused_and_the_first_gets_the_connection) {
  handler_thread h;
  auto listener = tcp_listener::bind(endpoint::loopback_v4());
  auto first = co_spawn(h, [&]() -> task<endpoint> {
    tcp_socket accepted = co_await listener.accept(30s);
    co_return accepted.remote_endpoint();
  });
  run_on(h, []() -> task<> { co_return; });  // the first accept waits
  const bool refused = run_on(h, [&]() -> task<bool> {
    try {
      (void)co_await listener.accept(5s);
    } catch (const std::logic_error&) {
      co_return true;
    }
    co_return false;
  });
  EXPECT_TRUE(refused);
  tcp_socket client = run_on(h, [&]() -> task<tcp_socket> {
    co_return co_await tcp_socket::connect(listener.local_endpoint(), 5s);
  });
  EXPECT_EQ(first.get(), client.local_endpoint());
  run_on(h, [&]() -> task<> {  // on its thread: closed before the test ends
    client.close();
    co_return;
  });
}

}  // namespace
