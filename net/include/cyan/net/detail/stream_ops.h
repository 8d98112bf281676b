#pragma once

// The awaiters of tcp_socket and tcp_listener (TCP and Unix-domain stream sockets). Each tries
// its system call first and waits for readiness only when it would block; reads adapt to a
// socket whose reads keep blocking (see socket_core.h).

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstddef>
#include <memory>
#include <span>

#include "cyan/net/detail/buffer_sequence.h"
#include "cyan/net/detail/socket_core.h"
#include "cyan/net/endpoint.h"

namespace cyan::net {
class tcp_socket;
}

namespace cyan::net::detail {

/// read_some(): one recv() of up to the buffer's size; 0 at end of stream.
class read_some_op final : public io_wait {
 public:
  read_some_op(socket_core* core, std::span<std::byte> buffer, timeout_type timeout) noexcept
      : io_wait(core, event::io::read, timeout), buffer_(buffer) {}
  std::size_t await_resume() {
    finish("cyan::net::tcp_socket::read_some");
    return done_;
  }

 private:
  bool attempt() noexcept override;
  void prepare_call(io_uring_sqe* entry) noexcept override;
  bool call_completed(int result) noexcept override;
  [[nodiscard]] bool adaptive_read() const noexcept override { return true; }
  [[nodiscard]] bool stream_read() const noexcept override { return true; }
  std::span<std::byte> buffer_;
  std::size_t done_ = 0;
};

/// read_exact(): recv() until the buffer is full; error::end_of_stream when the peer ends first.
/// Fails with transfer_error, which counts the bytes read.
class read_exact_op final : public io_wait {
 public:
  read_exact_op(socket_core* core, std::span<std::byte> buffer, timeout_type timeout) noexcept
      : io_wait(core, event::io::read, timeout), buffer_(buffer) {}
  void await_resume() { finish_transfer("cyan::net::tcp_socket::read_exact", done_); }

 private:
  bool attempt() noexcept override;
  void prepare_call(io_uring_sqe* entry) noexcept override;
  bool call_completed(int result) noexcept override;
  [[nodiscard]] bool adaptive_read() const noexcept override { return true; }
  [[nodiscard]] bool stream_read() const noexcept override { return true; }
  std::span<std::byte> buffer_;
  std::size_t done_ = 0;  // bytes at the start of buffer_ already read
};

/// write_some(): one send() of up to the buffer's size.
class write_some_op final : public io_wait {
 public:
  write_some_op(socket_core* core, std::span<const std::byte> buffer, timeout_type timeout) noexcept
      : io_wait(core, event::io::write, timeout), buffer_(buffer) {}
  std::size_t await_resume() {
    finish("cyan::net::tcp_socket::write_some");
    return done_;
  }

 private:
  bool attempt() noexcept override;
  void prepare_call(io_uring_sqe* entry) noexcept override;
  bool call_completed(int result) noexcept override;
  std::span<const std::byte> buffer_;
  std::size_t done_ = 0;
};

/// write_all(): send() / sendmsg() until every byte of every buffer is written, gathering up to
/// kGather buffers per system call. Fails with transfer_error, which counts the bytes sent.
class write_all_op final : public io_wait {
 public:
  static constexpr std::size_t kGather = 16;

  write_all_op(socket_core* core, buffer_sequence buffers, timeout_type timeout) noexcept
      : io_wait(core, event::io::write, timeout), buffers_(buffers) {}
  write_all_op(socket_core* core, std::span<const std::byte> buffer, timeout_type timeout) noexcept
      : io_wait(core, event::io::write, timeout),
        single_(buffer),
        buffers_(std::span<const std::span<const std::byte>>(&single_, 1)) {}
  void await_resume() { finish_transfer("cyan::net::tcp_socket::write_all", written_); }

 private:
  bool attempt() noexcept override;
  void prepare_call(io_uring_sqe* entry) noexcept override;
  bool call_completed(int result) noexcept override;
  void advance(std::size_t written) noexcept;

  /// Skips the buffers written completely; false when none is left.
  bool skip_written() noexcept;

  std::span<const std::byte> single_;
  buffer_sequence buffers_;
  ::iovec pieces_[kGather]{};  // io_uring: the sendmsg() in flight's
  ::msghdr message_{};
  std::size_t next_ = 0;     // the first buffer not completely written
  std::size_t offset_ = 0;   // bytes of buffers_[next_] already written
  std::size_t written_ = 0;  // bytes of all the buffers already written
};

/// connect(): a non-blocking connect(), then SO_ERROR once the socket is writable.
class connect_op final : public io_wait {
 public:
  connect_op(const endpoint& peer, timeout_type timeout);
  ~connect_op();
  tcp_socket await_resume();

 private:
  bool attempt() noexcept override;
  void prepare_call(io_uring_sqe* entry) noexcept override;
  bool call_completed(int result) noexcept override;
  endpoint peer_;
  std::unique_ptr<socket_core> socket_;
  bool started_ = false;
};

/// What a tcp_listener owns: the listening socket and a spare descriptor for EMFILE.
struct listener_state {
  explicit listener_state(int fd);
  ~listener_state();
  listener_state(const listener_state&) = delete;
  listener_state& operator=(const listener_state&) = delete;

  /// Out of descriptors: frees the spare, accepts and closes the connections waiting (so the
  /// listener stops being readable, and their clients see a reset rather than a hang), then
  /// takes the spare again. Without a spare (another thread took the freed descriptor) it
  /// sets back_off instead.
  void shed_connections() noexcept;
  /// Tries to take the spare descriptor again; clears back_off when it could.
  void reopen_spare() noexcept;

  socket_core core;
  int spare_fd = -1;      // /dev/null, or -1 while it could not be (re)opened
  bool back_off = false;  // the next accept() waits a little before it tries again
  // The last accept failed with EMFILE / ENFILE: the next one waits for readability first.
  bool out_of_descriptors = false;
};

/// accept(): accept4() of one connection.
class accept_op final : public io_wait {
 public:
  accept_op(listener_state* listener, timeout_type timeout) noexcept
      : io_wait(listener != nullptr ? &listener->core : nullptr, event::io::read, timeout),
        listener_(listener) {}
  ~accept_op();
  tcp_socket await_resume();

 private:
  bool attempt() noexcept override;
  void prepare_call(io_uring_sqe* entry) noexcept override;
  bool call_completed(int result) noexcept override;
  [[nodiscard]] bool poll_first() noexcept override;
  listener_state* listener_;
  int accepted_ = -1;
  bool speculative_ = true;  // the first attempt, made before any readiness
};

}  // namespace cyan::net::detail
