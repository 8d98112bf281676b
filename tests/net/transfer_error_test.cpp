// cyan::net::transfer_error: read_exact() and write_all() that fail part way tell how many bytes
// moved, so that a caller can go on where they stopped without losing or repeating a byte.

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "cyan/dispatch.h"
#include "cyan/net.h"
#include "net/net_support.h"

namespace {

using namespace std::chrono_literals;
using cyan::dispatch::handler_thread;
using cyan::dispatch::task;
using cyan::net::endpoint;
using cyan::net::tcp_listener;
using cyan::net::tcp_socket;
using cyan::net::transfer_error;
using cyan::test::first_mismatch;
using cyan::test::pattern;
using cyan::test::run_on;

// What a transfer_error said: its code and count.
struct failure {
  std::error_code code;
  std::size_t bytes = 0;
};

template <typename Awaitable>
task<std::optional<failure>> failure_of(Awaitable&& operation) {
  try {
    co_await operation;  // as an lvalue: GCC 12 would copy an xvalue awaiter
  } catch (const transfer_error& e) {
    co_return failure{ e.code(), e.bytes_transferred() };
  }
  co_return std::nullopt;
}

// A connection whose two ends belong to handler thread `h`, and are closed there when it goes
// (a close elsewhere would be handed to `h` too; closing here keeps each test's end in order).
class connection {
 public:
  connection(handler_thread& h, tcp_listener& listener) : h_(h) {
    run_on(h, [&]() -> task<> {
      client = co_await tcp_socket::connect(listener.local_endpoint(), 5s);
      server = co_await listener.accept(5s);
    });
  }
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;
  ~connection() {
    run_on(h_, [this]() -> task<> {
      client = tcp_socket();
      server = tcp_socket();
      co_return;
    });
  }

  tcp_socket client;
  tcp_socket server;

 private:
  handler_thread& h_;
};

// The program: "12345" arrives, read_exact(10, 50ms) times out; the retry must not lose
// those five bytes.
TEST(transfer_error, a_read_exact_that_times_out_counts_the_bytes_it_kept) {
  handler_thread h;
  auto listener = tcp_listener::bind(endpoint::loopback_v4());
  connection c(h, listener);
  const std::string text = run_on(h, [&]() -> task<std::string> {
    co_await c.client.write_all(cyan::net::buffer("12345"), 5s);
    std::string buffer(10, '\0');
    const auto timed_out =
        co_await failure_of(c.server.read_exact(cyan::net::buffer(buffer), 50ms));
    EXPECT_TRUE(timed_out.has_value());
    EXPECT_EQ(timed_out->code, std::errc::timed_out);
    EXPECT_EQ(timed_out->bytes, 5u);
    co_await c.client.write_all(cyan::net::buffer("67890ABCDE"), 5s);
    const std::size_t kept = timed_out->bytes;
    co_await c.server.read_exact(std::span(cyan::net::buffer(buffer)).subspan(kept), 5s);
    std::string tail(5, '\0');
    co_await c.server.read_exact(cyan::net::buffer(tail), 5s);
    co_return buffer + tail;
  });
  EXPECT_EQ(text, "1234567890ABCDE");
}

// Caught as std::system_error, as before transfer_error existed.
TEST(transfer_error, is_caught_as_a_system_error_with_the_same_code) {
  handler_thread h;
  auto listener = tcp_listener::bind(endpoint::loopback_v4());
  connection c(h, listener);
  const std::error_code code = run_on(h, [&]() -> task<std::error_code> {
    std::byte buffer[4];
    co_return co_await cyan::test::failure_of(c.server.read_exact(buffer, 10ms));
  });
  EXPECT_EQ(code, std::errc::timed_out);
}

TEST(transfer_error, end_of_stream_counts_the_bytes_read_before_it) {
  handler_thread h;
  auto listener = tcp_listener::bind(endpoint::loopback_v4());
  connection c(h, listener);
  std::string buffer(10, '\0');
  const auto ended = run_on(h, [&]() -> task<std::optional<failure>> {
    co_await c.client.write_all(cyan::net::buffer("abc"), 5s);
    c.client.shutdown_send();
    co_return co_await failure_of(c.server.read_exact(cyan::net::buffer(buffer), 5s));
  });
  ASSERT_TRUE(ended.has_value());
  EXPECT_EQ(ended->code, cyan::net::error::end_of_stream);
  EXPECT_EQ(ended->bytes, 3u);
  EXPECT_EQ(buffer.substr(0, 3), "abc");
}

TEST(transfer_error, a_read_exact_that_succeeds_throws_nothing) {
  handler_thread h;
  auto listener = tcp_listener::bind(endpoint::loopback_v4());
  connection c(h, listener);
  const auto outcome = run_on(h, [&]() -> task<std::optional<failure>> {
    co_await c.client.write_all(cyan::net::buffer("exact"), 5s);
    std::string buffer(5, '\0');
    co_return co_await failure_of(c.server.read_exact(cyan::net::buffer(buffer), 5s));
  });
  EXPECT_FALSE(outcome.has_value());
}

// write_all of 16 MiB to a peer that does not read times out part way; the count says where to
// go on, and the peer then reads the 16 MiB exactly once, in order.
TEST(transfer_error, a_write_all_that_times_out_counts_the_bytes_sent) {
  constexpr std::size_t kTotal = 16 << 20;
  handler_thread h;
  handler_thread reader_thread;
  auto listener = tcp_listener::bind(endpoint::loopback_v4());
  connection c(h, listener);
  const std::vector<std::byte> data = pattern(11, kTotal);
  const auto first = run_on(h, [&]() -> task<std::optional<failure>> {
    co_return co_await failure_of(c.client.write_all(data, 100ms));
  });
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->code, std::errc::timed_out);
  ASSERT_GT(first->bytes, 0u);
  ASSERT_LT(first->bytes, kTotal);
  // The rest goes from where the first stopped while the peer (on the same thread) reads.
  const std::vector<std::byte> received = run_on(h, [&]() -> task<std::vector<std::byte>> {
    auto rest = cyan::dispatch::co_spawn(h, [&]() -> task<> {
      co_await c.client.write_all(std::span(data).subspan(first->bytes), 30s);
      c.client.shutdown_send();
    });
    std::vector<std::byte> all(kTotal + 1);
    std::size_t got = 0;
    for (std::size_t n = 1; n != 0 && got < all.size();) {
      n = co_await c.server.read_some(std::span(all).subspan(got), 30s);
      got += n;
    }
    co_await rest;
    all.resize(got);
    co_return all;
  });
  ASSERT_EQ(received.size(), kTotal);
  EXPECT_EQ(first_mismatch(11, received), kTotal);
}

// The gathering write_all counts across its buffers, in order.
TEST(transfer_error, a_gathering_write_all_that_times_out_counts_across_its_buffers) {
  constexpr std::size_t kPiece = 6 << 20;
  handler_thread h;
  auto listener = tcp_listener::bind(endpoint::loopback_v4());
  connection c(h, listener);
  const std::vector<std::byte> data = pattern(13, 3 * kPiece);
  const std::array<std::span<const std::byte>, 3> pieces{ std::span(data).subspan(0, kPiece),
                                                          std::span(data).subspan(kPiece, kPiece),
                                                          std::span(data).subspan(2 * kPiece) };
  const auto first = run_on(h, [&]() -> task<std::optional<failure>> {
    co_return co_await failure_of(c.client.write_all(pieces, 100ms));
  });
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->code, std::errc::timed_out);
  ASSERT_GT(first->bytes, 0u);
  ASSERT_LT(first->bytes, data.size());
  run_on(h, [&]() -> task<> {
    c.client = tcp_socket();  // the peer reads what was sent, then end of stream
    co_return;
  });
  const std::vector<std::byte> received = run_on(h, [&]() -> task<std::vector<std::byte>> {
    std::vector<std::byte> all(data.size());
    std::size_t got = 0;
    for (std::size_t n = 1; n != 0 && got < all.size();) {
      n = co_await c.server.read_some(std::span(all).subspan(got), 30s);
      got += n;
    }
    all.resize(got);
    co_return all;
  });
  EXPECT_EQ(received.size(), first->bytes) << "the count is what the peer received";
  EXPECT_EQ(first_mismatch(13, received), received.size());
}

// A write to a peer that reset the connection fails with the bytes sent before (none here).
TEST(transfer_error, a_write_all_to_a_reset_peer_counts_what_went_before) {
  handler_thread h;
  auto listener = tcp_listener::bind(endpoint::loopback_v4());
  connection c(h, listener);
  const auto failed = run_on(h, [&]() -> task<std::optional<failure>> {
    ::linger reset{ 1, 0 };
    ::setsockopt(c.server.native_handle(), SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
    c.server.close();  // RST
    const std::vector<std::byte> data = pattern(5, 4 << 20);
    co_return co_await failure_of(c.client.write_all(data, 5s));
  });
  ASSERT_TRUE(failed.has_value());
  EXPECT_TRUE(failed->code == std::errc::connection_reset || failed->code == std::errc::broken_pipe)
      << failed->code.message();
  EXPECT_EQ(failed->bytes, 0u);
}

}  // namespace
