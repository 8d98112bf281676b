// http_server with --tls-cert / --tls-key as clients see it over loopback: curl over a kept-alive
// connection (ALPN http/1.1), a slow request's 408 ended by close_notify, a client that speaks
// plain HTTP to the TLS port, and the drain on SIGTERM. Certificates:
// scripts/tls_certificates.sh.

#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "bench/process.h"
#include "cyan/dispatch.h"
#include "cyan/net.h"
#include "net/net_support.h"
#include "support/descriptor_check.h"
#include "support/tls_certificates.h"

namespace {

using namespace std::chrono_literals;
using cyan::bench::child_process;
using cyan::bench::port_of_listening_line;
using cyan::dispatch::handler_thread;
using cyan::dispatch::task;
using cyan::net::endpoint;
using cyan::net::tcp_socket;
using cyan::net::tls_context;
using cyan::net::tls_stream;
using cyan::test::run_on;
using cyan::test::temp_dir;

std::string file(const char* name) {
  return cyan::test::tls_certificates() + "/" + name;
}

// http_server over TLS on a free port with `options`.
class https_server {
 public:
  explicit https_server(std::vector<std::string> options)
      : process_(command(std::move(options)), -1) {
    port_ = port_of_listening_line(process_.read_line(10s));
    if (port_ != 0) {
      listening_ = cyan::test::read_descriptor_table(process_.pid());
    }
  }
  [[nodiscard]] unsigned port() const noexcept { return port_; }
  child_process& process() noexcept { return process_; }

  // With the test's clients done and closed: the server closed every connection it accepted,
  // back to the descriptors it listened with, within 5 s.
  void expect_descriptors_back_to_baseline() {
    cyan::test::expect_descriptors_back_to_baseline(process_.pid(), listening_, 5s,
                                                    "http_server --tls-cert");
  }

 private:
  static std::vector<std::string> command(std::vector<std::string> options) {
    options.insert(options.begin(), { CYAN_PROGRAM_HTTP_SERVER, "--port", "0", "--tls-cert",
                                      file("server.crt"), "--tls-key", file("server.key") });
    return options;
  }
  child_process process_;
  unsigned port_ = 0;
  cyan::test::descriptor_table listening_;  // its descriptors when it said "listening on"
};

std::string run(const std::string& command) {
  std::string output;
  if (std::FILE* f = ::popen(command.c_str(), "r"); f != nullptr) {
    char chunk[512];
    while (std::fgets(chunk, sizeof chunk, f) != nullptr) {
      output += chunk;
    }
    ::pclose(f);
  }
  return output;
}

std::string curl(unsigned port, const std::string& arguments) {
  const std::string p = std::to_string(port);
  return run("curl -sS --max-time 20 --cacert " + file("ca.crt") + " --resolve localhost:" + p +
             ":127.0.0.1 " + arguments + " 2>&1");
}

tls_context client_context() {
  return tls_context::client({ .ca_file = file("ca.crt"), .verify_peer = true });
}

TEST(https_server, curl_gets_the_page_twice_over_one_kept_alive_connection_with_alpn_http_1_1) {
  https_server s({ "--threads", "2" });
  ASSERT_NE(s.port(), 0u);
  const std::string url = "https://localhost:" + std::to_string(s.port()) + "/";
  EXPECT_EQ(curl(s.port(), url + " " + url +
                               " -o /dev/null -o /dev/null -w '%{http_code} %{num_connects} "
                               "%{http_version}\\n'"),
            "200 1 1.1\n200 0 1.1\n");
  s.expect_descriptors_back_to_baseline();
  EXPECT_EQ(s.process().stop(), 0);
}

TEST(https_server, a_slow_request_gets_408_then_close_notify) {
  https_server s({ "--threads", "1", "--request-timeout-ms", "300" });
  ASSERT_NE(s.port(), 0u);
  handler_thread client_thread;
  const auto [answer, end] =
      run_on(client_thread, [&]() -> task<std::pair<std::string, std::string>> {
        tcp_socket raw = co_await tcp_socket::connect(
            endpoint::loopback_v4(static_cast<std::uint16_t>(s.port())), 10s);
        tls_stream stream =
            co_await tls_stream::connect(std::move(raw), client_context(), "localhost", 10s);
        co_await stream.write_all(
            cyan::net::buffer(std::string_view("GET / HTTP/1.1\r\nHost: t\r\n")), 10s);
        std::string answer;
        std::byte buffer[4096];
        std::string end = "clean";
        try {
          while (const std::size_t n = co_await stream.read_some(buffer, 10s)) {
            answer += cyan::net::as_string_view(std::span(buffer).first(n));
          }
        } catch (const std::system_error& e) {
          end = e.code().message();
        }
        co_return std::pair{ answer, end };
      });
  EXPECT_EQ(answer.substr(0, answer.find("\r\n")), "HTTP/1.1 408 Request Timeout");
  EXPECT_NE(answer.find("Connection: close\r\n"), std::string::npos) << answer;
  EXPECT_EQ(end, "clean");  // the answer ends with close_notify, not a bare TCP close
  s.expect_descriptors_back_to_baseline();
  EXPECT_EQ(s.process().stop(), 0);
}

// A client that asked to close gets the answer, close_notify and the end of the TCP stream at
// once: the server has nothing more to read, so it does not wait (up to kLingerLimit, 1 s) for
// the client's close_notify (as nginx). The client here never sends one.
TEST(https_server, a_request_asking_to_close_ends_the_connection_without_waiting_for_the_client) {
  https_server s({ "--threads", "1" });
  ASSERT_NE(s.port(), 0u);
  handler_thread client_thread;
  const auto [answer, waited] =
      run_on(client_thread, [&]() -> task<std::pair<std::string, std::chrono::nanoseconds>> {
        tcp_socket raw = co_await tcp_socket::connect(
            endpoint::loopback_v4(static_cast<std::uint16_t>(s.port())), 10s);
        tls_stream stream =
            co_await tls_stream::connect(std::move(raw), client_context(), "localhost", 10s);
        co_await stream.write_all(cyan::net::buffer(std::string_view(
                                      "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")),
                                  10s);
        std::string answer;
        std::byte buffer[4096];
        while (const std::size_t n = co_await stream.read_some(buffer, 10s)) {
          answer += cyan::net::as_string_view(std::span(buffer).first(n));
        }
        // The server's close_notify has come; now the TCP end, the client staying silent.
        const auto from = std::chrono::steady_clock::now();
        std::size_t after = 0;
        while (const std::size_t n = co_await stream.next_layer().read_some(buffer, 10s)) {
          after += n;
        }
        co_return std::pair{ after == 0 ? answer : "bytes after close_notify",
                             std::chrono::steady_clock::now() - from };
      });
  EXPECT_EQ(answer.substr(0, answer.find("\r\n")), "HTTP/1.1 200 OK");
  EXPECT_NE(answer.find("Connection: close\r\n"), std::string::npos) << answer;
  // Lingering would hold the connection for 1 s; closing at once takes microseconds.
  EXPECT_LT(waited, 500ms);
  s.expect_descriptors_back_to_baseline();
  EXPECT_EQ(s.process().stop(), 0);
}

TEST(https_server, a_plain_http_client_on_the_tls_port_is_dropped_and_tls_clients_are_served) {
  https_server s({ "--threads", "1" });
  ASSERT_NE(s.port(), 0u);
  handler_thread client_thread;
  const std::string plain = run_on(client_thread, [&]() -> task<std::string> {
    tcp_socket raw = co_await tcp_socket::connect(
        endpoint::loopback_v4(static_cast<std::uint16_t>(s.port())), 10s);
    co_await raw.write_all(
        cyan::net::buffer(std::string_view("GET / HTTP/1.1\r\nHost: t\r\n\r\n")));
    std::string got;
    std::byte buffer[1024];
    try {
      while (const std::size_t n = co_await raw.read_some(buffer, 10s)) {
        got += cyan::net::as_string_view(std::span(buffer).first(n));
      }
    } catch (const std::system_error&) {
      // reset: closed too
    }
    co_return got;
  });
  EXPECT_EQ(plain.find("HTTP/1.1"), std::string::npos);  // at most a TLS alert, no answer
  const std::string url = "https://localhost:" + std::to_string(s.port()) + "/";
  EXPECT_EQ(curl(s.port(), url + " -o /dev/null -w '%{http_code}\\n'"), "200\n");
  s.expect_descriptors_back_to_baseline();
  EXPECT_EQ(s.process().stop(), 0);
}

TEST(https_server, sigterm_closes_an_idle_tls_connection_and_exits_zero) {
  https_server s({ "--threads", "1", "--grace-ms", "10000" });
  ASSERT_NE(s.port(), 0u);
  handler_thread client_thread;
  const auto [status_line, closed] =
      run_on(client_thread, [&]() -> task<std::pair<std::string, bool>> {
        tcp_socket raw = co_await tcp_socket::connect(
            endpoint::loopback_v4(static_cast<std::uint16_t>(s.port())), 10s);
        tls_stream stream =
            co_await tls_stream::connect(std::move(raw), client_context(), "localhost", 10s);
        co_await stream.write_all(
            cyan::net::buffer(std::string_view("HEAD / HTTP/1.1\r\nHost: t\r\n\r\n")), 10s);
        std::string head;
        std::byte buffer[4096];
        while (head.find("\r\n\r\n") == std::string::npos) {
          const std::size_t n = co_await stream.read_some(buffer, 10s);
          if (n == 0) {
            break;
          }
          head += cyan::net::as_string_view(std::span(buffer).first(n));
        }
        // Idle between requests now: the drain closes it.
        EXPECT_EQ(::kill(s.process().pid(), SIGTERM), 0);
        bool closed = false;
        try {
          closed = co_await stream.read_some(buffer, 5s) == 0;
        } catch (const std::system_error& e) {
          closed = e.code() == cyan::net::tls_error::truncated ||
                   e.code() == std::errc::connection_reset;
        }
        co_return std::pair{ head.substr(0, head.find("\r\n")), closed };
      });
  EXPECT_EQ(status_line, "HTTP/1.1 200 OK");
  EXPECT_TRUE(closed);
  EXPECT_EQ(s.process().wait(10s), 0);
}

}  // namespace
