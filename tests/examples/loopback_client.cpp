#include "loopback_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace cyan::test {

int connect_to(unsigned port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ::sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<::sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

std::string receive(int fd, std::size_t want, std::chrono::milliseconds limit, bool& closed) {
  stream_end how = stream_end::open;
  std::string got = receive(fd, want, limit, how);
  closed = how != stream_end::open;
  return got;
}

std::string receive(int fd, std::size_t want, std::chrono::milliseconds limit, stream_end& how) {
  std::string got;
  how = stream_end::open;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (got.size() < want) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    ::pollfd ready{ fd, POLLIN, 0 };
    if (left.count() <= 0 || ::poll(&ready, 1, static_cast<int>(left.count())) != 1) {
      break;
    }
    char buffer[8192];
    const ::ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0) {
      how = n == 0                ? stream_end::end_of_stream
            : errno == ECONNRESET ? stream_end::reset
                                  : stream_end::error;
      break;
    }
    got.append(buffer, static_cast<std::size_t>(n));
  }
  return got;
}

bool send_all(int fd, const std::string& data) {
  for (std::size_t done = 0; done < data.size();) {
    const ::ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n <= 0) {
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace cyan::test
