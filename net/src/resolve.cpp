#include "cyan/net/resolve.h"

#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <utility>

#include "cyan/common/detail/escape.h"
#include "cyan/dispatch/async.h"
#include "cyan/net/detail/resolve_arguments.h"
#include "cyan/net/error.h"

namespace cyan::net {
namespace {

struct addrinfo_deleter {
  void operator()(::addrinfo* list) const noexcept { ::freeaddrinfo(list); }
};
using addrinfo_list = std::unique_ptr<::addrinfo, addrinfo_deleter>;

// `cyan::net::resolve("host", "service")`, for messages.
std::string call_text(std::string_view host, std::string_view service) {
  return "cyan::net::resolve(" + cyan::detail::quoted(host) + ", " + cyan::detail::quoted(service) +
         ")";
}

[[noreturn]] void throw_lookup_error(int rc, int saved_errno, const std::string& host,
                                     const std::string& service) {
  const std::error_code code = rc == EAI_SYSTEM
                                   ? std::error_code(saved_errno, std::generic_category())
                                   : std::error_code(rc, resolve_category());
  throw std::system_error(code, call_text(host, service));
}

// Whether glibc's getaddrinfo() takes `service` for a port number: when strtoul() reads all of
// it, leading white space and a sign included.
bool read_as_number(std::string_view service) noexcept {
  const auto start = service.find_first_not_of(" \t\n\v\f\r");
  if (start == std::string_view::npos) {
    return false;
  }
  service.remove_prefix(start);
  if (service.starts_with('+') || service.starts_with('-')) {
    service.remove_prefix(1);
  }
  return !service.empty() && service.find_first_not_of("0123456789") == std::string_view::npos;
}

// The blocking part, run on a pool thread.
std::vector<endpoint> lookup(const std::string& host, const std::string& service,
                             resolve_flags flags) {
  ::addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  // No AI_ADDRCONFIG: it hides ::1 and 127.0.0.1 on a host whose only interface is loopback.
  const bool passive =
      (static_cast<unsigned>(flags) & static_cast<unsigned>(resolve_flags::passive)) != 0;
  if (passive && host.empty()) {
    hints.ai_flags = AI_PASSIVE;
  }
  ::addrinfo* first = nullptr;
  // A null host is what getaddrinfo() knows as "loopback" (or, passive, "any"); "" is no name.
  const int rc =
      ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &first);
  if (rc != 0) {
    throw_lookup_error(rc, errno, host, service);
  }
  const addrinfo_list list(first);
  std::vector<endpoint> found;
  for (const ::addrinfo* entry = list.get(); entry != nullptr; entry = entry->ai_next) {
    endpoint address = endpoint::from_sockaddr(entry->ai_addr, entry->ai_addrlen);
    // A handful of entries at most, so a linear search beats a set.
    if (std::find(found.begin(), found.end(), address) == found.end()) {
      found.push_back(address);
    }
  }
  return found;
}

}  // namespace

namespace detail {

// Refuses what getaddrinfo() would misread. It reads host and service as C strings, so a NUL
// would cut a name short ("localhost\0evil.example" is "localhost"), and it keeps only the low
// 16 bits of a numeric service ("99999" is port 34463): a number must be plain digits, 0..65535.
void check_resolve_arguments(const std::string& host, const std::string& service) {
  if (host.find('\0') != std::string::npos || service.find('\0') != std::string::npos) {
    throw std::invalid_argument(call_text(host, service) + ": a NUL in the host or service");
  }
  if (!read_as_number(service)) {
    return;
  }
  std::uint32_t port = 0;
  const char* end = service.data() + service.size();
  const auto [stop, ec] = std::from_chars(service.data(), end, port);
  if (ec != std::errc() || stop != end || port > 0xffff) {
    throw std::invalid_argument(call_text(host, service) +
                                ": the port is not a decimal number from 0 to 65535");
  }
}

}  // namespace detail

dispatch::task<std::vector<endpoint>> resolve(std::string host, std::string service,
                                              resolve_flags flags) {
  detail::check_resolve_arguments(host, service);
  // The closure owns its strings: a stop request (or the task's destruction) may leave the
  // lookup running after this frame is gone. It is a named local because GCC 12 miscompiles a
  // capturing lambda temporary inside a co_await expression (a moved std::string capture is
  // freed from the frame's inline buffer; see tremotesf2 PR #551).
  auto job = [host = std::move(host), service = std::move(service), flags] {
    return lookup(host, service, flags);
  };
  co_return co_await dispatch::async_awaitable(std::move(job));
}

}  // namespace cyan::net
