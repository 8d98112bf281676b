// echo_server, http_server and load_tester behind cyan::test::chaos_proxy
// (tests/support/chaos_proxy.h): requests and answers in 1-byte pieces, resets mid-request,
// half-closes, stalls in either direction. Whatever the proxy does to a connection, the server
// survives it and says nothing it should not, a stalled connection is closed by the server's
// own timeout, a client talking to the server directly meanwhile (on the same handler thread)
// is served within a second, and load_tester counts each fault under the failure it is.

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/process.h"
#include "http_test_client.h"
#include "loopback_client.h"
#include "support/chaos_proxy.h"
#include "support/descriptor_check.h"

namespace {

using namespace std::chrono_literals;
using cyan::bench::child_process;
using cyan::bench::parse_result_line;
using cyan::bench::port_of_listening_line;
using cyan::test::chaos_proxy;
using cyan::test::connect_to;
using cyan::test::http_response;
using cyan::test::http_test_client;
using cyan::test::receive;
using cyan::test::send_all;
using cyan::test::stream_end;
using action = chaos_proxy::fault::action;
using statistics = chaos_proxy::statistics;
using clock_type = std::chrono::steady_clock;

constexpr std::string_view kGetRoot = "GET / HTTP/1.1\r\nHost: test\r\n\r\n";
// The timeouts the servers get here, small to keep the tests short.
constexpr auto kTimeout = 300ms;
// How much later than its timeout a server may close a stalled connection: its timers tick in
// milliseconds; the rest is a loaded 2-vCPU machine, and the sanitizers.
constexpr auto kCloseTolerance = 2s;
// A client beside the faulty ones is served within this.
constexpr auto kServedWithin = 1s;

// echo_server or http_server on a free port, its stderr in the same pipe as its stdout.
class server {
 public:
  server(const char* program, std::vector<std::string> options)
      : process_name_(program), process_(command(program, std::move(options)), -1, false, true) {
    port_ = port_of_listening_line(process_.read_line(10s));
    if (port_ != 0) {
      listening_ = cyan::test::read_descriptor_table(process_.pid());
    }
  }
  [[nodiscard]] unsigned port() const noexcept { return port_; }
  // With the proxies stopped and the direct clients closed: the server closed every connection
  // it accepted, whatever was done to it, back to the descriptors it listened with within 5 s.
  void expect_descriptors_back_to_baseline() {
    cyan::test::expect_descriptors_back_to_baseline(process_.pid(), listening_, 5s, process_name_);
  }
  // SIGTERM; its exit status. output() then holds what it said after "listening on".
  int stop() {
    const int status = process_.stop(10s);
    output_ = process_.read_all(5s);
    return status;
  }
  [[nodiscard]] const std::string& output() const noexcept { return output_; }

 private:
  static std::vector<std::string> command(const char* program, std::vector<std::string> options) {
    // --grace-ms: connections the proxy still holds stalled are cancelled that soon at stop.
    options.insert(options.begin(),
                   { program, "--port", "0", "--threads", "1", "--grace-ms", "500" });
    return options;
  }
  std::string process_name_;
  child_process process_;
  unsigned port_ = 0;
  std::string output_;
  cyan::test::descriptor_table listening_;  // its descriptors when it said "listening on"
};

// A blocking loopback connection, closed at the end of its scope.
class connection {
 public:
  explicit connection(unsigned port) : fd_(connect_to(port)) {}
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;
  ~connection() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }
  [[nodiscard]] int fd() const noexcept { return fd_; }
  [[nodiscard]] bool send(std::string_view bytes) const {
    return send_all(fd_, std::string(bytes));
  }

 private:
  int fd_;
};

std::string pattern(std::size_t size) {
  std::string text(size, ' ');
  for (std::size_t i = 0; i < size; ++i) {
    text[i] = static_cast<char>('a' + i % 26);
  }
  return text;
}

// A new connection straight to echo_server is echoed within kServedWithin.
void expect_direct_echo(unsigned port) {
  const auto start = clock_type::now();
  const connection direct(port);
  ASSERT_GE(direct.fd(), 0);
  ASSERT_TRUE(direct.send("direct"));
  stream_end how;
  EXPECT_EQ(receive(direct.fd(), 6, kServedWithin, how), "direct");
  EXPECT_LT(clock_type::now() - start, kServedWithin);
}

// A new connection straight to http_server gets 200 within kServedWithin.
void expect_direct_page(unsigned port) {
  const auto start = clock_type::now();
  http_test_client direct(port, kServedWithin);
  EXPECT_EQ(direct.get_root(kServedWithin), 200);
  EXPECT_LT(clock_type::now() - start, kServedWithin);
}

// One answer carrying the built-in page, read from `fd` up to the page's last line (at most
// 100 reads, each within a second).
std::string receive_page(int fd) {
  std::string answer;
  stream_end how = stream_end::open;
  for (int i = 0; i < 100 && !answer.ends_with("</html>\n") && how == stream_end::open; ++i) {
    answer += receive(fd, 1, 1s, how);  // what one read brings
  }
  return answer;
}

// What one connection received until its stream ended, how, and when.
struct ending {
  std::string received;
  stream_end how = stream_end::open;
  clock_type::time_point at{};
};

// Reads each of `fds` until its stream ends or `limit` passes, calling `meanwhile` between two
// polls (at least every 50 ms).
std::vector<ending> read_until_ends(const std::vector<int>& fds, std::chrono::milliseconds limit,
                                    const std::function<void()>& meanwhile) {
  std::vector<ending> ends(fds.size());
  const auto deadline = clock_type::now() + limit;
  std::size_t open = fds.size();
  while (open > 0 && clock_type::now() < deadline) {
    std::vector<::pollfd> polled;
    for (std::size_t i = 0; i < fds.size(); ++i) {
      polled.push_back({ ends[i].how == stream_end::open ? fds[i] : -1, POLLIN, 0 });
    }
    (void)::poll(polled.data(), polled.size(), 50);
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (polled[i].revents == 0) {
        continue;
      }
      char buffer[4096];
      const ::ssize_t n = ::recv(fds[i], buffer, sizeof buffer, MSG_DONTWAIT);
      if (n > 0) {
        ends[i].received.append(buffer, static_cast<std::size_t>(n));
      } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        ends[i].how = n == 0                ? stream_end::end_of_stream
                      : errno == ECONNRESET ? stream_end::reset
                                            : stream_end::error;
        ends[i].at = clock_type::now();
        --open;
      }
    }
    meanwhile();
  }
  return ends;
}

// Keeps sending `bytes` on `fd`, as fast as its buffer takes them, until the stream fails or
// `limit` passes; returns when it failed, or nullopt. Nothing is read: the client that stopped
// reading.
std::optional<clock_type::time_point> send_until_failure(int fd, std::string_view bytes,
                                                         std::chrono::milliseconds limit) {
  const auto deadline = clock_type::now() + limit;
  while (clock_type::now() < deadline) {
    if (::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT) < 0 &&
        errno != EAGAIN) {
      return clock_type::now();
    }
    ::pollfd ready{ fd, POLLOUT, 0 };  // room again, or the reset (POLLERR, POLLHUP)
    if (::poll(&ready, 1, 50) == 1 && (ready.revents & (POLLERR | POLLHUP)) != 0) {
      return clock_type::now();
    }
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// echo_server

TEST(chaos_echo_server, an_echo_in_one_byte_pieces_comes_back_byte_exact) {
  server s(CYAN_PROGRAM_ECHO_SERVER, {});
  ASSERT_NE(s.port(), 0u);
  chaos_proxy proxy({ .target_port = s.port(),
                      .to_server = { .split = true, .delay = 1ms },
                      .to_client = { .split = true } });
  {
    const connection c(proxy.port());
    const std::string message = pattern(300);
    ASSERT_TRUE(c.send(message));
    stream_end how;
    EXPECT_EQ(receive(c.fd(), message.size(), 5s, how), message);
    EXPECT_EQ(how, stream_end::open);
  }
  ASSERT_TRUE(proxy.wait_until([](const statistics& st) { return st.bytes_to_client == 300; }, 5s));
  EXPECT_EQ(proxy.stats().writes_to_server, 300u);  // one byte per piece, both ways
  EXPECT_EQ(proxy.stats().writes_to_client, 300u);
  proxy.stop();
  s.expect_descriptors_back_to_baseline();
  EXPECT_EQ(s.stop(), 0);
  EXPECT_EQ(s.output(), "");
}

TEST(chaos_echo_server, survives_resets_mid_message_and_serves_a_direct_client_within_a_second) {
  server s(CYAN_PROGRAM_ECHO_SERVER, {});
  ASSERT_NE(s.port(), 0u);
  chaos_proxy proxy(
      { .target_port = s.port(), .to_server = { .after = action::reset, .after_bytes = 100 } });
  constexpr int kRounds = 5;
  for (int round = 0; round < kRounds; ++round) {
    const connection c(proxy.port());
    ASSERT_TRUE(c.send(pattern(250)));
    stream_end how;
    const std::string echoed = receive(c.fd(), 250, 5s, how);
    EXPECT_EQ(how, stream_end::reset) << "round " << round;
    EXPECT_EQ(echoed, pattern(echoed.size()));  // what came back before the reset, if any
    EXPECT_LE(echoed.size(), 100u);
    expect_direct_echo(s.port());
  }
  ASSERT_TRUE(proxy.wait_until([](const statistics& st) { return st.resets == kRounds; }, 5s));
  EXPECT_EQ(proxy.stats().bytes_to_server, 100u * kRounds);
  proxy.stop();
  s.expect_descriptors_back_to_baseline();
  EXPECT_EQ(s.stop(), 0);
  EXPECT_EQ(s.output(), "");  // a reset is the client going away, not an error
}

TEST(chaos_echo_server, echoes_what_came_before_a_half_close_then_ends_the_stream) {
  server s(CYAN_PROGRAM_ECHO_SERVER, {});
  ASSERT_NE(s.port(), 0u);
  chaos_proxy proxy(
      { .target_port = s.port(), .to_server = { .after = action::half_close, .after_bytes = 6 } });
  {
    const connection c(proxy.port());
    ASSERT_TRUE(c.send("hello world"));
    stream_end how;
    EXPECT_EQ(receive(c.fd(), 100, 5s, how), "hello ");
    EXPECT_EQ(how, stream_end::end_of_stream);
    expect_direct_echo(s.port());
  }
  ASSERT_TRUE(proxy.wait_until([](const statistics& st) { return st.closed == 1; }, 5s));
  EXPECT_EQ(proxy.stats().half_closes, 1u);
  EXPECT_EQ(proxy.stats().server_ends, 1u);
  EXPECT_EQ(proxy.stats().resets, 0u);
  proxy.stop();
  s.expect_descriptors_back_to_baseline();
  EXPECT_EQ(s.stop(), 0);
  EXPECT_EQ(s.output(), "");
}

// A client whose bytes stop coming is closed at --idle-ms; each timeout is reported once.
TEST(chaos_echo_server, closes_stalled_connections_at_the_idle_timeout_while_serving_others) {
  server s(CYAN_PROGRAM_ECHO_SERVER, { "--idle-ms", std::to_string(kTimeout.count()) });
  ASSERT_NE(s.port(), 0u);
  chaos_proxy proxy(
      { .target_port = s.port(), .to_server = { .after = action::stall, .after_bytes = 4 } });
  constexpr int kStalled = 5;
  std::vector<std::unique_ptr<connection>> stalled;
  std::vector<int> fds;
  const auto sent = clock_type::now();
  for (int i = 0; i < kStalled; ++i) {
    stalled.push_back(std::make_unique<connection>(proxy.port()));
    ASSERT_TRUE(stalled.back()->send("ping-pong"));
    fds.push_back(stalled.back()->fd());
  }
  int served = 0;
  const std::vector<ending> ends = read_until_ends(fds, kTimeout + kCloseTolerance + 1s, [&] {
    expect_direct_echo(s.port());
    ++served;
  });
  for (int i = 0; i < kStalled; ++i) {
    EXPECT_EQ(ends[i].received, "ping") << i;
    EXPECT_EQ(ends[i].how, stream_end::end_of_stream) << i;
    EXPECT_GE(ends[i].at - sent, kTimeout) << i;
    EXPECT_LT(ends[i].at - sent, kTimeout + kCloseTolerance) << i;
  }
  EXPECT_GT(served, 0);
  EXPECT_EQ(proxy.stats().stalls, static_cast<std::uint64_t>(kStalled));
  proxy.stop();
  s.expect_descriptors_back_to_baseline();
  EXPECT_EQ(s.stop(), 0);
  EXPECT_EQ(s.output(), "");  // an --idle-ms close is how a silent connection ends, not an error
}

// A client that keeps sending but never reads: the echoes fill the buffers, the server's write
// waits, and --idle-ms (the limit of each write too) ends it.
TEST(chaos_echo_server, closes_a_client_that_stops_reading_at_the_write_timeout) {
  server s(CYAN_PROGRAM_ECHO_SERVER, { "--idle-ms", std::to_string(kTimeout.count()) });
  ASSERT_NE(s.port(), 0u);
  chaos_proxy proxy(
      { .target_port = s.port(), .to_client = { .after = action::stall, .after_bytes = 0 } });
  const connection c(proxy.port());
  const auto start = clock_type::now();
  const auto failed = send_until_failure(c.fd(), pattern(64 * 1024), kTimeout + kCloseTolerance);
  ASSERT_TRUE(failed.has_value());
  EXPECT_GE(*failed - start, kTimeout);
  expect_direct_echo(s.port());
  ASSERT_TRUE(proxy.wait_until([](const statistics& st) { return st.server_ends == 1; }, 5s));
  EXPECT_EQ(proxy.stats().bytes_to_client, 0u);
  proxy.stop();
  s.expect_descriptors_back_to_baseline();
  EXPECT_EQ(s.stop(), 0);
  EXPECT_EQ(s.output(), "");  // the write timeout ends it quietly, as the idle one
}

// ---------------------------------------------------------------------------------------------
// http_server

TEST(chaos_http_server, requests_and_answers_in_one_byte_pieces_are_served_exactly) {
  server s(CYAN_PROGRAM_HTTP_SERVER, {});
  ASSERT_NE(s.port(), 0u);
  http_test_client direct(s.port());
  ASSERT_TRUE(direct.send(kGetRoot));
  const std::optional<http_response> reference = direct.read_response(5s);
  ASSERT_TRUE(reference.has_value());
  chaos_proxy proxy({ .target_port = s.port(),
                      .to_server = { .split = true, .delay = 1ms },
                      .to_client = { .split = true } });
  // Pipelined: a HEAD between two GETs, every byte a piece of its own.
  const std::string requests =
      std::string(kGetRoot) + "HEAD / HTTP/1.1\r\nHost: test\r\n\r\n" + std::string(kGetRoot);
  {
    http_test_client c(proxy.port());
    ASSERT_TRUE(c.send(requests));
    for (const bool head : { false, true, false }) {
      const std::optional<http_response> r = c.read_response(10s, head);
      ASSERT_TRUE(r.has_value()) << (head ? "HEAD" : "GET");
      EXPECT_EQ(r->status_line, "HTTP/1.1 200 OK");
      EXPECT_EQ(r->header("Content-Length"), reference->header("Content-Length"));
      EXPECT_EQ(r->body, head ? "" : reference->body);
    }
  }
  ASSERT_TRUE(proxy.wait_until([](const statistics& st) { return st.closed == 1; }, 5s));
  const statistics st = proxy.stats();
  EXPECT_EQ(st.bytes_to_server, requests.size());
  EXPECT_EQ(st.writes_to_server, st.bytes_to_server);
  EXPECT_EQ(st.writes_to_client, st.bytes_to_client);
  EXPECT_EQ(direct.get_root(kServedWithin), 200);
  direct.close();
  proxy.stop();
  s.expect_descriptors_back_to_baseline();
  EXPECT_EQ(s.stop(), 0);
  EXPECT_EQ(s.output(), "");
}

// Resets in the request line, in a body, and in the answer: each connection ends in a reset,
// and the direct client beside them is served within a second after each.
TEST(chaos_http_server, survives_resets_mid_request_and_serves_a_direct_client_within_a_second) {
  server s(CYAN_PROGRAM_HTTP_SERVER, {});
  ASSERT_NE(s.port(), 0u);
  http_test_client good(s.port());
  ASSERT_EQ(good.get_root(), 200);
  const std::string post_head = "POST / HTTP/1.1\r\nHost: test\r\nContent-Length: 100\r\n\r\n";
  const std::string post = post_head + std::string(100, 'x');
  struct fault_case {
    const char* name;
    chaos_proxy::options options;
    std::string request;
  };
  const std::vector<fault_case> cases = {
    { "in the request line",
      { .target_port = s.port(), .to_server = { .after = action::reset, .after_bytes = 7 } },
      std::string(kGetRoot) },
    { "in the body",
      { .target_port = s.port(),
        .to_server = { .after = action::reset, .after_bytes = post_head.size() + 10 } },
      post },
    { "in the answer",
      { .target_port = s.port(), .to_client = { .after = action::reset, .after_bytes = 50 } },
      std::string(kGetRoot) },
  };
  for (const fault_case& fault : cases) {
    chaos_proxy proxy(fault.options);
    constexpr int kRounds = 3;
    for (int round = 0; round < kRounds; ++round) {
      const connection c(proxy.port());
      ASSERT_TRUE(c.send(fault.request));
      stream_end how;
      const std::string answer = receive(c.fd(), 100'000, 5s, how);
      EXPECT_EQ(how, stream_end::reset) << fault.name;
      EXPECT_EQ(answer.size(), fault.options.to_client.after == action::reset ? 50u : 0u)
          << fault.name;
      const auto start = clock_type::now();
      EXPECT_EQ(good.get_root(kServedWithin), 200) << fault.name;
      EXPECT_LT(clock_type::now() - start, kServedWithin) << fault.name;
    }
    EXPECT_TRUE(proxy.wait_until([](const statistics& st) { return st.resets == kRounds; }, 5s))
        << fault.name;
  }
  good.close();
  s.expect_descriptors_back_to_baseline();
  EXPECT_EQ(s.stop(), 0);
  EXPECT_EQ(s.output(), "");  // resets are clients going away, not errors
}

TEST(chaos_http_server, answers_a_request_before_a_half_close_then_ends_the_stream) {
  server s(CYAN_PROGRAM_HTTP_SERVER, {});
  ASSERT_NE(s.port(), 0u);
  {
    // The whole request, then the end: answered, then end of stream (not a reset).
    chaos_proxy proxy(
        { .target_port = s.port(),
          .to_server = { .after = action::half_close, .after_bytes = kGetRoot.size() } });
    const connection c(proxy.port());
    ASSERT_TRUE(c.send(kGetRoot));
    stream_end how;
    const std::string answer = receive(c.fd(), 100'000, 5s, how);
    EXPECT_TRUE(answer.starts_with("HTTP/1.1 200 OK\r\n")) << answer;
    EXPECT_TRUE(answer.ends_with("</html>\n")) << answer;
    EXPECT_EQ(how, stream_end::end_of_stream);
  }
  {
    // Half a request, then the end: no answer, end of stream.
    chaos_proxy proxy({ .target_port = s.port(),
                        .to_server = { .after = action::half_close, .after_bytes = 10 } });
    const connection c(proxy.port());
    ASSERT_TRUE(c.send(kGetRoot));
    stream_end how;
    EXPECT_EQ(receive(c.fd(), 100'000, 5s, how), "");
    EXPECT_EQ(how, stream_end::end_of_stream);
  }
  expect_direct_page(s.port());
  s.expect_descriptors_back_to_baseline();
  EXPECT_EQ(s.stop(), 0);
  EXPECT_EQ(s.output(), "");
}

// A request whose bytes stop coming gets 408 at --request-timeout-ms, then the end of stream.
TEST(chaos_http_server, stalled_requests_get_408_at_the_request_timeout_while_others_are_served) {
  server s(CYAN_PROGRAM_HTTP_SERVER, { "--request-timeout-ms", std::to_string(kTimeout.count()) });
  ASSERT_NE(s.port(), 0u);
  http_test_client good(s.port());
  ASSERT_EQ(good.get_root(), 200);
  chaos_proxy proxy(
      { .target_port = s.port(), .to_server = { .after = action::stall, .after_bytes = 20 } });
  constexpr int kStalled = 5;
  std::vector<std::unique_ptr<connection>> stalled;
  std::vector<int> fds;
  const auto sent = clock_type::now();
  for (int i = 0; i < kStalled; ++i) {
    stalled.push_back(std::make_unique<connection>(proxy.port()));
    ASSERT_TRUE(stalled.back()->send(kGetRoot));
    fds.push_back(stalled.back()->fd());
  }
  int served = 0;
  const std::vector<ending> ends = read_until_ends(fds, kTimeout + kCloseTolerance + 1s, [&] {
    EXPECT_EQ(good.get_root(kServedWithin), 200);
    ++served;
  });
  for (int i = 0; i < kStalled; ++i) {
    EXPECT_TRUE(ends[i].received.starts_with("HTTP/1.1 408 Request Timeout\r\n")) << i;
    EXPECT_EQ(ends[i].how, stream_end::end_of_stream) << i;
    EXPECT_GE(ends[i].at - sent, kTimeout) << i;
    EXPECT_LT(ends[i].at - sent, kTimeout + kCloseTolerance) << i;
  }
  EXPECT_GT(served, 0);
  good.close();
  proxy.stop();
  s.expect_descriptors_back_to_baseline();
  EXPECT_EQ(s.stop(), 0);
  EXPECT_EQ(s.output(), "");
}

// Between requests --idle-timeout-ms applies: a keep-alive connection whose next request never
// arrives is closed then; so is one where nothing at all gets through either way (the server's
// end seen by the proxy only).
TEST(chaos_http_server, connections_stalled_between_requests_are_closed_at_the_idle_timeout) {
  server s(CYAN_PROGRAM_HTTP_SERVER, { "--idle-timeout-ms", std::to_string(kTimeout.count()) });
  ASSERT_NE(s.port(), 0u);
  chaos_proxy after_one(
      { .target_port = s.port(),
        .to_server = { .after = action::stall, .after_bytes = kGetRoot.size() } });
  chaos_proxy frozen({ .target_port = s.port(),
                       .to_server = { .after = action::stall, .after_bytes = 0 },
                       .to_client = { .after = action::stall, .after_bytes = 0 } });
  constexpr int kFrozen = 3;
  const auto start = clock_type::now();
  std::vector<std::unique_ptr<connection>> held;
  for (int i = 0; i < kFrozen; ++i) {
    held.push_back(std::make_unique<connection>(frozen.port()));
  }
  const connection c(after_one.port());
  ASSERT_TRUE(c.send(kGetRoot));
  const std::string first = receive_page(c.fd());
  EXPECT_TRUE(first.starts_with("HTTP/1.1 200 OK\r\n")) << first;
  ASSERT_TRUE(c.send(kGetRoot));  // stalled
  const std::vector<ending> ends = read_until_ends({ c.fd() }, kTimeout + kCloseTolerance + 1s,
                                                   [&] { expect_direct_page(s.port()); });
  EXPECT_EQ(ends[0].received, "");
  EXPECT_EQ(ends[0].how, stream_end::end_of_stream);
  EXPECT_GE(ends[0].at - start, kTimeout);
  EXPECT_LT(ends[0].at - start, kTimeout + kCloseTolerance);
  ASSERT_TRUE(frozen.wait_until([](const statistics& st) { return st.server_ends == kFrozen; },
                                kTimeout + kCloseTolerance));
  EXPECT_GE(clock_type::now() - start, kTimeout);
  EXPECT_EQ(frozen.stats().bytes_to_client, 0u);
  after_one.stop();
  frozen.stop();
  s.expect_descriptors_back_to_baseline();
  EXPECT_EQ(s.stop(), 0);
  EXPECT_EQ(s.output(), "");
}

// A client that pipelines requests for large pages and never reads: the answers fill the
// buffers, the server's write waits, and --idle-timeout-ms (the limit of each write) ends it.
TEST(chaos_http_server, closes_a_client_that_stops_reading_at_the_write_timeout) {
  server s(CYAN_PROGRAM_HTTP_SERVER,
           { "--idle-timeout-ms", std::to_string(kTimeout.count()), "--body-size", "2000000" });
  ASSERT_NE(s.port(), 0u);
  chaos_proxy proxy(
      { .target_port = s.port(), .to_client = { .after = action::stall, .after_bytes = 0 } });
  const connection c(proxy.port());
  const auto start = clock_type::now();
  const auto failed = send_until_failure(c.fd(), kGetRoot, kTimeout + kCloseTolerance);
  ASSERT_TRUE(failed.has_value());
  EXPECT_GE(*failed - start, kTimeout);
  expect_direct_page(s.port());
  ASSERT_TRUE(proxy.wait_until([](const statistics& st) { return st.server_ends == 1; }, 5s));
  proxy.stop();
  s.expect_descriptors_back_to_baseline();
  EXPECT_EQ(s.stop(), 0);
  EXPECT_EQ(s.output(), "");
}

// SIGTERM while the proxy holds connections stalled mid-request (their timeouts far off): the
// server cancels them when --grace-ms (500) ends and exits 0. Each connection's answer shows
// that the server read the request's first bytes (one write of the proxy, one read of the
// server): it is mid-request, not idle, when the signal comes.
TEST(chaos_servers, sigterm_with_stalled_connections_exits_zero_after_the_grace_period) {
  struct program_case {
    const char* program;
    std::string sent;      // in one write
    std::size_t through;   // what the proxy forwards of it, then stalls
    std::string answered;  // how the server's answer to that begins
  };
  const std::string get_root(kGetRoot);
  const std::vector<program_case> cases = {
    { CYAN_PROGRAM_ECHO_SERVER, pattern(30), 20, pattern(20) },
    { CYAN_PROGRAM_HTTP_SERVER, get_root + get_root, get_root.size() + 20, "HTTP/1.1 200 OK\r\n" },
  };
  for (const program_case& c : cases) {
    server s(c.program, {});
    ASSERT_NE(s.port(), 0u);
    chaos_proxy proxy({ .target_port = s.port(),
                        .to_server = { .after = action::stall, .after_bytes = c.through } });
    std::vector<std::unique_ptr<connection>> stalled;
    for (int i = 0; i < 3; ++i) {
      stalled.push_back(std::make_unique<connection>(proxy.port()));
      ASSERT_TRUE(stalled.back()->send(c.sent));
      stream_end how;
      const std::string answer = receive(stalled.back()->fd(), c.answered.size(), 5s, how);
      ASSERT_TRUE(answer.starts_with(c.answered)) << c.program << ": " << answer;
    }
    const auto start = clock_type::now();
    EXPECT_EQ(s.stop(), 0) << c.program;
    const auto took = clock_type::now() - start;
    // Tolerance: not before the grace period; up to 3 s after it on a loaded machine.
    EXPECT_GE(took, 500ms) << c.program;
    EXPECT_LT(took, 500ms + 3s) << c.program;
    EXPECT_EQ(s.output(), "") << c.program;
    EXPECT_EQ(proxy.stats().stalls, 3u);
  }
}

// ---------------------------------------------------------------------------------------------
// load_tester

struct load_result {
  int status = -1;
  std::string output;                    // stdout and stderr
  std::map<std::string, double> result;  // the RESULT line
};

load_result run_load(unsigned port, std::vector<std::string> arguments) {
  arguments.insert(arguments.begin(), { CYAN_PROGRAM_LOAD_TESTER, "--port", std::to_string(port),
                                        "--max-seconds", "30" });
  child_process load(arguments, -1, false, true);
  load_result r;
  r.output = load.read_all(40s);
  r.status = load.wait(10s);
  r.result = parse_result_line(r.output);
  return r;
}

// load_tester's own reading, fed one byte at a time: every echo compared whole, every HTTP
// response parsed across 1-byte reads; nothing lost, nothing counted twice.
TEST(chaos_load_tester, counts_every_request_exactly_through_one_byte_pieces) {
  const chaos_proxy::fault split{ .split = true };
  {
    server s(CYAN_PROGRAM_ECHO_SERVER, {});
    ASSERT_NE(s.port(), 0u);
    chaos_proxy proxy({ .target_port = s.port(), .to_server = split, .to_client = split });
    const load_result r =
        run_load(proxy.port(), { "--connections", "2", "--requests", "20", "--size", "100" });
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(r.result.at("requests"), 40) << r.output;
    EXPECT_EQ(r.result.at("errors"), 0) << r.output;
    ASSERT_TRUE(proxy.wait_until([](const statistics& st) { return st.closed == 2; }, 5s));
    EXPECT_EQ(proxy.stats().writes_to_client, 40u * 100);
    proxy.stop();
    s.expect_descriptors_back_to_baseline();
    EXPECT_EQ(s.stop(), 0);
    EXPECT_EQ(s.output(), "");
  }
  {
    server s(CYAN_PROGRAM_HTTP_SERVER, {});
    ASSERT_NE(s.port(), 0u);
    chaos_proxy proxy({ .target_port = s.port(), .to_server = split, .to_client = split });
    const load_result r =
        run_load(proxy.port(), { "--mode", "http", "--connections", "2", "--requests", "10" });
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(r.result.at("requests"), 20) << r.output;
    EXPECT_EQ(r.result.at("errors"), 0) << r.output;
    ASSERT_TRUE(proxy.wait_until([](const statistics& st) { return st.closed == 2; }, 5s));
    EXPECT_EQ(proxy.stats().writes_to_client, proxy.stats().bytes_to_client);
    proxy.stop();
    s.expect_descriptors_back_to_baseline();
    EXPECT_EQ(s.stop(), 0);
    EXPECT_EQ(s.output(), "");
  }
}

// Each connection's fourth echo is cut after 10 bytes: three requests each, then a read
// failure, reported as the reset it is.
TEST(chaos_load_tester, counts_a_reset_mid_echo_as_a_read_failure) {
  server s(CYAN_PROGRAM_ECHO_SERVER, {});
  ASSERT_NE(s.port(), 0u);
  chaos_proxy proxy({ .target_port = s.port(),
                      .to_server = { .after = action::reset, .after_bytes = 3 * 64 + 10 } });
  const load_result r =
      run_load(proxy.port(), { "--connections", "4", "--requests", "10", "--size", "64" });
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_EQ(r.result.at("requests"), 12) << r.output;
  EXPECT_EQ(r.result.at("errors"), 4) << r.output;
  EXPECT_NE(r.output.find("errors 4: connect 0, read 4, write 0, invalid 0\n"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("load_tester: read: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Connection reset by peer"), std::string::npos) << r.output;
  EXPECT_TRUE(proxy.wait_until([](const statistics& st) { return st.resets == 4; }, 5s));
  expect_direct_echo(s.port());
  proxy.stop();
  s.expect_descriptors_back_to_baseline();
  EXPECT_EQ(s.stop(), 0);
  EXPECT_EQ(s.output(), "");
}

// Each connection's third echo never arrives: two requests each, then a read that times out
// at --timeout-ms.
TEST(chaos_load_tester, counts_a_stall_as_a_read_that_timed_out) {
  server s(CYAN_PROGRAM_ECHO_SERVER, {});
  ASSERT_NE(s.port(), 0u);
  chaos_proxy proxy({ .target_port = s.port(),
                      .to_server = { .after = action::stall, .after_bytes = 2 * 64 + 10 } });
  const load_result r =
      run_load(proxy.port(), { "--connections", "4", "--requests", "10", "--size", "64",
                               "--timeout-ms", std::to_string(kTimeout.count()) });
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_EQ(r.result.at("requests"), 8) << r.output;
  EXPECT_EQ(r.result.at("errors"), 4) << r.output;
  EXPECT_NE(r.output.find("errors 4: connect 0, read 4, write 0, invalid 0\n"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("timed out"), std::string::npos) << r.output;
  EXPECT_GE(r.result.at("seconds"), 0.3) << r.output;
  EXPECT_EQ(proxy.stats().stalls, 4u);
  expect_direct_echo(s.port());
  proxy.stop();
  s.expect_descriptors_back_to_baseline();
  EXPECT_EQ(s.stop(), 0);
  EXPECT_EQ(s.output(), "");
}

// Each connection's third message is cut by a half-close after 10 bytes: the server echoes
// those and ends the stream, which load_tester reads as an end of stream before the echo.
TEST(chaos_load_tester, counts_a_half_close_mid_echo_as_a_read_that_met_the_end) {
  server s(CYAN_PROGRAM_ECHO_SERVER, {});
  ASSERT_NE(s.port(), 0u);
  chaos_proxy proxy({ .target_port = s.port(),
                      .to_server = { .after = action::half_close, .after_bytes = 2 * 64 + 10 } });
  const load_result r =
      run_load(proxy.port(), { "--connections", "4", "--requests", "10", "--size", "64" });
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_EQ(r.result.at("requests"), 8) << r.output;
  EXPECT_NE(r.output.find("errors 4: connect 0, read 4, write 0, invalid 0\n"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("end of stream"), std::string::npos) << r.output;
  proxy.stop();
  s.expect_descriptors_back_to_baseline();
  EXPECT_EQ(s.stop(), 0);
  EXPECT_EQ(s.output(), "");
}

// HTTP mode: a reset in the request line or in the answer is a read failure; a frozen
// connection a read that
// times out (and the server closes it at its request timeout); a request whose end never
// reaches the server gets 408, which is an answer, counted invalid.
TEST(chaos_load_tester, http_counts_resets_stalls_and_408s_each_as_its_kind) {
  server s(CYAN_PROGRAM_HTTP_SERVER, { "--request-timeout-ms", std::to_string(kTimeout.count()) });
  ASSERT_NE(s.port(), 0u);
  const std::vector<std::string> run = {
    "--mode", "http", "--connections", "3", "--requests", "5"
  };
  {
    chaos_proxy proxy(
        { .target_port = s.port(), .to_server = { .after = action::reset, .after_bytes = 5 } });
    const load_result r = run_load(proxy.port(), run);
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_EQ(r.result.at("requests"), 0) << r.output;
    EXPECT_NE(r.output.find("errors 3: connect 0, read 3, write 0, invalid 0\n"), std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("Connection reset by peer"), std::string::npos) << r.output;
  }
  {
    // Reset 50 bytes into the first answer: the same read failure.
    chaos_proxy proxy(
        { .target_port = s.port(), .to_client = { .after = action::reset, .after_bytes = 50 } });
    const load_result r = run_load(proxy.port(), run);
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_EQ(r.result.at("requests"), 0) << r.output;
    EXPECT_NE(r.output.find("errors 3: connect 0, read 3, write 0, invalid 0\n"), std::string::npos)
        << r.output;
  }
  {
    chaos_proxy proxy({ .target_port = s.port(),
                        .to_server = { .after = action::stall, .after_bytes = 5 },
                        .to_client = { .after = action::stall, .after_bytes = 0 } });
    std::vector<std::string> frozen = run;
    frozen.insert(frozen.end(), { "--timeout-ms", std::to_string(kTimeout.count() * 2) });
    const load_result r = run_load(proxy.port(), frozen);
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_EQ(r.result.at("requests"), 0) << r.output;
    EXPECT_NE(r.output.find("errors 3: connect 0, read 3, write 0, invalid 0\n"), std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("timed out"), std::string::npos) << r.output;
    EXPECT_TRUE(proxy.wait_until([](const statistics& st) { return st.server_ends == 3; },
                                 kTimeout + kCloseTolerance));
  }
  {
    chaos_proxy proxy(
        { .target_port = s.port(), .to_server = { .after = action::stall, .after_bytes = 5 } });
    const load_result r = run_load(proxy.port(), run);
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_EQ(r.result.at("requests"), 0) << r.output;
    EXPECT_NE(r.output.find("errors 3: connect 0, read 0, write 0, invalid 3\n"), std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("status 408"), std::string::npos) << r.output;
  }
  expect_direct_page(s.port());
  s.expect_descriptors_back_to_baseline();
  EXPECT_EQ(s.stop(), 0);
  EXPECT_EQ(s.output(), "");
}

}  // namespace
