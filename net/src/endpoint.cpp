#include "cyan/net/endpoint.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/un.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>

#include "cyan/common/detail/escape.h"

namespace cyan::net {
namespace {

constexpr std::size_t kPathOffset = offsetof(::sockaddr_un, sun_path);
constexpr std::size_t kPathCapacity = sizeof(::sockaddr_un::sun_path);
constexpr std::string_view kUnixPrefix = "unix:";

static_assert(sizeof(::sockaddr_in) <= sizeof(::sockaddr_storage));
static_assert(sizeof(::sockaddr_in6) <= sizeof(::sockaddr_storage));
static_assert(sizeof(::sockaddr_un) <= sizeof(::sockaddr_storage));

// The sockets API's idiom: a sockaddr is read as its family's own struct.
const ::sockaddr_in& as_v4(const ::sockaddr* address) noexcept {
  return *reinterpret_cast<const ::sockaddr_in*>(address);
}
const ::sockaddr_in6& as_v6(const ::sockaddr* address) noexcept {
  return *reinterpret_cast<const ::sockaddr_in6*>(address);
}
const ::sockaddr_un& as_unix(const ::sockaddr* address) noexcept {
  return *reinterpret_cast<const ::sockaddr_un*>(address);
}

[[noreturn]] void throw_malformed(std::string_view text) {
  throw std::invalid_argument("cyan::net::endpoint: malformed endpoint " +
                              cyan::detail::quoted(text));
}

std::optional<std::uint32_t> parse_decimal(std::string_view digits) {
  // For an unsigned type from_chars takes no sign and no space; it must use up every character,
  // so trailing junk is refused too.
  std::uint32_t value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || end != digits.data() + digits.size()) {
    return std::nullopt;
  }
  return value;
}

std::optional<std::uint16_t> parse_port(std::string_view digits) {
  const auto value = parse_decimal(digits);
  if (!value || *value > 0xffff) {
    return std::nullopt;
  }
  return static_cast<std::uint16_t>(*value);
}

// A zone is an interface name ("lo") or its index ("1").
std::optional<std::uint32_t> parse_zone(std::string_view zone) {
  if (const auto index = parse_decimal(zone)) {
    return index;
  }
  const std::uint32_t index = ::if_nametoindex(std::string(zone).c_str());
  if (index == 0) {
    return std::nullopt;
  }
  return index;
}

std::string zone_to_string(std::uint32_t scope_id) {
  char name[IF_NAMESIZE];
  if (::if_indextoname(scope_id, name) != nullptr) {
    return name;
  }
  return std::to_string(scope_id);
}

// An abstract name's bytes as text (to_string()): a NUL, which the kernel takes anywhere in the
// name but parse() refuses in any text, is `\0`, so a backslash is `\\`; every other byte is
// itself. So every endpoint's text parses back to it.
void append_abstract_text(std::string& out, std::string_view name) {
  for (const char c : name) {
    if (c == '\0' || c == '\\') {
      out += '\\';
    }
    out += c == '\0' ? '0' : c;
  }
}

// The reverse, for parse(): `\0` is a NUL, `\\` a backslash, and a backslash before any other
// byte stands for itself (as a name written by hand means it).
std::string abstract_name_of(std::string_view text) {
  std::string name;
  name.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char next = i + 1 < text.size() ? text[i + 1] : '\0';
    if (text[i] == '\\' && (next == '0' || next == '\\')) {
      name += next == '0' ? '\0' : '\\';
      ++i;
    } else {
      name += text[i];
    }
  }
  return name;
}

// Fills `out` (zeroed) with the Unix-domain address of `path` ('@' first: the abstract name's
// bytes); returns its size, or 0 when the path is empty, does not fit sun_path or is a path
// name with a NUL (which would end it early; an abstract name's size says where it ends).
::socklen_t fill_unix(std::string_view path, ::sockaddr_storage& out) noexcept {
  auto& address = reinterpret_cast<::sockaddr_un&>(out);
  address.sun_family = AF_UNIX;
  if (path.starts_with('@')) {
    // Abstract: a '\0' then the name's bytes, no terminator; the size says where it ends.
    const std::string_view name = path.substr(1);
    if (name.empty() || name.size() > kPathCapacity - 1) {
      return 0;
    }
    std::memcpy(address.sun_path + 1, name.data(), name.size());
    return static_cast<::socklen_t>(kPathOffset + 1 + name.size());
  }
  // A path name keeps its terminating '\0' inside sun_path, as other programs expect.
  if (path.empty() || path.size() > kPathCapacity - 1 ||
      path.find('\0') != std::string_view::npos) {
    return 0;
  }
  std::memcpy(address.sun_path, path.data(), path.size());
  return static_cast<::socklen_t>(kPathOffset + path.size() + 1);
}

::socklen_t fill_v4(std::string_view text, ::sockaddr_storage& out) {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos) {
    return 0;
  }
  const auto port = parse_port(text.substr(colon + 1));
  auto& address = reinterpret_cast<::sockaddr_in&>(out);
  if (!port ||
      ::inet_pton(AF_INET, std::string(text.substr(0, colon)).c_str(), &address.sin_addr) != 1) {
    return 0;
  }
  address.sin_family = AF_INET;
  address.sin_port = htons(*port);
  return sizeof(::sockaddr_in);
}

// `text` is "[address%zone]:port" with the zone optional.
::socklen_t fill_v6(std::string_view text, ::sockaddr_storage& out) {
  const auto close = text.find("]:");
  if (close == std::string_view::npos) {
    return 0;
  }
  const auto port = parse_port(text.substr(close + 2));
  std::string_view host = text.substr(1, close - 1);
  std::optional<std::uint32_t> scope_id = 0;
  if (const auto percent = host.find('%'); percent != std::string_view::npos) {
    scope_id = parse_zone(host.substr(percent + 1));
    host = host.substr(0, percent);
  }
  auto& address = reinterpret_cast<::sockaddr_in6&>(out);
  if (!port || !scope_id ||
      ::inet_pton(AF_INET6, std::string(host).c_str(), &address.sin6_addr) != 1) {
    return 0;
  }
  address.sin6_family = AF_INET6;
  address.sin6_port = htons(*port);
  address.sin6_scope_id = *scope_id;
  return sizeof(::sockaddr_in6);
}

// The size of a kernel-filled AF_UNIX address, with a path name's '\0' counted exactly once
// (the kernel reports it or not depending on how the socket was bound).
::socklen_t unix_size(const ::sockaddr_un& address, ::socklen_t size) noexcept {
  if (size <= kPathOffset || address.sun_path[0] == '\0') {
    return size;
  }
  const std::size_t bytes = size - kPathOffset;
  const std::size_t length = ::strnlen(address.sun_path, bytes);
  return static_cast<::socklen_t>(std::min(kPathOffset + length + 1, sizeof(::sockaddr_un)));
}

// What operator== compares, in the order operator<=> compares it. `bytes` points into the
// endpoint: the address, or sun_path's bytes (so an abstract "\0x" differs from a path "@x").
struct comparison_key {
  int family;
  std::string_view bytes;
  std::uint16_t port;
  std::uint32_t scope_id;

  friend auto operator<=>(const comparison_key&, const comparison_key&) = default;
};

comparison_key key_of(const endpoint& e) noexcept {
  switch (e.family()) {
    case AF_INET: {
      const auto& address = as_v4(e.data()).sin_addr;
      return { AF_INET, { reinterpret_cast<const char*>(&address), sizeof(address) }, e.port(), 0 };
    }
    case AF_INET6: {
      const auto& v6 = as_v6(e.data());
      return { AF_INET6,
               { reinterpret_cast<const char*>(&v6.sin6_addr), sizeof(v6.sin6_addr) },
               e.port(),
               v6.sin6_scope_id };
    }
    default:
      return { AF_UNIX, { as_unix(e.data()).sun_path, e.size() - kPathOffset }, 0, 0 };
  }
}

::sockaddr_in make_v4(::in_addr_t host_order_address, std::uint16_t port) noexcept {
  ::sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(host_order_address);
  address.sin_port = htons(port);
  return address;
}

::sockaddr_in6 make_v6(const ::in6_addr& host, std::uint16_t port) noexcept {
  ::sockaddr_in6 address{};
  address.sin6_family = AF_INET6;
  address.sin6_addr = host;
  address.sin6_port = htons(port);
  return address;
}

// from_sockaddr() of an address that is valid by construction, so it does not throw.
template <typename Address>
endpoint endpoint_of(const Address& address) noexcept {
  return endpoint::from_sockaddr(reinterpret_cast<const ::sockaddr*>(&address), sizeof(address));
}

}  // namespace

endpoint::endpoint() noexcept : storage_{}, size_(sizeof(::sockaddr_in)) {
  storage_.ss_family = AF_INET;
}

endpoint endpoint::parse(std::string_view text) {
  ::sockaddr_storage address{};
  ::socklen_t size = 0;
  // inet_pton() and if_nametoindex() read a C string, which a NUL would end early:
  // "127.0.0.1\0evil:80" would pass for 127.0.0.1:80.
  if (text.find('\0') != std::string_view::npos) {
    throw_malformed(text);
  }
  if (text.starts_with(std::string(kUnixPrefix) + '@')) {
    size = fill_unix('@' + abstract_name_of(text.substr(kUnixPrefix.size() + 1)), address);
  } else if (text.starts_with(kUnixPrefix)) {
    size = fill_unix(text.substr(kUnixPrefix.size()), address);
  } else if (text.starts_with('[')) {
    size = fill_v6(text, address);
  } else {
    size = fill_v4(text, address);
  }
  if (size == 0) {
    throw_malformed(text);
  }
  return from_sockaddr(reinterpret_cast<const ::sockaddr*>(&address), size);
}

endpoint endpoint::loopback_v4(std::uint16_t port) noexcept {
  return endpoint_of(make_v4(INADDR_LOOPBACK, port));
}

endpoint endpoint::loopback_v6(std::uint16_t port) noexcept {
  return endpoint_of(make_v6(in6addr_loopback, port));
}

endpoint endpoint::any_v4(std::uint16_t port) noexcept {
  return endpoint_of(make_v4(INADDR_ANY, port));
}

endpoint endpoint::any_v6(std::uint16_t port) noexcept {
  return endpoint_of(make_v6(in6addr_any, port));
}

endpoint endpoint::unix_socket(std::string_view path) {
  ::sockaddr_storage address{};
  const ::socklen_t size = fill_unix(path, address);
  if (size == 0) {
    throw std::invalid_argument("cyan::net::endpoint: bad Unix-domain path " +
                                cyan::detail::quoted(path) + " (empty, longer than " +
                                std::to_string(kPathCapacity - 1) +
                                " bytes, or a path name with a NUL)");
  }
  return from_sockaddr(reinterpret_cast<const ::sockaddr*>(&address), size);
}

endpoint endpoint::from_sockaddr(const ::sockaddr* address, ::socklen_t size) {
  if (address == nullptr || size < sizeof(::sa_family_t)) {
    throw std::invalid_argument("cyan::net::endpoint: no address family in " +
                                std::to_string(size) + " bytes");
  }
  const bool fits =
      (address->sa_family == AF_INET && size == sizeof(::sockaddr_in)) ||
      (address->sa_family == AF_INET6 && size == sizeof(::sockaddr_in6)) ||
      (address->sa_family == AF_UNIX && size >= kPathOffset && size <= sizeof(::sockaddr_un));
  if (!fits) {
    throw std::invalid_argument("cyan::net::endpoint: " + std::to_string(size) +
                                " bytes are no address of family " +
                                std::to_string(address->sa_family));
  }
  endpoint copy;  // zeroed, so bytes past the address compare and hash alike
  copy.size_ = address->sa_family == AF_UNIX ? unix_size(as_unix(address), size) : size;
  std::memcpy(&copy.storage_, address, std::min(size, copy.size_));
  return copy;
}

const ::sockaddr* endpoint::data() const noexcept {
  return reinterpret_cast<const ::sockaddr*>(&storage_);
}

::sockaddr* endpoint::storage() noexcept {
  return reinterpret_cast<::sockaddr*>(&storage_);
}

int endpoint::family() const noexcept {
  return storage_.ss_family;
}

bool endpoint::is_v4() const noexcept {
  return family() == AF_INET;
}

bool endpoint::is_v6() const noexcept {
  return family() == AF_INET6;
}

bool endpoint::is_unix() const noexcept {
  return family() == AF_UNIX;
}

std::uint16_t endpoint::port() const noexcept {
  switch (family()) {
    case AF_INET:
      return ntohs(as_v4(data()).sin_port);
    case AF_INET6:
      return ntohs(as_v6(data()).sin6_port);
    default:
      return 0;
  }
}

endpoint endpoint::with_port(std::uint16_t port) const {
  endpoint copy = *this;
  switch (family()) {
    case AF_INET:
      reinterpret_cast<::sockaddr_in&>(copy.storage_).sin_port = htons(port);
      return copy;
    case AF_INET6:
      reinterpret_cast<::sockaddr_in6&>(copy.storage_).sin6_port = htons(port);
      return copy;
    default:
      throw std::logic_error("cyan::net::endpoint: with_port() on Unix-domain endpoint \"" +
                             to_string() + "\"");
  }
}

std::string endpoint::address() const {
  char text[INET6_ADDRSTRLEN];
  switch (family()) {
    case AF_INET:
      return ::inet_ntop(AF_INET, &as_v4(data()).sin_addr, text, sizeof(text));
    case AF_INET6: {
      const auto& v6 = as_v6(data());
      std::string result = ::inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof(text));
      if (v6.sin6_scope_id != 0) {
        result += '%' + zone_to_string(v6.sin6_scope_id);
      }
      return result;
    }
    default:
      return path();
  }
}

std::string endpoint::path() const {
  if (!is_unix() || size_ <= kPathOffset) {
    return {};
  }
  const char* bytes = as_unix(data()).sun_path;
  const std::size_t count = size_ - kPathOffset;
  if (bytes[0] == '\0') {
    return '@' + std::string(bytes + 1, count - 1);
  }
  return std::string(bytes, ::strnlen(bytes, count));
}

std::string endpoint::to_string() const {
  switch (family()) {
    case AF_INET:
      return address() + ':' + std::to_string(port());
    case AF_INET6:
      return '[' + address() + "]:" + std::to_string(port());
    default: {
      std::string text(kUnixPrefix);
      const std::string name = path();
      if (name.starts_with('@')) {
        text += '@';
        append_abstract_text(text, std::string_view(name).substr(1));
      } else {
        text += name;
      }
      return text;
    }
  }
}

bool operator==(const endpoint& a, const endpoint& b) noexcept {
  return (a <=> b) == 0;
}

std::strong_ordering operator<=>(const endpoint& a, const endpoint& b) noexcept {
  return key_of(a) <=> key_of(b);
}

std::size_t endpoint::hash() const noexcept {
  const comparison_key key = key_of(*this);
  // Boost's hash_combine mixing step: spreads each part over the whole word.
  std::size_t seed = std::hash<std::string_view>{}(key.bytes);
  for (const std::size_t part :
       { std::size_t(key.family), std::size_t(key.port), std::size_t(key.scope_id) }) {
    seed ^= part + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2);
  }
  return seed;
}

std::ostream& operator<<(std::ostream& out, const endpoint& e) {
  return out << e.to_string();
}

}  // namespace cyan::net
