// http_server against hostile framing: each request that could be read two ways (or that a
// trusted server refuses) gets the answer nginx gives, and the server keeps serving others.
//
// nginx's answers, as observed against nginx/1.22.1 (Debian's nginx-light: one worker, a root
// location), each case sent alone on a connection of its own ("close": nginx closed the
// connection after the answer; "kept": it went on). The tests below assert the same for cyan,
// except where marked:
//
//   Content-Length and Transfer-Encoding: chunked, either order            400, close
//   two Content-Length headers, different or equal                         400, close
//   Content-Length "+5", "-5" or "1 0"                                     400, close
//   Transfer-Encoding "chunked, identity", "identity, chunked",            501, close
//     "gzip, chunked" or "identity"
//   Transfer-Encoding "CHUNKED" or "chunked " (OWS after it)               200, kept
//   two Transfer-Encoding lines; Transfer-Encoding in an HTTP/1.0 request  400, close
//   chunk size "zz", "+5", "-5", 20 hex digits, 17 hex digits              400, close
//   chunk data not followed by CRLF ("5\r\nhelloXX0\r\n\r\n")              400, close
//   chunk extension of 1 MiB ("5;", 1 MiB, CRLF)                           200, kept
//   obs-fold: a header line starting with SP or HTAB                       400, close
//   bare CR in a header value, or ending the request line, a header line   400, close
//     or the header section
//   bare LF ending every line, one header line or the empty line           200, kept (*)
//   NUL in a header value                                                  400, close
//   request line of 8193 bytes or more (its CRLF included)                 414, close
//   request line of 8192 bytes, then "Host: test"                          404, kept (**)
//   "Host : x", "X-A : x", "X-A\t: x" (whitespace before the colon)        400, close
//   ": x" (an empty header name)                                           400, close
//   three pipelined requests in two writes, split at every byte            every answer, in
//                                                                          order, kept
//
// (*) cyan: 400, close. Stricter on purpose: RFC 9112 (2.2) lets a recipient take a bare LF for
//     a line end, but a front end that does not would read "X: a\nTransfer-Encoding: chunked"
//     as one header where this server reads two: a request framed two ways.
// (**) cyan: 431, close. A limit counted differently, not framing: nginx holds the request line
//     and each header line in buffers of 8 KiB, --max-header-bytes counts the whole header
//     section.

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http_test_client.h"

namespace {

using namespace std::chrono_literals;
using cyan::test::expect_answer_and_close;
using cyan::test::good_client;
using cyan::test::http_response;
using cyan::test::http_test_client;
using server = cyan::test::http_server_process;

constexpr std::string_view kOk = "HTTP/1.1 200 OK";
constexpr std::string_view kBadRequest = "HTTP/1.1 400 Bad Request";

// One way to send a case: its name (for the failure message) and its bytes.
struct variant {
  std::string_view name;
  std::string bytes;
};

// "GET / HTTP/1.1" with "Host: test", then `headers` (each with its CRLF), the blank line and
// `body`.
std::string get(std::string_view headers, std::string_view body = {}) {
  return "GET / HTTP/1.1\r\nHost: test\r\n" + std::string(headers) + "\r\n" + std::string(body);
}

// A GET with "Transfer-Encoding: chunked" and `body` as the chunked body.
std::string chunked(std::string_view body) {
  return get("Transfer-Encoding: chunked\r\n", body);
}

// One http_server thread and a client served before each case (so accepted first), which is
// served again after every refused request: whatever one client sends, the others are served.
class http_smuggling : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(server_.port(), 0u);
    good_ = good_client(server_.port());
  }
  // The cases closed their connections; with the good client's closed too, the server must
  // be back to the descriptors it listened with.
  void TearDown() override {
    if (good_) {
      server_.expect_descriptors_back_to_baseline({ good_.get() });
    }
    EXPECT_EQ(server_.process().stop(10s), 0);
  }

  // Each variant on a connection of its own: `status_line` with "Connection: close", then the
  // end of the connection; then the good client is served at once.
  void expect_refused(const std::vector<variant>& variants, std::string_view status_line) {
    for (const variant& v : variants) {
      SCOPED_TRACE(v.name);
      http_test_client client(server_.port());
      ASSERT_TRUE(client.connected());
      ASSERT_TRUE(client.send(v.bytes));
      expect_answer_and_close(client, status_line);
      EXPECT_EQ(good_->get_root(1s), 200);
    }
  }

  // Each variant on a connection of its own: `status_line` without "Connection: close", and the
  // connection goes on (a GET on it after the answer is served).
  void expect_served_and_kept(const std::vector<variant>& variants, std::string_view status_line) {
    for (const variant& v : variants) {
      SCOPED_TRACE(v.name);
      http_test_client client(server_.port());
      ASSERT_TRUE(client.connected());
      ASSERT_TRUE(client.send(v.bytes));
      const std::optional<http_response> r = client.read_response(5s);
      ASSERT_TRUE(r.has_value());
      EXPECT_EQ(r->status_line, status_line);
      EXPECT_EQ(r->header("Connection"), std::nullopt);
      EXPECT_EQ(client.get_root(5s), 200);
    }
  }

  server server_{ { "--threads", "1" } };
  std::unique_ptr<http_test_client> good_;
};

// RFC 9112, 6.3: both "ought to be handled as an error"; either order.
TEST_F(http_smuggling, content_length_with_transfer_encoding_is_refused_with_400_and_close) {
  expect_refused(
      {
          { "Content-Length first",
            get("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n") },
          { "Transfer-Encoding first",
            get("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", "0\r\n\r\n") },
      },
      kBadRequest);
}

TEST_F(http_smuggling, two_content_lengths_are_refused_with_400_and_close_even_when_equal) {
  expect_refused(
      {
          { "different", get("Content-Length: 5\r\nContent-Length: 6\r\n", "hello!") },
          { "equal", get("Content-Length: 5\r\nContent-Length: 5\r\n", "hello") },
      },
      kBadRequest);
}

TEST_F(http_smuggling, content_length_with_a_sign_or_a_space_inside_is_refused_with_400_and_close) {
  expect_refused(
      {
          { "+5", get("Content-Length: +5\r\n", "hello") },
          { "-5", get("Content-Length: -5\r\n", "hello") },
          { "1 0", get("Content-Length: 1 0\r\n", "helloworld") },
      },
      kBadRequest);
}

// RFC 9112, 6.1: a server that does not understand a transfer coding SHOULD answer 501, and
// chunked must come last. As nginx: any list but "chunked" alone is refused (the server decodes
// no other coding), so no two readers can disagree on which coding frames the body. The name in
// any case, with whitespace after it, is chunked.
TEST_F(http_smuggling, transfer_coding_other_than_chunked_alone_is_refused_with_501_and_close) {
  expect_refused(
      {
          { "chunked, identity", get("Transfer-Encoding: chunked, identity\r\n", "0\r\n\r\n") },
          { "identity, chunked", get("Transfer-Encoding: identity, chunked\r\n", "0\r\n\r\n") },
          { "gzip, chunked", get("Transfer-Encoding: gzip, chunked\r\n", "0\r\n\r\n") },
          { "identity", get("Transfer-Encoding: identity\r\n") },
      },
      "HTTP/1.1 501 Not Implemented");
  expect_served_and_kept(
      {
          { "CHUNKED", get("Transfer-Encoding: CHUNKED\r\n", "5\r\nhello\r\n0\r\n\r\n") },
          { "chunked SP", get("Transfer-Encoding: chunked \r\n", "5\r\nhello\r\n0\r\n\r\n") },
      },
      kOk);
}

// As nginx: a second Transfer-Encoding line is a duplicate (readers differ on which counts, or
// whether they join), and RFC 9112 6.1 says an HTTP/1.0 request's Transfer-Encoding is faulty
// framing: both 400.
TEST_F(http_smuggling, transfer_encoding_twice_or_in_http_1_0_is_refused_with_400_and_close) {
  expect_refused(
      {
          { "chunked twice",
            get("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n") },
          { "identity, then chunked",
            get("Transfer-Encoding: identity\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n") },
          { "chunked, then identity",
            get("Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n", "0\r\n\r\n") },
          { "HTTP/1.0", "GET / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" },
          { "HTTP/1.0 keep-alive",
            "GET / HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: "
            "chunked\r\n\r\n0\r\n\r\n" },
      },
      kBadRequest);
}

TEST_F(http_smuggling, invalid_chunk_size_is_refused_with_400_and_close) {
  expect_refused(
      {
          { "zz", chunked("zz\r\nhello\r\n0\r\n\r\n") },
          { "+5", chunked("+5\r\nhello\r\n0\r\n\r\n") },
          { "-5", chunked("-5\r\nhello\r\n0\r\n\r\n") },
          { "20 hex digits", chunked("FFFFFFFFFFFFFFFFFFFF\r\nhello\r\n0\r\n\r\n") },
          { "17 hex digits, one past 64 bits", chunked("10000000000000005\r\nhello\r\n0\r\n\r\n") },
      },
      kBadRequest);
}

// The two bytes after a chunk's data are its CRLF: taken for anything else, "XX" would hide
// where the next chunk (or request) starts.
TEST_F(http_smuggling, chunk_data_without_its_crlf_is_refused_with_400_and_close) {
  expect_refused(
      {
          { "XX instead of CRLF", chunked("5\r\nhelloXX0\r\n\r\n") },
          { "nothing instead of CRLF", chunked("5\r\nhello0\r\n\r\n") },
      },
      kBadRequest);
}

// As nginx: the extension is skipped as it comes (nothing of it is kept), and the request is
// served. --request-timeout-ms bounds how long a client may go on sending one.
TEST_F(http_smuggling, chunk_extension_of_1_mib_is_skipped_and_the_request_served) {
  const std::string extension(1024 * 1024, 'a');
  expect_served_and_kept({ { "5;<1 MiB>", chunked("5;" + extension + "\r\nhello\r\n0\r\n\r\n") } },
                         kOk);
}

// RFC 9112, 5.2: a server MUST either refuse obs-fold with 400 or replace it with spaces; as
// nginx, refused. Taken as a continuation, "Transfer-Encoding:\r\n chunked" is chunked here and
// no Transfer-Encoding at all to a front end that drops the odd line.
TEST_F(http_smuggling, obs_fold_continuation_line_is_refused_with_400_and_close) {
  expect_refused(
      {
          { "SP", get("X-A: a\r\n b\r\n") },
          { "HTAB", get("X-A: a\r\n\tb\r\n") },
          { "a folded Transfer-Encoding", get("Transfer-Encoding:\r\n chunked\r\n", "0\r\n\r\n") },
          { "whitespace only", get("X-A: a\r\n \r\n") },
          { "before the first header", "GET / HTTP/1.1\r\n Host: test\r\nHost: test\r\n\r\n" },
      },
      kBadRequest);
}

// A CR is a line's end only with its LF: "\r\r\n" or "\rX" must not end the header section.
TEST_F(http_smuggling, bare_cr_in_the_header_section_is_refused_with_400_and_close) {
  expect_refused(
      {
          { "in a value", get("X-A: a\rb\r\n") },
          { "ending a header line", get("X-A: a\rX-B: b\r\n") },
          { "ending the request line", "GET / HTTP/1.1\rHost: test\r\n\r\n" },
          { "CR CR LF ending the header section", "GET / HTTP/1.1\r\nHost: test\r\n\r\r\n" },
          { "CR X ending the header section", "GET / HTTP/1.1\r\nHost: test\r\n\rX\r\n\r\n" },
      },
      kBadRequest);
}

// Stricter than nginx, which serves these: see (*) at the top.
TEST_F(http_smuggling, bare_lf_line_ending_is_refused_with_400_and_close) {
  expect_refused(
      {
          { "every line", "GET / HTTP/1.1\nHost: test\n\n" },
          { "one header line", get("X-A: a\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n") },
          { "the empty line", "GET / HTTP/1.1\r\nHost: test\r\n\n" },
      },
      kBadRequest);
}

TEST_F(http_smuggling, nul_in_a_header_value_is_refused_with_400_and_close) {
  expect_refused({ { "X-A: a<NUL>b", get(std::string("X-A: a\0b\r\n", 11)) } }, kBadRequest);
}

// As nginx: a request line longer than the limit (8192 bytes, its CRLF included) is 414. One at
// the limit is taken, and then the header section it begins is over the limit: 431 (nginx,
// which holds each line in a buffer of 8 KiB, serves that one: 404).
TEST_F(http_smuggling, request_line_over_the_header_limit_is_refused_with_414_and_close) {
  const auto request_line = [](std::size_t size) {  // "GET /", the path, " HTTP/1.1\r\n"
    return "GET /" + std::string(size - 16, 'a') + " HTTP/1.1\r\n";
  };
  ASSERT_EQ(request_line(8193).size(), 8193u);
  expect_refused(
      {
          { "8193 bytes", request_line(8193) + "Host: test\r\n\r\n" },
          { "9000 bytes", request_line(9000) + "Host: test\r\n\r\n" },
          { "64 KiB", request_line(64 * 1024) + "Host: test\r\n\r\n" },
      },
      "HTTP/1.1 414 URI Too Long");
  expect_refused({ { "8192 bytes", request_line(8192) + "Host: test\r\n\r\n" } },
                 "HTTP/1.1 431 Request Header Fields Too Large");
}

// RFC 9112, 5.1: a server MUST answer 400 to whitespace between a field name and the colon.
TEST_F(http_smuggling, header_name_with_whitespace_before_the_colon_is_refused_with_400_and_close) {
  expect_refused(
      {
          { "Host : x", "GET / HTTP/1.1\r\nHost : x\r\n\r\n" },
          { "X-A : x", get("X-A : x\r\n") },
          { "X-A<HTAB>: x", get("X-A\t: x\r\n") },
      },
      kBadRequest);
}

// A field name is a token (RFC 9110, 5.1): one character at least.
TEST_F(http_smuggling, empty_header_name_is_refused_with_400_and_close) {
  expect_refused({ { ": x", get(": x\r\n") }, { ":", get(":\r\n") } }, kBadRequest);
}

// Each split on a connection of its own: the three answers, in order, and nothing else (the
// answer to a fourth request, a DELETE, is the next thing that comes).
TEST_F(http_smuggling, pipelined_requests_split_at_every_byte_are_answered_once_each_in_order) {
  const std::string requests =
      "GET / HTTP/1.1\r\nHost: test\r\n\r\nGET /missing HTTP/1.1\r\nHost: test\r\n\r\n"
      "HEAD / HTTP/1.1\r\nHost: test\r\n\r\n";
  for (std::size_t split = 1; split < requests.size(); ++split) {
    SCOPED_TRACE("split at " + std::to_string(split));
    http_test_client client(server_.port());
    ASSERT_TRUE(client.send(requests.substr(0, split)));
    ASSERT_TRUE(client.send(requests.substr(split)));
    const std::optional<http_response> get = client.read_response(5s);
    const std::optional<http_response> missing = client.read_response(5s);
    const std::optional<http_response> head = client.read_response(5s, true);
    ASSERT_TRUE(get && missing && head);
    EXPECT_EQ(get->status_line, kOk);
    EXPECT_EQ(missing->status_line, "HTTP/1.1 404 Not Found");
    EXPECT_EQ(head->status_line, kOk);
    ASSERT_TRUE(client.send("DELETE / HTTP/1.1\r\nHost: test\r\n\r\n"));
    const std::optional<http_response> after = client.read_response(5s);
    ASSERT_TRUE(after.has_value());
    EXPECT_EQ(after->status_line, "HTTP/1.1 405 Method Not Allowed");
  }
}

}  // namespace
