// A task destroyed while its read is in flight leaves the kernel no pointer into its frame: the
// read's buffer lives in the frame, the socket outside it. The task hops from thread A to
// thread B and reads there; B finishes under the read, which destroys the task's frame (see
// "lost" in cyan/dispatch/detail/timed_wait.h). On io_uring the frame's destructor cancels the
// ring's recv and waits for its completion, so bytes that the peer sends afterwards stay in the
// socket for whoever reads it next, instead of going into freed memory (which the ASan lane
// could not see: the kernel's writes bypass its shadow). The test reads them itself.

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

#include "cyan/dispatch.h"
#include "cyan/net.h"
#include "net/net_support.h"

namespace {

using namespace std::chrono_literals;
using cyan::dispatch::async_scope;
using cyan::dispatch::co_spawn;
using cyan::dispatch::handler_thread;
using cyan::dispatch::task;
using cyan::net::endpoint;
using cyan::net::tcp_listener;
using cyan::net::tcp_socket;
using cyan::test::frame_sentinel;
using cyan::test::run_on;

// Up to `size` bytes already in `fd`'s receive queue, waiting at most 5 s for the first.
std::string receive_waiting_bytes(int fd, std::size_t size) {
  ::pollfd ready{ fd, POLLIN, 0 };
  if (::poll(&ready, 1, 5000) != 1) {
    return "";
  }
  std::string bytes(size, '\0');
  const long n = ::recv(fd, bytes.data(), bytes.size(), MSG_DONTWAIT);
  bytes.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  return bytes;
}

TEST(frame_lifetime, a_read_in_flight_when_its_frame_is_destroyed_takes_no_later_bytes) {
  handler_thread a;
  std::optional<handler_thread> b{ std::in_place };
  handler_thread peer_thread;
  auto listener = tcp_listener::bind(endpoint::loopback_v4());
  const endpoint address = listener.local_endpoint();
  auto connecting = co_spawn(peer_thread, [&]() -> task<tcp_socket> {
    co_return co_await tcp_socket::connect(address, 5s);
  });
  // The socket is B's (accepted there) and outlives the task; the buffer is the task's.
  tcp_socket reader_socket =
      run_on(*b, [&]() -> task<tcp_socket> { co_return co_await listener.accept(5s); });
  tcp_socket peer = connecting.get();
  std::atomic<bool> waiting{ false };
  std::atomic<bool> destroyed{ false };
  std::atomic<bool> resumed{ false };
  async_scope scope;
  scope.spawn(a, [&]() -> task<> {
    const frame_sentinel sentinel{ &destroyed };
    co_await b->schedule();
    std::byte buffer[64];
    waiting = true;
    co_await reader_socket.read_some(buffer);
    resumed = true;
  });
  // The read waits once a job posted to B after `waiting` was set has run there.
  for (int i = 0; i < 100'000 && !waiting.load(); ++i) {
    run_on(*b, []() -> task<> { co_return; });
  }
  run_on(*b, []() -> task<> { co_return; });
  ASSERT_TRUE(waiting.load());

  b->stop();
  b->join();
  EXPECT_TRUE(destroyed.load()) << "the task outlived the thread it read on";
  run_on(peer_thread, [&]() -> task<> { co_await peer.write_all(cyan::net::buffer("late"), 5s); });
  EXPECT_EQ(receive_waiting_bytes(reader_socket.native_handle(), 16), "late");
  EXPECT_FALSE(resumed.load());
  scope.request_stop();
  scope.join_blocking();
  run_on(peer_thread, [&]() -> task<> {
    peer.close();
    co_return;
  });
}

}  // namespace
