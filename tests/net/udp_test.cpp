// udp_socket over loopback: round trips with the sender's address, connected sockets,
// truncation, time limits and cancellation.

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <stop_token>
#include <string>
#include <system_error>
#include <utility>

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

TEST(udp, a_unix_endpoint_is_refused) {
  EXPECT_THROW((void)udp_socket::bind(endpoint::unix_socket("/tmp/x.sock")), std::invalid_argument);
}

}  // namespace
