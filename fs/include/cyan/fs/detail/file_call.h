#pragma once

// The awaiters of cyan::fs::file. Each one is a call_request made on one of two paths, chosen
// when it suspends:
//   ring   on a handler thread whose backend is io_uring (event/detail/ring.h): one ring entry
//          (openat, read, write, fsync), awaited as a dispatch::detail::ring_wait: a deadline
//          or a stop request asks the kernel to cancel it, and the completion still decides
//          (a read the kernel finished first keeps its bytes);
//   pool   anywhere else (the epoll backend, a thread_pool worker, a thread that is no
//          executor's): a blocking call on the global pool (detail/pool_call.h), cancellable
//          only before it starts.
// Either way the coroutine resumes on its home, and the kernel or the pool is done with the
// caller's buffer before it does.

#include <coroutine>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <system_error>

#include "cyan/dispatch/detail/coro_env.h"
#include "cyan/dispatch/detail/ring_wait.h"
#include "cyan/fs/detail/call_request.h"
#include "cyan/fs/detail/pool_call.h"

namespace cyan::fs {
class file;
}

namespace cyan::fs::detail {

/// A call_request as one io_uring entry (see the top of this file). Every member is the ring's
/// thread's.
class ring_call final : protected dispatch::detail::ring_wait {
 public:
  explicit ring_call(const call_request& request) noexcept
      : ring_wait(std::errc::timed_out), request_(request) {}
  ~ring_call() { withdraw_operation(); }

  /// The start phase on `ring`: true when the coroutine waits, false when it goes on at once
  /// (its stop was requested). Throws std::system_error or std::bad_alloc before the entry was
  /// queued.
  bool start(event::detail::ring& ring, std::coroutine_handle<> coroutine,
             dispatch::detail::branch* owner, timeout_type timeout);

  /// For await_resume(): how the wait ended, or the call's failure (its errno).
  [[nodiscard]] std::error_code finish() noexcept { return finish_wait(); }
  /// The completion's result (a count, or a descriptor for an open); valid when finish() is
  /// empty.
  [[nodiscard]] int result() const noexcept { return result_; }

 private:
  void prepare(io_uring_sqe* entry) noexcept override;
  bool completed(int result) noexcept override;

  call_request request_;
  int result_ = 0;
};

/// The part every file awaiter shares: the path is chosen when it suspends; await_resume()
/// calls finish() (see the top of this file). Neither copyable nor movable.
class file_call {
 public:
  file_call(const file_call&) = delete;
  file_call& operator=(const file_call&) = delete;

  [[nodiscard]] bool await_ready() const noexcept { return false; }

  template <typename Promise>
  bool await_suspend(std::coroutine_handle<Promise> suspended) {
    return suspend(suspended, dispatch::detail::branch_of(suspended));
  }

 protected:
  file_call(const call_request& request, timeout_type timeout) noexcept
      : request_(request), timeout_(timeout) {}
  ~file_call() = default;

  /// The call's result; throws std::system_error(errno, "<what> '<path>'") when it failed,
  /// timed out (std::errc::timed_out) or was cancelled (std::errc::operation_canceled).
  int finish(const char* what);

  call_request request_;

 private:
  bool suspend(std::coroutine_handle<> coroutine, dispatch::detail::branch* owner);

  timeout_type timeout_;
  std::error_code refused_;  // an invalid request, refused before it suspended
  std::optional<ring_call> ring_;
  std::optional<pool_call> pool_;
};

/// read_at() and write_at(): one read or write at an offset; the count, 0 at end of file.
class transfer_op final : public file_call {
 public:
  transfer_op(const call_request& request, timeout_type timeout) noexcept
      : file_call(request, timeout) {}
  std::size_t await_resume() {
    const bool read = request_.what == call_request::kind::read;
    return static_cast<std::size_t>(
        finish(read ? "cyan::fs::file::read_at" : "cyan::fs::file::write_at"));
  }
};

/// sync(): fsync().
class sync_op final : public file_call {
 public:
  sync_op(const call_request& request, timeout_type timeout) noexcept
      : file_call(request, timeout) {}
  void await_resume() { (void)finish("cyan::fs::file::sync"); }
};

/// file::open(): openat() of the path it keeps; the open file.
class open_op final : public file_call {
 public:
  open_op(std::filesystem::path path, int flags, timeout_type timeout);
  file await_resume();

 private:
  std::filesystem::path path_;
};

}  // namespace cyan::fs::detail
