#pragma once

#include <sys/socket.h>
#include <unistd.h>

namespace cyan::test {

/// Whether this kernel has IPv6 at all (socket(AF_INET6) works): tests of IPv6 behaviour
/// GTEST_SKIP without it rather than fail on a host built without it.
inline bool kernel_has_ipv6() {
  const int probe = ::socket(AF_INET6, SOCK_STREAM, 0);
  if (probe < 0) {
    return false;
  }
  ::close(probe);
  return true;
}

}  // namespace cyan::test
