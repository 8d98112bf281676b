#pragma once

#include <cstddef>
#include <string>
#include <system_error>
#include <type_traits>

namespace cyan::net {

/// cyan::net's own error conditions (std::error_code values in net_category()); system call
/// failures carry the errno in std::generic_category() instead.
enum class error {
  /// The peer ended the stream before read_exact() got every byte it asked for.
  end_of_stream = 1,
};

/// The category of cyan::net::error, named "cyan.net". [any thread]
[[nodiscard]] const std::error_category& net_category() noexcept;

/// The category of getaddrinfo()'s EAI_* codes, named "getaddrinfo"; message() is
/// gai_strerror()'s. [any thread]
[[nodiscard]] const std::error_category& resolve_category() noexcept;

[[nodiscard]] inline std::error_code make_error_code(error e) noexcept {
  return { static_cast<int>(e), net_category() };
}

/// What read_exact() and write_all() throw when they fail: a std::system_error with the same
/// code (timed_out, operation_canceled, end_of_stream, ECONNRESET, ...) that also tells how many
/// bytes moved before the failure, so that a caller can go on where the operation stopped.
///
/// Its what(), as every cyan::net failure's, is "<the call the user made>: <the reason>", the
/// reason once: "cyan::net::tls_stream::write_all: Broken pipe". A layer over another
/// (tls_stream over its tcp_socket) rethrows the inner failure's code with its own call's name
/// as `what`, never the inner what().
class transfer_error : public std::system_error {
 public:
  /// `what` is the call's name ("cyan::net::tls_stream::read_exact"); std::system_error adds
  /// ": " and the code's message.
  transfer_error(std::error_code code, const std::string& what, std::size_t bytes_transferred)
      : std::system_error(code, what), bytes_transferred_(bytes_transferred) {}

  /// The bytes read into the start of the buffer (read_exact) or sent from the start of the
  /// buffers, in order (write_all), before the failure; 0 when none moved. [any thread]
  [[nodiscard]] std::size_t bytes_transferred() const noexcept { return bytes_transferred_; }

 private:
  std::size_t bytes_transferred_;
};

}  // namespace cyan::net

template <>
struct std::is_error_code_enum<cyan::net::error> : std::true_type {};
