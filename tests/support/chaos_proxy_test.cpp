// The chaos proxy on its own, between a blocking client and a blocking peer in this process:
// each fault does exactly what it says, byte for byte, and stop() ends what it holds.

#include "support/chaos_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using cyan::test::chaos_proxy;
using action = chaos_proxy::fault::action;
using clock_type = std::chrono::steady_clock;

// How a socket's stream ended, as its reader saw it.
enum class end { open, end_of_stream, reset, other_error };

// What a peer saw on one connection.
struct peer_record {
  std::string received;
  end how = end::open;
};

// A blocking TCP server on 127.0.0.1: a thread per connection records what it reads and how the
// stream ended, echoing each read back when `echo`, and closing the connection itself once it
// has received `close_after` bytes. Every wait is bounded (100 ms polls, 30 s per connection);
// the destructor stops and joins every thread.
class peer {
 public:
  explicit peer(bool echo, std::size_t close_after = SIZE_MAX)
      : echo_(echo), close_after_(close_after) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ::sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::socklen_t length = sizeof address;
    if (::bind(listener_, reinterpret_cast<::sockaddr*>(&address), length) != 0 ||
        ::listen(listener_, 16) != 0 ||
        ::getsockname(listener_, reinterpret_cast<::sockaddr*>(&address), &length) != 0) {
      ADD_FAILURE() << "cannot listen on 127.0.0.1";
      return;
    }
    port_ = ntohs(address.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  peer(const peer&) = delete;
  peer& operator=(const peer&) = delete;
  ~peer() {
    stopping_ = true;
    if (acceptor_.joinable()) {
      acceptor_.join();
    }
    for (std::thread& t : connections_) {
      t.join();
    }
    ::close(listener_);
  }

  [[nodiscard]] unsigned port() const { return port_; }

  // Connection `index`'s record once `done` holds for it, or after `limit` as it is then.
  peer_record wait_for(std::size_t index, std::chrono::milliseconds limit,
                       const std::function<bool(const peer_record&)>& done) {
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, limit,
                      [&] { return index < records_.size() && done(records_[index]); });
    return index < records_.size() ? records_[index] : peer_record{};
  }
  peer_record wait_ended(std::size_t index, std::chrono::milliseconds limit) {
    return wait_for(index, limit, [](const peer_record& r) { return r.how != end::open; });
  }

 private:
  void accept_loop() {
    for (int round = 0; round < 300 && !stopping_; ++round) {  // at most 30 s
      ::pollfd ready{ listener_, POLLIN, 0 };
      if (::poll(&ready, 1, 100) != 1) {
        continue;
      }
      const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        continue;
      }
      std::size_t index = 0;
      {
        const std::lock_guard lock(mutex_);
        index = records_.size();
        records_.emplace_back();
      }
      connections_.emplace_back([this, fd, index] {
        serve(fd, index);
        ::close(fd);
      });
    }
  }

  void serve(int fd, std::size_t index) {
    const auto deadline = clock_type::now() + 30s;
    while (!stopping_ && clock_type::now() < deadline) {
      ::pollfd ready{ fd, POLLIN, 0 };
      if (::poll(&ready, 1, 100) != 1) {
        continue;
      }
      char buffer[4096];
      const ::ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) {
        finish(index, n == 0                ? end::end_of_stream
                      : errno == ECONNRESET ? end::reset
                                            : end::other_error);
        return;
      }
      {
        const std::lock_guard lock(mutex_);
        records_[index].received.append(buffer, static_cast<std::size_t>(n));
      }
      changed_.notify_all();
      if (echo_ && ::send(fd, buffer, static_cast<std::size_t>(n), MSG_NOSIGNAL) != n) {
        finish(index, errno == ECONNRESET ? end::reset : end::other_error);
        return;
      }
      const std::lock_guard lock(mutex_);
      if (records_[index].received.size() >= close_after_) {
        return;  // the caller closes it; the record stays open: the peer saw no end
      }
    }
  }

  void finish(std::size_t index, end how) {
    {
      const std::lock_guard lock(mutex_);
      records_[index].how = how;
    }
    changed_.notify_all();
  }

  const bool echo_;
  const std::size_t close_after_;
  int listener_ = -1;
  unsigned port_ = 0;
  std::atomic<bool> stopping_{ false };
  std::thread acceptor_;
  std::vector<std::thread> connections_;  // the acceptor's
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<peer_record> records_;  // by connection, in accept order; guarded by mutex_
};

// A blocking client connection to 127.0.0.1:`port`.
class client {
 public:
  explicit client(unsigned port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ::sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<::sockaddr*>(&address), sizeof address) != 0) {
      ADD_FAILURE() << "cannot connect to port " << port;
    }
  }
  client(const client&) = delete;
  client& operator=(const client&) = delete;
  ~client() { ::close(fd_); }

  bool send(const std::string& bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<::ssize_t>(bytes.size());
  }
  void shutdown_send() { ::shutdown(fd_, SHUT_WR); }

  // Reads until `want` bytes came, the stream ended, or `limit` passed; how_ says which end.
  std::string receive(std::size_t want, std::chrono::milliseconds limit) {
    std::string got;
    const auto deadline = clock_type::now() + limit;
    while (got.size() < want && how_ == end::open) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - clock_type::now());
      ::pollfd ready{ fd_, POLLIN, 0 };
      if (left.count() <= 0 || ::poll(&ready, 1, static_cast<int>(left.count())) != 1) {
        break;
      }
      char buffer[4096];
      const ::ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n > 0) {
        got.append(buffer, static_cast<std::size_t>(n));
      } else {
        how_ = n == 0 ? end::end_of_stream : errno == ECONNRESET ? end::reset : end::other_error;
      }
    }
    return got;
  }
  // Whatever comes within `limit`, and then how the stream stands.
  std::string receive_all(std::chrono::milliseconds limit) { return receive(SIZE_MAX, limit); }
  [[nodiscard]] end how() const { return how_; }

 private:
  int fd_ = -1;
  end how_ = end::open;
};

std::string pattern(std::size_t size) {
  std::string text(size, ' ');
  for (std::size_t i = 0; i < size; ++i) {
    text[i] = static_cast<char>('a' + i % 26);
  }
  return text;
}

TEST(chaos_proxy, passes_bytes_through_unchanged_and_counts_them) {
  peer echo(true);
  chaos_proxy proxy({ .target_port = echo.port() });
  client c(proxy.port());
  const std::string message = pattern(200'000);  // several reads and writes each way
  ASSERT_TRUE(c.send(message));
  EXPECT_EQ(c.receive(message.size(), 5s), message);
  c.shutdown_send();
  // The client's end reaches the peer, the peer's end comes back, the proxy closes both.
  EXPECT_EQ(echo.wait_ended(0, 5s).how, end::end_of_stream);
  EXPECT_EQ(c.receive_all(5s), "");
  EXPECT_EQ(c.how(), end::end_of_stream);
  ASSERT_TRUE(proxy.wait_until([](const auto& s) { return s.closed == 1; }, 5s));
  const chaos_proxy::statistics s = proxy.stats();
  EXPECT_EQ(s.accepted, 1u);
  EXPECT_EQ(s.bytes_to_server, message.size());
  EXPECT_EQ(s.bytes_to_client, message.size());
  EXPECT_EQ(s.server_ends, 1u);
  EXPECT_EQ(s.resets + s.half_closes + s.stalls, 0u);
}

TEST(chaos_proxy, split_forwards_the_same_bytes_in_order_one_byte_per_write) {
  peer echo(true);
  chaos_proxy proxy({ .target_port = echo.port(),
                      .to_server = { .split = true },
                      .to_client = { .split = true } });
  client c(proxy.port());
  const std::string message = pattern(3000);
  ASSERT_TRUE(c.send(message));
  EXPECT_EQ(c.receive(message.size(), 5s), message);
  EXPECT_EQ(echo.wait_for(0, 5s, [&](const auto& r) { return r.received.size() >= 3000; }).received,
            message);
  // The figures come at the end of the proxy's round, maybe after the client saw the bytes.
  ASSERT_TRUE(proxy.wait_until(
      [](const auto& s) { return s.bytes_to_server == 3000 && s.bytes_to_client == 3000; }, 5s));
  const chaos_proxy::statistics s = proxy.stats();
  EXPECT_EQ(s.bytes_to_server, 3000u);
  EXPECT_EQ(s.writes_to_server, 3000u);
  EXPECT_EQ(s.bytes_to_client, 3000u);
  EXPECT_EQ(s.writes_to_client, 3000u);
}

// Each piece waits `delay` after the one before (the first after its bytes arrived): ten
// 1-byte pieces 30 ms apart cannot all arrive sooner than 300 ms after they were sent.
TEST(chaos_proxy, delay_spaces_the_pieces) {
  peer echo(true);
  chaos_proxy proxy({ .target_port = echo.port(), .to_server = { .split = true, .delay = 30ms } });
  client c(proxy.port());
  const auto start = clock_type::now();
  ASSERT_TRUE(c.send("0123456789"));
  EXPECT_EQ(c.receive(10, 5s), "0123456789");
  const auto waited = clock_type::now() - start;
  EXPECT_GE(waited, 300ms);
  EXPECT_LT(waited, 5s);  // tolerance: a loaded machine
  ASSERT_TRUE(proxy.wait_until([](const auto& s) { return s.bytes_to_server == 10; }, 5s));
  EXPECT_EQ(proxy.stats().writes_to_server, 10u);
}

TEST(chaos_proxy, reset_towards_the_client_delivers_exactly_n_bytes_then_econnreset) {
  peer echo(true);
  chaos_proxy proxy(
      { .target_port = echo.port(), .to_client = { .after = action::reset, .after_bytes = 10 } });
  client c(proxy.port());
  ASSERT_TRUE(c.send(pattern(100)));
  EXPECT_EQ(c.receive_all(5s), pattern(10));
  EXPECT_EQ(c.how(), end::reset);
  // The peer's side is reset too (its next read or its echo fails).
  EXPECT_EQ(echo.wait_ended(0, 5s).how, end::reset);
  ASSERT_TRUE(proxy.wait_until([](const auto& s) { return s.closed == 1; }, 5s));
  const chaos_proxy::statistics s = proxy.stats();
  EXPECT_EQ(s.resets, 1u);
  EXPECT_EQ(s.closed, 1u);
  EXPECT_EQ(s.bytes_to_client, 10u);
}

TEST(chaos_proxy, reset_towards_the_server_delivers_exactly_n_bytes_then_econnreset) {
  peer sink(false);
  chaos_proxy proxy(
      { .target_port = sink.port(), .to_server = { .after = action::reset, .after_bytes = 10 } });
  client c(proxy.port());
  ASSERT_TRUE(c.send(pattern(100)));
  const peer_record r = sink.wait_ended(0, 5s);
  EXPECT_EQ(r.received, pattern(10));
  EXPECT_EQ(r.how, end::reset);
  EXPECT_EQ(c.receive_all(5s), "");
  EXPECT_EQ(c.how(), end::reset);
  ASSERT_TRUE(proxy.wait_until([](const auto& s) { return s.closed == 1; }, 5s));
  EXPECT_EQ(proxy.stats().resets, 1u);
  EXPECT_EQ(proxy.stats().bytes_to_server, 10u);
}

// After the half-close the peer reads end of stream; what it sends back still arrives, and
// its own end then ends the client's stream (end of stream, not a reset).
TEST(chaos_proxy, half_close_gives_the_server_end_of_stream_and_the_other_way_goes_on) {
  peer echo(true);
  chaos_proxy proxy({ .target_port = echo.port(),
                      .to_server = { .after = action::half_close, .after_bytes = 5 } });
  client c(proxy.port());
  ASSERT_TRUE(c.send("hello world"));
  const peer_record r = echo.wait_ended(0, 5s);
  EXPECT_EQ(r.received, "hello");
  EXPECT_EQ(r.how, end::end_of_stream);
  EXPECT_EQ(c.receive_all(5s), "hello");
  EXPECT_EQ(c.how(), end::end_of_stream);
  ASSERT_TRUE(c.send("dropped"));  // read and dropped by the proxy
  c.shutdown_send();
  ASSERT_TRUE(proxy.wait_until([](const auto& s) { return s.closed == 1; }, 5s));
  const chaos_proxy::statistics s = proxy.stats();
  EXPECT_EQ(s.half_closes, 1u);
  EXPECT_EQ(s.bytes_to_server, 5u);
  EXPECT_EQ(s.bytes_to_client, 5u);
  EXPECT_EQ(s.server_ends, 1u);
  EXPECT_EQ(s.resets, 0u);
}

// A stall forwards nothing more and closes nothing: for as long as the test watches (half a
// second), neither side gets a byte more or an end. stop() then ends both.
TEST(chaos_proxy, stall_gives_nothing_more_and_keeps_both_sides_open_until_stop) {
  peer echo(true);
  chaos_proxy proxy(
      { .target_port = echo.port(), .to_server = { .after = action::stall, .after_bytes = 5 } });
  client c(proxy.port());
  ASSERT_TRUE(c.send("hello world"));
  EXPECT_EQ(c.receive(5, 5s), "hello");
  EXPECT_EQ(c.receive_all(500ms), "");
  EXPECT_EQ(c.how(), end::open);
  const peer_record r = echo.wait_ended(0, 0ms);
  EXPECT_EQ(r.received, "hello");
  EXPECT_EQ(r.how, end::open);
  ASSERT_TRUE(proxy.wait_until([](const auto& s) { return s.stalls == 1; }, 5s));
  EXPECT_EQ(proxy.stats().bytes_to_server, 5u);
  EXPECT_EQ(proxy.stats().closed, 0u);

  const auto start = clock_type::now();
  proxy.stop();
  EXPECT_LT(clock_type::now() - start, 1s);  // tolerance: a loaded machine; the wake is at once
  EXPECT_NE(echo.wait_ended(0, 5s).how, end::open);
  EXPECT_EQ(c.receive_all(5s), "");
  EXPECT_NE(c.how(), end::open);
}

// Behind a stall on the server's side nothing reads the server, but its end is still seen.
TEST(chaos_proxy, a_server_end_behind_a_stall_is_counted) {
  peer sink(false);
  chaos_proxy proxy({ .target_port = sink.port(),
                      .to_server = { .after = action::half_close, .after_bytes = 0 },
                      .to_client = { .after = action::stall, .after_bytes = 0 } });
  client c(proxy.port());
  // The sink reads the half-close's end of stream and closes; nothing reads its end but the
  // proxy's watch.
  EXPECT_EQ(sink.wait_ended(0, 5s).how, end::end_of_stream);
  EXPECT_TRUE(proxy.wait_until([](const auto& s) { return s.server_ends == 1; }, 5s));
  EXPECT_EQ(proxy.stats().stalls, 1u);
  EXPECT_EQ(proxy.stats().half_closes, 1u);
  EXPECT_EQ(c.receive_all(200ms), "");
  EXPECT_EQ(c.how(), end::open);
}

// Three pairs in turn: connection i gets pair i mod 3 (pass-through; the answer reset after 3
// bytes; the answer half-closed after 2). Each client connects once the one before was accepted,
// so the accept order is the connect order.
TEST(chaos_proxy, fault_pairs_are_taken_in_turn_in_accept_order) {
  peer echo(true);
  chaos_proxy proxy(
      { .target_port = echo.port(),
        .then = { { .to_client = { .after = action::reset, .after_bytes = 3 } },
                  { .to_client = { .after = action::half_close, .after_bytes = 2 } } } });
  constexpr std::uint64_t kClients = 7;
  std::vector<std::unique_ptr<client>> clients;
  for (std::uint64_t i = 0; i < kClients; ++i) {
    clients.push_back(std::make_unique<client>(proxy.port()));
    ASSERT_TRUE(proxy.wait_until([&](const auto& s) { return s.accepted == i + 1; }, 5s)) << i;
  }
  const std::string expected[] = { "hello", "hel", "he" };
  const end ends[] = { end::open, end::reset, end::end_of_stream };
  for (std::uint64_t i = 0; i < kClients; ++i) {
    ASSERT_TRUE(clients[i]->send("hello"));
    EXPECT_EQ(clients[i]->receive(5, 5s), expected[i % 3]) << i;
    EXPECT_EQ(clients[i]->how(), ends[i % 3]) << i;
  }
  // The figures come at the end of the proxy's round, maybe after the client saw the bytes.
  constexpr std::uint64_t kToClients = 3 * 5 + 2 * 3 + 2 * 2;  // connections 0, 3, 6; 1, 4; 2, 5
  ASSERT_TRUE(proxy.wait_until([](const auto& s) { return s.bytes_to_client == kToClients; }, 5s))
      << proxy.stats().bytes_to_client;
  const chaos_proxy::statistics s = proxy.stats();
  EXPECT_EQ(s.accepted, kClients);
  EXPECT_EQ(s.resets, 2u);
  EXPECT_EQ(s.half_closes, 2u);
  EXPECT_EQ(s.stalls, 0u);
  EXPECT_EQ(s.bytes_to_server, 5 * kClients);
}

// A stall holds its connection only while a peer is still there: the server's end comes
// through the other direction; the client's is seen behind the stall without reading it, and
// then the proxy closes both sockets.
TEST(chaos_proxy, a_stall_towards_the_server_is_over_when_the_client_ends) {
  peer echo(true, 5);
  chaos_proxy proxy(
      { .target_port = echo.port(), .to_server = { .after = action::stall, .after_bytes = 5 } });
  client c(proxy.port());
  ASSERT_TRUE(c.send("hello world"));
  EXPECT_EQ(c.receive_all(5s), "hello");  // the echo, then the peer's end passed on
  EXPECT_EQ(c.how(), end::end_of_stream);
  ASSERT_TRUE(proxy.wait_until([](const auto& s) { return s.server_ends == 1; }, 5s));
  // The round that saw the server's end kept the connection: the client had not ended.
  EXPECT_EQ(proxy.stats().closed, 0u);
  c.shutdown_send();
  ASSERT_TRUE(proxy.wait_until([](const auto& s) { return s.closed == 1; }, 5s));
  const chaos_proxy::statistics s = proxy.stats();
  EXPECT_EQ(s.stalls, 1u);
  EXPECT_EQ(s.bytes_to_server, 5u);
  EXPECT_EQ(s.bytes_to_client, 5u);
  EXPECT_EQ(s.resets + s.half_closes, 0u);
}

// The other way round: the client's end comes through to the server, the server's end is seen
// behind the stall, and the client then reads the end of its stream.
TEST(chaos_proxy, a_stall_towards_the_client_is_over_when_the_server_ends) {
  peer sink(false);
  chaos_proxy proxy(
      { .target_port = sink.port(), .to_client = { .after = action::stall, .after_bytes = 0 } });
  client c(proxy.port());
  ASSERT_TRUE(c.send("abc"));
  c.shutdown_send();
  const peer_record r = sink.wait_ended(0, 5s);
  EXPECT_EQ(r.received, "abc");
  EXPECT_EQ(r.how, end::end_of_stream);
  ASSERT_TRUE(proxy.wait_until([](const auto& s) { return s.closed == 1; }, 5s));
  const chaos_proxy::statistics s = proxy.stats();
  EXPECT_EQ(s.stalls, 1u);
  EXPECT_EQ(s.server_ends, 1u);
  EXPECT_EQ(s.bytes_to_server, 3u);
  EXPECT_EQ(s.bytes_to_client, 0u);
  EXPECT_EQ(c.receive_all(5s), "");
  EXPECT_EQ(c.how(), end::end_of_stream);
}

TEST(chaos_proxy, a_refused_server_connection_resets_the_client) {
  unsigned closed_port = 0;
  {
    peer gone(false);  // a port that was free a moment ago
    closed_port = gone.port();
  }
  chaos_proxy proxy({ .target_port = closed_port });
  client c(proxy.port());
  EXPECT_EQ(c.receive_all(5s), "");
  EXPECT_EQ(c.how(), end::reset);
  ASSERT_TRUE(proxy.wait_until([](const auto& s) { return s.closed == 1; }, 5s));
  const chaos_proxy::statistics s = proxy.stats();
  EXPECT_EQ(s.accepted, 1u);
  EXPECT_EQ(s.bytes_to_server + s.bytes_to_client + s.resets, 0u);
}

}  // namespace
