#pragma once

// TLS over cyan's stream sockets (OpenSSL 3): tls_context (certificates, trust, ALPN, SNI,
// reload, client session resumption) and tls_stream (the handshake, then reads and writes with
// the rules of tcp_socket). OpenSSL works on memory only; the bytes move through the socket's
// own operations, so a tls_stream works on both network backends.

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

#include "cyan/dispatch/task.h"
#include "cyan/net/detail/socket_core.h"
#include "cyan/net/tcp.h"

namespace cyan::net {

/// cyan's own TLS conditions, in tls_category(). Every other code in that category is an
/// OpenSSL error code (ERR_get_error()), whose message() is OpenSSL's reason text.
enum class tls_error {
  /// The peer ended the TCP stream without a close_notify: what arrived may be cut short
  /// (a truncation attack, or a peer that crashed). A clean end reads as 0 bytes instead.
  truncated = 1,
  /// The peer's certificate did not verify; the exception's what() names the reason
  /// ("certificate has expired", "unable to get local issuer certificate", "hostname
  /// mismatch", ...).
  certificate_verify_failed = 2,
};

/// The category of TLS failures, named "cyan.tls". [any thread]
[[nodiscard]] const std::error_category& tls_category() noexcept;

[[nodiscard]] inline std::error_code make_error_code(tls_error e) noexcept {
  return { static_cast<int>(e), tls_category() };
}

/// The lowest protocol version a context accepts.
enum class tls_version { tls1_2, tls1_3 };

class tls_stream;

namespace detail {
struct tls_context_state;
struct tls_stream_state;
/// Whether `stream` holds input no read has taken yet: ciphertext it took from the socket and
/// has not decrypted (a record that came with the handshake, or part of one), or decrypted
/// bytes not yet read. For tcp_server's drain. [the stream's thread]
[[nodiscard]] bool holds_unread_input(const tls_stream& stream) noexcept;
}  // namespace detail

/// What TLS connections use: the certificates and keys (a server's), the trust (a client's),
/// the protocol versions and the ALPN protocols. A cheap handle: copies share one context.
/// Connections started with it keep what they started with, so a context may be reloaded, or
/// destroyed, while they live. [any thread; reload() and add_certificate() may race with
/// handshakes on other threads]
///
/// Errors are std::system_error in tls_category() with OpenSSL's reason text, or in
/// std::generic_category() for a file that cannot be read.
class tls_context {
 public:
  /// A server's settings.
  struct server_options {
    /// PEM: the certificate, then the intermediates up to (not including) the root.
    std::filesystem::path certificate_chain_file{};
    /// PEM: the certificate's private key (unencrypted).
    std::filesystem::path private_key_file{};
    /// ALPN protocols in the server's order of preference; empty: no ALPN. A client that
    /// offers none of them is served without ALPN.
    std::vector<std::string> alpn{};
    tls_version min_version = tls_version::tls1_2;
    /// Ask clients for a certificate signed by a CA in this PEM file (mutual TLS); empty: do
    /// not ask.
    std::filesystem::path client_ca_file{};
    /// Session tickets (TLS 1.3 and 1.2): a client that comes back resumes without the
    /// certificate exchange. false: no tickets and no session cache, every handshake full.
    bool session_tickets = true;
  };

  /// A client's settings.
  struct client_options {
    /// PEM file of trusted CA certificates; with ca_path empty too, the system's trust store.
    std::filesystem::path ca_file{};
    /// A directory of hashed CA certificates (c_rehash / openssl rehash).
    std::filesystem::path ca_path{};
    /// Verify the server's certificate chain and its host name (the server_name given to
    /// tls_stream::connect). Turn off only for tests against self-signed servers.
    bool verify_peer = true;
    /// ALPN protocols to offer, in order of preference; empty: no ALPN.
    std::vector<std::string> alpn{};
    tls_version min_version = tls_version::tls1_2;
    /// A client certificate and key (PEM), for servers that ask; empty: none.
    std::filesystem::path certificate_chain_file{};
    std::filesystem::path private_key_file{};
    /// Keep the last session per server name and resume it on the next connect().
    bool resume_sessions = true;
  };

  /// An empty context (no connection can use it).
  tls_context() noexcept = default;

  /// A server context. Reads the files now; throws std::system_error when they cannot be read,
  /// the key does not match the certificate, or an ALPN name is empty or over 255 bytes.
  [[nodiscard]] static tls_context server(const server_options& options);
  /// A client context. Throws std::system_error when a CA file or a client certificate cannot
  /// be read.
  [[nodiscard]] static tls_context client(const client_options& options);

  /// A server context: serve `server_name` (a host name as clients send it in SNI, matched
  /// without regard to case; `*.example.com` matches one label) with this certificate and key;
  /// other names and clients without SNI get the options' certificate. Later handshakes see it.
  /// Throws std::system_error as server(), and std::logic_error on a client context.
  void add_certificate(std::string server_name, std::filesystem::path certificate_chain_file,
                       std::filesystem::path private_key_file);

  /// Reads every certificate, key and CA file again: handshakes that start afterwards use them;
  /// connections already made are not affected; session tickets issued before stay valid. A
  /// reload that fails (a file missing, a key that does not match) throws std::system_error
  /// and keeps what was there.
  void reload();

  [[nodiscard]] bool is_server() const noexcept;
  [[nodiscard]] explicit operator bool() const noexcept { return state_ != nullptr; }

 private:
  friend struct detail::tls_stream_state;
  explicit tls_context(std::shared_ptr<detail::tls_context_state> state) noexcept
      : state_(std::move(state)) {}
  std::shared_ptr<detail::tls_context_state> state_;
};

/// A TLS connection over a tcp_socket (TCP or Unix-domain), after its handshake.
///
/// Reads and writes follow tcp_socket's rules: awaited in a task on the socket's thread, one
/// read and one write may be pending at once (a second read or write throws std::logic_error),
/// an optional time limit as the last argument (the whole operation's: every wait inside it
/// counts against it), the task's stop token ends a pending operation with
/// std::errc::operation_canceled, and read_exact / write_all fail with transfer_error counting
/// the bytes moved. A read or write that times out or is cancelled leaves the stream usable.
///
/// The ends of a stream: read_some() returns 0 once the peer sent close_notify (a clean end);
/// a peer that ends the TCP stream without it makes reads fail with tls_error::truncated.
/// shutdown() sends close_notify. Errors: std::system_error in tls_category() (OpenSSL's
/// reason), in std::generic_category() for the socket's (ECONNRESET, ...), named after the
/// tls_stream call ("cyan::net::tls_stream::write_all: Broken pipe"), not the socket's.
class tls_stream {
 public:
  /// Not open.
  tls_stream() noexcept;
  tls_stream(tls_stream&& other) noexcept;
  tls_stream& operator=(tls_stream&& other) noexcept;
  /// Closes the socket (without close_notify: call shutdown() first for a clean end).
  ~tls_stream();

  /// `co_await tls_stream::accept(std::move(socket), context[, limit])`: the server's
  /// handshake on an accepted socket. Throws std::system_error: tls_category() for a client
  /// that does not speak TLS or that the context cannot serve (no common version or cipher,
  /// ...), certificate_verify_failed for a client certificate that does not verify,
  /// end_of_stream when the client leaves, timed_out, operation_canceled.
  [[nodiscard]] static dispatch::task<tls_stream> accept(tcp_socket&& socket,
                                                         const tls_context& context) {
    return accept_within(std::move(socket), context, detail::kNoTimeout);
  }
  template <typename Rep, typename Period>
  [[nodiscard]] static dispatch::task<tls_stream> accept(tcp_socket&& socket,
                                                         const tls_context& context,
                                                         std::chrono::duration<Rep, Period> limit) {
    return accept_within(std::move(socket), context, detail::to_timeout(limit));
  }

  /// `co_await tls_stream::connect(std::move(socket), context, "example.com"[, limit])`: the
  /// client's handshake on a connected socket. `server_name` goes out as SNI (unless it is an
  /// IP address) and, with verify_peer, the certificate must be valid for it (a host name or
  /// an IP address). Resumes the last session with that server name when the context keeps
  /// one. Throws std::system_error: certificate_verify_failed (what() names the reason),
  /// tls_category() for other handshake failures, end_of_stream, timed_out,
  /// operation_canceled.
  [[nodiscard]] static dispatch::task<tls_stream> connect(tcp_socket&& socket,
                                                          const tls_context& context,
                                                          std::string_view server_name) {
    return connect_within(std::move(socket), context, std::string(server_name), detail::kNoTimeout);
  }
  template <typename Rep, typename Period>
  [[nodiscard]] static dispatch::task<tls_stream> connect(
      tcp_socket&& socket, const tls_context& context, std::string_view server_name,
      std::chrono::duration<Rep, Period> limit) {
    return connect_within(std::move(socket), context, std::string(server_name),
                          detail::to_timeout(limit));
  }

  /// `co_await s.read_some(buf[, limit])`: reads what has been decrypted, up to buf.size()
  /// bytes, waiting for at least one; returns the count, 0 after the peer's close_notify (or
  /// for an empty buffer). tls_error::truncated when the TCP stream ends without it.
  [[nodiscard]] dispatch::task<std::size_t> read_some(std::span<std::byte> buffer) {
    return read_some_within(buffer, detail::kNoTimeout);
  }
  template <typename Rep, typename Period>
  [[nodiscard]] dispatch::task<std::size_t> read_some(std::span<std::byte> buffer,
                                                      std::chrono::duration<Rep, Period> limit) {
    return read_some_within(buffer, detail::to_timeout(limit));
  }

  /// `co_await s.read_exact(buf[, limit])`: reads exactly buf.size() bytes; fails with
  /// transfer_error (end_of_stream after a close_notify, truncated, timed_out, ...) counting
  /// the bytes read into the start of `buf`.
  [[nodiscard]] dispatch::task<> read_exact(std::span<std::byte> buffer) {
    return read_exact_within(buffer, detail::kNoTimeout);
  }
  template <typename Rep, typename Period>
  [[nodiscard]] dispatch::task<> read_exact(std::span<std::byte> buffer,
                                            std::chrono::duration<Rep, Period> limit) {
    return read_exact_within(buffer, detail::to_timeout(limit));
  }

  /// `co_await s.write_some(buf[, limit])`: encrypts up to 64 KiB of `buf`, sends the records
  /// and returns the count.
  [[nodiscard]] dispatch::task<std::size_t> write_some(std::span<const std::byte> buffer) {
    return write_some_within(buffer, detail::kNoTimeout);
  }
  template <typename Rep, typename Period>
  [[nodiscard]] dispatch::task<std::size_t> write_some(std::span<const std::byte> buffer,
                                                       std::chrono::duration<Rep, Period> limit) {
    return write_some_within(buffer, detail::to_timeout(limit));
  }

  /// `co_await s.write_all(buf[, limit])`, or of several buffers in order
  /// (`std::array{ buffer(head), buffer(body) }`, gathered into full records): encrypts and
  /// sends every byte. Fails with transfer_error whose bytes_transferred() counts the bytes
  /// taken into records, 64 KiB at a time: records that were not yet on the socket when the
  /// operation failed (a timeout, a stop) go out first with the next write or shutdown(), so
  /// a caller that goes on from that count repeats nothing and loses nothing.
  [[nodiscard]] dispatch::task<> write_all(std::span<const std::byte> buffer) {
    return write_one_within(buffer, detail::kNoTimeout);
  }
  template <typename Rep, typename Period>
  [[nodiscard]] dispatch::task<> write_all(std::span<const std::byte> buffer,
                                           std::chrono::duration<Rep, Period> limit) {
    return write_one_within(buffer, detail::to_timeout(limit));
  }
  [[nodiscard]] dispatch::task<> write_all(std::span<const std::span<const std::byte>> buffers) {
    return write_all_within(gather(buffers), detail::kNoTimeout);
  }
  [[nodiscard]] dispatch::task<> write_all(std::span<const std::span<std::byte>> buffers) {
    return write_all_within(gather(buffers), detail::kNoTimeout);
  }
  template <typename Rep, typename Period>
  [[nodiscard]] dispatch::task<> write_all(std::span<const std::span<const std::byte>> buffers,
                                           std::chrono::duration<Rep, Period> limit) {
    return write_all_within(gather(buffers), detail::to_timeout(limit));
  }
  template <typename Rep, typename Period>
  [[nodiscard]] dispatch::task<> write_all(std::span<const std::span<std::byte>> buffers,
                                           std::chrono::duration<Rep, Period> limit) {
    return write_all_within(gather(buffers), detail::to_timeout(limit));
  }

  /// `co_await s.shutdown([limit])`: sends close_notify (after any records still queued) and
  /// waits, at most `limit`, for the peer's, dropping the data that comes before it. Returns
  /// true when the peer's close_notify came; false when the limit passed first, the peer ended
  /// the TCP stream without one or the connection failed (the stream is finished either way:
  /// close it). While a read is pending in another task, only sends close_notify (that read
  /// sees the peer's) and returns false. Throws operation_canceled on a stop request, and
  /// std::logic_error while a write is pending. The socket stays open: close() or destroy.
  [[nodiscard]] dispatch::task<bool> shutdown() { return shutdown_within(detail::kNoTimeout); }
  template <typename Rep, typename Period>
  [[nodiscard]] dispatch::task<bool> shutdown(std::chrono::duration<Rep, Period> limit) {
    return shutdown_within(detail::to_timeout(limit));
  }

  /// Closes the socket (no close_notify); pending operations resume with operation_canceled.
  void close() noexcept;
  [[nodiscard]] bool is_open() const noexcept;

  /// The ALPN protocol agreed on ("h2", "http/1.1"), or "" when none was.
  [[nodiscard]] std::string_view alpn_protocol() const noexcept;
  /// The SNI name: the one the client sent (on a server; "" when none), or the one given to
  /// connect() (on a client).
  [[nodiscard]] std::string_view server_name() const noexcept;
  /// The peer certificate's subject in OpenSSL's one-line form ("CN = localhost, O = ..."),
  /// or "" when the peer sent none (a client usually does not).
  [[nodiscard]] std::string peer_certificate_subject() const;
  /// Whether the handshake resumed an earlier session (no certificate exchange).
  [[nodiscard]] bool session_reused() const noexcept;
  /// The negotiated version ("TLSv1.3", "TLSv1.2").
  [[nodiscard]] std::string_view protocol_version() const noexcept;

  /// The TCP connection underneath: for its endpoints, options, and tcp_server::idle(). Its
  /// reads and writes must not be used while the stream is.
  [[nodiscard]] tcp_socket& next_layer() noexcept;
  [[nodiscard]] const tcp_socket& next_layer() const noexcept;

 private:
  friend bool detail::holds_unread_input(const tls_stream& stream) noexcept;
  explicit tls_stream(std::unique_ptr<detail::tls_stream_state> state) noexcept;
  static dispatch::task<tls_stream> accept_within(tcp_socket socket, tls_context context,
                                                  detail::timeout_type limit);
  static dispatch::task<tls_stream> connect_within(tcp_socket socket, tls_context context,
                                                   std::string server_name,
                                                   detail::timeout_type limit);
  dispatch::task<std::size_t> read_some_within(std::span<std::byte> buffer,
                                               detail::timeout_type limit);
  dispatch::task<> read_exact_within(std::span<std::byte> buffer, detail::timeout_type limit);
  dispatch::task<std::size_t> write_some_within(std::span<const std::byte> buffer,
                                                detail::timeout_type limit);
  // The buffers of a gathering write, of const or mutable bytes, read in place.
  struct gather {
    explicit gather(std::span<const std::span<const std::byte>> buffers) noexcept
        : constant(buffers) {}
    explicit gather(std::span<const std::span<std::byte>> buffers) noexcept
        : mutable_bytes(buffers) {}
    [[nodiscard]] std::size_t size() const noexcept {
      return constant.size() + mutable_bytes.size();
    }
    [[nodiscard]] std::span<const std::byte> operator[](std::size_t i) const noexcept {
      return constant.empty() ? std::span<const std::byte>(mutable_bytes[i]) : constant[i];
    }
    std::span<const std::span<const std::byte>> constant;
    std::span<const std::span<std::byte>> mutable_bytes;
  };
  dispatch::task<> write_one_within(std::span<const std::byte> buffer, detail::timeout_type limit);
  dispatch::task<> write_all_within(gather buffers, detail::timeout_type limit);
  dispatch::task<bool> shutdown_within(detail::timeout_type limit);

  std::unique_ptr<detail::tls_stream_state> state_;
};

}  // namespace cyan::net

template <>
struct std::is_error_code_enum<cyan::net::tls_error> : std::true_type {};
