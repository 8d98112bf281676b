// The io_uring floor of the echo benchmark: a raw io_uring echo server written the way liburing's
// authors advise, one ring per thread, each with its own SO_REUSEPORT listener. The ring is
// SINGLE_ISSUER + DEFER_TASKRUN (COOP_TASKRUN where the kernel refuses them); one multishot accept
// per listener; one multishot receive per connection that takes its buffers from a provided
// buffer ring; the bytes received are sent from that same buffer, which goes back to the buffer
// ring when its send has completed. A connection has one send in flight at a time (two sends on
// one stream may complete out of order); buffers received meanwhile queue behind it. Each loop
// turn is one io_uring_submit_and_wait: it submits what the previous turn queued and waits.
//
//   uring_echo_server [--port N] [--threads N]    prints "listening on 127.0.0.1:PORT";
//                                                 SIGINT/SIGTERM stop it (exit 0)

#include <arpa/inet.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

namespace {

std::atomic<bool> stopping{ false };

constexpr unsigned kRingEntries = 1024;
constexpr unsigned kBufferCount = 256;   // per thread, a power of two (the buffer ring's rule)
constexpr unsigned kBufferSize = 16384;  // room for a whole 4 KiB message, as epoll's floor
constexpr int kBufferGroup = 0;
constexpr std::uint16_t kNoBuffer = 0xffff;

[[noreturn]] void fail(const char* what, int error) {
  std::fprintf(stderr, "uring_echo_server: %s: %s\n", what, std::strerror(error));
  std::exit(1);
}

int open_listener(unsigned short port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int on = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on);
  ::sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<::sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(fd, SOMAXCONN) != 0) {
    fail("bind", errno);
  }
  return fd;
}

// What a completion is about, packed into its user_data: the operation, the buffer (sends) and
// the descriptor.
enum class op : std::uint8_t { accept, receive, send, signal };

std::uint64_t pack(op kind, int fd, std::uint16_t buffer = kNoBuffer) {
  return std::uint64_t{ static_cast<std::uint8_t>(kind) } << 56 | std::uint64_t{ buffer } << 32 |
         static_cast<std::uint32_t>(fd);
}

// One thread's ring, listener, buffers and connections. Touched only by its thread.
class ring_server {
 public:
  ring_server(int listener, int wake) : listener_(listener), wake_(wake) {
    setup_ring();
    setup_buffer_ring();
    arm_accept();
    arm_signal();
  }
  ring_server(const ring_server&) = delete;
  ring_server& operator=(const ring_server&) = delete;
  ~ring_server() {
    io_uring_queue_exit(&ring_);
    ::munmap(buffer_ring_, kBufferCount * sizeof(io_uring_buf));
  }

  // The loop's turn: submit what the last turn queued and wait, handle every completion, give
  // the sent buffers back to the kernel in one step, re-arm receives that ran out of buffers.
  void run() {
    while (!stopping.load(std::memory_order_relaxed)) {
      const int submitted = io_uring_submit_and_wait(&ring_, 1);
      if (submitted < 0 && submitted != -EINTR) {
        fail("io_uring_submit_and_wait", -submitted);
      }
      unsigned head = 0;
      unsigned seen = 0;
      io_uring_cqe* cqe = nullptr;
      io_uring_for_each_cqe(&ring_, head, cqe) {
        handle(*cqe);
        ++seen;
      }
      io_uring_cq_advance(&ring_, seen);
      publish_returned_buffers();
    }
  }

 private:
  struct buffer_state {
    std::uint32_t length = 0;        // bytes received into it
    std::uint32_t sent = 0;          // of which sent so far
    std::uint16_t next = kNoBuffer;  // the connection's next queued buffer
  };
  struct connection {
    std::uint16_t head = kNoBuffer;  // being sent; the rest queue behind it
    std::uint16_t tail = kNoBuffer;
    bool receiving = false;  // a multishot receive is armed
    bool closing = false;    // end of stream or an error: close once nothing is in flight
  };

  void setup_ring() {
    io_uring_params params{};
    params.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    int result = io_uring_queue_init_params(kRingEntries, &ring_, &params);
    if (result == -EINVAL) {  // kernels before 6.1
      params = {};
      params.flags = IORING_SETUP_COOP_TASKRUN;
      result = io_uring_queue_init_params(kRingEntries, &ring_, &params);
    }
    if (result < 0) {
      fail("io_uring_queue_init_params", -result);
    }
  }

  // liburing 2.3 (Debian 12) has no io_uring_setup_buf_ring(): map and register by hand.
  void setup_buffer_ring() {
    void* memory = ::mmap(nullptr, kBufferCount * sizeof(io_uring_buf), PROT_READ | PROT_WRITE,
                          MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
    if (memory == MAP_FAILED) {
      fail("mmap", errno);
    }
    buffer_ring_ = static_cast<io_uring_buf_ring*>(memory);
    io_uring_buf_reg registration{};
    registration.ring_addr = reinterpret_cast<std::uintptr_t>(memory);
    registration.ring_entries = kBufferCount;
    registration.bgid = kBufferGroup;
    if (const int result = io_uring_register_buf_ring(&ring_, &registration, 0); result < 0) {
      fail("io_uring_register_buf_ring", -result);
    }
    io_uring_buf_ring_init(buffer_ring_);
    for (std::uint16_t id = 0; id < kBufferCount; ++id) {
      return_buffer(id);
    }
    publish_returned_buffers();
  }

  io_uring_sqe* next_sqe() {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    while (sqe == nullptr) {  // the submission queue is full: hand it to the kernel now
      io_uring_submit(&ring_);
      sqe = io_uring_get_sqe(&ring_);
    }
    return sqe;
  }

  void arm_accept() {
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_multishot_accept(sqe, listener_, nullptr, nullptr, SOCK_CLOEXEC);
    io_uring_sqe_set_data64(sqe, pack(op::accept, listener_));
  }

  // A poll does not consume the signal, so every thread's ring sees it.
  void arm_signal() {
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_poll_add(sqe, wake_, POLLIN);
    io_uring_sqe_set_data64(sqe, pack(op::signal, wake_));
  }

  void arm_receive(int fd) {
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_recv_multishot(sqe, fd, nullptr, 0, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = kBufferGroup;
    io_uring_sqe_set_data64(sqe, pack(op::receive, fd));
    connections_[static_cast<std::size_t>(fd)].receiving = true;
  }

  // Sends what is left of `id`, the connection's head buffer.
  void arm_send(int fd, std::uint16_t id) {
    const buffer_state& state = buffers_[id];
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_send(sqe, fd, buffer(id) + state.sent, state.length - state.sent, MSG_NOSIGNAL);
    io_uring_sqe_set_data64(sqe, pack(op::send, fd, id));
  }

  void handle(const io_uring_cqe& cqe) {
    const std::uint64_t data = io_uring_cqe_get_data64(&cqe);
    const auto kind = static_cast<op>(data >> 56);
    const auto id = static_cast<std::uint16_t>(data >> 32);
    const auto fd = static_cast<int>(static_cast<std::uint32_t>(data));
    switch (kind) {
      case op::accept:
        on_accept(cqe.res, cqe.flags);
        break;
      case op::receive:
        on_receive(fd, cqe.res, cqe.flags);
        break;
      case op::send:
        on_send(fd, id, cqe.res);
        break;
      case op::signal:
        stopping = true;
        break;
    }
  }

  void on_accept(int client, unsigned flags) {
    if (client >= 0) {
      const int on = 1;
      ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
      if (connections_.size() <= static_cast<std::size_t>(client)) {
        connections_.resize(static_cast<std::size_t>(client) + 1);
      }
      connections_[static_cast<std::size_t>(client)] = {};
      arm_receive(client);
    }
    if ((flags & IORING_CQE_F_MORE) == 0) {
      arm_accept();  // the multishot accept ended (an error, a full queue): start another
    }
  }

  void on_receive(int fd, int result, unsigned flags) {
    connection& c = connections_[static_cast<std::size_t>(fd)];
    if (result > 0) {
      const auto id = static_cast<std::uint16_t>(flags >> IORING_CQE_BUFFER_SHIFT);
      if (c.closing) {
        return_buffer(id);
      } else {
        queue_send(fd, id, static_cast<std::uint32_t>(result));
      }
    }
    if ((flags & IORING_CQE_F_MORE) != 0) {
      return;
    }
    c.receiving = false;
    if (result == -ENOBUFS) {
      starved_.push_back(fd);  // re-armed when buffers come back
    } else if (result > 0 && !c.closing) {
      arm_receive(fd);  // the kernel ended the multishot (e.g. a full completion queue)
    } else {
      c.closing = true;  // end of stream or an error
      close_if_done(fd);
    }
  }

  void queue_send(int fd, std::uint16_t id, std::uint32_t length) {
    connection& c = connections_[static_cast<std::size_t>(fd)];
    buffers_[id] = { length, 0, kNoBuffer };
    if (c.head == kNoBuffer) {
      c.head = c.tail = id;
      arm_send(fd, id);
    } else {
      buffers_[c.tail].next = id;
      c.tail = id;
    }
  }

  void on_send(int fd, std::uint16_t id, int result) {
    connection& c = connections_[static_cast<std::size_t>(fd)];
    if (result <= 0) {  // the peer is gone: drop what was queued, end the receive
      for (std::uint16_t at = c.head; at != kNoBuffer; at = buffers_[at].next) {
        return_buffer(at);
      }
      c.head = c.tail = kNoBuffer;
      c.closing = true;
      ::shutdown(fd, SHUT_RDWR);
      close_if_done(fd);
      return;
    }
    buffer_state& state = buffers_[id];
    state.sent += static_cast<std::uint32_t>(result);
    if (state.sent < state.length) {
      arm_send(fd, id);  // a partial send: the rest, before anything queued behind it
      return;
    }
    c.head = state.next;
    if (c.head == kNoBuffer) {
      c.tail = kNoBuffer;
    } else {
      arm_send(fd, c.head);
    }
    return_buffer(id);
    close_if_done(fd);
  }

  void close_if_done(int fd) {
    const connection& c = connections_[static_cast<std::size_t>(fd)];
    if (c.closing && !c.receiving && c.head == kNoBuffer) {
      ::close(fd);
    }
  }

  char* buffer(std::uint16_t id) { return memory_.get() + std::size_t{ id } * kBufferSize; }

  void return_buffer(std::uint16_t id) {
    io_uring_buf_ring_add(buffer_ring_, buffer(id), kBufferSize, id,
                          io_uring_buf_ring_mask(kBufferCount), returned_++);
  }

  // Makes the buffers returned since the last call visible to the kernel, then re-arms the
  // receives that ended for want of one.
  void publish_returned_buffers() {
    if (returned_ == 0) {
      return;
    }
    io_uring_buf_ring_advance(buffer_ring_, returned_);
    returned_ = 0;
    for (const int fd : starved_) {
      const connection& c = connections_[static_cast<std::size_t>(fd)];
      if (!c.receiving && !c.closing) {  // not closed since (nor its descriptor reused)
        arm_receive(fd);
      }
    }
    starved_.clear();
  }

  const int listener_;
  const int wake_;
  io_uring ring_{};
  io_uring_buf_ring* buffer_ring_ = nullptr;
  std::unique_ptr<char[]> memory_{ new char[std::size_t{ kBufferCount } * kBufferSize] };
  buffer_state buffers_[kBufferCount];
  int returned_ = 0;                     // buffers added since the last advance
  std::vector<connection> connections_;  // by descriptor
  std::vector<int> starved_;             // receives ended by ENOBUFS
};

void serve(int listener, int wake) {
  ring_server server(listener, wake);  // made on its thread: SINGLE_ISSUER
  server.run();
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
