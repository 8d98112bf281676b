// tcp_socket and tcp_listener over loopback: data integrity, concurrency, partial writes,
// timeouts, errors, cancellation, destruction, threads, allocation, IPv6 and Unix-domain.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "cyan/dispatch.h"
#include "cyan/net.h"
#include "event/loop_support.h"
#include "net/net_support.h"
#include "support/allocation_counter.h"
#include "support/ipv6.h"
#include "support/owned_coroutine.h"
#include "support/sync_wait.h"

namespace {

using namespace std::chrono_literals;
using cyan::dispatch::co_spawn;
using cyan::dispatch::future;
using cyan::dispatch::handler_thread;
using cyan::dispatch::task;
using cyan::net::endpoint;
using cyan::net::tcp_listener;
using cyan::net::tcp_socket;
using cyan::test::first_mismatch;
using cyan::test::pattern;
using cyan::test::run_on;

// The errc a std::system_error thrown by `body` carries, or no value when it does not throw.
template <typename F>
std::optional<std::error_code> error_of(F&& body) {
  try {
    body();
  } catch (const std::system_error& e) {
    return e.code();
  }
  return std::nullopt;
}

// Echoes every byte it reads until the client ends the stream; returns the bytes echoed.
task<std::size_t> echo_connection(tcp_socket connection) {
  std::array<std::byte, 4096> buffer;
  std::size_t echoed = 0;
  for (;;) {
    const std::size_t n = co_await connection.read_some(buffer);
    if (n == 0) {
      co_return echoed;
    }
    co_await connection.write_all(std::span(buffer).first(n));
    echoed += n;
  }
}

TEST(tcp, a_mebibyte_echoed_in_100_byte_chunks_keeps_every_byte_in_order) {
  constexpr std::size_t kTotal = 1 << 20;
  constexpr std::size_t kChunk = 100;
  handler_thread server_thread;
  handler_thread client_thread;
  auto listener = tcp_listener::bind(endpoint::loopback_v4());
  const endpoint address = listener.local_endpoint();
  auto served = co_spawn(server_thread, [&]() -> task<std::size_t> {
    co_return co_await echo_connection(co_await listener.accept());
  });
  const auto received = run_on(client_thread, [&]() -> task<std::vector<std::byte>> {
    tcp_socket s = co_await tcp_socket::connect(address, 5s);
    const std::vector<std::byte> data = pattern(7, kTotal);
    std::vector<std::byte> echoed(kTotal);
    for (std::size_t at = 0; at < kTotal; at += kChunk) {
      const std::size_t n = std::min(kChunk, kTotal - at);
      co_await s.write_all(std::span(data).subspan(at, n));
      co_await s.read_exact(std::span(echoed).subspan(at, n), 5s);
    }
    s.shutdown_send();
    std::byte extra[1];
    EXPECT_EQ(co_await s.read_some(extra, 5s), 0u);  // the server ends its side after ours
    co_return echoed;
  });
  EXPECT_EQ(served.get(), kTotal);
  ASSERT_EQ(received.size(), kTotal);
  EXPECT_EQ(first_mismatch(7, received), kTotal);
}

// 50 clients (25 on each of two client threads) against two listeners sharing the port with
// reuse_port, one per server thread: each client its own pattern, every count exact.
TEST(tcp, fifty_concurrent_clients_over_two_handler_threads) {
  constexpr int kClients = 50;
  constexpr std::size_t kBytes = 64 * 1024;
  handler_thread servers[2];
  handler_thread clients[2];
  auto first = tcp_listener::bind(endpoint::loopback_v4(), { .reuse_port = true });
  const endpoint address = first.local_endpoint();
  auto second = tcp_listener::bind(address, { .reuse_port = true });
  // The kernel spreads connections over the two listeners by hash, so neither knows how many
  // it gets: each accepts until the other thread's count plus its own reaches kClients.
  std::atomic<int> accepted{ 0 };
  auto serve = [&](handler_thread& home, tcp_listener& listener) {
    return co_spawn(home, [&]() -> task<std::size_t> {
      std::vector<future<std::size_t>> connections;
      try {
        while (accepted.load() < kClients) {
          tcp_socket connection = co_await listener.accept(200ms);
          accepted.fetch_add(1);
          connections.push_back(co_spawn(home, echo_connection(std::move(connection))));
        }
      } catch (const std::system_error& e) {
        EXPECT_EQ(e.code(), std::errc::timed_out);  // polls the shared count
        if (e.code() != std::errc::timed_out) {
          throw;
        }
      }
      std::size_t total = 0;
      for (auto& connection : connections) {
        total += co_await connection;
      }
      co_return total;
    });
  };
  auto served_a = serve(servers[0], first);
  auto served_b = serve(servers[1], second);
  std::vector<future<std::size_t>> verified;
  for (int i = 0; i < kClients; ++i) {
    const auto seed = static_cast<std::uint32_t>(100 + i);
    verified.push_back(co_spawn(clients[i % 2], [address, seed]() -> task<std::size_t> {
      tcp_socket s = co_await tcp_socket::connect(address, 5s);
      const std::vector<std::byte> data = pattern(seed, kBytes);
      std::vector<std::byte> echoed(kBytes);
      std::size_t good = 0;
      for (std::size_t at = 0; at < kBytes; at += 8192) {
        co_await s.write_all(std::span(data).subspan(at, 8192), 5s);
        co_await s.read_exact(std::span(echoed).subspan(at, 8192), 5s);
      }
      good = first_mismatch(seed, echoed);
      s.close();
      co_return good;
    }));
  }
  for (auto& client : verified) {
    EXPECT_EQ(client.get(), kBytes);
  }
  EXPECT_EQ(served_a.get() + served_b.get(), kClients * kBytes);
  EXPECT_EQ(accepted.load(), kClients);
}

// A writer with a tiny send buffer and a reader that takes its time: write_all() goes through
// many partial writes and delivers exactly 8 MiB.
TEST(tcp, write_all_through_partial_writes_to_a_slow_reader_is_exact) {
  constexpr std::size_t kTotal = 8 << 20;
  handler_thread writer_thread;
  handler_thread reader_thread;
  auto listener = tcp_listener::bind(endpoint::loopback_v4());
  const endpoint address = listener.local_endpoint();
  auto reader = co_spawn(reader_thread, [&]() -> task<std::size_t> {
    tcp_socket s = co_await listener.accept();
    std::vector<std::byte> buffer(4096);
    std::size_t got = 0;
    std::size_t bad = 0;
    int reads = 0;
    for (;;) {
      const std::size_t n = co_await s.read_some(buffer, 10s);
      if (n == 0) {
        break;
      }
      bad += std::span(buffer).first(n).size() - first_mismatch(9, std::span(buffer).first(n), got);
      got += n;
      if (++reads % 64 == 0) {
        co_await cyan::dispatch::sleep_for(1ms);  // slow: the writer's buffer fills up
      }
    }
    EXPECT_EQ(bad, 0u);
    co_return got;
  });
  const auto writes = run_on(writer_thread, [&]() -> task<int> {
    tcp_socket s = co_await tcp_socket::connect(address, 5s);
    const int small = 4096;
    EXPECT_EQ(::setsockopt(s.native_handle(), SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
    const std::vector<std::byte> data = pattern(9, kTotal);
    // Count the partial writes write_some() makes, then the rest with write_all().
    int partial = 0;
    std::size_t at = 0;
    while (at < kTotal / 2) {
      const std::size_t n =
          co_await s.write_some(std::span(data).subspan(at, kTotal / 2 - at), 10s);
      partial += n < kTotal / 2 - at ? 1 : 0;
      at += n;
    }
    co_await s.write_all(std::span(data).subspan(at), 30s);
    co_return partial;
  });
  EXPECT_GT(writes, 10) << "the send buffer should have cut the writes short many times";
  EXPECT_EQ(reader.get(), kTotal);
}

TEST(tcp, a_read_timeout_expires_and_the_socket_stays_usable) {
  handler_thread h;
  auto listener = tcp_listener::bind(endpoint::loopback_v4());
  const auto result = run_on(h, [&]() -> task<std::string> {
    tcp_socket client = co_await tcp_socket::connect(listener.local_endpoint(), 5s);
    tcp_socket server = co_await listener.accept(5s);
    std::byte byte[1];
    // Resumed by the timer wheel, the task runs inside one of the loop's rounds; after 5 ms of
    // work the round's time is that old, and the timeout must still count from the read.
    co_await cyan::dispatch::sleep_for(1ms);
    EXPECT_TRUE(cyan::this_thread::get_event_loop()->in_round());
    cyan::test::busy_for(5ms);
    const auto start = std::chrono::steady_clock::now();
    std::error_code timeout;
    try {
      co_await server.read_some(byte, 30ms);
    } catch (const std::system_error& e) {
      timeout = e.code();
    }
    EXPECT_EQ(timeout, std::errc::timed_out);
    EXPECT_GE(std::chrono::steady_clock::now() - start, 30ms);
    co_await client.write_all(cyan::net::buffer("after"));
    std::string text(5, '\0');
    co_await server.read_exact(cyan::net::buffer(text), 5s);
    co_return text;
  });
  EXPECT_EQ(result, "after");
}

// Whole-millisecond timeouts take the timer wheel's path without a division; the others keep
// their nanoseconds. Both expire, never early, and not 10 s late.
TEST(tcp, read_timeouts_in_whole_and_fractional_milliseconds_expire_on_time) {
  handler_thread h;
  auto listener = tcp_listener::bind(endpoint::loopback_v4());
  const auto waited = run_on(h, [&]() -> task<std::vector<std::chrono::nanoseconds>> {
    tcp_socket client = co_await tcp_socket::connect(listener.local_endpoint(), 5s);
    tcp_socket server = co_await listener.accept(5s);
    std::vector<std::chrono::nanoseconds> result;
    for (const std::chrono::nanoseconds limit :
         { std::chrono::nanoseconds(20ms), std::chrono::nanoseconds(20500us),
           std::chrono::nanoseconds(20'000'001ns) }) {
      std::byte byte[1];
      const auto start = std::chrono::steady_clock::now();
      std::error_code timeout;
      try {
        co_await server.read_some(byte, limit);
      } catch (const std::system_error& e) {
        timeout = e.code();
      }
      EXPECT_EQ(timeout, std::errc::timed_out) << limit.count() << " ns";
      result.push_back(std::chrono::steady_clock::now() - start - limit);
    }
    co_return result;
  });
  ASSERT_EQ(waited.size(), 3u);
  for (const auto late : waited) {
    EXPECT_GE(late, 0ns);
    EXPECT_LT(late, 10s);
  }
}

TEST(tcp, connect_to_a_closed_port_is_refused) {
  handler_thread h;
  endpoint address;
  {
    auto listener = tcp_listener::bind(endpoint::loopback_v4());
    address = listener.local_endpoint();
  }
  const auto code = run_on(h, [address]() -> task<std::error_code> {
    co_return co_await cyan::test::failure_of(tcp_socket::connect(address, 5s));
  });
  EXPECT_EQ(code, std::errc::connection_refused);
}

// A listener that never accepts, with a backlog of 1: once its queue is full the kernel drops
// further SYNs, so a connect hangs until its time limit.
TEST(tcp, connect_times_out_against_a_full_backlog) {
  handler_thread h;
  auto listener = tcp_listener::bind(endpoint::loopback_v4(), { .backlog = 1 });
  const endpoint address = listener.local_endpoint();
  const auto outcome = run_on(h, [address]() -> task<std::pair<int, std::error_code>> {
    std::vector<tcp_socket> queued;
    for (int i = 0; i < 16; ++i) {
      try {
        queued.push_back(co_await tcp_socket::connect(address, 100ms));
      } catch (const std::system_error& e) {
        co_return std::pair{ i, e.code() };
      }
    }
    co_return std::pair{ 16, std::error_code{} };
  });
  EXPECT_GE(outcome.first, 1) << "the first connections fit the queue";
  EXPECT_LT(outcome.first, 16) << "a connect should have hung once the queue was full";
  EXPECT_EQ(outcome.second, std::errc::timed_out);
}

// The server aborts the connection (SO_LINGER 0): the client's read fails with ECONNRESET.
TEST(tcp, a_peer_reset_is_reported_as_econnreset) {
  handler_thread h;
  auto listener = tcp_listener::bind(endpoint::loopback_v4());
  const auto code = run_on(h, [&]() -> task<std::error_code> {
    tcp_socket client = co_await tcp_socket::connect(listener.local_endpoint(), 5s);
    {
      tcp_socket server = co_await listener.accept(5s);
      const ::linger abort_on_close{ 1, 0 };
      EXPECT_EQ(::setsockopt(server.native_handle(), SOL_SOCKET, SO_LINGER, &abort_on_close,
                             sizeof abort_on_close),
                0);
    }
    std::byte buffer[16];
    co_return co_await cyan::test::failure_of(client.read_some(buffer, 5s));
  });
  EXPECT_EQ(code, std::errc::connection_reset);
}

TEST(tcp, writing_to_a_reset_connection_fails_without_sigpipe) {
  handler_thread h;
  auto listener = tcp_listener::bind(endpoint::loopback_v4());
  const auto code = run_on(h, [&]() -> task<std::error_code> {
    tcp_socket client = co_await tcp_socket::connect(listener.local_endpoint(), 5s);
    (co_await listener.accept(5s)).close();
    const std::vector<std::byte> data(64 * 1024);
    try {
      for (int i = 0; i < 100; ++i) {  // the first writes may still be taken
        co_await client.write_all(data, 5s);
      }
    } catch (const std::system_error& e) {
      co_return e.code();
    }
    co_return std::error_code{};
  });
  EXPECT_TRUE(code == std::errc::broken_pipe || code == std::errc::connection_reset) << code;
}

TEST(tcp, read_exact_at_end_of_stream_reports_end_of_stream) {
  handler_thread h;
  auto listener = tcp_listener::bind(endpoint::loopback_v4());
  const auto code = run_on(h, [&]() -> task<std::error_code> {
    tcp_socket client = co_await tcp_socket::connect(listener.local_endpoint(), 5s);
    tcp_socket server = co_await listener.accept(5s);
    co_await client.write_all(cyan::net::buffer("abc"));
    client.shutdown_send();
    std::byte buffer[8];
    co_return co_await cyan::test::failure_of(server.read_exact(buffer, 5s));
  });
  EXPECT_EQ(code, cyan::net::error::end_of_stream);
  EXPECT_EQ(&code.category(), &cyan::net::net_category());
  EXPECT_STREQ(code.category().name(), "cyan.net");
}

// A read pending in one task, close() from another task of the same thread.
TEST(tcp, close_cancels_a_pending_read) {
  handler_thread h;
  auto listener = tcp_listener::bind(endpoint::loopback_v4());
  const auto code = run_on(h, [&]() -> task<std::error_code> {
    tcp_socket client = co_await tcp_socket::connect(listener.local_endpoint(), 5s);
    tcp_socket server = co_await listener.accept(5s);
    auto reader = co_spawn(h, [&server]() -> task<std::error_code> {
      std::byte buffer[8];
      co_return co_await cyan::test::failure_of(server.read_some(buffer));
    });
    co_await cyan::dispatch::yield();  // the reader runs and waits
    server.close();
    co_return co_await reader;
  });
  EXPECT_EQ(code, std::errc::operation_canceled);
}

TEST(tcp, close_cancels_a_pending_accept) {
  handler_thread h;
  auto listener = tcp_listener::bind(endpoint::loopback_v4());
  const auto code = run_on(h, [&]() -> task<std::error_code> {
    auto acceptor = co_spawn(h, [&listener]() -> task<std::error_code> {
      co_return co_await cyan::test::failure_of(listener.accept());
    });
    co_await cyan::dispatch::yield();
    listener.close();
    co_return co_await acceptor;
  });
  EXPECT_EQ(code, std::errc::operation_canceled);
}

// The stop request comes from the test's thread while the read and the accept wait.
TEST(tcp, a_stop_request_cancels_a_pending_read_and_a_pending_accept) {
  handler_thread h;
  auto listener = tcp_listener::bind(endpoint::loopback_v4());
  auto other_listener = tcp_listener::bind(endpoint::loopback_v4());
  std::stop_source stop;
  std::atomic<int> waiting{ 0 };
  auto reader = co_spawn(
      h,
      [&]() -> task<std::error_code> {
        tcp_socket client = co_await tcp_socket::connect(listener.local_endpoint(), 5s);
        tcp_socket server = co_await listener.accept(5s);
        std::byte buffer[8];
        try {
          waiting.fetch_add(1);
          co_await server.read_some(buffer);
        } catch (const std::system_error& e) {
          co_return e.code();
        }
        co_return std::error_code{};
      },
      stop.get_token());
  auto acceptor = co_spawn(
      h,
      [&]() -> task<std::error_code> {
        try {
          waiting.fetch_add(1);
          co_await other_listener.accept();
        } catch (const std::system_error& e) {
          co_return e.code();
        }
        co_return std::error_code{};
      },
      stop.get_token());
  // Both have started to wait once a task posted after them has run on the same thread.
  for (int i = 0; i < 100'000 && waiting.load() < 2; ++i) {
    co_spawn(h, []() -> task<> { co_return; }()).get();
  }
  ASSERT_EQ(waiting.load(), 2);
  co_spawn(h, []() -> task<> { co_return; }()).get();
  stop.request_stop();
  EXPECT_EQ(reader.get(), std::errc::operation_canceled);
  EXPECT_EQ(acceptor.get(), std::errc::operation_canceled);
}

// An operation that can complete at once ignores nothing but a stop already requested: it
// fails with operation_canceled before its system call.
TEST(tcp, an_operation_of_a_stopped_task_fails_at_once) {
  handler_thread h;
  auto listener = tcp_listener::bind(endpoint::loopback_v4());
  std::stop_source stop;
  stop.request_stop();
  const auto code = co_spawn(
                        h,
                        [&]() -> task<std::error_code> {
                          co_return co_await cyan::test::failure_of(listener.accept(5s));
                        },
                        stop.get_token())
                        .get();
  EXPECT_EQ(code, std::errc::operation_canceled);
}

// A coroutine (not a spawned task) suspended in a read is destroyed: its frame's socket is
// closed (the peer reads end of stream) and its watcher is gone — libev aborts when a watcher
// is left on a closed descriptor — so the loop goes on serving another read.
TEST(tcp, destroying_a_coroutine_suspended_in_a_read_withdraws_it_and_closes_the_socket) {
  handler_thread h;
  auto listener = tcp_listener::bind(endpoint::loopback_v4());
  auto body = [](tcp_socket s, bool& resumed) -> cyan::test::owned_coroutine {
    std::byte buffer[8];
    co_await s.read_some(buffer);
    resumed = true;
  };
  auto client = run_on(h, [&]() -> task<tcp_socket> {
    co_return co_await tcp_socket::connect(listener.local_endpoint(), 5s);
  });
  std::optional<cyan::test::owned_coroutine> pending;
  bool resumed = false;
  run_on(h, [&]() -> task<> { pending.emplace(body(co_await listener.accept(5s), resumed)); });
  EXPECT_FALSE(pending->done());
  const auto end = run_on(h, [&]() -> task<std::size_t> {
    pending.reset();  // destroys the frame where it is suspended
    std::byte buffer[8];
    co_return co_await client.read_some(buffer, 5s);
  });
  EXPECT_EQ(end, 0u) << "the destroyed frame's socket was closed";
  EXPECT_FALSE(resumed);
  // The loop still works: a round trip on a new connection.
  const auto echoed = run_on(h, [&]() -> task<std::size_t> {
    tcp_socket a = co_await tcp_socket::connect(listener.local_endpoint(), 5s);
    tcp_socket b = co_await listener.accept(5s);
    co_await a.write_all(cyan::net::buffer("x"));
    std::byte buffer[1];
    co_return co_await b.read_some(buffer, 5s);
  });
  EXPECT_EQ(echoed, 1u);
}

// A socket is its thread's: using one created on thread A from thread B aborts in debug builds.
TEST(tcp_death, a_socket_used_from_another_thread_aborts_in_debug_builds) {
#ifdef NDEBUG
  GTEST_SKIP() << "the thread check is in debug builds only";
#else
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        handler_thread a;
        handler_thread b;
        auto listener = tcp_listener::bind(endpoint::loopback_v4());
        tcp_socket socket = run_on(a, [&]() -> task<tcp_socket> {
          co_return co_await tcp_socket::connect(listener.local_endpoint(), 5s);
        });
        run_on(b, [&]() -> task<> {
          std::byte buffer[1];
          co_await socket.read_some(buffer, 1s);
        });
      },
      "belongs to another thread's loop");
#endif
}

// Reads and writes that wait allocate nothing once the thread's structures have grown: 200
// round trips, each read waiting for the peer, with and without a time limit.
TEST(tcp, steady_state_reads_and_writes_do_not_allocate) {
  handler_thread server_thread;
  handler_thread client_thread;
  auto listener = tcp_listener::bind(endpoint::loopback_v4());
  const endpoint address = listener.local_endpoint();
  auto served = co_spawn(server_thread, [&]() -> task<std::size_t> {
    co_return co_await echo_connection(co_await listener.accept());
  });
  const auto allocations = run_on(client_thread, [&]() -> task<std::pair<int, int>> {
    tcp_socket s = co_await tcp_socket::connect(address, 5s);
    std::array<std::byte, 64> out{};
    std::array<std::byte, 64> in{};
    // Counts the allocations of `count` round trips (the frame of this coroutine excepted).
    auto round_trips = [&](int count, bool limited) -> task<int> {
      cyan::test::start_counting_allocations();
      for (int i = 0; i < count; ++i) {
        out[0] = static_cast<std::byte>(i);
        if (limited) {
          co_await s.write_all(out, 5s);
          co_await s.read_exact(in, 5s);
        } else {
          co_await s.write_all(out);
          co_await s.read_exact(in);
        }
        EXPECT_EQ(in[0], out[0]);
      }
      co_return cyan::test::stop_counting_allocations();
    };
    // Warm up: the timer wheel, libev's arrays, the loop's queue of expired timers.
    (void)co_await round_trips(50, true);
    co_await cyan::dispatch::sleep_for(2ms);
    const int unlimited = co_await round_trips(200, false);
    const int limited = co_await round_trips(200, true);
    s.close();
    co_return std::pair{ unlimited, limited };
  });
  EXPECT_EQ(allocations.first, 0);
  EXPECT_EQ(allocations.second, 0);
  EXPECT_EQ(served.get(), 450u * 64);
}

// Reads that find their data at once yield every kReadsBeforeYield-th read (their task resumes
// through the thread's queue), and that resumption allocates nothing either, from the first one
// on a fresh thread: 100 reads of 64 bytes already there, on a thread that never posted.
TEST(tcp, reads_that_find_data_at_once_yield_without_allocating) {
  constexpr int kReads = 100;
  static_assert(kReads > 3 * cyan::net::detail::socket_core::kReadsBeforeYield);
  handler_thread h;
  auto listener = tcp_listener::bind(endpoint::loopback_v4());
  const auto [allocations, pattern_kept] = run_on(h, [&]() -> task<std::pair<int, bool>> {
    tcp_socket client = co_await tcp_socket::connect(listener.local_endpoint(), 5s);
    tcp_socket server = co_await listener.accept(5s);
    std::array<std::byte, 64> in{};
    // Warm up the socket's own structures (the io_uring backend makes its multishot receive's
    // state at the first read), not the thread's.
    co_await client.write_all(in);
    co_await server.read_exact(in);
    const std::vector<std::byte> sent = cyan::test::pattern(7, kReads * in.size());
    co_await client.write_all(sent);
    std::vector<std::byte> received;
    received.reserve(sent.size());
    cyan::test::start_counting_allocations();
    for (int i = 0; i < kReads; ++i) {
      co_await server.read_exact(in);
      received.insert(received.end(), in.begin(), in.end());
    }
    const int counted = cyan::test::stop_counting_allocations();
    co_return std::pair{ counted, received == sent };
  });
  EXPECT_EQ(allocations, 0);
  EXPECT_TRUE(pattern_kept);
}

TEST(tcp, gathering_write_all_sends_every_buffer_in_order) {
  handler_thread h;
  auto listener = tcp_listener::bind(endpoint::loopback_v4());
  const auto received = run_on(h, [&]() -> task<std::string> {
    tcp_socket client = co_await tcp_socket::connect(listener.local_endpoint(), 5s);
    tcp_socket server = co_await listener.accept(5s);
    std::vector<std::string> parts;
    std::string expected;
    for (int i = 0; i < 40; ++i) {  // more than one sendmsg() gathers
      parts.push_back(std::string(static_cast<std::size_t>(i % 7), 'a' + i % 26) + "|");
      expected += parts.back();
    }
    std::vector<std::span<const std::byte>> buffers;
    for (const auto& part : parts) {
      buffers.push_back(cyan::net::buffer(part));
    }
    co_await client.write_all(buffers, 5s);
    co_await client.write_all(
        std::array{ cyan::net::buffer("<"), cyan::net::buffer(""), cyan::net::buffer(">") });
    std::string text(expected.size() + 2, '\0');
    co_await server.read_exact(cyan::net::buffer(text), 5s);
    EXPECT_EQ(text, expected + "<>");
    co_return text;
  });
  EXPECT_EQ(received.substr(0, 4), "|b|c");
}

// buffer() of a non-const std::string gives spans of mutable bytes, which the gathering
// write_all takes as they are (the README's form), from a std::array or a std::vector.
static_assert(requires(tcp_socket & s, std::array<std::span<std::byte>, 2>& pieces) {
  s.write_all(pieces);
  s.write_all(pieces, 5s);
});
static_assert(requires(tcp_socket & s, const std::vector<std::span<std::byte>>& pieces) {
  s.write_all(pieces);
  s.write_all(pieces, 5s);
});

TEST(tcp, gathering_write_all_takes_buffers_of_non_const_strings) {
  handler_thread h;
  auto listener = tcp_listener::bind(endpoint::loopback_v4());
  std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 3000\r\n\r\n";
  std::string body(3000, '\0');
  for (std::size_t i = 0; i < body.size(); ++i) {
    body[i] = static_cast<char>('a' + i % 26);
  }
  const auto received = run_on(h, [&]() -> task<std::string> {
    using cyan::net::buffer;
    tcp_socket client = co_await tcp_socket::connect(listener.local_endpoint(), 5s);
    tcp_socket server = co_await listener.accept(5s);
    co_await client.write_all(std::array{ buffer(head), buffer(body) });
    std::vector<std::span<std::byte>> pieces{ buffer(body), buffer(head) };
    co_await client.write_all(pieces, 5s);
    std::string text(2 * (head.size() + body.size()), '\0');
    co_await server.read_exact(buffer(text), 5s);
    co_return text;
  });
  EXPECT_EQ(received, head + body + body + head);
}

TEST(tcp, endpoints_and_options_of_a_connection) {
  handler_thread h;
  auto listener = tcp_listener::bind(endpoint::loopback_v4());
  const endpoint address = listener.local_endpoint();
  EXPECT_NE(address.port(), 0);
  run_on(h, [&]() -> task<> {
    tcp_socket client = co_await tcp_socket::connect(address, 5s);
    tcp_socket server = co_await listener.accept(5s);
    EXPECT_EQ(client.remote_endpoint(), address);
    EXPECT_EQ(server.local_endpoint(), address);
    EXPECT_EQ(server.remote_endpoint(), client.local_endpoint());
    client.set_nodelay();
    client.set_keepalive();
    int nodelay = 0;
    int keepalive = 0;
    ::socklen_t size = sizeof(int);
    ::getsockopt(client.native_handle(), IPPROTO_TCP, TCP_NODELAY, &nodelay, &size);
    ::getsockopt(client.native_handle(), SOL_SOCKET, SO_KEEPALIVE, &keepalive, &size);
    EXPECT_EQ(nodelay, 1);
    EXPECT_EQ(keepalive, 1);
    client.close();
    EXPECT_FALSE(client.is_open());
    EXPECT_EQ(client.native_handle(), -1);
    std::byte buffer[1];
    EXPECT_EQ(co_await server.read_some(buffer, 5s), 0u);
  });
}

// An acceptor on one thread hands each connection to a worker thread: release() there,
// adopt() here.
TEST(tcp, a_connection_released_on_one_thread_is_adopted_on_another) {
  handler_thread acceptor;
  handler_thread worker;
  handler_thread client_thread;
  auto listener = tcp_listener::bind(endpoint::loopback_v4());
  auto served = co_spawn(acceptor, [&]() -> task<std::size_t> {
    tcp_socket connection = co_await listener.accept(5s);
    cyan::net::socket_handle handle = connection.release();
    EXPECT_FALSE(connection.is_open());
    // Named, not written inside the co_await expression: GCC 12 copies a lambda temporary of a
    // co_await expression into the frame bit for bit and destroys both copies, so the handle's
    // descriptor was closed a second time here after the worker had closed it, and the number
    // another thread had reused meanwhile with it (README, "GCC 12" under Coroutines).
    auto echo_on_worker = [&worker, h = std::move(handle)]() mutable -> task<std::size_t> {
      EXPECT_TRUE(worker.is_current());
      co_return co_await echo_connection(tcp_socket::adopt(std::move(h)));
    };
    co_return co_await co_spawn(worker, std::move(echo_on_worker));
  });
  const auto text = run_on(client_thread, [&]() -> task<std::string> {
    tcp_socket s = co_await tcp_socket::connect(listener.local_endpoint(), 5s);
    co_await s.write_all(cyan::net::buffer("handed over"));
    s.shutdown_send();
    std::string echoed(11, '\0');
    co_await s.read_exact(cyan::net::buffer(echoed), 5s);
    co_return echoed;
  });
  EXPECT_EQ(text, "handed over");
  EXPECT_EQ(served.get(), 11u);
}

TEST(tcp, release_with_an_operation_pending_throws_and_keeps_the_socket) {
  handler_thread h;
  auto listener = tcp_listener::bind(endpoint::loopback_v4());
  run_on(h, [&]() -> task<> {
    tcp_socket client = co_await tcp_socket::connect(listener.local_endpoint(), 5s);
    tcp_socket server = co_await listener.accept(5s);
    auto reader = co_spawn(h, [&server]() -> task<std::size_t> {
      std::byte buffer[4];
      co_return co_await server.read_some(buffer, 5s);
    });
    co_await cyan::dispatch::yield();
    EXPECT_THROW((void)server.release(), std::logic_error);
    EXPECT_TRUE(server.is_open());
    co_await client.write_all(cyan::net::buffer("ok"));
    EXPECT_EQ(co_await reader, 2u);
  });
}

TEST(tcp, ipv6_loopback_round_trip) {
  if (!cyan::test::kernel_has_ipv6()) {
    GTEST_SKIP() << "this kernel has no IPv6 loopback (::1)";
  }
  handler_thread h;
  auto listener = tcp_listener::bind(endpoint::loopback_v6(), { .v6_only = true });
  const endpoint address = listener.local_endpoint();
  EXPECT_TRUE(address.is_v6());
  const auto text = run_on(h, [&]() -> task<std::string> {
    tcp_socket client = co_await tcp_socket::connect(address, 5s);
    tcp_socket server = co_await listener.accept(5s);
    EXPECT_TRUE(server.remote_endpoint().is_v6());
    co_await client.write_all(cyan::net::buffer("six"));
    std::string got(3, '\0');
    co_await server.read_exact(cyan::net::buffer(got), 5s);
    co_return got;
  });
  EXPECT_EQ(text, "six");
}

TEST(unix_stream, round_trip_through_a_socket_file) {
  cyan::test::temp_dir dir;
  const endpoint address = endpoint::unix_socket(dir.path() + "/echo.sock");
  handler_thread h;
  auto listener = tcp_listener::bind(address);
  EXPECT_EQ(listener.local_endpoint(), address);
  const auto text = run_on(h, [&]() -> task<std::string> {
    tcp_socket client = co_await tcp_socket::connect(address, 5s);
    tcp_socket server = co_await listener.accept(5s);
    client.set_nodelay();  // nothing to do on a Unix socket, and no error
    co_await client.write_all(cyan::net::buffer("local"));
    client.shutdown_send();
    std::string got(5, '\0');
    co_await server.read_exact(cyan::net::buffer(got), 5s);
    std::byte end[1];
    EXPECT_EQ(co_await server.read_some(end, 5s), 0u);
    co_return got;
  });
  EXPECT_EQ(text, "local");
}

// A socket file left by a listener that is gone: bind fails with EADDRINUSE unless asked to
// remove it; a live listener's file is never removed.
TEST(unix_stream, a_stale_socket_file_is_removed_only_when_asked) {
  cyan::test::temp_dir dir;
  const endpoint address = endpoint::unix_socket(dir.path() + "/stale.sock");
  { auto first = tcp_listener::bind(address); }  // leaves the file behind
  const auto plain = error_of([&] { (void)tcp_listener::bind(address); });
  EXPECT_EQ(plain, std::make_error_code(std::errc::address_in_use));
  auto second = tcp_listener::bind(address, { .remove_stale_socket = true });
  const auto live =
      error_of([&] { (void)tcp_listener::bind(address, { .remove_stale_socket = true }); });
  EXPECT_EQ(live, std::make_error_code(std::errc::address_in_use));
  EXPECT_TRUE(second.is_open());
}

TEST(unix_stream, connect_to_a_missing_socket_file_fails_with_enoent) {
  cyan::test::temp_dir dir;
  handler_thread h;
  const auto code = run_on(h, [&]() -> task<std::error_code> {
    co_return co_await cyan::test::failure_of(
        tcp_socket::connect(endpoint::unix_socket(dir.path() + "/none.sock"), 1s));
  });
  EXPECT_EQ(code, std::errc::no_such_file_or_directory);
}

TEST(tcp, sockets_outside_handler_threads_are_refused_clearly) {
  auto listener = tcp_listener::bind(endpoint::loopback_v4());  // made here, used nowhere: fine
  EXPECT_TRUE(listener.is_open());
  const auto run = [&] {
    cyan::test::sync_wait([&]() -> task<> { co_await listener.accept(1ms); }());
  };
  EXPECT_THROW(run(), std::logic_error);
}

// Fair reads: a reader whose data is all there already (64 KiB written before it starts, read
// 100 bytes at a time) lets a task queued on its thread behind it run after at most 32 reads,
// instead of after all 656; and it still gets every byte in order.
TEST(tcp, a_reader_that_never_waits_lets_its_threads_other_tasks_run) {
  constexpr std::size_t kTotal = 64 * 1024;
  handler_thread h;
  handler_thread peer;
  auto listener = tcp_listener::bind(endpoint::loopback_v4());
  const endpoint address = listener.local_endpoint();
  auto accepted = co_spawn(h, [&]() -> task<tcp_socket> { co_return co_await listener.accept(); });
  std::optional<tcp_socket> writer;
  run_on(peer, [&]() -> task<> {
    writer = co_await tcp_socket::connect(address, 5s);
    co_await writer->write_all(pattern(11, kTotal), 5s);
  });
  tcp_socket reader = accepted.get();
  std::atomic<std::size_t> reads{ 0 };
  std::atomic<std::size_t> reads_when_other_ran{ kTotal };
  const auto received = run_on(h, [&]() -> task<std::vector<std::byte>> {
    // The other task is queued behind this one on the same thread.
    h.post([&] { reads_when_other_ran = reads.load(); });
    std::vector<std::byte> got(kTotal);
    for (std::size_t at = 0; at < kTotal;) {
      const std::size_t n = co_await reader.read_some(
          std::span(got).subspan(at, std::min<std::size_t>(100, kTotal - at)), 5s);
      EXPECT_NE(n, 0u);
      at += n;
      reads.fetch_add(1);
    }
    co_return got;
  });
  EXPECT_EQ(first_mismatch(11, received), kTotal);
  EXPECT_LE(reads_when_other_ran.load(), cyan::net::detail::socket_core::kReadsBeforeYield);
  if (cyan::net::current_backend() == cyan::net::backend::epoll) {
    // Every read finds its data at once here: the other task runs when the 32nd yields, before
    // the reader counts it.
    EXPECT_EQ(reads_when_other_ran.load(), cyan::net::detail::socket_core::kReadsBeforeYield - 1);
  }
  run_on(h, [&]() -> task<> {
    reader.close();
    co_return;
  });
  run_on(peer, [&]() -> task<> {
    writer.reset();
    co_return;
  });
}

}  // namespace
