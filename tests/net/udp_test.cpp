// udp_socket over loopback: round trips with the sender's address, connected sockets,
// truncation, time limits and cancellation.

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stop_token>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "cyan/dispatch.h"
#include "cyan/net.h"
#include "net/net_support.h"
#include "support/ipv6.h"

namespace {

using namespace std::chrono_literals;
using cyan::dispatch::co_spawn;
using cyan::dispatch::handler_thread;
using cyan::dispatch::task;
using cyan::net::endpoint;
using cyan::net::udp_socket;
using cyan::test::run_on;

TEST(udp, a_round_trip_reports_each_sender) {
  handler_thread server_thread;
  handler_thread client_thread;
  auto server = udp_socket::bind(endpoint::loopback_v4());
  const endpoint address = server.local_endpoint();
  auto served = co_spawn(server_thread, [&]() -> task<endpoint> {
    std::byte buffer[64];
    const auto got = co_await server.receive_from(buffer, 5s);
    EXPECT_FALSE(got.truncated);
    std::string reply =
        "re:" + std::string(cyan::net::as_string_view(std::span(buffer).first(got.size)));
    EXPECT_EQ(co_await server.send_to(cyan::net::buffer(reply), got.sender, 5s), reply.size());
    co_return got.sender;
  });
  const auto [reply, client_address] =
      run_on(client_thread, [&]() -> task<std::pair<std::string, endpoint>> {
        auto client = udp_socket::bind(endpoint::loopback_v4());
        co_await client.send_to(cyan::net::buffer("ping"), address, 5s);
        std::byte buffer[64];
        const auto got = co_await client.receive_from(buffer, 5s);
        EXPECT_EQ(got.sender, address);
        co_return std::pair{ std::string(
                                 cyan::net::as_string_view(std::span(buffer).first(got.size))),
                             client.local_endpoint() };
      });
  EXPECT_EQ(reply, "re:ping");
  EXPECT_EQ(served.get(), client_address);
}

TEST(udp, connected_sockets_send_and_receive_and_truncation_shows) {
  handler_thread h;
  const auto result = run_on(h, []() -> task<std::string> {
    auto a = udp_socket::bind(endpoint::loopback_v4());
    auto b = udp_socket::bind(endpoint::loopback_v4());
    a.connect(b.local_endpoint());
    b.connect(a.local_endpoint());
    co_await a.send(cyan::net::buffer("0123456789"));
    std::byte small[4];
    const auto cut = co_await b.receive_from(small, 5s);
    EXPECT_TRUE(cut.truncated);
    EXPECT_EQ(cut.size, 4u);
    co_await b.send(cyan::net::buffer("back"));
    std::byte buffer[16];
    const std::size_t n = co_await a.receive(buffer, 5s);
    co_return std::string(cyan::net::as_string_view(std::span(buffer).first(n)));
  });
  EXPECT_EQ(result, "back");
}

TEST(udp, a_receive_times_out_then_works) {
  handler_thread h;
  const auto result = run_on(h, []() -> task<std::pair<std::error_code, std::size_t>> {
    auto a = udp_socket::bind(endpoint::loopback_v4());
    auto b = udp_socket::bind(endpoint::loopback_v4());
    std::byte buffer[16];
    std::error_code code;
    try {
      co_await a.receive_from(buffer, 20ms);
    } catch (const std::system_error& e) {
      code = e.code();
    }
    co_await b.send_to(cyan::net::buffer("late"), a.local_endpoint());
    const auto got = co_await a.receive_from(buffer, 5s);
    co_return std::pair{ code, got.size };
  });
  EXPECT_EQ(result.first, std::errc::timed_out);
  EXPECT_EQ(result.second, 4u);
}

TEST(udp, a_stop_request_cancels_a_pending_receive) {
  handler_thread h;
  std::stop_source stop;
  auto socket = udp_socket::bind(endpoint::loopback_v4());
  auto receiver = co_spawn(
      h,
      [&]() -> task<std::error_code> {
        std::byte buffer[16];
        co_return co_await cyan::test::failure_of(socket.receive_from(buffer));
      },
      stop.get_token());
  co_spawn(h, []() -> task<> { co_return; }()).get();  // the receive waits by now
  stop.request_stop();
  EXPECT_EQ(receiver.get(), std::errc::operation_canceled);
}

TEST(udp, ipv6_round_trip) {
  if (!cyan::test::kernel_has_ipv6()) {
    GTEST_SKIP() << "this kernel has no IPv6 loopback (::1)";
  }
  handler_thread h;
  const auto size = run_on(h, []() -> task<std::size_t> {
    auto a = udp_socket::bind(endpoint::loopback_v6());
    auto b = udp_socket::bind(endpoint::loopback_v6());
    co_await a.send_to(cyan::net::buffer("v6"), b.local_endpoint());
    std::byte buffer[8];
    const auto got = co_await b.receive_from(buffer, 5s);
    EXPECT_EQ(got.sender, a.local_endpoint());
    co_return got.size;
  });
  EXPECT_EQ(size, 2u);
}

// The size of datagram i of the echo below: 1 B up to the largest IPv4 UDP payload, 65,507 B.
std::size_t echo_size(std::size_t i) {
  constexpr std::size_t kSizes[] = { 1, 2, 7, 64, 512, 1'472, 1'473, 4'096, 9'000, 65'507 };
  return i < std::size(kSizes) ? kSizes[i] : 1 + (i * 7'919) % 65'507;
}

// What the server of the echo below saw of one datagram.
struct echoed {
  std::size_t size = 0;
  bool truncated = false;
  bool pattern_kept = false;
  endpoint sender;
};

// A client on one handler thread sends `count` datagrams (datagram i: pattern i, echo_size(i)
// bytes) to a server on another, each awaited in turn: the server receives it (a 2 s limit) and
// sends back what it got; datagram `cut` is received into 100 bytes. Returns what the server saw;
// the client checks each echo's size, bytes and sender.
std::vector<echoed> echo_datagrams(std::size_t count, std::size_t cut) {
  constexpr std::size_t kCutTo = 100;
  handler_thread server_thread;
  handler_thread client_thread;
  auto server = udp_socket::bind(endpoint::loopback_v4());
  const endpoint address = server.local_endpoint();
  auto served = co_spawn(server_thread, [&]() -> task<std::vector<echoed>> {
    std::vector<std::byte> buffer(65'507);
    std::vector<echoed> seen;
    for (std::size_t i = 0; i < count; ++i) {
      const auto into = std::span(buffer).first(i == cut ? kCutTo : buffer.size());
      const auto got = co_await server.receive_from(into, 2s);
      const auto bytes = std::span(buffer).first(got.size);
      seen.push_back({ got.size, got.truncated,
                       cyan::test::first_mismatch(static_cast<std::uint32_t>(i), bytes) == got.size,
                       got.sender });
      EXPECT_EQ(co_await server.send_to(bytes, got.sender, 2s), got.size);
    }
    co_return seen;
  });
  const auto client_address = run_on(client_thread, [&]() -> task<endpoint> {
    auto client = udp_socket::bind(endpoint::loopback_v4());
    std::vector<std::byte> reply(65'507);
    for (std::size_t i = 0; i < count; ++i) {
      const auto datagram = cyan::test::pattern(static_cast<std::uint32_t>(i), echo_size(i));
      EXPECT_EQ(co_await client.send_to(datagram, address, 2s), datagram.size());
      const auto got = co_await client.receive_from(reply, 2s);
      EXPECT_EQ(got.size, i == cut ? kCutTo : datagram.size()) << "datagram " << i;
      EXPECT_EQ(cyan::test::first_mismatch(static_cast<std::uint32_t>(i),
                                           std::span(reply).first(got.size)),
                got.size)
          << "datagram " << i;
      EXPECT_EQ(got.sender, address);
    }
    co_return client.local_endpoint();
  });
  auto seen = served.get();
  for (echoed& e : seen) {
    EXPECT_EQ(e.sender, client_address);
  }
  return seen;
}

// A new user's first echo: five 1-byte datagrams. On io_uring the third receive used to wait on
// the stream sockets' multishot receive (two waited reads switch a stream socket to it) and timed
// out.
TEST(udp, an_echo_of_five_one_byte_datagrams_receives_each) {
  handler_thread server_thread;
  handler_thread client_thread;
  auto server = udp_socket::bind(endpoint::loopback_v4());
  const endpoint address = server.local_endpoint();
  auto served = co_spawn(server_thread, [&]() -> task<std::string> {
    std::string got_bytes;
    for (int i = 0; i < 5; ++i) {
      std::byte buffer[1];
      const auto got = co_await server.receive_from(buffer, 2s);
      got_bytes += static_cast<char>(buffer[0]);
      co_await server.send_to(std::span(buffer).first(got.size), got.sender, 2s);
    }
    co_return got_bytes;
  });
  const auto echoed_bytes = run_on(client_thread, [&]() -> task<std::string> {
    auto client = udp_socket::bind(endpoint::loopback_v4());
    std::string back;
    for (char c = '0'; c < '5'; ++c) {
      const std::byte datagram[1] = { static_cast<std::byte>(c) };
      co_await client.send_to(datagram, address, 2s);
      std::byte buffer[1];
      co_await client.receive_from(buffer, 2s);
      back += static_cast<char>(buffer[0]);
    }
    co_return back;
  });
  EXPECT_EQ(served.get(), "01234");
  EXPECT_EQ(echoed_bytes, "01234");
}

// Datagrams keep their boundaries, senders and truncation however many a socket receives: every
// one of 1,000 (1 B to 65,507 B; number 10 cut to 100 B) arrives once, whole, in order.
TEST(udp, a_thousand_datagrams_each_awaited_in_turn_arrive_once_with_their_sender) {
  constexpr std::size_t kCount = 1'000;
  constexpr std::size_t kCut = 10;
  const std::vector<echoed> seen = echo_datagrams(kCount, kCut);
  ASSERT_EQ(seen.size(), kCount);
  for (std::size_t i = 0; i < kCount; ++i) {
    EXPECT_EQ(seen[i].size, i == kCut ? 100 : echo_size(i)) << "datagram " << i;
    EXPECT_EQ(seen[i].truncated, i == kCut) << "datagram " << i;
    EXPECT_TRUE(seen[i].pattern_kept) << "datagram " << i;
  }
}

TEST(udp, a_unix_endpoint_is_refused) {
  EXPECT_THROW((void)udp_socket::bind(endpoint::unix_socket("/tmp/x.sock")), std::invalid_argument);
}

}  // namespace
