#pragma once

// One HTTP connection of http_server: its buffers, its parser and the coroutine that serves it
// (read, answer, write, again), and what each handler thread keeps for its connections.

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "cyan/common/cache_line.h"
#include "cyan/dispatch.h"
#include "cyan/net.h"
#include "http/request_parser.h"
#include "http/responses.h"

namespace cyan::examples::http {

/// How connections are served. Read-only once the server runs.
struct connection_settings {
  request_limits limits;
  std::chrono::milliseconds request_timeout{ 10'000 };  ///< first byte to last, else 408
  std::chrono::milliseconds idle_timeout{ 60'000 };     ///< between requests; also each write
};

/// What belongs to one handler thread: its responses (whose Date it rewrites). Only that thread
/// touches it once the server runs.
struct alignas(cache_line_size) thread_state {
  thread_state(std::string_view page, std::string_view page_type) : responses(page, page_type) {}

  response_set responses;
};

/// How long, after an answer that closes while the client may still be sending (an error
/// mid-request, requests pipelined after it), the server keeps reading (and dropping) what
/// comes: closing with unread input resets the connection, and the client may then lose the
/// answer before it reads it. A client that asked to close, with nothing after, is not waited
/// for.
inline constexpr std::chrono::seconds kLingerLimit{ 1 };

/// After an answer that closes the connection: ends the sending side (the client reads the
/// answer, then end of stream) and drops what the client still sends until it closes too, or
/// `limit` passes (zero: only what has arrived). `socket` and `scratch` must outlive it.
dispatch::task<> linger(net::tcp_socket& socket, std::span<std::byte> scratch,
                        std::chrono::steady_clock::duration limit);
/// The same over TLS: close_notify, then the client's, at most `limit`.
dispatch::task<> linger(net::tls_stream& stream, std::span<std::byte> scratch,
                        std::chrono::steady_clock::duration limit);

/// The TCP connection under a stream: for its options and the server's idle guard.
[[nodiscard]] inline net::tcp_socket& tcp_of(net::tcp_socket& socket) noexcept {
  return socket;
}
[[nodiscard]] inline net::tcp_socket& tcp_of(net::tls_stream& stream) noexcept {
  return stream.next_layer();
}

/// The errors that only mean the client went away, was too slow, or the server is stopping
/// (a TLS client that closes without close_notify too).
[[nodiscard]] bool is_quiet(const std::system_error& e);

/// One connection, served on the thread that accepted it. Lives in its task's frame; the
/// settings, thread state and server outlive it. While it waits for a request none of whose
/// bytes has arrived, or lingers after its last answer, it holds an idle guard of the server,
/// so that the server's drain closes it at once. `Stream`: net::tcp_socket, or net::tls_stream
/// after its handshake. [its thread]
template <typename Stream>
class basic_connection {
 public:
  basic_connection(Stream socket, thread_state& home, const connection_settings& settings,
                   net::tcp_server& server);
  basic_connection(const basic_connection&) = delete;
  basic_connection& operator=(const basic_connection&) = delete;

  /// Serves the connection until it closes (see the .cpp for the phases).
  dispatch::task<> run();

 private:
  using clock_type = std::chrono::steady_clock;

  dispatch::task<> exchange();
  [[nodiscard]] std::chrono::nanoseconds read_limit() const;
  [[nodiscard]] std::chrono::nanoseconds linger_limit() const;
  void note_request_start();
  [[nodiscard]] bool answer();
  void respond(const request& r);
  void respond_error(status s);

  // What one read takes at most. llhttp parses as the bytes come, so a request need not fit.
  static constexpr std::size_t kReadBufferSize = 8 * 1024;

  Stream socket_;
  thread_state& home_;
  const connection_settings& settings_;
  net::tcp_server& server_;
  request_parser parser_;
  std::array<std::byte, kReadBufferSize> input_;
  std::string_view unparsed_;        // of input_
  std::string out_;                  // the responses to write; cleared, never shrunk
  std::string_view large_body_;      // written after out_ (see kInlineBodyLimit)
  clock_type::time_point deadline_;  // of the request in progress
  std::uint64_t deadline_of_ = 0;    // which request (by requests_begun()) deadline_ is for
  bool reading_ = false;             // in a read (not a write) when an exception comes
  bool closing_ = false;             // the last response closes the connection
  bool client_closes_ = false;       // because the request asked to (not an error, a drain)
};

using connection = basic_connection<net::tcp_socket>;
using tls_connection = basic_connection<net::tls_stream>;
extern template class basic_connection<net::tcp_socket>;
extern template class basic_connection<net::tls_stream>;

}  // namespace cyan::examples::http
