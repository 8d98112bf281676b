#pragma once

// Reads HTTP/1.x responses from a keep-alive connection, one per request: the status line,
// the headers (Content-Length, Connection, Transfer-Encoding), then the body, which it skips.
// What the load tester needs to count a response, not a general HTTP client: a chunked body
// is refused, and the body's bytes are not kept.

#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "cyan/dispatch/task.h"
#include "cyan/net/tcp.h"

namespace cyan::examples {

/// A response that is not HTTP/1.x as this reader understands it.
class http_protocol_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The parts of a response the load tester looks at.
struct http_response {
  int status = 0;
  /// False when the server closes the connection after this response.
  bool keep_alive = true;
};

/// One connection's response reader: keeps the bytes read past a response for the next one.
/// Belongs to the socket's thread.
class http_response_reader {
 public:
  /// `header_capacity`: the largest status line plus headers accepted.
  explicit http_response_reader(std::size_t header_capacity = 16 * 1024);

  /// `co_await reader.read(socket, limit)`: the next response, its body read and dropped; each
  /// read waits at most `limit`. Throws std::system_error (timed_out, end_of_stream,
  /// ECONNRESET, ...) and http_protocol_error. `socket` must outlive the task.
  dispatch::task<http_response> read(net::tcp_socket& socket, std::chrono::milliseconds limit);

 private:
  struct head {
    http_response response;
    bool has_length = false;
    std::size_t content_length = 0;
  };
  dispatch::task<std::size_t> read_head(net::tcp_socket& socket, std::chrono::milliseconds limit);
  dispatch::task<> skip_body(net::tcp_socket& socket, head& parsed,
                             std::chrono::milliseconds limit);
  [[nodiscard]] static head parse_head(std::string_view text);
  [[nodiscard]] std::string_view buffered() const noexcept;
  void compact() noexcept;

  std::vector<char> buffer_;
  std::size_t begin_ = 0;  // the unread bytes are [begin_, end_)
  std::size_t end_ = 0;
};

}  // namespace cyan::examples
