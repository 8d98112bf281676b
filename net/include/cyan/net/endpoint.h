#pragma once

#include <sys/socket.h>

#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>

namespace cyan::net {

/// A socket address: IPv4 (`127.0.0.1:8080`), IPv6 (`[::1]:8080`, with an optional zone:
/// `[fe80::1%lo]:80`) or Unix-domain (`unix:/run/x.sock`; `unix:@name` for Linux's abstract
/// namespace, whose names may hold a NUL: written `\0` in the text, and a backslash `\\`).
/// A plain value: copyable, comparable, hashable. Port 0 means "any free port" when binding.
/// [any thread]
class endpoint {
 public:
  /// 0.0.0.0:0 (IPv4, any address, any port).
  endpoint() noexcept;

  /// Parses the forms above (numeric addresses only: use resolve() for host names). The port is
  /// decimal, 0..65535, and required for IPv4 and IPv6. Throws std::invalid_argument naming the
  /// string (a NUL shown as `\0`) when it is malformed, holds a NUL anywhere, or a Unix path is
  /// empty or longer than sockaddr_un holds. In an abstract name `\0` is a NUL and `\\` a
  /// backslash; a backslash before any other character is itself.
  [[nodiscard]] static endpoint parse(std::string_view text);

  /// 127.0.0.1:port, [::1]:port, 0.0.0.0:port, [::]:port.
  [[nodiscard]] static endpoint loopback_v4(std::uint16_t port = 0) noexcept;
  [[nodiscard]] static endpoint loopback_v6(std::uint16_t port = 0) noexcept;
  [[nodiscard]] static endpoint any_v4(std::uint16_t port = 0) noexcept;
  [[nodiscard]] static endpoint any_v6(std::uint16_t port = 0) noexcept;

  /// A Unix-domain endpoint for `path` (a leading '@' names the abstract namespace: the name's
  /// bytes, a NUL among them allowed, as path() gives them). Throws std::invalid_argument when
  /// the path is empty, too long for sockaddr_un, or a path name that holds a NUL.
  [[nodiscard]] static endpoint unix_socket(std::string_view path);

  /// Copies an address the kernel filled in (accept, getsockname, recvfrom, getaddrinfo).
  /// Throws std::invalid_argument for a family other than AF_INET, AF_INET6 and AF_UNIX, or a
  /// size that does not fit it. An AF_UNIX address with no path (an unnamed socket) gives
  /// `unix:` with an empty path().
  [[nodiscard]] static endpoint from_sockaddr(const ::sockaddr* address, ::socklen_t size);

  /// The address for bind/connect/sendto.
  [[nodiscard]] const ::sockaddr* data() const noexcept;
  [[nodiscard]] ::socklen_t size() const noexcept { return size_; }
  /// AF_INET, AF_INET6 or AF_UNIX.
  [[nodiscard]] int family() const noexcept;

  [[nodiscard]] bool is_v4() const noexcept;
  [[nodiscard]] bool is_v6() const noexcept;
  [[nodiscard]] bool is_unix() const noexcept;

  /// The port (host byte order); 0 for a Unix-domain endpoint.
  [[nodiscard]] std::uint16_t port() const noexcept;
  /// The same address with another port. Throws std::logic_error for a Unix-domain endpoint.
  [[nodiscard]] endpoint with_port(std::uint16_t port) const;
  /// The numeric address without the port (`127.0.0.1`, `::1`, `fe80::1%lo` with its zone) or,
  /// for Unix-domain, the path.
  [[nodiscard]] std::string address() const;
  /// The Unix-domain path ('@' first for the abstract namespace, then the name's bytes as they
  /// are, a NUL included); empty for IP endpoints.
  [[nodiscard]] std::string path() const;

  /// The form parse() reads, which parses back to this endpoint: `127.0.0.1:8080`,
  /// `[::1]:8080`, `unix:/run/x.sock`, `unix:@name` (a NUL in the name as `\0`, a backslash as
  /// `\\`).
  [[nodiscard]] std::string to_string() const;

  /// Equal when family, address, port (and IPv6 zone) or path are equal. The order is by family,
  /// then address bytes, then port, then IPv6 zone (Unix-domain: by sun_path's bytes, so an
  /// abstract name differs from a path spelled the same): a total order for std::map.
  friend bool operator==(const endpoint& a, const endpoint& b) noexcept;
  friend std::strong_ordering operator<=>(const endpoint& a, const endpoint& b) noexcept;

  /// The space (capacity() bytes) for the kernel to fill in, for recvfrom/accept: pass it and
  /// the size the kernel wrote to from_sockaddr() to get the endpoint; size() is not updated.
  [[nodiscard]] ::sockaddr* storage() noexcept;
  [[nodiscard]] static constexpr ::socklen_t capacity() noexcept {
    return sizeof(::sockaddr_storage);
  }

  /// Hash of what operator== compares.
  [[nodiscard]] std::size_t hash() const noexcept;

 private:
  ::sockaddr_storage storage_;
  ::socklen_t size_;
};

/// Writes to_string().
std::ostream& operator<<(std::ostream& out, const endpoint& e);

}  // namespace cyan::net

template <>
struct std::hash<cyan::net::endpoint> {
  std::size_t operator()(const cyan::net::endpoint& e) const noexcept { return e.hash(); }
};
