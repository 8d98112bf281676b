#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>

#include "cyan/net/buffer.h"
#include "cyan/net/detail/datagram_ops.h"
#include "cyan/net/endpoint.h"

namespace cyan::net {

/// A UDP socket (IPv4 or IPv6). Operations are awaited in a cyan::dispatch::task on a handler
/// thread and behave as tcp_socket's: the system call first, a wait for readiness only when it
/// would block, an optional time limit as the last argument (std::errc::timed_out), the task's
/// stop token and close() end a pending operation with std::errc::operation_canceled. Errors
/// are std::system_error with the errno (ECONNREFUSED after an ICMP port-unreachable on a
/// connected socket, EMSGSIZE, ...).
///
/// Thread rules: as tcp_socket — the socket belongs to the handler thread that created it (or
/// that first used one created elsewhere); debug builds abort when another thread uses it, but
/// any thread may close or destroy an idle one (the close is handed to its thread).
class udp_socket {
 public:
  udp_socket() noexcept = default;
  udp_socket(udp_socket&&) noexcept = default;
  udp_socket& operator=(udp_socket&& other) noexcept;
  ~udp_socket();

  /// A socket bound to `local` (port 0: a free port; endpoint::any_v4() for a client that
  /// only needs a source port). Throws std::system_error, std::invalid_argument for a `unix:`
  /// endpoint.
  [[nodiscard]] static udp_socket bind(const endpoint& local);

  /// Fixes the peer: send() and receive() then go to and come from it only. Throws
  /// std::system_error.
  void connect(const endpoint& peer);

  /// `co_await s.send_to(datagram, peer[, limit])` sends one datagram; returns its size.
  [[nodiscard]] detail::send_op send_to(std::span<const std::byte> datagram,
                                        const endpoint& peer) noexcept {
    return { core(), datagram, &peer, detail::kNoTimeout };
  }
  template <typename Rep, typename Period>
  [[nodiscard]] detail::send_op send_to(std::span<const std::byte> datagram, const endpoint& peer,
                                        std::chrono::duration<Rep, Period> limit) noexcept {
    return { core(), datagram, &peer, detail::to_timeout(limit) };
  }

  /// `co_await s.receive_from(buffer[, limit])` receives one datagram: its size and sender.
  [[nodiscard]] detail::receive_op receive_from(std::span<std::byte> buffer) noexcept {
    return { core(), buffer, detail::kNoTimeout };
  }
  template <typename Rep, typename Period>
  [[nodiscard]] detail::receive_op receive_from(std::span<std::byte> buffer,
                                                std::chrono::duration<Rep, Period> limit) noexcept {
    return { core(), buffer, detail::to_timeout(limit) };
  }

  /// After connect(): `co_await s.send(datagram[, limit])` sends to the peer; returns the size.
  [[nodiscard]] detail::send_op send(std::span<const std::byte> datagram) noexcept {
    return { core(), datagram, nullptr, detail::kNoTimeout };
  }
  template <typename Rep, typename Period>
  [[nodiscard]] detail::send_op send(std::span<const std::byte> datagram,
                                     std::chrono::duration<Rep, Period> limit) noexcept {
    return { core(), datagram, nullptr, detail::to_timeout(limit) };
  }

  /// After connect(): `co_await s.receive(buffer[, limit])` receives one datagram from the peer;
  /// returns its size (cut to the buffer's).
  [[nodiscard]] detail::receive_size_op receive(std::span<std::byte> buffer) noexcept {
    return { core(), buffer, detail::kNoTimeout };
  }
  template <typename Rep, typename Period>
  [[nodiscard]] detail::receive_size_op receive(std::span<std::byte> buffer,
                                                std::chrono::duration<Rep, Period> limit) noexcept {
    return { core(), buffer, detail::to_timeout(limit) };
  }

  /// Closes the socket; pending operations resume with operation_canceled.
  void close() noexcept;

  [[nodiscard]] bool is_open() const noexcept { return core_ != nullptr && core_->is_open(); }
  /// getsockname(). Throws std::system_error.
  [[nodiscard]] endpoint local_endpoint() const;
  [[nodiscard]] int native_handle() const noexcept { return is_open() ? core_->fd() : -1; }

 private:
  explicit udp_socket(std::unique_ptr<detail::socket_core> core) noexcept
      : core_(std::move(core)) {}
  [[nodiscard]] detail::socket_core* core() const noexcept { return core_.get(); }

  std::unique_ptr<detail::socket_core> core_;
};

}  // namespace cyan::net
