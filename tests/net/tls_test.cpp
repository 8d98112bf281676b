// tls_context and tls_stream over loopback: data integrity both ways, verification failures
// (wrong CA, wrong name, expired), handshake timeout, garbage, truncation, ALPN, SNI, reload,
// shutdown's deadline, session resumption, the one-read rule, a read timeout, failures named
// after the stream's call with their reason once; and against implementations no one here
// wrote: Python's ssl module, openssl s_client, curl. The certificates are made at test time by
// tls_certificates.sh (the openssl command), once per test program: seconds under load, so a
// test makes its contexts before it times anything.

#include <gtest/gtest.h>
#include <poll.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "cyan/dispatch.h"
#include "cyan/net.h"
#include "net/net_support.h"
#include "support/tls_certificates.h"

namespace {

using namespace std::chrono_literals;
using cyan::dispatch::co_spawn;
using cyan::dispatch::future;
using cyan::dispatch::handler_thread;
using cyan::dispatch::task;
using cyan::net::endpoint;
using cyan::net::tcp_listener;
using cyan::net::tcp_socket;
using cyan::net::tls_context;
using cyan::net::tls_error;
using cyan::net::tls_stream;
using cyan::test::first_mismatch;
using cyan::test::pattern;
using cyan::test::run_on;
using cyan::test::temp_dir;
using clock_type = std::chrono::steady_clock;

std::filesystem::path file(const char* name) {
  return std::filesystem::path(cyan::test::tls_certificates()) / name;
}

tls_context server_context(const char* name = "server", std::vector<std::string> alpn = {}) {
  return tls_context::server({ .certificate_chain_file = file((std::string(name) + ".crt").c_str()),
                               .private_key_file = file((std::string(name) + ".key").c_str()),
                               .alpn = std::move(alpn) });
}

tls_context client_context(const char* ca = "ca.crt", std::vector<std::string> alpn = {}) {
  return tls_context::client({ .ca_file = file(ca), .verify_peer = true, .alpn = std::move(alpn) });
}

// The exception a task throws, or none.
template <typename T>
task<std::optional<std::system_error>> error_of(task<T> operation) {
  try {
    (void)co_await std::move(operation);
  } catch (const std::system_error& e) {
    co_return e;
  }
  co_return std::nullopt;
}

// What a transfer_error said: its code, what() and count.
struct transfer_failure {
  std::error_code code;
  std::string what;
  std::size_t bytes = 0;
};

// The transfer_error a task throws; an empty code when it throws none.
template <typename T>
task<transfer_failure> transfer_failure_of(task<T> operation) {
  try {
    (void)co_await std::move(operation);
  } catch (const cyan::net::transfer_error& e) {
    co_return transfer_failure{ e.code(), e.what(), e.bytes_transferred() };
  }
  co_return transfer_failure{};
}

std::string text_of(std::span<const std::byte> bytes) {
  return std::string(cyan::net::as_string_view(bytes));
}

// A server thread with a listener on 127.0.0.1 and a client thread.
struct loopback {
  handler_thread server_thread;
  handler_thread client_thread;
  tcp_listener listener = tcp_listener::bind(endpoint::loopback_v4());
  endpoint address = listener.local_endpoint();

  // The server's side of the next connection: accept, handshake, then `serve`.
  template <typename Serve>
  auto serve_one(const tls_context& context, Serve serve) {
    return co_spawn(
        server_thread,
        [this, context,
         serve]() mutable -> task<typename std::invoke_result_t<Serve, tls_stream&>::value_type> {
          tcp_socket raw = co_await listener.accept(10s);
          tls_stream stream = co_await tls_stream::accept(std::move(raw), context, 10s);
          co_return co_await serve(stream);
        });
  }

  // The client's side: connect, handshake with `name`, then `use`.
  template <typename Use>
  auto connect(const tls_context& context, std::string name, Use use) {
    return run_on(
        client_thread,
        [this, context, name,
         use]() mutable -> task<typename std::invoke_result_t<Use, tls_stream&>::value_type> {
          tcp_socket raw = co_await tcp_socket::connect(address, 10s);
          tls_stream stream = co_await tls_stream::connect(std::move(raw), context, name, 10s);
          co_return co_await use(stream);
        });
  }
};

// Echoes until the client's close_notify, then answers it; returns the bytes echoed.
task<std::size_t> echo(tls_stream& s) {
  std::vector<std::byte> buffer(16 * 1024);
  std::size_t total = 0;
  for (;;) {
    const std::size_t n = co_await s.read_some(buffer, 10s);
    if (n == 0) {
      break;
    }
    co_await s.write_all(std::span(buffer).first(n), 10s);
    total += n;
  }
  EXPECT_TRUE(co_await s.shutdown(5s));
  co_return total;
}

TEST(tls, a_mebibyte_echoed_both_ways_is_byte_exact_and_both_ends_close_cleanly) {
  constexpr std::size_t kTotal = 1 << 20;
  constexpr std::size_t kChunk = 10'000;
  loopback net;
  auto served = net.serve_one(server_context(), echo);
  const auto [received, clean] =
      net.connect(client_context(), "localhost",
                  [&](tls_stream& s) -> task<std::pair<std::vector<std::byte>, bool>> {
                    const std::vector<std::byte> data = pattern(11, kTotal);
                    std::vector<std::byte> echoed(kTotal);
                    for (std::size_t at = 0; at < kTotal; at += kChunk) {
                      const std::size_t n = std::min(kChunk, kTotal - at);
                      co_await s.write_all(std::span(data).subspan(at, n), 10s);
                      co_await s.read_exact(std::span(echoed).subspan(at, n), 10s);
                    }
                    const bool shut = co_await s.shutdown(5s);
                    co_return std::pair{ std::move(echoed), shut };
                  });
  EXPECT_EQ(served.get(), kTotal);
  EXPECT_TRUE(clean);
  ASSERT_EQ(received.size(), kTotal);
  EXPECT_EQ(first_mismatch(11, received), kTotal);
}

TEST(tls, a_gathered_write_arrives_in_order) {
  loopback net;
  auto served = net.serve_one(server_context(), [](tls_stream& s) -> task<std::string> {
    std::string got(5 + 40'000 + 3, '\0');
    co_await s.read_exact(cyan::net::buffer(got), 10s);
    co_return got;
  });
  const std::string big(40'000, 'b');
  net.connect(client_context(), "localhost", [&](tls_stream& s) -> task<int> {
    std::string tail = "end";
    co_await s.write_all(
        std::array{ cyan::net::buffer(std::string_view("head:")), cyan::net::buffer(big),
                    cyan::net::buffer(std::string_view(tail)) },
        10s);
    co_return 0;
  });
  EXPECT_EQ(served.get(), "head:" + big + "end");
}

// The client's verification failure, and what the server sees of it.
struct handshake_failures {
  std::optional<std::system_error> client;
  std::optional<std::system_error> server;
};

handshake_failures failed_handshake(const tls_context& server, const tls_context& client,
                                    std::string name) {
  loopback net;
  auto served = co_spawn(net.server_thread, [&]() -> task<std::optional<std::system_error>> {
    tcp_socket raw = co_await net.listener.accept(10s);
    co_return co_await error_of(tls_stream::accept(std::move(raw), server, 10s));
  });
  handshake_failures result;
  result.client = run_on(net.client_thread, [&]() -> task<std::optional<std::system_error>> {
    tcp_socket raw = co_await tcp_socket::connect(net.address, 10s);
    co_return co_await error_of(tls_stream::connect(std::move(raw), client, name, 10s));
  });
  result.server = served.get();
  return result;
}

TEST(tls, a_certificate_from_an_unknown_ca_fails_verification_naming_the_reason) {
  const handshake_failures failed =
      failed_handshake(server_context(), client_context("wrong_ca.crt"), "localhost");
  ASSERT_TRUE(failed.client.has_value());
  EXPECT_EQ(failed.client->code(), tls_error::certificate_verify_failed);
  EXPECT_NE(std::string(failed.client->what()).find("unable to get local issuer certificate"),
            std::string::npos)
      << failed.client->what();
  ASSERT_TRUE(failed.server.has_value());  // the client's alert ends the server's handshake
  EXPECT_EQ(failed.server->code().category(), cyan::net::tls_category()) << failed.server->what();
}

TEST(tls, a_certificate_for_another_name_fails_verification) {
  const handshake_failures failed =
      failed_handshake(server_context(), client_context(), "example.com");
  ASSERT_TRUE(failed.client.has_value());
  EXPECT_EQ(failed.client->code(), tls_error::certificate_verify_failed);
  EXPECT_NE(std::string(failed.client->what()).find("hostname mismatch"), std::string::npos)
      << failed.client->what();
}

TEST(tls, an_expired_certificate_fails_verification) {
  const handshake_failures failed =
      failed_handshake(server_context("expired"), client_context(), "localhost");
  ASSERT_TRUE(failed.client.has_value());
  EXPECT_EQ(failed.client->code(), tls_error::certificate_verify_failed);
  EXPECT_NE(std::string(failed.client->what()).find("certificate has expired"), std::string::npos)
      << failed.client->what();
}

TEST(tls, an_ip_address_is_verified_against_the_certificates_addresses) {
  loopback net;
  auto served = net.serve_one(server_context(), echo);
  const std::string subject =
      net.connect(client_context(), "127.0.0.1", [](tls_stream& s) -> task<std::string> {
        EXPECT_EQ(s.server_name(), "127.0.0.1");
        (void)co_await s.shutdown(5s);
        co_return s.peer_certificate_subject();
      });
  EXPECT_EQ(subject, "CN = localhost");
  EXPECT_EQ(served.get(), 0u);
}

// The context is made before the handshake is timed: the first one in a test program runs
// tls_certificates.sh (seconds of openssl under load), which must not count against the
// handshake's 200 ms, nor keep the client's read waiting for the server to close.
TEST(tls, a_client_that_sends_nothing_times_out_the_handshake) {
  loopback net;
  const tls_context context = server_context();
  auto served = co_spawn(net.server_thread, [&]() -> task<std::pair<std::string, double>> {
    tcp_socket raw = co_await net.listener.accept(10s);
    const auto start = clock_type::now();
    auto failure = co_await error_of(tls_stream::accept(std::move(raw), context, 200ms));
    EXPECT_EQ(failure ? failure->code() : std::error_code{}, std::errc::timed_out);
    co_return std::pair{ failure ? std::string(failure->what()) : std::string(),
                         std::chrono::duration<double>(clock_type::now() - start).count() };
  });
  run_on(net.client_thread, [&]() -> task<int> {
    tcp_socket silent = co_await tcp_socket::connect(net.address, 10s);
    std::byte alert[64];
    (void)co_await cyan::test::failure_of(silent.read_some(alert, 10s));  // until the server closes
    co_return 0;
  });
  const auto [what, seconds] = served.get();
  EXPECT_EQ(what, "cyan::net::tls_stream::accept: Connection timed out");
  EXPECT_GE(seconds, 0.2);
  EXPECT_LT(seconds, 5.0);
}

TEST(tls, a_server_that_sends_nothing_times_out_the_clients_handshake_naming_connect) {
  loopback net;
  const tls_context context = client_context();
  auto held = co_spawn(net.server_thread, [&]() -> task<std::size_t> {
    tcp_socket raw = co_await net.listener.accept(10s);
    std::byte hello[4096];
    std::size_t n = 0;
    while (co_await raw.read_some(hello, 10s) > 0) {  // the client hello, then the client's end
      ++n;
    }
    co_return n;
  });
  const std::optional<std::system_error> failure =
      run_on(net.client_thread, [&]() -> task<std::optional<std::system_error>> {
        tcp_socket raw = co_await tcp_socket::connect(net.address, 10s);
        co_return co_await error_of(
            tls_stream::connect(std::move(raw), context, "localhost", 200ms));
      });
  EXPECT_GE(held.get(), 1u);
  ASSERT_TRUE(failure.has_value());
  EXPECT_EQ(failure->code(), std::errc::timed_out);
  EXPECT_STREQ(failure->what(), "cyan::net::tls_stream::connect: Connection timed out");
}

TEST(tls, garbage_instead_of_a_client_hello_fails_cleanly_and_the_next_client_is_served) {
  loopback net;
  const tls_context context = server_context();
  auto served = co_spawn(net.server_thread, [&]() -> task<std::pair<std::error_code, std::string>> {
    tcp_socket first = co_await net.listener.accept(10s);
    auto failure = co_await error_of(tls_stream::accept(std::move(first), context, 10s));
    tcp_socket second = co_await net.listener.accept(10s);
    tls_stream s = co_await tls_stream::accept(std::move(second), context, 10s);
    std::string got(4, '\0');
    co_await s.read_exact(cyan::net::buffer(got), 10s);
    co_await s.write_all(cyan::net::buffer(std::string_view("pong")), 10s);
    co_return std::pair{ failure ? failure->code() : std::error_code{}, got };
  });
  const std::string answer = run_on(net.client_thread, [&]() -> task<std::string> {
    {
      tcp_socket garbage = co_await tcp_socket::connect(net.address, 10s);
      co_await garbage.write_all(cyan::net::buffer(std::string_view("GET / HTTP/1.1\r\n\r\n")));
      std::byte rest[256];
      while (co_await garbage.read_some(rest, 10s) > 0) {
      }
    }
    tcp_socket raw = co_await tcp_socket::connect(net.address, 10s);
    tls_stream s = co_await tls_stream::connect(std::move(raw), client_context(), "localhost", 10s);
    co_await s.write_all(cyan::net::buffer(std::string_view("ping")), 10s);
    std::string got(4, '\0');
    co_await s.read_exact(cyan::net::buffer(got), 10s);
    co_return got;
  });
  const auto [code, got] = served.get();
  EXPECT_EQ(code.category(), cyan::net::tls_category()) << code.message();
  EXPECT_EQ(got, "ping");
  EXPECT_EQ(answer, "pong");
}

TEST(tls, a_peer_that_closes_without_close_notify_is_reported_as_truncation) {
  loopback net;
  auto served = net.serve_one(server_context(), [](tls_stream& s) -> task<int> {
    co_await s.write_all(cyan::net::buffer(std::string_view("partial")), 10s);
    s.close();  // TCP ends; no close_notify
    co_return 0;
  });
  const auto [got, code] =
      net.connect(client_context(), "localhost",
                  [](tls_stream& s) -> task<std::pair<std::string, std::error_code>> {
                    std::string got(7, '\0');
                    co_await s.read_exact(cyan::net::buffer(got), 10s);
                    std::byte more[16];
                    auto failure = co_await error_of(s.read_some(more, 10s));
                    co_return std::pair{ got, failure ? failure->code() : std::error_code{} };
                  });
  served.get();
  EXPECT_EQ(got, "partial");
  EXPECT_EQ(code, tls_error::truncated);
}

TEST(tls, read_exact_after_a_close_notify_fails_with_end_of_stream_counting_the_bytes) {
  loopback net;
  auto served = net.serve_one(server_context(), [](tls_stream& s) -> task<bool> {
    co_await s.write_all(cyan::net::buffer(std::string_view("abc")), 10s);
    co_return co_await s.shutdown(5s);
  });
  const auto [code, count] =
      net.connect(client_context(), "localhost",
                  [](tls_stream& s) -> task<std::pair<std::error_code, std::size_t>> {
                    std::byte buffer[10];
                    std::pair<std::error_code, std::size_t> result;
                    try {
                      co_await s.read_exact(buffer, 10s);
                    } catch (const cyan::net::transfer_error& e) {
                      result = { e.code(), e.bytes_transferred() };
                    }
                    (void)co_await s.shutdown(5s);
                    co_return result;
                  });
  EXPECT_TRUE(served.get());
  EXPECT_EQ(code, cyan::net::error::end_of_stream);
  EXPECT_EQ(count, 3u);
}

TEST(tls, alpn_picks_the_servers_first_protocol_the_client_offers) {
  loopback net;
  auto served = net.serve_one(server_context("server", { "h2", "http/1.1" }),
                              [](tls_stream& s) -> task<std::string> {
                                std::string protocol(s.alpn_protocol());
                                (void)co_await s.shutdown(5s);
                                co_return protocol;
                              });
  const std::string client_side = net.connect(client_context("ca.crt", { "spdy/1", "http/1.1" }),
                                              "localhost", [](tls_stream& s) -> task<std::string> {
                                                std::string protocol(s.alpn_protocol());
                                                (void)co_await s.shutdown(5s);
                                                co_return protocol;
                                              });
  EXPECT_EQ(served.get(), "http/1.1");
  EXPECT_EQ(client_side, "http/1.1");
}

TEST(tls, without_a_common_protocol_the_connection_goes_on_without_alpn) {
  loopback net;
  auto served =
      net.serve_one(server_context("server", { "h2" }), [](tls_stream& s) -> task<std::string> {
        std::string protocol(s.alpn_protocol());
        (void)co_await s.shutdown(5s);
        co_return protocol;
      });
  const std::string client_side = net.connect(client_context("ca.crt", { "http/1.1" }), "localhost",
                                              [](tls_stream& s) -> task<std::string> {
                                                std::string protocol(s.alpn_protocol());
                                                (void)co_await s.shutdown(5s);
                                                co_return protocol;
                                              });
  EXPECT_EQ(served.get(), "");
  EXPECT_EQ(client_side, "");
}

TEST(tls, sni_picks_the_certificate_for_the_name_the_client_sends) {
  tls_context server = server_context();
  server.add_certificate("Other.Test", file("other.crt"), file("other.key"));
  const tls_context client = client_context();
  for (const char* name : { "other.test", "localhost" }) {
    loopback net;
    auto served = net.serve_one(server, [](tls_stream& s) -> task<std::string> {
      std::string name(s.server_name());
      (void)co_await s.shutdown(5s);
      co_return name;
    });
    const std::string subject = net.connect(client, name, [](tls_stream& s) -> task<std::string> {
      (void)co_await s.shutdown(5s);
      co_return s.peer_certificate_subject();
    });
    EXPECT_EQ(served.get(), name);
    EXPECT_EQ(subject, std::string("CN = ") + name);
  }
}

TEST(tls, reload_serves_new_connections_the_new_certificate_and_the_open_one_goes_on) {
  temp_dir live;
  const std::filesystem::path chain = std::filesystem::path(live.path()) / "live.crt";
  const std::filesystem::path key = std::filesystem::path(live.path()) / "live.key";
  const auto install = [&](const char* name) {
    std::filesystem::copy_file(file((std::string(name) + ".crt").c_str()), chain,
                               std::filesystem::copy_options::overwrite_existing);
    std::filesystem::copy_file(file((std::string(name) + ".key").c_str()), key,
                               std::filesystem::copy_options::overwrite_existing);
  };
  install("server");
  tls_context server =
      tls_context::server({ .certificate_chain_file = chain, .private_key_file = key });
  // Without resumption: a resumed session shows the certificate of the session it resumes.
  const tls_context client = tls_context::client(
      { .ca_file = file("ca.crt"), .verify_peer = true, .resume_sessions = false });
  handler_thread server_thread;
  handler_thread client_thread;
  auto listener = tcp_listener::bind(endpoint::loopback_v4());
  const endpoint address = listener.local_endpoint();
  auto served = co_spawn(server_thread, [&]() -> task<std::vector<future<std::size_t>>> {
    std::vector<future<std::size_t>> connections;
    for (int i = 0; i < 3; ++i) {
      tcp_socket raw = co_await listener.accept(10s);
      connections.push_back(
          co_spawn(server_thread, [&server, raw = std::move(raw)]() mutable -> task<std::size_t> {
            tls_stream s = co_await tls_stream::accept(std::move(raw), server, 10s);
            co_return co_await echo(s);
          }));
    }
    co_return connections;
  });
  const auto subjects = run_on(client_thread, [&]() -> task<std::vector<std::string>> {
    std::vector<std::string> seen;
    tcp_socket raw = co_await tcp_socket::connect(address, 10s);
    tls_stream first = co_await tls_stream::connect(std::move(raw), client, "localhost", 10s);
    seen.push_back(first.peer_certificate_subject());
    std::string echoed(5, '\0');
    co_await first.write_all(cyan::net::buffer(std::string_view("one  ")), 10s);
    co_await first.read_exact(cyan::net::buffer(echoed), 10s);
    seen.push_back(echoed);

    install("renewed");
    server.reload();
    // A reload that fails keeps the renewed certificate.
    std::filesystem::copy_file(file("other.key"), key,
                               std::filesystem::copy_options::overwrite_existing);
    try {
      server.reload();
      seen.push_back("a reload with a mismatched key did not throw");
    } catch (const std::system_error&) {
    }

    raw = co_await tcp_socket::connect(address, 10s);
    tls_stream second = co_await tls_stream::connect(std::move(raw), client, "localhost", 10s);
    seen.push_back(second.peer_certificate_subject());
    co_await first.write_all(cyan::net::buffer(std::string_view("two  ")), 10s);
    co_await first.read_exact(cyan::net::buffer(echoed), 10s);
    seen.push_back(echoed);
    raw = co_await tcp_socket::connect(address, 10s);
    tls_stream third = co_await tls_stream::connect(std::move(raw), client, "localhost", 10s);
    seen.push_back(third.peer_certificate_subject());
    for (tls_stream* s : { &first, &second, &third }) {
      (void)co_await s->shutdown(5s);
    }
    co_return seen;
  });
  EXPECT_EQ(subjects,
            (std::vector<std::string>{ "CN = localhost", "one  ", "CN = localhost, O = renewed",
                                       "two  ", "CN = localhost, O = renewed" }));
  std::size_t echoed = 0;
  for (future<std::size_t>& connection : served.get()) {
    echoed += connection.get();
  }
  EXPECT_EQ(echoed, 10u);
}

TEST(tls, shutdown_against_a_peer_that_never_answers_returns_at_its_deadline) {
  loopback net;
  auto served = net.serve_one(server_context(), [](tls_stream& s) -> task<std::size_t> {
    std::byte buffer[16];
    const std::size_t n = co_await s.read_some(buffer, 10s);  // 0: the client's close_notify
    // No close_notify back: hold the connection until the client closes it.
    while (co_await s.next_layer().read_some(buffer, 10s) > 0) {
    }
    co_return n;
  });
  const auto [answered, seconds] = net.connect(
      client_context(), "localhost", [](tls_stream& s) -> task<std::pair<bool, double>> {
        const auto start = clock_type::now();
        const bool answered = co_await s.shutdown(300ms);
        const double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
        s.close();
        co_return std::pair{ answered, seconds };
      });
  EXPECT_EQ(served.get(), 0u);
  EXPECT_FALSE(answered);
  EXPECT_GE(seconds, 0.3);
  EXPECT_LT(seconds, 5.0);
}

// Two connections in turn from one client context: whether each end saw its session resumed
// (server, client; server, client).
std::vector<bool> resumed_over_two_connections(const tls_context& server) {
  const tls_context client = client_context();
  std::vector<bool> reused;
  for (int round = 0; round < 2; ++round) {
    loopback net;
    auto served = net.serve_one(server, [](tls_stream& s) -> task<bool> {
      const bool resumed = s.session_reused();
      co_await s.write_all(cyan::net::buffer(std::string_view("hi")), 10s);
      (void)co_await s.shutdown(5s);
      co_return resumed;
    });
    const bool client_resumed = net.connect(client, "localhost", [](tls_stream& s) -> task<bool> {
      std::string got(2, '\0');
      co_await s.read_exact(cyan::net::buffer(got), 10s);  // the tickets come before it
      (void)co_await s.shutdown(5s);
      co_return s.session_reused();
    });
    reused.push_back(served.get());
    reused.push_back(client_resumed);
  }
  return reused;
}

TEST(tls, a_second_connection_to_the_same_name_resumes_the_session) {
  EXPECT_EQ(resumed_over_two_connections(server_context()),
            (std::vector<bool>{ false, false, true, true }));
}

TEST(tls, without_session_tickets_every_handshake_is_full) {
  const tls_context server = tls_context::server({ .certificate_chain_file = file("server.crt"),
                                                   .private_key_file = file("server.key"),
                                                   .session_tickets = false });
  EXPECT_EQ(resumed_over_two_connections(server),
            (std::vector<bool>{ false, false, false, false }));
}

TEST(tls, a_second_read_while_one_is_pending_throws_logic_error_and_the_first_goes_on) {
  loopback net;
  auto served = net.serve_one(server_context(), [](tls_stream& s) -> task<int> {
    std::byte go[1];
    co_await s.read_exact(go, 10s);
    co_await s.write_all(cyan::net::buffer(std::string_view("x")), 10s);
    (void)co_await s.shutdown(5s);
    co_return 0;
  });
  const auto [second_failed, first_read] = net.connect(
      client_context(), "localhost", [&](tls_stream& s) -> task<std::pair<bool, std::size_t>> {
        std::byte first[4];
        auto pending = co_spawn(net.client_thread, s.read_some(first, 10s));
        co_await cyan::dispatch::yield();  // the first read waits now
        bool second_failed = false;
        try {
          std::byte second[4];
          (void)co_await s.read_some(second, 10s);
        } catch (const std::logic_error&) {
          second_failed = true;
        }
        co_await s.write_all(cyan::net::buffer(std::string_view("g")), 10s);
        const std::size_t n = co_await std::move(pending);
        (void)co_await s.shutdown(5s);
        co_return std::pair{ second_failed, n };
      });
  served.get();
  EXPECT_TRUE(second_failed);
  EXPECT_EQ(first_read, 1u);
}

TEST(tls, a_read_timeout_leaves_the_stream_usable) {
  loopback net;
  auto served = net.serve_one(server_context(), [](tls_stream& s) -> task<int> {
    std::byte go[1];
    co_await s.read_exact(go, 10s);
    co_await s.write_all(cyan::net::buffer(std::string_view("late")), 10s);
    (void)co_await s.shutdown(5s);
    co_return 0;
  });
  const auto [failure, got] = net.connect(
      client_context(), "localhost",
      [](tls_stream& s) -> task<std::pair<std::optional<std::system_error>, std::string>> {
        std::byte buffer[8];
        auto failure = co_await error_of(s.read_some(buffer, 50ms));
        co_await s.write_all(cyan::net::buffer(std::string_view("g")), 10s);
        std::string got(4, '\0');
        co_await s.read_exact(cyan::net::buffer(got), 10s);
        (void)co_await s.shutdown(5s);
        co_return std::pair{ failure, got };
      });
  served.get();
  ASSERT_TRUE(failure.has_value());
  EXPECT_EQ(failure->code(), std::errc::timed_out);
  // The call the user made, its reason once: not tcp_socket::read_some's, under the stream.
  EXPECT_STREQ(failure->what(), "cyan::net::tls_stream::read_some: Connection timed out");
  EXPECT_EQ(got, "late");
}

TEST(tls, a_read_exact_that_times_out_names_read_exact_once_and_counts_the_bytes_it_kept) {
  loopback net;
  auto served = net.serve_one(server_context(), [](tls_stream& s) -> task<int> {
    co_await s.write_all(cyan::net::buffer(std::string_view("abc")), 10s);
    std::byte go[1];
    co_await s.read_exact(go, 10s);
    co_await s.write_all(cyan::net::buffer(std::string_view("defghij")), 10s);
    (void)co_await s.shutdown(5s);
    co_return 0;
  });
  const auto [failure, rest] =
      net.connect(client_context(), "localhost",
                  [](tls_stream& s) -> task<std::pair<transfer_failure, std::string>> {
                    // Until the record of "abc" is in: then the read keeps it, and times out.
                    ::pollfd readable{ s.next_layer().native_handle(), POLLIN, 0 };
                    EXPECT_EQ(::poll(&readable, 1, 10'000), 1);
                    std::string got(10, '\0');
                    const transfer_failure failure =
                        co_await transfer_failure_of(s.read_exact(cyan::net::buffer(got), 100ms));
                    co_await s.write_all(cyan::net::buffer(std::string_view("g")), 10s);
                    co_await s.read_exact(
                        cyan::net::buffer(got).subspan(failure.bytes, 10 - failure.bytes), 10s);
                    (void)co_await s.shutdown(5s);
                    co_return std::pair{ failure, got };
                  });
  served.get();
  EXPECT_EQ(failure.code, std::errc::timed_out);
  EXPECT_EQ(failure.what, "cyan::net::tls_stream::read_exact: Connection timed out");
  EXPECT_EQ(failure.bytes, 3u);
  EXPECT_EQ(rest, "abcdefghij");
}

// The issue's program: an echo whose client leaves without shutdown(). The server writes once
// the client's end is in (its FIN, seen under TLS without reading it) until the kernel says the
// peer is gone: each failure names the call the user made and says its reason once ("Broken
// pipe", not "tcp_socket::write_all: Broken pipe: Broken pipe: Broken pipe").
TEST(tls, writes_to_a_client_that_left_without_shutdown_fail_naming_the_call_once) {
  loopback net;
  auto served =
      net.serve_one(server_context(), [](tls_stream& s) -> task<std::vector<transfer_failure>> {
        std::string ping(4, '\0');
        co_await s.read_exact(cyan::net::buffer(ping), 10s);
        co_await s.write_all(cyan::net::buffer(ping), 10s);
        ::pollfd ended{ s.next_layer().native_handle(), POLLRDHUP, 0 };
        EXPECT_EQ(::poll(&ended, 1, 10'000), 1);
        // The first write after the peer's end goes out and draws its reset (bounded: 100).
        std::vector<transfer_failure> failures;
        for (int attempt = 0; attempt < 100 && failures.empty(); ++attempt) {
          transfer_failure f = co_await transfer_failure_of(
              s.write_all(cyan::net::buffer(std::string_view("x")), 10s));
          if (f.code) {
            failures.push_back(std::move(f));
          }
        }
        failures.push_back(co_await transfer_failure_of(
            s.write_some(cyan::net::buffer(std::string_view("yz")), 10s)));
        co_return failures;
      });
  net.connect(client_context(), "localhost", [](tls_stream& s) -> task<int> {
    co_await s.write_all(cyan::net::buffer(std::string_view("ping")), 10s);
    std::string echoed(4, '\0');
    co_await s.read_exact(cyan::net::buffer(echoed), 10s);
    co_return 0;  // the stream closes without close_notify
  });
  const std::vector<transfer_failure> failures = served.get();
  ASSERT_EQ(failures.size(), 2u);
  EXPECT_EQ(failures[0].code, std::errc::broken_pipe);
  EXPECT_EQ(failures[0].what, "cyan::net::tls_stream::write_all: Broken pipe");
  EXPECT_EQ(failures[0].bytes, 1u);  // taken into a record (see write_all)
  EXPECT_EQ(failures[1].code, std::errc::broken_pipe);
  EXPECT_EQ(failures[1].what, "cyan::net::tls_stream::write_some: Broken pipe");
  EXPECT_EQ(failures[1].bytes, 2u);
}

TEST(tls, a_stop_request_ends_a_pending_read_with_operation_canceled) {
  loopback net;
  auto served = net.serve_one(server_context(), [](tls_stream& s) -> task<std::size_t> {
    std::byte buffer[8];
    co_return co_await s.read_some(buffer, 10s);  // the client's close_notify: 0
  });
  const std::error_code code =
      net.connect(client_context(), "localhost", [&](tls_stream& s) -> task<std::error_code> {
        std::stop_source stop;
        std::byte buffer[8];
        auto read =
            co_spawn(net.client_thread, error_of(s.read_some(buffer, 10s)), stop.get_token());
        co_await cyan::dispatch::yield();
        stop.request_stop();
        auto failure = co_await std::move(read);
        (void)co_await s.shutdown(200ms);
        co_return failure ? failure->code() : std::error_code{};
      });
  EXPECT_EQ(served.get(), 0u);
  EXPECT_EQ(code, std::errc::operation_canceled);
}

// ---- other implementations ----

struct pipe_closer {
  void operator()(std::FILE* f) const noexcept { ::pclose(f); }
};
using process = std::unique_ptr<std::FILE, pipe_closer>;

process start(const std::string& command) {
  return process(::popen(command.c_str(), "r"));
}

std::string read_all(std::FILE* f) {
  std::string text;
  char chunk[512];
  while (std::fgets(chunk, sizeof chunk, f) != nullptr) {
    text += chunk;
  }
  return text;
}

std::string quoted(const std::string& script) {
  std::string result = "'";
  for (char c : script) {
    result += c == '\'' ? std::string("'\\''") : std::string(1, c);
  }
  return result + "'";
}

// Python's start (the interpreter, the ssl module, the CA file) takes seconds on a loaded
// machine: the server starts its accept, with its 10 s limit, once the client says it is about
// to connect, so that no wait of the server's counts that start.
TEST(tls_interop, a_python_ssl_client_talks_to_a_cyan_server) {
  loopback net;
  const tls_context context = server_context("server", { "http/1.1" });
  const std::string script = R"(
import socket, ssl, sys
context = ssl.create_default_context(cafile=sys.argv[1])
context.set_alpn_protocols(['http/1.1'])
print('connecting', flush=True)
with socket.create_connection(('127.0.0.1', int(sys.argv[2])), timeout=20) as raw:
    with context.wrap_socket(raw, server_hostname='localhost') as s:
        sent = b''.join(b'line %d from python\n' % i for i in range(2000))
        s.sendall(sent)
        got = b''
        while len(got) < len(sent):
            got += s.recv(65536)
        alpn = s.selected_alpn_protocol()
        s.unwrap()
        print('ok' if got == sent else 'mismatch', len(got), alpn, flush=True)
)";
  process python = start("python3 -c " + quoted(script) + " " + file("ca.crt").string() + " " +
                         std::to_string(net.address.port()));
  ASSERT_NE(python, nullptr);
  char line[32] = {};
  ASSERT_NE(std::fgets(line, sizeof line, python.get()), nullptr);
  ASSERT_STREQ(line, "connecting\n");
  auto served = net.serve_one(context, echo);
  const std::string output = read_all(python.get());
  EXPECT_EQ(output, "ok 42890 http/1.1\n");
  EXPECT_EQ(served.get(), 42890u);
}

TEST(tls_interop, a_cyan_client_talks_to_a_python_ssl_server) {
  const std::string script = R"(
import socket, ssl, sys
context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
context.load_cert_chain(sys.argv[1], sys.argv[2])
with socket.create_server(('127.0.0.1', 0)) as listener:
    listener.settimeout(20)
    print(listener.getsockname()[1], flush=True)
    raw, _ = listener.accept()
    raw.settimeout(20)
    with context.wrap_socket(raw, server_side=True) as s:
        while data := s.recv(65536):
            s.sendall(data)
        s.unwrap()
)";
  process python = start("python3 -c " + quoted(script) + " " + file("server.crt").string() + " " +
                         file("server.key").string());
  ASSERT_NE(python, nullptr);
  char line[32] = {};
  ASSERT_NE(std::fgets(line, sizeof line, python.get()), nullptr);
  const endpoint address = endpoint::loopback_v4(static_cast<std::uint16_t>(std::atoi(line)));
  handler_thread client_thread;
  const auto [received, clean] =
      run_on(client_thread, [&]() -> task<std::pair<std::vector<std::byte>, bool>> {
        tcp_socket raw = co_await tcp_socket::connect(address, 10s);
        tls_stream s =
            co_await tls_stream::connect(std::move(raw), client_context(), "localhost", 10s);
        const std::vector<std::byte> data = pattern(5, 300'000);
        std::vector<std::byte> echoed(data.size());
        for (std::size_t at = 0; at < data.size(); at += 30'000) {
          co_await s.write_all(std::span(data).subspan(at, 30'000), 10s);
          co_await s.read_exact(std::span(echoed).subspan(at, 30'000), 10s);
        }
        const bool clean = co_await s.shutdown(5s);
        co_return std::pair{ std::move(echoed), clean };
      });
  EXPECT_EQ(first_mismatch(5, received), received.size());
  EXPECT_TRUE(clean);
}

TEST(tls_interop, openssl_s_client_talks_to_a_cyan_server) {
  loopback net;
  auto served = net.serve_one(server_context(), [](tls_stream& s) -> task<std::string> {
    std::string line;
    std::byte buffer[256];
    while (line.find('\n') == std::string::npos) {
      const std::size_t n = co_await s.read_some(buffer, 10s);
      if (n == 0) {
        break;
      }
      line += text_of(std::span(buffer).first(n));
    }
    co_await s.write_all(cyan::net::buffer("echo: " + line), 10s);
    (void)co_await s.shutdown(2s);
    co_return line;
  });
  process client = start(
      "printf 'hello\\n' | timeout 20 openssl s_client -quiet -ign_eof "
      "-verify_return_error -CAfile " +
      file("ca.crt").string() + " -servername localhost -connect 127.0.0.1:" +
      std::to_string(net.address.port()) + " 2>/dev/null");
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(read_all(client.get()), "echo: hello\n");
  EXPECT_EQ(served.get(), "hello\n");
}

TEST(tls_interop, curl_gets_a_page_from_a_cyan_https_responder) {
  loopback net;
  auto served = net.serve_one(
      server_context("server", { "http/1.1" }), [](tls_stream& s) -> task<std::string> {
        std::string request;
        std::byte buffer[1024];
        while (request.find("\r\n\r\n") == std::string::npos) {
          const std::size_t n = co_await s.read_some(buffer, 10s);
          if (n == 0) {
            break;
          }
          request += text_of(std::span(buffer).first(n));
        }
        co_await s.write_all(
            cyan::net::buffer(std::string_view(
                "HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\nhello\n")),
            10s);
        (void)co_await s.shutdown(2s);
        co_return request.substr(0, request.find("\r\n"));
      });
  const std::string port = std::to_string(net.address.port());
  process curl =
      start("curl -sS --max-time 20 --cacert " + file("ca.crt").string() +
            " --resolve localhost:" + port + ":127.0.0.1 https://localhost:" + port + "/page 2>&1");
  ASSERT_NE(curl, nullptr);
  EXPECT_EQ(read_all(curl.get()), "hello\n");
  EXPECT_EQ(served.get(), "GET /page HTTP/1.1");
}

TEST(tls_context_files, a_missing_certificate_file_throws_naming_it) {
  try {
    (void)tls_context::server({ .certificate_chain_file = "/nonexistent/cert.pem",
                                .private_key_file = file("server.key") });
    FAIL() << "no exception";
  } catch (const std::system_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/cert.pem"), std::string::npos) << e.what();
  }
}

TEST(tls_context_files, a_key_that_does_not_match_the_certificate_throws) {
  try {
    (void)tls_context::server(
        { .certificate_chain_file = file("server.crt"), .private_key_file = file("other.key") });
    FAIL() << "no exception";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code().category(), cyan::net::tls_category()) << e.what();
    EXPECT_NE(std::string(e.what()).find("other.key: key values mismatch"), std::string::npos)
        << e.what();
  }
}

}  // namespace
