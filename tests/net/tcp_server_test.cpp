// net::tcp_server: both distributions serve every byte, max_connections is enforced and
// recovers, stop(grace) drains idle connections at once, waits for busy ones, cancels the rest
// after the grace, and a running server can be destroyed.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "cyan/dispatch.h"
#include "cyan/net.h"
#include "net_support.h"
#include "support/cpu_time.h"
#include "support/tls_certificates.h"

namespace {

using namespace std::chrono_literals;
using cyan::dispatch::co_spawn;
using cyan::dispatch::handler_thread;
using cyan::dispatch::task;
using cyan::net::endpoint;
using cyan::net::tcp_server;
using cyan::net::tcp_socket;
using cyan::net::tls_stream;
using cyan::test::first_mismatch;
using cyan::test::pattern;
using cyan::test::run_on;
using clock_type = std::chrono::steady_clock;

// Echoes until the peer ends its side; counts the connections each server thread served.
struct echo_service {
  std::array<std::atomic<int>, 4> served_by{};
  tcp_server* server = nullptr;

  task<> operator()(tcp_socket connection) {
    for (std::size_t i = 0; i < server->threads().size(); ++i) {
      if (server->threads()[i]->is_current()) {
        served_by[i].fetch_add(1);
      }
    }
    std::array<std::byte, 4096> buffer;
    try {
      while (const std::size_t n = co_await connection.read_some(buffer)) {
        co_await connection.write_all(std::span(buffer.data(), n));
      }
    } catch (const std::system_error&) {
      // the test's clients end their side; a reset is theirs to report
    }
  }
};

// `clients` connections at once from `h`, each sending `size` bytes of its own pattern and
// reading them back; returns how many came back intact.
int echo_clients(handler_thread& h, const endpoint& server, int clients, std::size_t size) {
  return run_on(h, [&]() -> task<int> {
    std::vector<cyan::dispatch::future<bool>> each;
    for (int c = 0; c < clients; ++c) {
      each.push_back(co_spawn(h, [&server, c, size]() -> task<bool> {
        tcp_socket s = co_await tcp_socket::connect(server, 10s);
        const auto sent = pattern(static_cast<std::uint32_t>(c), size);
        co_await s.write_all(sent, 10s);
        std::vector<std::byte> got(size);
        co_await s.read_exact(got, 10s);
        s.shutdown_send();
        std::array<std::byte, 1> end;
        const std::size_t more = co_await s.read_some(end, 10s);
        co_return more == 0 && first_mismatch(static_cast<std::uint32_t>(c), got) == size;
      }));
    }
    int intact = 0;
    for (auto& f : each) {
      intact += (co_await f) ? 1 : 0;
    }
    co_return intact;
  });
}

TEST(tcp_server, reuse_port_serves_every_byte_of_100_clients) {
  echo_service service;
  tcp_server server({ .endpoint = endpoint::loopback_v4(0), .threads = 2 });
  service.server = &server;
  server.start([&service](tcp_socket s) { return service(std::move(s)); });
  EXPECT_NE(server.local_endpoint().port(), 0);
  handler_thread clients;
  EXPECT_EQ(echo_clients(clients, server.local_endpoint(), 100, 3000), 100);
  EXPECT_TRUE(server.stop(10s));
  EXPECT_EQ(service.served_by[0].load() + service.served_by[1].load(), 100);
  EXPECT_EQ(server.connections(), 0U);
}

TEST(tcp_server, an_acceptor_hands_connections_to_the_other_threads_in_turn) {
  echo_service service;
  tcp_server server({ .endpoint = endpoint::loopback_v4(0),
                      .threads = 3,
                      .distribution = tcp_server::distribution::acceptor });
  service.server = &server;
  server.start([&service](tcp_socket s) { return service(std::move(s)); });
  handler_thread clients;
  EXPECT_EQ(echo_clients(clients, server.local_endpoint(), 100, 3000), 100);
  EXPECT_TRUE(server.stop(10s));
  EXPECT_EQ(service.served_by[0].load(), 0);
  EXPECT_EQ(service.served_by[1].load(), 50);
  EXPECT_EQ(service.served_by[2].load(), 50);
}

TEST(tcp_server, a_unix_endpoint_is_served_by_one_listener) {
  cyan::test::temp_dir dir;
  echo_service service;
  tcp_server server({ .endpoint = endpoint::unix_socket(dir.path() + "/s.sock"), .threads = 2 });
  service.server = &server;
  server.start([&service](tcp_socket s) { return service(std::move(s)); });
  handler_thread clients;
  EXPECT_EQ(echo_clients(clients, server.local_endpoint(), 20, 1000), 20);
  EXPECT_TRUE(server.stop(10s));
  EXPECT_EQ(service.served_by[0].load(), 0);  // the acceptor hands all of them on
  EXPECT_EQ(service.served_by[1].load(), 20);
}

// A handler that holds each connection until its peer closes, and says when it has ended.
struct holding_service {
  std::mutex mutex;
  std::condition_variable changed;
  int ended = 0;

  task<> operator()(tcp_socket connection) {
    std::array<std::byte, 64> buffer;
    try {
      while (const std::size_t n = co_await connection.read_some(buffer)) {
        co_await connection.write_all(std::span(buffer.data(), n));
      }
    } catch (const std::system_error&) {
    }
    const std::lock_guard lock(mutex);
    ++ended;
    changed.notify_all();
  }
  bool wait_ended(int n) {
    std::unique_lock lock(mutex);
    return changed.wait_for(lock, 10s, [&] { return ended >= n; });
  }
};

task<bool> round_trip(tcp_socket& s) {
  const std::array<std::byte, 3> hello{ std::byte{ 'h' }, std::byte{ 'e' }, std::byte{ 'y' } };
  co_await s.write_all(hello, 10s);
  std::array<std::byte, 3> back{};
  co_await s.read_exact(back, 10s);
  co_return back == hello;
}

TEST(tcp_server, max_connections_is_enforced_and_recovers) {
  holding_service service;
  tcp_server server({ .endpoint = endpoint::loopback_v4(0), .threads = 1, .max_connections = 2 });
  server.start([&service](tcp_socket s) { return service(std::move(s)); });
  handler_thread clients;
  const endpoint where = server.local_endpoint();
  run_on(clients, [&]() -> task<> {
    tcp_socket first = co_await tcp_socket::connect(where, 10s);
    tcp_socket second = co_await tcp_socket::connect(where, 10s);
    EXPECT_TRUE(co_await round_trip(first));
    EXPECT_TRUE(co_await round_trip(second));
    EXPECT_EQ(server.connections(), 2U);
    // The third is accepted and closed at once: its read sees the end (or a reset).
    tcp_socket third = co_await tcp_socket::connect(where, 10s);
    std::array<std::byte, 1> byte;
    std::size_t got = 1;
    try {
      got = co_await third.read_some(byte, 10s);
    } catch (const std::system_error& e) {
      got = e.code() == std::errc::connection_reset ? 0 : 1;
    }
    EXPECT_EQ(got, 0U);
    EXPECT_EQ(server.refused_connections(), 1U);
    first.close();
  });
  ASSERT_TRUE(service.wait_ended(1));
  // One ended: a new connection is served again.
  run_on(clients, [&]() -> task<> {
    tcp_socket again = co_await tcp_socket::connect(where, 10s);
    EXPECT_TRUE(co_await round_trip(again));
  });
  EXPECT_EQ(server.refused_connections(), 1U);
  EXPECT_TRUE(server.stop(10s));  // `second` went with the clients' task: every handler ended
}

// A keep-alive handler: waits for each request holding an idle guard, answers it, and ends
// when the server drains between requests.
struct keep_alive_service {
  tcp_server* server = nullptr;
  std::atomic<int> closed_idle{ 0 };

  task<> operator()(tcp_socket connection) {
    std::array<std::byte, 64> buffer;
    for (;;) {
      std::size_t n = 0;
      try {
        const auto idle = server->idle(connection);
        n = co_await connection.read_some(buffer);
      } catch (const std::system_error& e) {
        if (e.code() == std::errc::operation_canceled) {
          closed_idle.fetch_add(1);
        }
        co_return;
      }
      if (n == 0) {
        co_return;
      }
      co_await connection.write_all(std::span(buffer.data(), n));
      if (server->draining()) {
        co_return;
      }
    }
  }
};

TEST(tcp_server, stop_closes_idle_connections_at_once) {
  keep_alive_service service;
  tcp_server server({ .endpoint = endpoint::loopback_v4(0), .threads = 2 });
  service.server = &server;
  server.start([&service](tcp_socket s) { return service(std::move(s)); });
  handler_thread clients;
  std::vector<tcp_socket> open;
  run_on(clients, [&]() -> task<> {
    for (int i = 0; i < 10; ++i) {
      open.push_back(co_await tcp_socket::connect(server.local_endpoint(), 10s));
      EXPECT_TRUE(co_await round_trip(open.back()));
    }
  });
  EXPECT_EQ(server.connections(), 10U);
  const auto start = clock_type::now();
  EXPECT_TRUE(server.stop(30s));
  EXPECT_LT(clock_type::now() - start, 10s);  // not the grace: the drain closed them
  EXPECT_EQ(service.closed_idle.load(), 10);
  EXPECT_TRUE(server.draining());
  run_on(clients, [&]() -> task<> {
    open.clear();
    co_return;
  });
}

TEST(tcp_server, stop_waits_for_a_connection_that_finishes_within_the_grace) {
  std::atomic<bool> working{ false };
  tcp_server server({ .endpoint = endpoint::loopback_v4(0), .threads = 1 });
  server.start([&working](tcp_socket connection) -> task<> {
    std::array<std::byte, 1> request;
    co_await connection.read_exact(request, 10s);
    working = true;
    co_await cyan::dispatch::sleep_for(300ms);  // busy with the request when the drain begins
    const std::array<std::byte, 4> done{ std::byte{ 'd' }, std::byte{ 'o' }, std::byte{ 'n' },
                                         std::byte{ 'e' } };
    co_await connection.write_all(done, 10s);
  });
  handler_thread clients;
  auto client = co_spawn(clients, [&]() -> task<bool> {
    tcp_socket s = co_await tcp_socket::connect(server.local_endpoint(), 10s);
    const std::array<std::byte, 1> request{ std::byte{ 'x' } };
    co_await s.write_all(request, 10s);
    std::array<std::byte, 4> answer{};
    co_await s.read_exact(answer, 10s);
    co_return answer[0] == std::byte{ 'd' } && answer[3] == std::byte{ 'e' };
  });
  while (!working.load()) {
    std::this_thread::yield();
  }
  EXPECT_TRUE(server.stop(10s));
  EXPECT_EQ(server.connections(), 0U);
  EXPECT_TRUE(client.get());
}

TEST(tcp_server, stop_cancels_a_connection_blocked_after_the_grace) {
  std::atomic<bool> reading{ false };
  std::atomic<bool> canceled{ false };
  tcp_server server({ .endpoint = endpoint::loopback_v4(0), .threads = 1 });
  server.start([&](tcp_socket connection) -> task<> {
    std::array<std::byte, 16> buffer;
    reading = true;
    try {
      (void)co_await connection.read_some(buffer);  // no time limit, no idle guard
    } catch (const std::system_error& e) {
      canceled = e.code() == std::errc::operation_canceled;
    }
  });
  handler_thread clients;
  std::optional<tcp_socket> held;
  run_on(clients,
         [&]() -> task<> { held = co_await tcp_socket::connect(server.local_endpoint(), 10s); });
  while (!reading.load()) {
    std::this_thread::yield();
  }
  constexpr auto kGrace = 200ms;
  const auto start = clock_type::now();
  EXPECT_FALSE(server.stop(kGrace));
  const auto took = clock_type::now() - start;
  EXPECT_GE(took, kGrace);
  EXPECT_LT(took, kGrace + 500ms);
  EXPECT_TRUE(canceled.load());
  EXPECT_EQ(server.connections(), 0U);
  EXPECT_FALSE(server.stop(kGrace));  // a second stop answers as the first did
  run_on(clients, [&]() -> task<> {
    held.reset();
    co_return;
  });
}

TEST(tcp_server, destroying_a_running_server_stops_it) {
  std::atomic<int> ended{ 0 };
  handler_thread clients;
  std::vector<tcp_socket> open;
  {
    tcp_server server({ .endpoint = endpoint::loopback_v4(0), .threads = 2 });
    server.start([&ended](tcp_socket connection) -> task<> {
      std::array<std::byte, 16> buffer;
      try {
        (void)co_await connection.read_some(buffer);
      } catch (const std::system_error&) {
      }
      ended.fetch_add(1);
    });
    run_on(clients, [&]() -> task<> {
      for (int i = 0; i < 5; ++i) {
        open.push_back(co_await tcp_socket::connect(server.local_endpoint(), 10s));
      }
    });
    while (server.connections() < 5) {
      std::this_thread::yield();  // each connection task has started
    }
  }
  EXPECT_EQ(ended.load(), 5);
  run_on(clients, [&]() -> task<> {
    open.clear();
    co_return;
  });
}

// A server with `connections` clients connected from `clients`, each connection task waiting
// in a read (no idle guard) until the server's destruction cancels it; `ended` counts them.
std::unique_ptr<tcp_server> server_with_waiting_connections(handler_thread& clients,
                                                            std::vector<tcp_socket>& open,
                                                            std::atomic<int>& ended,
                                                            int connections) {
  auto server = std::make_unique<tcp_server>(
      tcp_server::options{ .endpoint = endpoint::loopback_v4(0), .threads = 2 });
  server->start([&ended](tcp_socket connection) -> task<> {
    std::array<std::byte, 16> buffer;
    try {
      (void)co_await connection.read_some(buffer);
    } catch (const std::system_error&) {
    }
    ended.fetch_add(1);
  });
  const endpoint address = server->local_endpoint();
  run_on(clients, [&]() -> task<> {
    for (int i = 0; i < connections; ++i) {
      open.push_back(co_await tcp_socket::connect(address, 10s));
    }
  });
  for (int i = 0; i < 10'000 && server->connections() < static_cast<std::size_t>(connections);
       ++i) {
    std::this_thread::sleep_for(1ms);  // bounded: each connection task has started
  }
  return server;
}

// How many of `open` the server closed: each read ends at once with end of stream.
int closed_by_the_server(handler_thread& clients, std::vector<tcp_socket>& open) {
  return run_on(clients, [&]() -> task<int> {
    int closed = 0;
    for (tcp_socket& s : open) {
      std::array<std::byte, 1> end;
      closed += co_await s.read_some(end, 10s) == 0 ? 1 : 0;
    }
    open.clear();
    co_return closed;
  });
}

// An active object's thread and a pool worker are not the server's: the destructor (and stop())
// work there, blocking that thread while the connections end, for a started server as for one
// never started.
TEST(tcp_server, is_destroyed_on_another_handler_thread_or_a_pool_worker) {
  handler_thread clients;
  handler_thread active_object;
  std::vector<tcp_socket> open;
  {
    std::atomic<int> ended{ 0 };
    auto server = server_with_waiting_connections(clients, open, ended, 4);
    ASSERT_EQ(server->connections(), 4U);
    active_object.post_awaitable([&server] { server.reset(); }).get();
    EXPECT_EQ(ended.load(), 4);
    EXPECT_EQ(closed_by_the_server(clients, open), 4);
  }
  {
    std::atomic<int> ended{ 0 };
    auto server = server_with_waiting_connections(clients, open, ended, 4);
    ASSERT_EQ(server->connections(), 4U);
    cyan::dispatch::async_awaitable([&server] { server.reset(); }).get();
    EXPECT_EQ(ended.load(), 4);
    EXPECT_EQ(closed_by_the_server(clients, open), 4);
  }
  {
    std::atomic<int> ended{ 0 };
    auto server = server_with_waiting_connections(clients, open, ended, 3);
    const bool finished = cyan::dispatch::async_awaitable([&server] {
                            return server->stop(0ms);  // cancels the waiting reads
                          }).get();
    EXPECT_FALSE(finished);
    EXPECT_EQ(ended.load(), 3);
    EXPECT_EQ(server->connections(), 0U);
    active_object.post_awaitable([&server] { server.reset(); }).get();
    EXPECT_EQ(closed_by_the_server(clients, open), 3);
  }
  // Never started: made and destroyed there.
  const int made_on_the_pool = cyan::dispatch::async_awaitable([] {
                                 tcp_server unstarted({ .threads = 2 });
                                 return static_cast<int>(unstarted.threads().size());
                               }).get();
  EXPECT_EQ(made_on_the_pool, 2);
  const int made_on_the_active_object = active_object
                                            .post_awaitable([] {
                                              tcp_server unstarted({ .threads = 1 });
                                              return static_cast<int>(unstarted.threads().size());
                                            })
                                            .get();
  EXPECT_EQ(made_on_the_active_object, 1);
}

// Destroyed on one of its own threads, it cannot wait for itself: an abort that says so.
TEST(tcp_server_death, destroyed_on_its_own_thread_aborts_with_a_message) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        auto* server = new tcp_server({ .endpoint = endpoint::loopback_v4(0), .threads = 1 });
        server->start([](tcp_socket) -> task<> { co_return; });
        server->threads()[0]->post_awaitable([server] { delete server; }).get();
      },
      "tcp_server: destroyed on one of its own threads");
}

// A line service as a new user writes one from the README, over TCP or TLS: the idle guard
// around the wait for a request's first bytes, none around the rest of it; a request is a line,
// answered "got <line>"; after an answer, a draining server closes the connection.
template <typename Stream>
task<> serve_lines(tcp_server& server, Stream& stream) {
  std::string request;
  std::array<std::byte, 256> buffer;
  try {
    for (;;) {
      std::size_t n = 0;
      if (request.empty()) {
        const auto idle = server.idle(stream);
        n = co_await stream.read_some(buffer, 10s);
      } else {
        n = co_await stream.read_some(buffer, 10s);
      }
      if (n == 0) {
        co_return;
      }
      request += cyan::net::as_string_view(std::span(buffer).first(n));
      if (request.ends_with('\n')) {
        const std::string answer = "got " + request;
        co_await stream.write_all(cyan::net::buffer(answer), 10s);
        request.clear();
        if (server.draining()) {
          co_return;
        }
      }
    }
  } catch (const std::system_error&) {  // closed by the drain, or the client went away
  }
}

std::string certificate_file(const char* name) {
  return cyan::test::tls_certificates() + "/" + name;
}

// Clients that have sent the first half of a request when stop() begins and the rest 300 ms
// later, within the grace: each gets its answer, then the end of the stream. The server
// (acceptor distribution, two threads: the connections are the second's) is busy when the
// first halves arrive — a job holds its connections' thread until the drain has begun — so the
// drain looks at each connection before the thread has seen those bytes (on io_uring the
// kernel has received them into the pending read, whose completion is not reaped yet; over
// TLS a handshake may end with them). The request must be served.

template <typename Connect>
void expect_requests_on_their_way_are_served(tcp_server& server, Connect connect) {
  constexpr int kClients = 8;
  handler_thread client_thread;
  std::atomic<bool> connected{ false };
  std::atomic<bool> busy{ false };
  std::atomic<bool> first_halves_sent{ false };
  auto answers = co_spawn(client_thread, [&]() -> task<std::vector<std::string>> {
    using stream_type = typename std::invoke_result_t<Connect&, tcp_socket>::value_type;
    std::vector<stream_type> clients;
    for (int i = 0; i < kClients; ++i) {
      clients.push_back(
          co_await connect(co_await tcp_socket::connect(server.local_endpoint(), 10s)));
    }
    connected = true;
    for (int i = 0; i < 10'000 && !busy.load(); ++i) {
      co_await cyan::dispatch::sleep_for(1ms);  // bounded: until the server's thread is busy
    }
    for (stream_type& client : clients) {
      co_await client.write_all(cyan::net::buffer(std::string_view("first half, ")), 10s);
    }
    first_halves_sent = true;
    for (int i = 0; i < 10'000 && !server.draining(); ++i) {
      co_await cyan::dispatch::sleep_for(1ms);  // bounded: until stop() has begun
    }
    co_await cyan::dispatch::sleep_for(300ms);  // the rest of the request comes later
    std::vector<std::string> got;
    for (stream_type& client : clients) {
      std::string text;
      try {
        co_await client.write_all(cyan::net::buffer(std::string_view("then the rest\n")), 10s);
        std::array<std::byte, 256> buffer;
        while (const std::size_t n = co_await client.read_some(buffer, 10s)) {
          text += cyan::net::as_string_view(std::span(buffer).first(n));
        }
        text += "<end>";
        client = stream_type{};  // closed: a TLS server's shutdown need not wait for it
      } catch (const std::system_error& e) {
        text += std::string("<") + e.what() + ">";
      }
      got.push_back(text);
    }
    co_return got;
  });
  for (int i = 0; i < 10'000 && !(connected.load() && server.connections() == kClients); ++i) {
    std::this_thread::sleep_for(1ms);  // bounded: connected and accepted
  }
  ASSERT_EQ(server.connections(), static_cast<std::size_t>(kClients));
  server.threads()[1]->post([&] {
    busy = true;
    for (int i = 0; i < 10'000 && !server.draining(); ++i) {
      std::this_thread::sleep_for(1ms);  // busy (bounded) until the drain has begun
    }
  });
  for (int i = 0; i < 10'000 && !first_halves_sent.load(); ++i) {
    std::this_thread::sleep_for(1ms);  // bounded: the first halves are on their way
  }
  ASSERT_TRUE(first_halves_sent.load());
  EXPECT_TRUE(server.stop(5s));  // every request answered within the grace
  const std::vector<std::string> got = answers.get();
  ASSERT_EQ(got.size(), static_cast<std::size_t>(kClients));
  for (const std::string& each : got) {
    EXPECT_EQ(each, "got first half, then the rest\n<end>");
  }
}

task<tcp_socket> plain(tcp_socket raw) {
  co_return raw;
}

task<tls_stream> tls_connect(tcp_socket raw, cyan::net::tls_context context) {
  co_return co_await tls_stream::connect(std::move(raw), context, "localhost", 10s);
}

TEST(tcp_server, a_request_on_its_way_when_the_drain_begins_is_served) {
  for (int round = 0; round < 3; ++round) {
    tcp_server server({ .endpoint = endpoint::loopback_v4(0),
                        .threads = 2,
                        .distribution = tcp_server::distribution::acceptor });
    server.start(
        [&server](tcp_socket connection) -> task<> { co_await serve_lines(server, connection); });
    expect_requests_on_their_way_are_served(server,
                                            [](tcp_socket raw) { return plain(std::move(raw)); });
  }
}

TEST(tcp_server, a_tls_request_on_its_way_when_the_drain_begins_is_served) {
  const auto server_context =
      cyan::net::tls_context::server({ .certificate_chain_file = certificate_file("server.crt"),
                                       .private_key_file = certificate_file("server.key") });
  const auto client_context = cyan::net::tls_context::client(
      { .ca_file = certificate_file("ca.crt"), .verify_peer = true });
  for (int round = 0; round < 3; ++round) {
    tcp_server server({ .endpoint = endpoint::loopback_v4(0),
                        .threads = 2,
                        .distribution = tcp_server::distribution::acceptor });
    server.start([&server, server_context](tcp_socket connection) -> task<> {
      tls_stream stream = co_await tls_stream::accept(std::move(connection), server_context, 10s);
      co_await serve_lines(server, stream);
      try {
        (void)co_await stream.shutdown(1s);  // close_notify: the client reads a clean end
      } catch (const std::system_error&) {
      }
    });
    expect_requests_on_their_way_are_served(server, [client_context](tcp_socket raw) {
      return tls_connect(std::move(raw), client_context);
    });
  }
}

TEST(tcp_server, misuse_is_refused) {
  tcp_server server({ .endpoint = endpoint::loopback_v4(0), .threads = 1 });
  EXPECT_THROW((void)server.local_endpoint(), std::logic_error);
  server.start([](tcp_socket) -> task<> { co_return; });
  EXPECT_THROW(server.start([](tcp_socket) -> task<> { co_return; }), std::logic_error);
  tcp_socket unused;
  EXPECT_THROW((void)server.idle(unused), std::logic_error);  // not one of the server's threads
  const bool refused_inside = server.threads()[0]
                                  ->post_awaitable([&server] {
                                    try {
                                      (void)server.stop(0ms);
                                    } catch (const std::logic_error&) {
                                      return true;
                                    }
                                    return false;
                                  })
                                  .get();
  EXPECT_TRUE(refused_inside);
  EXPECT_TRUE(server.stop(1s));
  EXPECT_THROW(server.start([](tcp_socket) -> task<> { co_return; }), std::logic_error);
}

TEST(tcp_server, a_bind_failure_throws_and_leaves_nothing_listening) {
  tcp_server first({ .endpoint = endpoint::loopback_v4(0), .threads = 1 });
  first.start([](tcp_socket) -> task<> { co_return; });
  tcp_server second({ .endpoint = first.local_endpoint(), .threads = 1 });
  EXPECT_THROW(second.start([](tcp_socket) -> task<> { co_return; }), std::system_error);
  EXPECT_EQ(second.connections(), 0U);
}

// Ends the child, failed at `step`.
[[noreturn]] void fail_child(const char* step) {
  std::fprintf(stderr, "server emfile: %s\n", step);
  std::_Exit(1);
}

// The EMFILE check in a child process: exits 0 when every step held.
[[noreturn]] void check_server_out_of_descriptors() {
  ::rlimit limit{};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = std::min<::rlim_t>(limit.rlim_max, 256);
  if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    fail_child("setrlimit");
  }
  std::atomic<int> too_many{ 0 };
  std::atomic<int> other_errors{ 0 };
  std::atomic<int> served{ 0 };
  {
    tcp_server server({ .endpoint = endpoint::loopback_v4(0),
                        .threads = 1,
                        .on_accept_error = [&](const std::system_error& e) {
                          if (e.code() == std::errc::too_many_files_open) {
                            too_many.fetch_add(1);
                          } else {
                            other_errors.fetch_add(1);
                          }
                        } });
    server.start([&served](tcp_socket connection) -> task<> {
      served.fetch_add(1);
      std::array<std::byte, 16> buffer;
      try {
        while (co_await connection.read_some(buffer) != 0) {
        }
      } catch (const std::system_error&) {
      }
    });
    // The accept loop (and the thread's ring) are set up before the table fills, as a
    // server's are before it runs out of descriptors.
    co_spawn(*server.threads()[0], []() -> task<> {
      (void)cyan::net::current_backend();
      co_return;
    }).get();
    const endpoint address = server.local_endpoint();
    const int first_client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int second_client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    std::vector<int> fillers;
    for (int fd;
         fillers.size() < 100'000 && (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) {
      fillers.push_back(fd);
    }
    if (errno != EMFILE) {
      fail_child("filling the table did not end in EMFILE");
    }
    if (::connect(first_client, address.data(), address.size()) != 0) {
      fail_child("first connect");
    }
    for (int i = 0; i < 500 && too_many.load() == 0; ++i) {
      std::this_thread::sleep_for(10ms);  // bounded poll of the error callback's counter
    }
    if (too_many.load() == 0) {
      fail_child("the error callback did not get EMFILE");
    }
    const auto cpu_before = cyan::test::cpu_time(CLOCK_PROCESS_CPUTIME_ID);
    std::this_thread::sleep_for(300ms);
    if (cyan::test::cpu_time(CLOCK_PROCESS_CPUTIME_ID) - cpu_before > 30ms) {
      fail_child("the server spins while out of descriptors");
    }
    for (const int fd : fillers) {
      ::close(fd);
    }
    if (::connect(second_client, address.data(), address.size()) != 0) {
      fail_child("second connect");
    }
    for (int i = 0; i < 500 && served.load() == 0; ++i) {
      std::this_thread::sleep_for(10ms);
    }
    if (served.load() != 1) {
      fail_child("the connection after descriptors were freed was not served");
    }
    ::close(first_client);
    ::close(second_client);
    if (!server.stop(10s)) {
      fail_child("stop");
    }
  }
  if (other_errors.load() != 0) {
    fail_child("an accept error other than EMFILE");
  }
  std::fprintf(stderr, "server emfile: %d reported, 1 served\n", too_many.load());
  std::exit(0);
}

// In a child process with every descriptor taken: the server reports EMFILE through its error
// callback without spinning, and serves the next connection once descriptors are free.
TEST(tcp_server_death, out_of_descriptors_is_reported_without_spinning_and_recovers) {
#ifdef CYAN_TEST_UBSAN
  GTEST_SKIP() << "UBSan's vptr check cannot run with the descriptor table full";
#endif
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(check_server_out_of_descriptors(), ::testing::ExitedWithCode(0),
              "server emfile: [1-9][0-9]* reported, 1 served");
}

}  // namespace
