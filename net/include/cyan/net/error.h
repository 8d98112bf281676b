#pragma once

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

}  // namespace cyan::net

template <>
struct std::is_error_code_enum<cyan::net::error> : std::true_type {};
