#pragma once

// What a file operation asks the kernel, the same on both paths: an io_uring entry
// (detail/file_call.h) or a blocking system call on the global pool (detail/pool_call.h).

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "cyan/dispatch/detail/timed_wait.h"

namespace cyan::fs::detail {

/// An operation's time limit; kNoTimeout waits for ever.
using timeout_type = dispatch::detail::timed_wait::timeout_type;
inline constexpr timeout_type kNoTimeout = dispatch::detail::timed_wait::kNoTimeout;

/// `limit` as a timeout (see dispatch::detail::to_timeout).
using dispatch::detail::to_timeout;

/// Linux moves at most this many bytes per read or write (MAX_RW_COUNT); a larger buffer is
/// served in part, as by pread(), and the count fits an io_uring result.
inline constexpr std::size_t kMaxTransfer = 0x7ffff000;

/// One system call: openat(AT_FDCWD, path, flags, 0666), pread, pwrite or fsync.
struct call_request {
  enum class kind : unsigned char { open, read, write, sync };

  kind what = kind::sync;
  int fd = -1;                 // read, write, sync
  std::uint64_t offset = 0;    // read, write (at most INT64_MAX)
  std::byte* data = nullptr;   // read, write: the caller's buffer (written from for a write)
  std::size_t size = 0;        // read, write: at most kMaxTransfer
  const char* path = nullptr;  // open: the file; every kind: named in errors
  int flags = 0;               // open: O_* flags
};

/// Makes the request's system call, again after EINTR: its result (a count, a descriptor, 0),
/// or -errno. Blocks. [any thread]
[[nodiscard]] int run_blocking(const call_request& request) noexcept;

/// Whether the calling thread's file operations take the pool fallback even where it has a
/// ring; false by default. For benchmarks and tests that compare the two paths in one
/// process. [the thread]
[[nodiscard]] bool pool_fallback_forced() noexcept;
void force_pool_fallback(bool forced) noexcept;

}  // namespace cyan::fs::detail
