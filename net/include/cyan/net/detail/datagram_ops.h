#pragma once

// The awaiters of udp_socket (see socket_core.h for how they wait).

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstddef>
#include <span>

#include "cyan/net/detail/socket_core.h"
#include "cyan/net/endpoint.h"

namespace cyan::net {

/// What receive_from() returns: the datagram's size and who sent it.
struct received_datagram {
  /// Bytes stored; a datagram larger than the buffer is cut to its size (`truncated`).
  std::size_t size = 0;
  endpoint sender;
  /// The datagram was longer than the buffer: its end was dropped.
  bool truncated = false;
};

}  // namespace cyan::net

namespace cyan::net::detail {

/// send_to() / send(): one sendto() of the whole datagram; `peer` null: the connected peer.
class send_op final : public io_wait {
 public:
  send_op(socket_core* core, std::span<const std::byte> datagram, const endpoint* peer,
          timeout_type timeout) noexcept
      : io_wait(core, event::io::write, timeout), datagram_(datagram), peer_(peer) {}
  std::size_t await_resume() {
    finish("cyan::net::udp_socket::send");
    return done_;
  }

 private:
  bool attempt() noexcept override;
  void prepare_call(io_uring_sqe* entry) noexcept override;
  bool call_completed(int result) noexcept override;
  std::span<const std::byte> datagram_;
  const endpoint* peer_;
  std::size_t done_ = 0;
  ::iovec piece_{};  // io_uring: the sendmsg() in flight's
  ::msghdr message_{};
};

/// receive_from() / receive(): one recvfrom().
class receive_op final : public io_wait {
 public:
  receive_op(socket_core* core, std::span<std::byte> buffer, timeout_type timeout) noexcept
      : io_wait(core, event::io::read, timeout), buffer_(buffer) {}
  received_datagram await_resume();

 private:
  bool attempt() noexcept override;
  void prepare_call(io_uring_sqe* entry) noexcept override;
  bool call_completed(int result) noexcept override;
  [[nodiscard]] bool adaptive_read() const noexcept override { return true; }
  std::span<std::byte> buffer_;
  received_datagram result_;
  ::socklen_t sender_size_ = 0;
  ::iovec piece_{};  // io_uring: the recvmsg() in flight's
  ::msghdr message_{};
};

/// receive(): receive_op's size only.
class receive_size_op {
 public:
  receive_size_op(socket_core* core, std::span<std::byte> buffer, timeout_type timeout) noexcept
      : op_(core, buffer, timeout) {}
  [[nodiscard]] bool await_ready() const noexcept { return false; }
  template <typename Promise>
  bool await_suspend(std::coroutine_handle<Promise> suspended) {
    return op_.await_suspend(suspended);
  }
  std::size_t await_resume() { return op_.await_resume().size; }

 private:
  receive_op op_;
};

}  // namespace cyan::net::detail
