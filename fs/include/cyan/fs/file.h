#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <utility>

#include "cyan/fs/detail/file_call.h"

namespace cyan::fs {

/// How file::open() opens a file; combine with `|`. `read` and/or `write` is required;
/// `append` implies `write`.
enum class open_mode : unsigned {
  read = 1u << 0,       ///< O_RDONLY, or O_RDWR with write
  write = 1u << 1,      ///< O_WRONLY, or O_RDWR with read
  create = 1u << 2,     ///< O_CREAT: a missing file is created (mode 0666 less the umask)
  truncate = 1u << 3,   ///< O_TRUNC
  append = 1u << 4,     ///< O_APPEND: every write goes to the end, whatever its offset
  exclusive = 1u << 5,  ///< O_EXCL: with create, an existing file is EEXIST
};

[[nodiscard]] constexpr open_mode operator|(open_mode a, open_mode b) noexcept {
  return static_cast<open_mode>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}
[[nodiscard]] constexpr open_mode operator&(open_mode a, open_mode b) noexcept {
  return static_cast<open_mode>(static_cast<unsigned>(a) & static_cast<unsigned>(b));
}
constexpr open_mode& operator|=(open_mode& a, open_mode b) noexcept {
  return a = a | b;
}
/// Whether `mode` has every bit of `flags`.
[[nodiscard]] constexpr bool has(open_mode mode, open_mode flags) noexcept {
  return (mode & flags) == flags;
}

/// An open file, read and written at offsets by coroutines: `auto f = co_await
/// cyan::fs::file::open(path, open_mode::read); auto n = co_await f.read_at(0, buffer);`.
///
/// Backends: files follow CYAN_NET_BACKEND. On a handler thread with an io_uring ring each
/// operation is one ring entry on that thread's ring; elsewhere (the epoll backend, a task on
/// a thread_pool, a thread that is no executor's) it is a blocking system call on the global
/// pool (libuv's model). Either way the task resumes on its home thread.
///
/// Every operation takes an optional time limit as its last argument (any std::chrono duration,
/// counted from when it is awaited): when it passes, the operation fails with
/// std::errc::timed_out. A stop request on the task's std::stop_token ends a pending operation
/// with std::errc::operation_canceled. Both end an operation only while it can still be
/// cancelled: on io_uring while the kernel has not finished it, on the pool while its call has
/// not started; otherwise the operation reports what it did (a read keeps its bytes).
///
/// Errors are std::system_error with the errno in std::generic_category() and the path in
/// what(): ENOENT, EACCES, EISDIR, EEXIST, ENOSPC, ...
///
/// Thread rules: a file belongs to no thread: operations may be awaited from any task, several
/// at once (reads and writes at different offsets do not wait for each other). The file must
/// outlive its operations: close(), move or destroy it only once none is pending.
class file {
 public:
  /// Not open.
  file() noexcept = default;
  file(file&& other) noexcept;
  /// Closes the file this one held first.
  file& operator=(file&& other) noexcept;
  /// close().
  ~file();

  /// `co_await file::open(path, mode[, limit])` opens `path` (O_CLOEXEC always). Throws
  /// std::invalid_argument (at the call) when `mode` has neither read, write nor append;
  /// std::system_error: ENOENT, EACCES, EISDIR (a directory opened for writing), EEXIST
  /// (create | exclusive), timed_out, operation_canceled; and on io_uring's backend as chosen
  /// by CYAN_NET_BACKEND=io_uring, the reason a ring cannot be set up.
  [[nodiscard]] static detail::open_op open(std::filesystem::path path, open_mode mode) {
    return open_within(std::move(path), mode, detail::kNoTimeout);
  }
  template <typename Rep, typename Period>
  [[nodiscard]] static detail::open_op open(std::filesystem::path path, open_mode mode,
                                            std::chrono::duration<Rep, Period> limit) {
    return open_within(std::move(path), mode, detail::to_timeout(limit));
  }

  /// `co_await f.read_at(offset, buffer[, limit])` reads up to buffer.size() bytes at `offset`
  /// (as pread: fewer near the end of the file or past 2 GiB); returns the count, 0 at or past
  /// the end of the file (or for an empty buffer). EISDIR for a directory, EBADF when closed.
  [[nodiscard]] detail::transfer_op read_at(std::uint64_t offset,
                                            std::span<std::byte> buffer) const noexcept {
    return transfer(offset, buffer.data(), buffer.size(), false, detail::kNoTimeout);
  }
  template <typename Rep, typename Period>
  [[nodiscard]] detail::transfer_op read_at(
      std::uint64_t offset, std::span<std::byte> buffer,
      std::chrono::duration<Rep, Period> limit) const noexcept {
    return transfer(offset, buffer.data(), buffer.size(), false, detail::to_timeout(limit));
  }

  /// `co_await f.write_at(offset, buffer[, limit])` writes up to buffer.size() bytes at
  /// `offset` (at the end with open_mode::append); returns the count (as pwrite: possibly
  /// fewer, e.g. on a full disk). EBADF when closed or not opened for writing.
  [[nodiscard]] detail::transfer_op write_at(std::uint64_t offset,
                                             std::span<const std::byte> buffer) const noexcept {
    return transfer(offset, const_cast<std::byte*>(buffer.data()), buffer.size(), true,
                    detail::kNoTimeout);
  }
  template <typename Rep, typename Period>
  [[nodiscard]] detail::transfer_op write_at(
      std::uint64_t offset, std::span<const std::byte> buffer,
      std::chrono::duration<Rep, Period> limit) const noexcept {
    return transfer(offset, const_cast<std::byte*>(buffer.data()), buffer.size(), true,
                    detail::to_timeout(limit));
  }

  /// `co_await f.sync([limit])` flushes the file's data and metadata to its device (fsync).
  [[nodiscard]] detail::sync_op sync() const noexcept { return sync_within(detail::kNoTimeout); }
  template <typename Rep, typename Period>
  [[nodiscard]] detail::sync_op sync(std::chrono::duration<Rep, Period> limit) const noexcept {
    return sync_within(detail::to_timeout(limit));
  }

  /// The file's size in bytes (fstat, synchronous: it reads the inode, not the data). Throws
  /// std::system_error (EBADF when closed).
  [[nodiscard]] std::uint64_t size() const;

  /// Closes the descriptor (synchronously); does nothing when not open. No operation may be
  /// pending.
  void close() noexcept;

  [[nodiscard]] bool is_open() const noexcept { return fd_ >= 0; }
  /// The descriptor, -1 when closed; the file still owns it.
  [[nodiscard]] int native_handle() const noexcept { return fd_; }
  /// The path it was opened with.
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }

 private:
  friend class detail::open_op;

  file(int fd, std::filesystem::path path) noexcept : fd_(fd), path_(std::move(path)) {}
  static detail::open_op open_within(std::filesystem::path path, open_mode mode,
                                     detail::timeout_type timeout);
  // A write's buffer is only read: `data` loses its const for the request alone.
  [[nodiscard]] detail::transfer_op transfer(std::uint64_t offset, std::byte* data,
                                             std::size_t size, bool write,
                                             detail::timeout_type timeout) const noexcept;
  [[nodiscard]] detail::sync_op sync_within(detail::timeout_type timeout) const noexcept;

  int fd_ = -1;
  std::filesystem::path path_;
};

}  // namespace cyan::fs
