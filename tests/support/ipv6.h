#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace cyan::test {

/// Whether this kernel has IPv6 with a usable loopback (a socket binds to ::1): tests of IPv6
/// behaviour GTEST_SKIP without it rather than fail on a host built or configured without it.
inline bool kernel_has_ipv6() {
  const int probe = ::socket(AF_INET6, SOCK_STREAM, 0);
  if (probe < 0) {
    return false;
  }
  ::sockaddr_in6 loopback{};
  loopback.sin6_family = AF_INET6;
  loopback.sin6_addr = in6addr_loopback;
  const bool bound =
      ::bind(probe, reinterpret_cast<const ::sockaddr*>(&loopback), sizeof loopback) == 0;
  ::close(probe);
  return bound;
}

}  // namespace cyan::test
