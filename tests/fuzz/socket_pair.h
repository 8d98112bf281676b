#pragma once

// The transport of the fuzz targets that read from a socket: the input is written into one end
// of a Unix-domain stream pair, whose writing side then ends, and a cyan socket on a handler
// thread reads the other end. Kernel memory only: no address, no port.

#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

#include "cyan/net/tcp.h"
#include "fuzz_check.h"

namespace cyan::fuzz {

/// The largest input written: what a pair's buffer takes without a reader (Linux: 208 KiB).
inline constexpr std::size_t kMaxInput = 64 * 1024;

/// A connected pair; `peer()` has the input and its end of stream written, `take()` gives the
/// other end for tcp_socket::adopt(). The peer's end closes on destruction.
class socket_pair {
 public:
  socket_pair(const std::uint8_t* data, std::size_t size) {
    CYAN_FUZZ_CHECK(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds_) == 0);
    for (std::size_t sent = 0; sent < size;) {
      const ::ssize_t n = ::write(fds_[1], data + sent, size - sent);
      CYAN_FUZZ_CHECK(n > 0);
      sent += static_cast<std::size_t>(n);
    }
    ::shutdown(fds_[1], SHUT_WR);
  }
  socket_pair(const socket_pair&) = delete;
  socket_pair& operator=(const socket_pair&) = delete;
  ~socket_pair() {
    ::close(fds_[1]);
    if (fds_[0] >= 0) {
      ::close(fds_[0]);
    }
  }

  /// The reading end, for tcp_socket::adopt() (once).
  net::socket_handle take() noexcept {
    const int fd = fds_[0];
    fds_[0] = -1;
    return net::socket_handle(fd);
  }

 private:
  int fds_[2] = { -1, -1 };
};

}  // namespace cyan::fuzz
