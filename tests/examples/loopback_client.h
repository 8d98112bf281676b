#pragma once

// Plain POSIX helpers for the example programs' tests: a blocking loopback connection and
// bounded reads and writes on it.

#include <chrono>
#include <cstddef>
#include <string>

namespace cyan::test {

/// A blocking TCP connection to 127.0.0.1:`port`; -1 when refused.
[[nodiscard]] int connect_to(unsigned port);

/// What arrives on `fd` within `limit`, until `want` bytes or the end of the stream; `closed`
/// tells whether the stream ended (or failed).
[[nodiscard]] std::string receive(int fd, std::size_t want, std::chrono::milliseconds limit,
                                  bool& closed);

/// How a stream ended, as its reader saw it.
enum class stream_end { open, end_of_stream, reset, error };

/// receive() that tells how the stream ended: `how` is open when it did not within `limit`.
[[nodiscard]] std::string receive(int fd, std::size_t want, std::chrono::milliseconds limit,
                                  stream_end& how);

/// Sends every byte of `data` (blocking socket, MSG_NOSIGNAL); false on an error.
bool send_all(int fd, const std::string& data);

}  // namespace cyan::test
