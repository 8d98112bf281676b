#pragma once

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "cyan/common/noncopyable.h"
#include "cyan/dispatch/async_scope.h"
#include "cyan/dispatch/handler_thread.h"
#include "cyan/dispatch/task.h"
#include "cyan/net/endpoint.h"
#include "cyan/net/tcp.h"
#include "cyan/net/tls.h"

namespace cyan::net {

/// A TCP (or Unix-domain stream) server spread over handler threads of its own: it accepts
/// connections and runs a task per connection on the thread that owns it.
///
///     cyan::net::tcp_server server{ { .endpoint = cyan::net::endpoint::loopback_v4(8080),
///                                     .threads = 4 } };
///     server.start([](cyan::net::tcp_socket connection) -> cyan::dispatch::task<> { ... });
///     ...
///     bool all_finished = server.stop(2s);
///
/// Distribution: with reuse_port (the default) every thread has a listener of its own on the
/// same address (SO_REUSEPORT) and the kernel spreads the connections; with acceptor one thread
/// (the first) accepts and hands the connections to the others in turn (to itself when it is
/// alone). A `unix:` endpoint has one listener, so it is always served by an acceptor.
///
/// Limits: beyond max_connections live connections, a new connection is accepted and closed at
/// once (the client sees its connection end rather than wait in the backlog); the server
/// accepts again as soon as one ends. Accept failures (EMFILE, ENFILE, ENOBUFS, ...) go to
/// options::on_accept_error (default: stderr, at most one line a second); the listener waits
/// before it tries again, so a full descriptor table never makes it spin.
///
/// Shutdown: stop(grace) stops accepting, starts draining (draining() turns true, and every
/// connection held by an idle() guard that has no unread bytes is closed at once on its
/// thread, so a read waiting for the next request ends with operation_canceled), waits up to
/// `grace` for the connection tasks, then requests the stop of those still running (their
/// pending operations end with operation_canceled) and waits for them. Unread bytes are a
/// request on its way, which is served: bytes in the socket, bytes its io_uring receive holds,
/// bytes a TLS stream holds (guard the tls_stream, not its next_layer()), or a read that got
/// bytes and has not resumed its task yet. A handler sees the drain by checking draining()
/// between requests, and by holding an idle() guard around the wait for the next one (not
/// around the rest of a request begun).
///
/// Errors of a connection task (what the handler's task throws) go to its handler thread's
/// error path (stderr), except operation_canceled.
///
/// Thread rules: stop() and the destructor wait for the server's threads, so they run on any
/// thread but those: the main thread, another handler thread (an active object's), a pool
/// worker. That thread blocks until the connection tasks are done, so they must not need it
/// (a task that moved onto it with schedule() cannot end there). On one of the server's own
/// threads stop() throws std::logic_error and the destructor aborts with a message. The rest
/// [any thread] unless marked.
class tcp_server : noncopyable {
 public:
  /// How connections reach the threads (see above).
  enum class distribution { reuse_port, acceptor };

  /// What start() is given: called once per connection, on the thread that owns it.
  using connection_handler = std::function<dispatch::task<>(tcp_socket)>;
  /// Receives each accept failure, on the accepting thread.
  using accept_error_handler = std::function<void(const std::system_error&)>;

  struct options {
    /// Where to listen (port 0: a free port, see local_endpoint()).
    net::endpoint endpoint = net::endpoint::loopback_v4();
    /// Handler threads the server starts; 0 = std::thread::hardware_concurrency().
    std::size_t threads = 0;
    tcp_server::distribution distribution = tcp_server::distribution::reuse_port;
    /// Live connections at most; 0 = no limit.
    std::size_t max_connections = 0;
    /// listen()'s backlog.
    int backlog = SOMAXCONN;
    /// Empty: accept failures are written to stderr, at most one line a second.
    accept_error_handler on_accept_error = {};
  };

  /// While it lives, the connection counts as idle (see idle()).
  class idle_guard;

  /// Starts the handler threads (not yet listening). Throws std::system_error when a thread
  /// cannot start.
  explicit tcp_server(options settings);
  /// stop() with no grace, then stops the threads. Not on one of the server's own threads,
  /// which cannot wait for themselves: there it aborts with a message (see the thread rules).
  ~tcp_server();

  /// Binds the listeners and starts accepting; each connection runs `handler(socket)` (a
  /// callable taking a tcp_socket and returning a dispatch::task<>), which the server keeps
  /// alive until stop() returns, so its captures cannot dangle. Throws std::system_error when
  /// binding fails (nothing is left listening), std::logic_error when started before or after
  /// stop().
  template <typename Handler>
  requires std::invocable<Handler&, tcp_socket> &&
      std::same_as<std::invoke_result_t<Handler&, tcp_socket>, dispatch::task<>>
  void start(Handler handler) { start_with(connection_handler(std::move(handler))); }

  /// The address the listeners are bound to (the real port after port 0). Throws
  /// std::logic_error before start().
  [[nodiscard]] endpoint local_endpoint() const;

  /// The shutdown (see above): returns true when every connection task finished within
  /// `grace`. A second call returns at once with the first one's answer. Blocks the calling
  /// thread; throws std::logic_error on one of the server's own threads (see the thread rules).
  bool stop(std::chrono::milliseconds grace);

  /// True once stop() began the drain.
  [[nodiscard]] bool draining() const noexcept { return draining_.load(std::memory_order_acquire); }

  /// Connection tasks alive.
  [[nodiscard]] std::size_t connections() const { return connections_.size(); }
  /// Connections closed at once because max_connections were alive.
  [[nodiscard]] std::size_t refused_connections() const noexcept {
    return refused_.load(std::memory_order_relaxed);
  }

  /// The server's handler threads, for work that must run beside the connections. They live
  /// as long as the server.
  [[nodiscard]] std::span<dispatch::handler_thread* const> threads() const noexcept {
    return thread_view_;
  }

  /// Marks `connection` idle while the guard lives: a drain that begins meanwhile closes it at
  /// once (a pending read ends with operation_canceled) unless bytes have arrived that it has
  /// not read yet (a request on its way, see above: the read takes them); if the drain has
  /// begun already, the same holds as soon as the task waits. Hold it around the wait for the
  /// next request. [the connection's thread, which must be one of the server's;
  /// std::logic_error otherwise]
  [[nodiscard]] idle_guard idle(tcp_socket& connection);
  /// idle() for a TLS connection: what the stream holds counts as unread too (a request that
  /// came with the handshake, or part of a record). The stream must outlive the guard.
  [[nodiscard]] idle_guard idle(tls_stream& connection);

 private:
  struct thread_state;
  class accept_errors;

  void start_with(connection_handler handler);
  dispatch::task<> accept_loop(tcp_listener listener, std::size_t index);
  void place(tcp_socket connection, std::size_t accepting_thread);
  dispatch::task<bool> shut_down(std::chrono::milliseconds grace);
  void drain_here(thread_state& state) noexcept;
  static void reap_completions() noexcept;
  [[nodiscard]] bool on_own_thread() const noexcept;
  thread_state& state_of_this_thread();
  idle_guard make_idle_guard(tcp_socket& connection, const tls_stream* stream);

  options options_;
  std::vector<std::unique_ptr<thread_state>> states_;
  std::vector<dispatch::handler_thread*> thread_view_;
  std::shared_ptr<connection_handler> handler_;
  endpoint bound_;
  bool started_ = false;
  dispatch::async_scope listeners_;
  dispatch::async_scope connections_;
  std::atomic<bool> draining_{ false };
  std::atomic<std::size_t> refused_{ 0 };
  std::atomic<std::size_t> next_thread_{ 0 };
  std::mutex stop_mutex_;
  bool stopped_ = false;
  bool stop_result_ = true;
};

class tcp_server::idle_guard {
 public:
  idle_guard(idle_guard&& other) noexcept;
  idle_guard& operator=(idle_guard&&) = delete;
  ~idle_guard();

 private:
  friend class tcp_server;
  idle_guard(thread_state* state, tcp_socket* connection, const tls_stream* stream) noexcept;
  // Whether bytes arrived that no read took (see tcp_server's "Shutdown").
  [[nodiscard]] bool has_unread_input() const noexcept;
  // At the drain: unread input, or a read that finished under the guard.
  [[nodiscard]] bool has_request_on_its_way() const noexcept;
  thread_state* state_;
  tcp_socket* connection_;
  const tls_stream* stream_;  // null for a plain socket
};

}  // namespace cyan::net
