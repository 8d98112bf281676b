#pragma once

#include <string_view>

namespace cyan::net {

/// How a handler thread's sockets do their I/O.
///
/// The environment variable CYAN_NET_BACKEND (read once per process) chooses: `auto` (the
/// default) uses io_uring where the thread can set up a ring and epoll silently where it cannot
/// (an old kernel, a seccomp filter such as Docker's and Kubernetes' default profiles, the sysctl
/// kernel.io_uring_disabled); `io_uring` makes the first socket operation on a thread that
/// cannot set up a ring throw std::system_error saying why; `epoll` always uses the readiness
/// path. Both backends give sockets the same API and semantics.
enum class backend {
  epoll,     ///< readiness: the system call first, an epoll watcher on EAGAIN
  io_uring,  ///< completion: calls queued on the thread's ring, submitted in batches
};

/// The backend that sockets created on the calling handler thread use; sets up the thread's
/// ring on first use. [a handler thread] Throws std::system_error when CYAN_NET_BACKEND=io_uring
/// and the thread cannot set up a ring.
[[nodiscard]] backend current_backend();

/// "epoll" or "io_uring". [any thread]
[[nodiscard]] std::string_view to_string(backend value) noexcept;

}  // namespace cyan::net
