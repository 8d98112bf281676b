#pragma once

// A plain POSIX HTTP client for the tests of http_server: one loopback connection, every wait
// bounded by poll(), responses read exactly as sent (status line, headers, Content-Length body).

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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

}  // namespace cyan::test
