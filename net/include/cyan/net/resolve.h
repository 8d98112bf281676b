#pragma once

#include <string>
#include <vector>

#include "cyan/dispatch/task.h"
#include "cyan/net/endpoint.h"

namespace cyan::net {

/// What resolve() looks for.
enum class resolve_flags : unsigned {
  none = 0,
  /// An empty host gives the wildcard addresses (0.0.0.0, ::) for binding instead of loopback.
  passive = 1,
};

/// `co_await resolve(host, service)` looks `host` up (a name, "localhost", or a numeric
/// address) with getaddrinfo() on a thread of the global pool, so the calling loop is never
/// blocked, and returns its stream-socket addresses with the port of `service` (a number such
/// as "8080", or a name from /etc/services such as "http"), in getaddrinfo()'s order, without
/// duplicates. The calling task resumes on its own thread. Throws std::invalid_argument naming
/// both strings (a NUL shown as `\0`), before any lookup, when either holds a NUL or a numeric
/// service is not plain decimal digits from 0 to 65535 (getaddrinfo() would read "99999" as port
/// 34463); std::system_error in resolve_category() (message from gai_strerror(), e.g. "Name or
/// service not known") when the lookup fails, with the errno in std::generic_category() for
/// EAI_SYSTEM.
[[nodiscard]] dispatch::task<std::vector<endpoint>> resolve(
    std::string host, std::string service, resolve_flags flags = resolve_flags::none);

}  // namespace cyan::net
