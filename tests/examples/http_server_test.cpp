// http_server as a client sees it over loopback: the page, HEAD, 404, 405, keep-alive and its
// end, pipelining, every limit (each while another client keeps being served), the graceful
// shutdown, and load_tester's HTTP mode against it.

#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/process.h"
#include "http_test_client.h"

namespace {

using namespace std::chrono_literals;
using cyan::bench::child_process;
using cyan::bench::parse_result_line;
using cyan::test::expect_answer_and_close;
using cyan::test::good_client;
using cyan::test::http_response;
using cyan::test::http_test_client;
using server = cyan::test::http_server_process;
using clock_type = std::chrono::steady_clock;

constexpr std::string_view kGetRoot = "GET / HTTP/1.1\r\nHost: test\r\n\r\n";

// The Date header's time, or -1 when it is not an IMF-fixdate.
std::time_t parse_imf_fixdate(const std::string& text) {
  std::tm t{};
  const char* end = strptime(text.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &t);
  return text.size() == 29 && end != nullptr && *end == '\0' ? timegm(&t) : -1;
}

// The names of a response's headers, in order.
std::vector<std::string> header_names(const http_response& r) {
  std::vector<std::string> names;
  for (const auto& header : r.headers) {
    names.push_back(header.first);
  }
  return names;
}

TEST(http_server, get_root_returns_the_page_and_head_the_same_headers_without_body) {
  server s({ "--threads", "1" });
  ASSERT_NE(s.port(), 0u);
  http_test_client client(s.port());
  // A HEAD pipelined before a GET: the GET's response starts right after the HEAD's head.
  ASSERT_TRUE(
      client.send("GET / HTTP/1.1\r\nHost: test\r\n\r\nHEAD / HTTP/1.1\r\nHost: test\r\n\r\n" +
                  std::string(kGetRoot)));
  const std::optional<http_response> get = client.read_response(5s);
  ASSERT_TRUE(get.has_value());
  EXPECT_EQ(get->status_line, "HTTP/1.1 200 OK");
  EXPECT_EQ(header_names(*get),
            (std::vector<std::string>{ "Server", "Date", "Content-Type", "Content-Length" }));
  EXPECT_EQ(get->header("Server"), "cyan");
  EXPECT_EQ(get->header("Content-Type"), "text/html");
  EXPECT_EQ(get->header("Content-Length"), std::to_string(get->body.size()));
  EXPECT_EQ(get->body.rfind("<!DOCTYPE html>\n", 0), 0u);
  EXPECT_TRUE(get->body.ends_with("</html>\n"));
  // Tolerance: the server's clock is this machine's; a minute covers a slow sanitizer run.
  const std::time_t date = parse_imf_fixdate(get->header("Date").value_or(""));
  EXPECT_NE(date, -1) << get->header("Date").value_or("");
  EXPECT_LE(std::abs(static_cast<long long>(date - std::time(nullptr))), 60);

  const std::optional<http_response> head = client.read_response(5s, true);
  ASSERT_TRUE(head.has_value());
  EXPECT_EQ(head->status_line, "HTTP/1.1 200 OK");
  EXPECT_EQ(header_names(*head), header_names(*get));
  EXPECT_EQ(head->header("Content-Length"), get->header("Content-Length"));
  const std::optional<http_response> again = client.read_response(5s);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->status_line, "HTTP/1.1 200 OK");
  EXPECT_EQ(again->body, get->body);
  s.expect_descriptors_back_to_baseline({ &client });
  EXPECT_EQ(s.process().stop(10s), 0);
}

TEST(http_server, body_size_gives_a_body_of_exactly_that_many_bytes) {
  for (const std::size_t size : { std::size_t{ 1 }, std::size_t{ 1000 }, std::size_t{ 100'000 } }) {
    server s({ "--threads", "1", "--body-size", std::to_string(size) });
    ASSERT_NE(s.port(), 0u);
    http_test_client client(s.port());
    ASSERT_TRUE(client.send(std::string(kGetRoot) + "HEAD / HTTP/1.1\r\nHost: test\r\n\r\n" +
                            std::string(kGetRoot)));
    const std::optional<http_response> first = client.read_response(5s);
    const std::optional<http_response> head = client.read_response(5s, true);
    const std::optional<http_response> second = client.read_response(5s);
    ASSERT_TRUE(first && head && second) << "size " << size;
    EXPECT_EQ(first->status(), 200);
    EXPECT_EQ(first->body.size(), size);
    EXPECT_EQ(first->header("Content-Length"), std::to_string(size));
    EXPECT_EQ(head->header("Content-Length"), std::to_string(size));
    EXPECT_EQ(second->body, first->body);
    s.expect_descriptors_back_to_baseline({ &client });
    EXPECT_EQ(s.process().stop(10s), 0);
  }
}

TEST(http_server, other_path_is_404_and_other_method_is_405_and_the_connection_goes_on) {
  server s({ "--threads", "1" });
  ASSERT_NE(s.port(), 0u);
  http_test_client client(s.port());
  ASSERT_TRUE(client.send("GET /missing HTTP/1.1\r\nHost: test\r\n\r\n"));
  const std::optional<http_response> missing = client.read_response(5s);
  ASSERT_TRUE(missing.has_value());
  EXPECT_EQ(missing->status_line, "HTTP/1.1 404 Not Found");
  EXPECT_FALSE(missing->header("Connection").has_value());

  ASSERT_TRUE(client.send("POST / HTTP/1.1\r\nHost: test\r\nContent-Length: 5\r\n\r\nhello"));
  const std::optional<http_response> post = client.read_response(5s);
  ASSERT_TRUE(post.has_value());
  EXPECT_EQ(post->status_line, "HTTP/1.1 405 Method Not Allowed");
  EXPECT_EQ(post->header("Allow"), "GET, HEAD");

  ASSERT_TRUE(client.send("DELETE /missing HTTP/1.1\r\nHost: test\r\n\r\n"));
  const std::optional<http_response> del = client.read_response(5s);
  ASSERT_TRUE(del.has_value());
  EXPECT_EQ(del->status(), 405);
  EXPECT_EQ(client.get_root(5s), 200);  // the body of the POST was not taken for a request
  s.expect_descriptors_back_to_baseline({ &client });
  EXPECT_EQ(s.process().stop(10s), 0);
}

TEST(http_server, http_10_closes_unless_it_asks_for_keep_alive) {
  server s({ "--threads", "1" });
  ASSERT_NE(s.port(), 0u);
  http_test_client plain(s.port());
  ASSERT_TRUE(plain.send("GET / HTTP/1.0\r\n\r\n"));
  expect_answer_and_close(plain, 200);

  http_test_client kept(s.port());
  ASSERT_TRUE(kept.send("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
  const std::optional<http_response> r = kept.read_response(5s);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status(), 200);
  EXPECT_EQ(r->header("Connection"), "keep-alive");
  EXPECT_EQ(kept.get_root(5s), 200);
  s.expect_descriptors_back_to_baseline({ &plain, &kept });
  EXPECT_EQ(s.process().stop(10s), 0);
}

TEST(http_server, connection_close_closes_after_the_response) {
  server s({ "--threads", "1" });
  ASSERT_NE(s.port(), 0u);
  http_test_client client(s.port());
  // The request after the one that closes is not answered.
  ASSERT_TRUE(client.send("GET / HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n" +
                          std::string(kGetRoot)));
  expect_answer_and_close(client, 200);
  s.expect_descriptors_back_to_baseline({ &client });
  EXPECT_EQ(s.process().stop(10s), 0);
}

TEST(http_server, twenty_pipelined_requests_get_twenty_responses_in_order) {
  server s({ "--threads", "1" });
  ASSERT_NE(s.port(), 0u);
  http_test_client client(s.port());
  std::string requests;
  for (int i = 0; i < 20; ++i) {
    requests += i % 3 == 0 ? "GET / HTTP/1.1\r\nHost: test\r\n\r\n"
                : i % 3 == 1
                    ? "GET /missing/" + std::to_string(i) + " HTTP/1.1\r\nHost: test\r\n\r\n"
                    : "HEAD / HTTP/1.1\r\nHost: test\r\n\r\n";
  }
  ASSERT_TRUE(client.send(requests));  // one write
  for (int i = 0; i < 20; ++i) {
    const std::optional<http_response> r = client.read_response(5s, i % 3 == 2);
    ASSERT_TRUE(r.has_value()) << "response " << i;
    EXPECT_EQ(r->status(), i % 3 == 1 ? 404 : 200) << "response " << i;
    EXPECT_EQ(r->body.empty(), i % 3 == 2) << "response " << i;
  }
  EXPECT_EQ(client.get_root(5s), 200);  // nothing more came before this one's answer
  s.expect_descriptors_back_to_baseline({ &client });
  EXPECT_EQ(s.process().stop(10s), 0);
}

TEST(http_server,
     thousands_of_pipelined_requests_unread_for_a_while_are_all_answered_while_others_are_served) {
  server s({ "--threads", "1" });
  ASSERT_NE(s.port(), 0u);
  const auto good = good_client(s.port());
  http_test_client flood(s.port());
  constexpr int kRequests = 5000;  // ~1.7 MB of answers: more than the socket buffers hold
  std::string requests;
  for (int i = 0; i < kRequests; ++i) {
    requests += i % 2 == 0 ? "GET / HTTP/1.1\r\nHost: test\r\n\r\n"
                           : "GET /missing HTTP/1.1\r\nHost: test\r\n\r\n";
  }
  ASSERT_TRUE(flood.send(requests, 10s));
  EXPECT_EQ(good->get_root(1s), 200);  // the flood's writes wait; this thread does not
  for (int i = 0; i < kRequests; ++i) {
    const std::optional<http_response> r = flood.read_response(10s);
    ASSERT_TRUE(r.has_value()) << "response " << i;
    ASSERT_EQ(r->status(), i % 2 == 0 ? 200 : 404) << "response " << i;
  }
  EXPECT_EQ(flood.get_root(5s), 200);
  s.expect_descriptors_back_to_baseline({ good.get(), &flood });
  EXPECT_EQ(s.process().stop(10s), 0);
}

TEST(http_server, request_arriving_byte_by_byte_is_served) {
  server s({ "--threads", "1" });
  ASSERT_NE(s.port(), 0u);
  http_test_client client(s.port());
  const std::string request = "GET /?q=1 HTTP/1.1\r\nHost: test\r\nAccept: */*\r\n\r\n";
  for (const char c : request) {
    ASSERT_TRUE(client.send(std::string(1, c)));
  }
  const std::optional<http_response> r = client.read_response(5s);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status(), 200);
  s.expect_descriptors_back_to_baseline({ &client });
  EXPECT_EQ(s.process().stop(10s), 0);
}

// "Expect: 100-continue": the server says "100 Continue" before the body comes (the client
// waits for it: curl a second), then answers the request as ever.
TEST(http_server, expect_continue_gets_an_interim_answer_before_the_body) {
  server s({ "--threads", "1" });
  ASSERT_NE(s.port(), 0u);
  http_test_client client(s.port());
  ASSERT_TRUE(client.send(
      "POST / HTTP/1.1\r\nHost: test\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n"));
  const std::optional<http_response> interim = client.read_response(5s);
  ASSERT_TRUE(interim.has_value());
  EXPECT_EQ(interim->status_line, "HTTP/1.1 100 Continue");
  EXPECT_TRUE(interim->headers.empty());
  ASSERT_TRUE(client.send("hello"));
  const std::optional<http_response> answer = client.read_response(5s);
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->status(), 405);
  // No body to wait for: no interim answer, only the response.
  ASSERT_TRUE(client.send("GET / HTTP/1.1\r\nHost: test\r\nExpect: 100-continue\r\n\r\n"));
  const std::optional<http_response> get = client.read_response(5s);
  ASSERT_TRUE(get.has_value());
  EXPECT_EQ(get->status(), 200);
  s.expect_descriptors_back_to_baseline({ &client });
  EXPECT_EQ(s.process().stop(10s), 0);
}

TEST(http_server, malformed_request_gets_400_and_close_while_others_are_served) {
  server s({ "--threads", "1" });
  ASSERT_NE(s.port(), 0u);
  const auto good = good_client(s.port());
  http_test_client bad(s.port());
  ASSERT_TRUE(bad.send("GET / HTTP/1.1\r\nHost: test\r\nContent-Length: x\r\n\r\n"));
  expect_answer_and_close(bad, 400);
  http_test_client garbage(s.port());
  ASSERT_TRUE(garbage.send("\x01\x02 nonsense\r\n\r\n"));
  expect_answer_and_close(garbage, 400);
  http_test_client no_host(s.port());  // HTTP/1.1 requires a Host header
  ASSERT_TRUE(no_host.send("GET / HTTP/1.1\r\n\r\n"));
  expect_answer_and_close(no_host, 400);
  EXPECT_EQ(good->get_root(1s), 200);
  s.expect_descriptors_back_to_baseline({ good.get(), &bad, &garbage, &no_host });
  EXPECT_EQ(s.process().stop(10s), 0);
}

// As nginx: a version other than HTTP/1.0 and 1.1 gets 505 and the connection closes.
TEST(http_server, a_version_other_than_1_0_or_1_1_gets_505_and_close_while_others_are_served) {
  server s({ "--threads", "1" });
  ASSERT_NE(s.port(), 0u);
  const auto good = good_client(s.port());
  for (const std::string version : { "HTTP/2.0", "HTTP/1.2", "HTTP/0.9", "HTTP/3.0" }) {
    http_test_client client(s.port());
    ASSERT_TRUE(client.send("GET / " + version + "\r\nHost: test\r\n\r\n"));
    const std::optional<http_response> r = client.read_response(5s);
    ASSERT_TRUE(r.has_value()) << version;
    EXPECT_EQ(r->status_line, "HTTP/1.1 505 HTTP Version Not Supported") << version;
    EXPECT_EQ(r->body, "505 HTTP Version Not Supported\n") << version;
    EXPECT_EQ(r->header("Connection"), "close") << version;
    EXPECT_EQ(r->header("Content-Length"), std::to_string(r->body.size())) << version;
    EXPECT_TRUE(client.wait_closed(5s)) << version;
    EXPECT_EQ(good->get_root(5s), 200) << version;
  }
  s.expect_descriptors_back_to_baseline({ good.get() });
  EXPECT_EQ(s.process().stop(10s), 0);
}

// A body that cannot fit in memory is refused by name before the server listens (the last
// resort would otherwise be std::bad_alloc's "std::bad_alloc", or the kernel's OOM killer).
TEST(http_server, a_body_size_larger_than_memory_is_refused_naming_the_option) {
  const std::uint64_t memory = static_cast<std::uint64_t>(::sysconf(_SC_PHYS_PAGES)) *
                               static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  const std::uint64_t size = 999'999'999'999;  // the most --body-size's 12 digits say
  ASSERT_GT(size, memory) << "this machine holds a body of " << size << " bytes";
  child_process p({ CYAN_PROGRAM_HTTP_SERVER, "--port", "0", "--threads", "1", "--body-size",
                    std::to_string(size) },
                  -1, false, true);
  const std::string output = p.read_all(10s);
  EXPECT_EQ(p.wait(10s), 1);
  EXPECT_EQ(output, "http_server: --body-size " + std::to_string(size) +
                        " is more than this machine's memory (" + std::to_string(memory) +
                        " bytes)\n");
}

TEST(http_server, oversized_header_gets_431_and_close_while_others_are_served) {
  server s({ "--threads", "1", "--max-header-bytes", "1024" });
  ASSERT_NE(s.port(), 0u);
  const auto good = good_client(s.port());
  http_test_client within(s.port());
  ASSERT_TRUE(
      within.send("GET / HTTP/1.1\r\nHost: test\r\nX-Fill: " + std::string(900, 'a') + "\r\n\r\n"));
  const std::optional<http_response> r = within.read_response(5s);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status(), 200);

  http_test_client at_once(s.port());
  ASSERT_TRUE(at_once.send("GET / HTTP/1.1\r\nHost: test\r\nX-Fill: " + std::string(2000, 'a') +
                           "\r\n\r\n"));
  expect_answer_and_close(at_once, 431);
  EXPECT_EQ(good->get_root(1s), 200);

  // In pieces, never finished: the server counts across reads and answers before the end.
  http_test_client in_pieces(s.port());
  ASSERT_TRUE(in_pieces.send("GET / HTTP/1.1\r\nHost: test\r\n"));
  for (int i = 0; i < 40 && !in_pieces.wait_readable(0ms); ++i) {
    (void)in_pieces.send("X-Piece-" + std::to_string(i) + ": " + std::string(80, 'b') + "\r\n");
    EXPECT_EQ(good->get_root(1s), 200);
  }
  expect_answer_and_close(in_pieces, 431);
  EXPECT_EQ(good->get_root(1s), 200);
  s.expect_descriptors_back_to_baseline({ good.get(), &within, &at_once, &in_pieces });
  EXPECT_EQ(s.process().stop(10s), 0);
}

TEST(http_server, oversized_body_gets_413_and_close_while_others_are_served) {
  server s({ "--threads", "1", "--max-body-bytes", "1000" });
  ASSERT_NE(s.port(), 0u);
  const auto good = good_client(s.port());
  http_test_client declared(s.port());
  ASSERT_TRUE(declared.send("POST / HTTP/1.1\r\nHost: test\r\nContent-Length: 5000\r\n\r\n" +
                            std::string(100, 'x')));
  expect_answer_and_close(declared, 413);
  EXPECT_EQ(good->get_root(1s), 200);

  http_test_client chunked(s.port());
  ASSERT_TRUE(chunked.send("POST / HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n"));
  for (int i = 0; i < 20 && !chunked.wait_readable(0ms); ++i) {
    (void)chunked.send("64\r\n" + std::string(100, 'y') + "\r\n");  // 100-byte chunks
  }
  expect_answer_and_close(chunked, 413);
  EXPECT_EQ(good->get_root(1s), 200);
  s.expect_descriptors_back_to_baseline({ good.get(), &declared, &chunked });
  EXPECT_EQ(s.process().stop(10s), 0);
}

TEST(http_server, slow_request_gets_408_and_close_while_others_are_served) {
  server s({ "--threads", "1", "--request-timeout-ms", "300" });
  ASSERT_NE(s.port(), 0u);
  const auto good = good_client(s.port());
  http_test_client slow(s.port());
  const auto start = clock_type::now();
  ASSERT_TRUE(slow.send("GET / HTTP/1.1\r\nHost: te"));
  // Served meanwhile, again and again, until the slow one's answer arrives (bounded: 5 s).
  int served = 0;
  while (!slow.wait_readable(20ms) && clock_type::now() - start < 5s) {
    ASSERT_EQ(good->get_root(1s), 200);
    ++served;
  }
  const auto waited = clock_type::now() - start;
  expect_answer_and_close(slow, 408);
  // Tolerance: never earlier than the timeout; up to 5 s later on a loaded machine.
  EXPECT_GE(waited, 300ms);
  EXPECT_LT(waited, 5s);
  EXPECT_GT(served, 0);
  EXPECT_EQ(good->get_root(1s), 200);
  s.expect_descriptors_back_to_baseline({ good.get(), &slow });
  EXPECT_EQ(s.process().stop(10s), 0);
}

TEST(http_server, idle_keep_alive_connection_is_closed_after_the_idle_timeout) {
  server s({ "--threads", "1", "--idle-timeout-ms", "300" });
  ASSERT_NE(s.port(), 0u);
  http_test_client client(s.port());
  ASSERT_EQ(client.get_root(5s), 200);
  const auto start = clock_type::now();
  EXPECT_TRUE(client.wait_closed(5s));
  const auto waited = clock_type::now() - start;
  // Tolerance: the timer wheel's 1 ms ticks aside, not before the timeout; within 5 s.
  EXPECT_GE(waited, 290ms);
  EXPECT_LT(waited, 5s);
  s.expect_descriptors_back_to_baseline({ &client });
  EXPECT_EQ(s.process().stop(10s), 0);
}

TEST(http_server, connections_beyond_max_connections_get_503_and_close) {
  server s({ "--threads", "2", "--max-connections", "2" });
  ASSERT_NE(s.port(), 0u);
  auto first = good_client(s.port());
  const auto second = good_client(s.port());
  {
    http_test_client third(s.port());
    expect_answer_and_close(third, 503);
  }  // closed: the server stops lingering on it
  EXPECT_EQ(first->get_root(1s), 200);
  EXPECT_EQ(second->get_root(1s), 200);
  // Once a place is free again (when the server has seen the close), a new client is served.
  first.reset();
  int status = 0;
  for (int attempt = 0; attempt < 100 && status != 200; ++attempt) {
    http_test_client next(s.port());
    status = next.get_root(1s);
    EXPECT_TRUE(status == 200 || status == 503) << status;
    if (status == 503) {
      EXPECT_TRUE(next.wait_closed(5s));
    }
  }
  EXPECT_EQ(status, 200);
  EXPECT_EQ(second->get_root(1s), 200);
  s.expect_descriptors_back_to_baseline({ second.get() });
  EXPECT_EQ(s.process().stop(10s), 0);
}

TEST(http_server, sigterm_answers_the_request_in_flight_then_exits_zero) {
  server s({ "--threads", "1", "--grace-ms", "10000" });
  ASSERT_NE(s.port(), 0u);
  const auto in_flight = good_client(s.port());
  const auto idle = good_client(s.port());
  ASSERT_TRUE(in_flight->send(
      "GET / HTTP/1.1\r\nHost: test\r\nContent-Length: 10\r\n\r\n12345"));  // half the body
  ASSERT_EQ(::kill(s.process().pid(), SIGTERM), 0);
  // The drain closes the idle connection at once: then the server is surely draining.
  EXPECT_TRUE(idle->wait_closed(5s));
  ASSERT_TRUE(in_flight->send("67890"));
  const std::optional<http_response> r = in_flight->read_response(5s);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status(), 200);
  EXPECT_EQ(r->header("Connection"), "close");
  EXPECT_TRUE(in_flight->wait_closed(5s));
  EXPECT_EQ(s.process().wait(10s), 0);
}

TEST(http_server, load_tester_http_mode_gets_every_request_answered) {
  server s({ "--threads", "2" });
  ASSERT_NE(s.port(), 0u);
  child_process load(
      { CYAN_PROGRAM_LOAD_TESTER, "--mode", "http", "--port", std::to_string(s.port()),
        "--connections", "8", "--threads", "2", "--requests", "250", "--max-seconds", "120" },
      -1);
  const std::string output = load.read_all(150s);
  EXPECT_EQ(load.wait(10s), 0) << output;
  const auto result = parse_result_line(output);
  ASSERT_FALSE(result.empty()) << output;
  EXPECT_EQ(result.at("requests"), 8 * 250);
  EXPECT_EQ(result.at("errors"), 0);
  s.expect_descriptors_back_to_baseline();
  EXPECT_EQ(s.process().stop(10s), 0);
}

}  // namespace
