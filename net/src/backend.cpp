#include "cyan/net/backend.h"

#include "cyan/event/detail/ring.h"

namespace cyan::net {

backend current_backend() {
  return event::detail::ring::this_thread() != nullptr ? backend::io_uring : backend::epoll;
}

std::string_view to_string(backend value) noexcept {
  return value == backend::io_uring ? "io_uring" : "epoll";
}

}  // namespace cyan::net
