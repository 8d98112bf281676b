#pragma once

#include <string>

namespace cyan::net::detail {

/// resolve()'s checks before any lookup (see resolve.h): throws std::invalid_argument naming both
/// strings when either holds a NUL or a service that getaddrinfo() would read as a number is not
/// plain decimal digits from 0 to 65535. Apart for its fuzz target (tests/fuzz). [any thread]
void check_resolve_arguments(const std::string& host, const std::string& service);

}  // namespace cyan::net::detail
