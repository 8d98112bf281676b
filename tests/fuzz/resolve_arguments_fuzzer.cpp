// resolve()'s checks (detail::check_resolve_arguments) against glibc's own reading of a service,
// with no lookup: getaddrinfo() with AI_NUMERICHOST | AI_NUMERICSERV on 127.0.0.1 reads the
// service as a number the way resolve()'s lookup would (strtoul over all of it) or refuses it.
// The first input byte gives the host's length; the host, then the service, follow. What must
// hold:
//   - a host or service with a NUL is refused;
//   - a service that is accepted and that glibc reads as a number is plain decimal digits whose
//     value is the port glibc gives (no "99999" read as 34463, no "+80" or " 80");
//   - a plain decimal port from 0 to 65535 is never refused (only a NUL or a number that is not
//     one is: glibc itself refuses some of those, e.g. "-2", and misreads others, " 80").

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "cyan/net/detail/resolve_arguments.h"
#include "fuzz_check.h"

namespace {

// The port glibc reads from `service` as a number, or -1 when it does not take it for one.
long glibc_port(const std::string& service) {
  ::addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  ::addrinfo* found = nullptr;
  if (::getaddrinfo("127.0.0.1", service.c_str(), &hints, &found) != 0) {
    return -1;
  }
  const long port = ntohs(reinterpret_cast<const ::sockaddr_in*>(found->ai_addr)->sin_port);
  ::freeaddrinfo(found);
  return port;
}

bool plain_digits(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1 || size > 256) {
    return 0;
  }
  const std::size_t host_size = data[0] < size - 1 ? data[0] : size - 1;
  const std::string host(reinterpret_cast<const char*>(data + 1), host_size);
  const std::string service(reinterpret_cast<const char*>(data + 1 + host_size),
                            size - 1 - host_size);
  const bool nul = host.find('\0') != std::string::npos || service.find('\0') != std::string::npos;
  bool accepted = true;
  try {
    cyan::net::detail::check_resolve_arguments(host, service);
  } catch (const std::invalid_argument&) {
    accepted = false;
  }
  if (nul) {
    CYAN_FUZZ_CHECK(!accepted);
    return 0;
  }
  // glibc reads "" as port 0 (strtoul reads nothing and stops at the end) and "*" as no
  // service (port 0): neither is a number misread.
  const long read = glibc_port(service);
  if (accepted && read >= 0 && !service.empty() && service != "*") {
    CYAN_FUZZ_CHECK(plain_digits(service));
    unsigned long value = 0;
    std::from_chars(service.data(), service.data() + service.size(), value);
    CYAN_FUZZ_CHECK(static_cast<long>(value) == read);
  }
  if (!accepted) {
    unsigned long value = 0;
    const char* end = service.data() + service.size();
    const auto [stop, ec] = std::from_chars(service.data(), end, value);
    CYAN_FUZZ_CHECK(!plain_digits(service) || ec != std::errc() || stop != end || value > 0xffff);
  }
  return 0;
}
