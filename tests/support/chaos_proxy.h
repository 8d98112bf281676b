#pragma once

// A loopback TCP proxy that misbehaves on purpose, for the tests of the servers and clients:
// it stands between a client and a server and, on either direction, splits every write into
// 1-byte pieces, delays each piece, or after N bytes resets the connection, half-closes it or
// stalls it for good. Plain POSIX sockets and poll() on one thread of its own, nothing of cyan,
// so that a bug in cyan cannot hide a bug in the proxy.

#include <poll.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace cyan::test {

/// Listens on 127.0.0.1 (a free port, port()) and forwards each connection it accepts to
/// 127.0.0.1:`target_port`, applying one fault per direction to each connection: the same pair
/// to every connection, or several pairs taken in turn (options::then). The sockets
/// belong to the proxy's thread; port(), stats() and wait_until() may be called from any
/// thread, stop() and the destructor from the thread that made it.
class chaos_proxy {
 public:
  /// What the proxy does to one direction (the bytes one side sends the other).
  struct fault {
    /// What happens once `after_bytes` bytes of this direction have been forwarded.
    enum class action {
      none,        ///< nothing: forward until the source ends, then end the destination's side
      reset,       ///< reset both sides (SO_LINGER 0 close): each peer's next call ECONNRESET
      half_close,  ///< shutdown(SHUT_WR) towards the destination (it reads end of stream);
                   ///< what the source still sends is read and dropped; the other direction
                   ///< goes on
      stall,       ///< forward nothing more this way (not even the source's end), read
                   ///< nothing more from the source; the direction is over only when the
                   ///< source ends (seen without reading), so the connection stays open until
                   ///< both peers have ended their sides, or until stop()
    };

    bool split = false;                    ///< forward one byte per write
    std::chrono::milliseconds delay{ 0 };  ///< before each write (a piece), after the last one
    action after = action::none;
    std::size_t after_bytes = 0;  ///< 0: the action comes as soon as the server connection is up
  };

  /// One connection's faults, one per direction.
  struct connection_faults {
    fault to_server{};  ///< what the client sends
    fault to_client{};  ///< what the server sends
  };

  /// The target and the faults.
  struct options {
    unsigned target_port = 0;  ///< on 127.0.0.1
    fault to_server{};         ///< what the client sends
    fault to_client{};         ///< what the server sends
    /// More pairs, taken in turn with the first: connection i (in accept order, from 0) gets
    /// pair i mod (1 + then.size()), pair 0 being to_server and to_client.
    std::vector<connection_faults> then{};
  };

  /// What the proxy has done so far (each figure only grows).
  struct statistics {
    std::uint64_t accepted = 0;          ///< connections accepted from clients
    std::uint64_t bytes_to_server = 0;   ///< forwarded client → server
    std::uint64_t bytes_to_client = 0;   ///< forwarded server → client
    std::uint64_t writes_to_server = 0;  ///< pieces: successful writes client → server
    std::uint64_t writes_to_client = 0;  ///< pieces: successful writes server → client
    std::uint64_t resets = 0;            ///< connections reset by a fault
    std::uint64_t half_closes = 0;       ///< directions half-closed by a fault
    std::uint64_t stalls = 0;            ///< directions stalled by a fault
    /// Connections whose server ended its side (end of stream or reset), seen while relaying
    /// or, behind a stall, by watching the socket without reading it.
    std::uint64_t server_ends = 0;
    /// Connections closed before stop(): both directions ended, a reset (by a fault or passed
    /// on from one side to the other), or the server refused.
    std::uint64_t closed = 0;
  };

  /// Listens and starts the proxy's thread. Throws std::system_error when it cannot.
  explicit chaos_proxy(options settings);
  /// stop().
  ~chaos_proxy();
  chaos_proxy(const chaos_proxy&) = delete;
  chaos_proxy& operator=(const chaos_proxy&) = delete;

  /// The port it listens on, on 127.0.0.1.
  [[nodiscard]] unsigned port() const noexcept { return port_; }

  /// The figures as of the end of the proxy's last round.
  [[nodiscard]] statistics stats() const;

  /// Waits up to `limit` until `done(stats())` holds (checked after each of the proxy's
  /// rounds); returns whether it did.
  [[nodiscard]] bool wait_until(const std::function<bool(const statistics&)>& done,
                                std::chrono::milliseconds limit) const;

  /// Stops the thread (it wakes at once, at worst within its 200 ms poll cap) and closes every
  /// socket; a stalled connection's peers then see its end. Idempotent.
  void stop();

 private:
  struct connection;  // one client and its server connection (see the .cpp)

  void run();
  [[nodiscard]] bool wait(std::vector<::pollfd>& polled) const;
  void relay_all(const std::vector<::pollfd>& polled);
  void accept_clients();
  [[nodiscard]] int poll_timeout() const;
  void publish();

  const unsigned target_port_;
  const std::vector<connection_faults> in_turn_;  // options' pairs; connection i gets i mod size
  int listener_ = -1;
  int wake_read_ = -1;  // a pipe: stop() writes a byte so that poll() returns
  int wake_write_ = -1;
  unsigned port_ = 0;

  // The proxy thread's own.
  std::vector<std::unique_ptr<connection>> connections_;
  statistics counted_;
  bool accept_failed_ = false;  // the last accept failed: the next poll leaves the listener out

  mutable std::mutex mutex_;
  mutable std::condition_variable published_changed_;
  statistics published_;  // a copy of counted_ after each round; guarded by mutex_

  std::atomic<bool> stopping_{ false };  // set by stop(); read by the proxy's thread
  std::thread thread_;
};

}  // namespace cyan::test
