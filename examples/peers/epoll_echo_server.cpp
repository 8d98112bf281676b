// The floor of the echo benchmark: a raw edge-triggered epoll echo server, one epoll loop per
// thread, each with its own SO_REUSEPORT listener. No framework, no allocation per message, and
// no system call that a request/response connection does not need: one read and one send per
// message (a read that returns less than the buffer emptied the socket, so the next data raises
// a new edge; no second read to see EAGAIN), and epoll_wait for as many sockets as are ready.
//
//   epoll_echo_server [--port N] [--threads N]    prints "listening on 127.0.0.1:PORT";
//                                                 SIGINT/SIGTERM stop it (exit 0)

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

std::atomic<bool> stopping{ false };

int open_listener(unsigned short port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  const int on = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on);
  ::sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<::sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(fd, SOMAXCONN) != 0) {
    std::perror("epoll_echo_server: bind");
    std::exit(1);
  }
  return fd;
}

// Echoes what is readable; false when the connection is over. A write that would block drops
// the rest of the chunk: with request/response clients of messages far below the socket
// buffers this never happens, and the benchmark's load tester verifies every byte.
//
// Edge-triggered, so the socket must be left empty or known to raise another edge. A short read
// (less than the buffer) took everything queued, and data arriving later raises a new edge. The
// peer's end of stream may have been queued before that read, though, with no edge after it:
// `peer_closed` (EPOLLRDHUP in the event) makes the loop read on until read() returns 0.
bool echo_ready(int fd, bool peer_closed) {
  char buffer[16384];  // room for a whole 4 KiB message: its read is a short one
  for (;;) {
    const ::ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0) {
      for (::ssize_t done = 0; done < n;) {
        const ::ssize_t w =
            ::send(fd, buffer + done, static_cast<std::size_t>(n - done), MSG_NOSIGNAL);
        if (w <= 0) {
          return false;
        }
        done += w;
      }
      if (n < static_cast<::ssize_t>(sizeof buffer) && !peer_closed) {
        return true;
      }
    } else if (n == 0 || errno != EAGAIN) {
      return false;
    } else {
      return true;
    }
  }
}

void serve(int listener, int wake) {
  const int poller = ::epoll_create1(EPOLL_CLOEXEC);
  ::epoll_event event{ EPOLLIN, { .fd = listener } };
  ::epoll_ctl(poller, EPOLL_CTL_ADD, listener, &event);
  event = { EPOLLIN, { .fd = wake } };
  ::epoll_ctl(poller, EPOLL_CTL_ADD, wake, &event);
  ::epoll_event ready[256];
  while (!stopping.load(std::memory_order_relaxed)) {
    const int count = ::epoll_wait(poller, ready, 256, -1);
    for (int i = 0; i < count; ++i) {
      const int fd = ready[i].data.fd;
      if (fd == wake) {
        stopping = true;
      } else if (fd == listener) {
        for (int client;
             (client = ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0;) {
          const int on = 1;
          ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
          ::epoll_event edge{ EPOLLIN | EPOLLRDHUP | EPOLLET, { .fd = client } };
          ::epoll_ctl(poller, EPOLL_CTL_ADD, client, &edge);
        }
      } else if (!echo_ready(fd, (ready[i].events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0)) {
        ::close(fd);
      }
    }
  }
  ::close(poller);
}

}  // namespace

int main(int argc, char** argv) {
  unsigned short port = 0;
  unsigned threads = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--port") == 0) {
      port = static_cast<unsigned short>(std::atoi(argv[i + 1]));
    } else if (std::strcmp(argv[i], "--threads") == 0) {
      threads = static_cast<unsigned>(std::max(1, std::atoi(argv[i + 1])));
    }
  }
  ::sigset_t signals;
  ::sigemptyset(&signals);
  ::sigaddset(&signals, SIGINT);
  ::sigaddset(&signals, SIGTERM);
  ::pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // inherited by the threads
  const int wake = ::signalfd(-1, &signals, SFD_CLOEXEC | SFD_NONBLOCK);
  std::vector<int> listeners;
  for (unsigned i = 0; i < threads; ++i) {
    listeners.push_back(open_listener(port));
    ::sockaddr_in bound{};
    ::socklen_t size = sizeof bound;
    ::getsockname(listeners.back(), reinterpret_cast<::sockaddr*>(&bound), &size);
    port = ntohs(bound.sin_port);
  }
  std::printf("listening on 127.0.0.1:%u\n", port);
  std::fflush(stdout);
  std::vector<std::thread> runners;
  for (unsigned i = 0; i < threads; ++i) {
    runners.emplace_back(serve, listeners[i], wake);
  }
  for (auto& runner : runners) {
    runner.join();
  }
  return 0;
}
