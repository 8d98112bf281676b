#pragma once

// A plain POSIX HTTP client for the tests of http_server: one loopback connection, every wait
// bounded by poll(), responses read exactly as sent (status line, headers, Content-Length body);
// and the server itself as those tests start it.

#include <chrono>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bench/process.h"
#include "support/descriptors.h"

namespace cyan::test {

/// One response as it arrived.
struct http_response {
  std::string status_line;                                   ///< without its CRLF
  std::vector<std::pair<std::string, std::string>> headers;  ///< in order, as sent
  std::string body;

  /// The status code of the status line (0 when it has none).
  [[nodiscard]] int status() const;
  /// The value of the first header named `name` (any case), or nullopt.
  [[nodiscard]] std::optional<std::string> header(std::string_view name) const;
};

/// A blocking-style client over a non-blocking socket to 127.0.0.1. [one thread]
class http_test_client {
 public:
  /// Connects to 127.0.0.1:`port` (within `limit`); see connected().
  explicit http_test_client(unsigned port,
                            std::chrono::milliseconds limit = std::chrono::seconds(5));
  http_test_client(const http_test_client&) = delete;
  http_test_client& operator=(const http_test_client&) = delete;
  ~http_test_client();

  [[nodiscard]] bool connected() const noexcept { return fd_ >= 0; }

  /// Closes the connection now (the destructor does otherwise); connected() is false after.
  void close();

  /// Sends every byte of `bytes` within `limit`; false when it could not.
  bool send(std::string_view bytes, std::chrono::milliseconds limit = std::chrono::seconds(5));

  /// The next response, read within `limit`: its head, then Content-Length bytes of body
  /// (none when `head_request`: the answer to a HEAD). nullopt when the connection ended or
  /// `limit` passed first, or the head is not HTTP.
  [[nodiscard]] std::optional<http_response> read_response(std::chrono::milliseconds limit,
                                                           bool head_request = false);

  /// Waits up to `limit` for the server to end the connection (end of stream or reset). True
  /// when it did with no byte left unread before the end.
  [[nodiscard]] bool wait_closed(std::chrono::milliseconds limit);

  /// Whether a byte (or the end) arrives within `limit`, without consuming it.
  [[nodiscard]] bool wait_readable(std::chrono::milliseconds limit);

  /// Sends "GET / HTTP/1.1" and returns the response's status, or 0 when none came within
  /// `limit`.
  [[nodiscard]] int get_root(std::chrono::milliseconds limit = std::chrono::seconds(1));

 private:
  using clock = std::chrono::steady_clock;
  // Reads what is there into buffer_, waiting until `deadline`; false at the end (ended_),
  // after an error, or when the deadline passed.
  bool fill(clock::time_point deadline);

  int fd_ = -1;
  std::string buffer_;  // received, not yet consumed
  bool ended_ = false;  // end of stream or reset seen
};

/// http_server on a free port of 127.0.0.1 with `options`, started from the test target's
/// CYAN_PROGRAM_HTTP_SERVER (cyan_add_program_test(... PROGRAMS http_server)). port() is 0 when
/// it did not say "listening on" within 10 s. The test stops it and checks its exit status.
class http_server_process {
 public:
  explicit http_server_process(std::vector<std::string> options);

  [[nodiscard]] unsigned port() const noexcept { return port_; }
  [[nodiscard]] bench::child_process& process() noexcept { return process_; }

  /// Closes `clients` (the test's connections still open), then checks (EXPECT) that the
  /// server closed every connection it accepted: back to the descriptors it held when it said
  /// "listening on" (support/descriptors.h) within 5 s, as a closing answer's linger ends when
  /// the client's end arrives.
  void expect_descriptors_back_to_baseline(std::initializer_list<http_test_client*> clients = {});

 private:
  bench::child_process process_;
  unsigned port_ = 0;
  descriptor_table listening_;  // its descriptors when it said "listening on"
};

/// A client that behaves, connected and served once already (so accepted before anything
/// else); the served status is checked with EXPECT.
[[nodiscard]] std::unique_ptr<http_test_client> good_client(unsigned port);

/// Checks (EXPECT) the answer to a client that broke a rule: status `expected` with
/// "Connection: close" and a Content-Length that is its body's, then the end of the connection.
void expect_answer_and_close(http_test_client& client, int expected);
/// The same with the whole status line, e.g. "HTTP/1.1 400 Bad Request".
void expect_answer_and_close(http_test_client& client, std::string_view status_line);

}  // namespace cyan::test
