#include "cyan/net/resolve.h"

#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <system_error>
#include <utility>

#include "cyan/dispatch/async.h"
#include "cyan/net/error.h"

namespace cyan::net {
namespace {

struct addrinfo_deleter {
  void operator()(::addrinfo* list) const noexcept { ::freeaddrinfo(list); }
};
using addrinfo_list = std::unique_ptr<::addrinfo, addrinfo_deleter>;

[[noreturn]] void throw_lookup_error(int rc, int saved_errno, const std::string& host,
                                     const std::string& service) {
  const std::error_code code = rc == EAI_SYSTEM
                                   ? std::error_code(saved_errno, std::generic_category())
                                   : std::error_code(rc, resolve_category());
  throw std::system_error(code, "cyan::net::resolve(\"" + host + "\", \"" + service + "\")");
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

dispatch::task<std::vector<endpoint>> resolve(std::string host, std::string service,
                                              resolve_flags flags) {
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
