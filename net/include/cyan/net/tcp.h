#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "cyan/dispatch/task.h"
#include "cyan/net/buffer.h"
#include "cyan/net/detail/stream_ops.h"
#include "cyan/net/endpoint.h"
#include "cyan/net/error.h"

namespace cyan::net {

class tcp_socket;

namespace detail {
/// The socket's core, or null when it is not open: for tests and diagnostics (e.g.
/// socket_core::reading_multishot()).
[[nodiscard]] socket_core* core_of(const tcp_socket& socket) noexcept;
}  // namespace detail

/// An open descriptor that belongs to no thread: what tcp_socket::release() gives and
/// tcp_socket::adopt() takes, to hand a connection to another handler thread. Closes the
/// descriptor when destroyed unadopted. Move-only. [any thread]
///
/// It also carries the bytes the socket had received but not yet read (on io_uring a socket
/// may hold some, see tcp_socket::release()): the adopting socket's reads return them first.
/// release() of the handle (the bare descriptor) drops them.
class socket_handle {
 public:
  socket_handle() noexcept = default;
  /// Takes ownership of `fd`.
  explicit socket_handle(int fd) noexcept : fd_(fd) {}
  socket_handle(socket_handle&& other) noexcept
      : fd_(std::exchange(other.fd_, -1)), held_(std::move(other.held_)) {}
  socket_handle& operator=(socket_handle&& other) noexcept;
  ~socket_handle();

  [[nodiscard]] int native_handle() const noexcept { return fd_; }
  [[nodiscard]] explicit operator bool() const noexcept { return fd_ >= 0; }
  /// Gives the descriptor up: the caller closes it. Bytes carried for adopt() are dropped.
  [[nodiscard]] int release() noexcept {
    held_.clear();
    return std::exchange(fd_, -1);
  }

 private:
  friend class tcp_socket;

  int fd_ = -1;
  std::vector<std::byte> held_;  // received, not yet read: adopt() serves them first
};

/// A connected stream socket: TCP over IPv4 or IPv6, or Unix-domain (a `unix:` endpoint).
///
/// Operations are awaited in a cyan::dispatch::task on a handler thread: `co_await
/// s.read_some(buf)`. Each one makes its system call at once and waits (on the thread's loop,
/// through the socket's one io watcher) only when that would block; in steady state nothing is
/// allocated. A read and a write may be pending at the same time (from two tasks of the
/// socket's thread), but not two reads or two writes: the second throws std::logic_error
/// before it moves any byte (so bytes never interleave), and the first goes on undisturbed.
///
/// Every operation takes an optional time limit as its last argument (any std::chrono
/// duration, counted from when it starts to wait): when it passes, the operation fails with
/// std::errc::timed_out and the socket stays usable (a write may have written part of its
/// data). A stop request on the task's std::stop_token ends a pending operation with
/// std::errc::operation_canceled, as does close() (from another task on the same thread).
///
/// Errors are std::system_error with the errno (ECONNREFUSED, ECONNRESET, EPIPE, ...) in
/// std::generic_category(); EINTR and EAGAIN are handled inside; writes never raise SIGPIPE.
///
/// Thread rules: a socket belongs to the handler thread that created or accepted it (one made
/// outside any handler thread belongs to the first that uses it). Every member is that
/// thread's; debug builds abort with a message when another thread uses it. Except: any thread
/// may close() or destroy a socket without a pending operation (a connection dropped elsewhere
/// after its task ended); off its thread the close is handed to the socket's thread, without
/// blocking, and the descriptor stays open until that thread closes it in a later round (its
/// loop may still watch it; its number is not reused meanwhile), or is closed at once when that
/// thread has finished. An operation in a
/// task on a thread_pool (the global pool included) throws std::logic_error before doing
/// anything: a pool task resumes on any worker. To hand a connection to another thread,
/// release() it and adopt() the handle there. When the socket's thread finishes while an
/// operation of a task from another executor waits (the task hopped there with schedule()),
/// the thread ends the wait and destroys the task, as any executor that finishes under a task
/// does; it never resumes it.
class tcp_socket {
 public:
  /// Not open.
  tcp_socket() noexcept = default;
  tcp_socket(tcp_socket&& other) noexcept = default;
  /// Closes the socket this one held first.
  tcp_socket& operator=(tcp_socket&& other) noexcept;
  /// close().
  ~tcp_socket();

  /// `co_await tcp_socket::connect(peer[, limit])` connects to `peer` (IPv4, IPv6 or `unix:`)
  /// and returns the socket, owned by the calling thread. Throws std::system_error:
  /// ECONNREFUSED, ENOENT (no such Unix socket), EAGAIN (a Unix listener's backlog is full),
  /// timed_out, operation_canceled.
  [[nodiscard]] static detail::connect_op connect(const endpoint& peer) {
    return detail::connect_op(peer, detail::kNoTimeout);
  }
  template <typename Rep, typename Period>
  [[nodiscard]] static detail::connect_op connect(const endpoint& peer,
                                                  std::chrono::duration<Rep, Period> limit) {
    return detail::connect_op(peer, detail::to_timeout(limit));
  }

  /// A socket for a connected stream descriptor, owned by the calling thread (made
  /// non-blocking). Throws std::invalid_argument for an empty handle.
  [[nodiscard]] static tcp_socket adopt(socket_handle handle);

  /// Gives the descriptor up (the socket is closed afterwards, without closing it), for
  /// adopt() on another thread. Bytes already received but not yet read (held by a socket
  /// reading through a multishot receive on io_uring) go with the handle, and the adopting
  /// socket's reads return them first: release() ends that receive and waits for its end, so
  /// nothing it received is lost. Throws std::logic_error while an operation is pending:
  /// finish or cancel them first. [the socket's thread]
  [[nodiscard]] socket_handle release();

  /// `co_await s.read_some(buf[, limit])`: reads what is there, up to buf.size() bytes, waiting
  /// for at least one; returns the count, 0 at end of stream (or for an empty buffer).
  [[nodiscard]] detail::read_some_op read_some(std::span<std::byte> buffer) noexcept {
    return { core(), buffer, detail::kNoTimeout };
  }
  template <typename Rep, typename Period>
  [[nodiscard]] detail::read_some_op read_some(std::span<std::byte> buffer,
                                               std::chrono::duration<Rep, Period> limit) noexcept {
    return { core(), buffer, detail::to_timeout(limit) };
  }

  /// `co_await s.read_exact(buf[, limit])`: reads exactly buf.size() bytes. Fails with
  /// cyan::net::transfer_error (a std::system_error) whose bytes_transferred() counts the bytes
  /// already read into the start of `buf`: cyan::net::error::end_of_stream when the stream
  /// ends first, timed_out, operation_canceled, ECONNRESET, ...
  [[nodiscard]] detail::read_exact_op read_exact(std::span<std::byte> buffer) noexcept {
    return { core(), buffer, detail::kNoTimeout };
  }
  template <typename Rep, typename Period>
  [[nodiscard]] detail::read_exact_op read_exact(
      std::span<std::byte> buffer, std::chrono::duration<Rep, Period> limit) noexcept {
    return { core(), buffer, detail::to_timeout(limit) };
  }

  /// `co_await s.write_some(buf[, limit])`: writes what the socket takes, at least one byte;
  /// returns the count.
  [[nodiscard]] detail::write_some_op write_some(std::span<const std::byte> buffer) noexcept {
    return { core(), buffer, detail::kNoTimeout };
  }
  template <typename Rep, typename Period>
  [[nodiscard]] detail::write_some_op write_some(
      std::span<const std::byte> buffer, std::chrono::duration<Rep, Period> limit) noexcept {
    return { core(), buffer, detail::to_timeout(limit) };
  }

  /// `co_await s.write_all(buf[, limit])`: writes every byte. Fails with
  /// cyan::net::transfer_error (a std::system_error) whose bytes_transferred() counts the bytes
  /// sent from the start of `buf` before the failure (timed_out, EPIPE, ...).
  [[nodiscard]] detail::write_all_op write_all(std::span<const std::byte> buffer) noexcept {
    return { core(), buffer, detail::kNoTimeout };
  }
  template <typename Rep, typename Period>
  [[nodiscard]] detail::write_all_op write_all(std::span<const std::byte> buffer,
                                               std::chrono::duration<Rep, Period> limit) noexcept {
    return { core(), buffer, detail::to_timeout(limit) };
  }

  /// `co_await s.write_all(std::array{ buffer(header), buffer(body) }[, limit])`: writes every
  /// byte of every buffer, in order, gathering them into one writev (sendmsg) per system call
  /// (16 buffers at most per call). The buffers may be spans of const bytes (buffer() of a
  /// string_view or a const string) or of mutable ones (buffer() of a std::string), in a
  /// std::array, a std::vector or any contiguous range; the buffers and the range of them must
  /// live until the write completes (it reads the range in place); a temporary array in the
  /// co_await expression does. (No braced-list overload: GCC 12 cannot keep an
  /// initializer_list alive across co_await.) Fails with cyan::net::transfer_error counting
  /// the bytes sent, across the buffers in order.
  [[nodiscard]] detail::write_all_op write_all(
      std::span<const std::span<const std::byte>> buffers) noexcept {
    return { core(), buffers, detail::kNoTimeout };
  }
  [[nodiscard]] detail::write_all_op write_all(
      std::span<const std::span<std::byte>> buffers) noexcept {
    return { core(), buffers, detail::kNoTimeout };
  }
  template <typename Rep, typename Period>
  [[nodiscard]] detail::write_all_op write_all(std::span<const std::span<const std::byte>> buffers,
                                               std::chrono::duration<Rep, Period> limit) noexcept {
    return { core(), buffers, detail::to_timeout(limit) };
  }
  template <typename Rep, typename Period>
  [[nodiscard]] detail::write_all_op write_all(std::span<const std::span<std::byte>> buffers,
                                               std::chrono::duration<Rep, Period> limit) noexcept {
    return { core(), buffers, detail::to_timeout(limit) };
  }

  /// Ends the sending direction (the peer reads end of stream); reading goes on. Throws
  /// std::system_error.
  void shutdown_send();

  /// Closes the socket; its pending operations resume with operation_canceled. Does nothing
  /// when not open. On another thread (no operation pending) the descriptor is closed by the
  /// socket's thread (see the thread rules above).
  void close() noexcept;

  [[nodiscard]] bool is_open() const noexcept { return core_ != nullptr && core_->is_open(); }

  /// TCP_NODELAY (off by default, as the kernel makes sockets); does nothing on a Unix-domain
  /// socket. Throws std::system_error.
  void set_nodelay(bool on = true);
  /// SO_KEEPALIVE. Throws std::system_error.
  void set_keepalive(bool on = true);

  /// getsockname() / getpeername(). Throw std::system_error.
  [[nodiscard]] endpoint local_endpoint() const;
  [[nodiscard]] endpoint remote_endpoint() const;

  /// The descriptor (still owned by the socket), or -1.
  [[nodiscard]] int native_handle() const noexcept { return is_open() ? core_->fd() : -1; }

 private:
  friend class detail::connect_op;
  friend class detail::accept_op;
  friend detail::socket_core* detail::core_of(const tcp_socket& socket) noexcept;
  explicit tcp_socket(std::unique_ptr<detail::socket_core> core) noexcept
      : core_(std::move(core)) {}
  [[nodiscard]] detail::socket_core* core() const noexcept { return core_.get(); }

  std::unique_ptr<detail::socket_core> core_;
};

/// tcp_listener::options.
struct tcp_listener_options {
  /// SO_REUSEPORT: several listeners (one per handler thread) share the address and the kernel
  /// spreads the connections over them.
  bool reuse_port = false;
  /// listen()'s backlog.
  int backlog = SOMAXCONN;
  /// IPV6_V6ONLY for an IPv6 address: false also accepts IPv4 connections on `[::]`.
  bool v6_only = false;
  /// For a `unix:` path: remove a socket file that no one listens on any more (connecting to
  /// it is refused) before binding. A file that is not a socket, or a live one, is kept and
  /// bind fails with EADDRINUSE.
  bool remove_stale_socket = false;
};

/// A listening stream socket (TCP, or Unix-domain for a `unix:` endpoint). SO_REUSEADDR is
/// always set for TCP.
///
/// Out of descriptors (EMFILE, ENFILE), accept() throws std::system_error with that errno and
/// the listener stays usable. It keeps one spare descriptor (libuv's trick): it closes the
/// spare, accepts the waiting connections and closes them at once (their clients see the
/// connection reset instead of hanging), and reopens the spare; the next accept() then waits
/// for a new connection before it tries again, so a loop around accept() does not spin. When
/// another thread took the freed descriptor first, the next accept() also waits 50 ms. Accepting
/// works again by itself once descriptors are free.
///
/// Thread rules: as tcp_socket; accepted sockets belong to the accepting thread.
class tcp_listener {
 public:
  using options = tcp_listener_options;

  tcp_listener() noexcept = default;
  tcp_listener(tcp_listener&&) noexcept = default;
  tcp_listener& operator=(tcp_listener&& other) noexcept;
  ~tcp_listener();

  /// Binds to `local` (port 0: a free port, see local_endpoint()) and listens. Throws
  /// std::system_error (EADDRINUSE, EACCES, ...).
  [[nodiscard]] static tcp_listener bind(const endpoint& local, const options& settings = {});

  /// `co_await listener.accept([limit])` returns the next connection, owned by the calling
  /// thread. Throws std::system_error: EMFILE / ENFILE (see above), timed_out,
  /// operation_canceled (stop request, close()).
  [[nodiscard]] dispatch::task<tcp_socket> accept() { return accept_within(detail::kNoTimeout); }
  template <typename Rep, typename Period>
  [[nodiscard]] dispatch::task<tcp_socket> accept(std::chrono::duration<Rep, Period> limit) {
    return accept_within(detail::to_timeout(limit));
  }

  /// Stops listening (the descriptor is closed at once; on another thread, without a pending
  /// accept(), by the listener's thread, as tcp_socket::close()); a pending accept() resumes
  /// with operation_canceled — one that backs off after EMFILE, when its wait of up to 50 ms
  /// ends.
  void close() noexcept;

  [[nodiscard]] bool is_open() const noexcept {
    return state_ != nullptr && state_->core.is_open();
  }
  /// The bound address, with the real port after binding to port 0. Throws std::system_error.
  [[nodiscard]] endpoint local_endpoint() const;
  [[nodiscard]] int native_handle() const noexcept { return is_open() ? state_->core.fd() : -1; }

 private:
  explicit tcp_listener(std::shared_ptr<detail::listener_state> state) noexcept
      : state_(std::move(state)) {}
  dispatch::task<tcp_socket> accept_within(detail::timeout_type limit);

  // Shared with a pending accept(), which may outlive close() while it backs off (see above).
  std::shared_ptr<detail::listener_state> state_;
};

}  // namespace cyan::net
