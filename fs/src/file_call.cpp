#include "cyan/fs/detail/file_call.h"

#include <fcntl.h>
#include <liburing.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include "cyan/fs/file.h"

namespace cyan::fs::detail {
namespace {

thread_local bool pool_forced = false;

// A call made on this thread's ring: a handler thread's, when its backend is io_uring. A pool
// worker takes the pool path even though it is a handler thread underneath: its tasks resume on
// any worker, and the blocking call is what libuv's model asks for there.
event::detail::ring* ring_here() {
  if (pool_forced ||
      dispatch::detail::this_thread_kind() != dispatch::detail::thread_kind::handler_thread) {
    return nullptr;
  }
  return event::detail::ring::this_thread();  // throws when io_uring was chosen and is refused
}

}  // namespace

bool pool_fallback_forced() noexcept {
  return pool_forced;
}

void force_pool_fallback(bool forced) noexcept {
  pool_forced = forced;
}

int run_blocking(const call_request& request) noexcept {
  const auto offset = static_cast<off_t>(request.offset);
  for (;;) {
    long rc = 0;
    switch (request.what) {
      case call_request::kind::open:
        rc = ::openat(AT_FDCWD, request.path, request.flags, 0666);
        break;
      case call_request::kind::read:
        rc = ::pread(request.fd, request.data, request.size, offset);
        break;
      case call_request::kind::write:
        rc = ::pwrite(request.fd, request.data, request.size, offset);
        break;
      case call_request::kind::sync:
        rc = ::fsync(request.fd);
        break;
    }
    if (rc >= 0) {
      return static_cast<int>(rc);  // at most kMaxTransfer, or a descriptor
    }
    if (errno != EINTR) {
      return -errno;
    }
  }
}

// ---- ring_call ----

bool ring_call::start(event::detail::ring& ring, std::coroutine_handle<> coroutine,
                      dispatch::detail::branch* owner, timeout_type timeout) {
  if (const admission refused = admit(coroutine, owner); refused != admission::wait) {
    return refused == admission::dropped;  // dropped: stays suspended; stopped: goes on
  }
  start_ring_wait(ring, coroutine, owner, timeout);
  return true;
}

void ring_call::prepare(io_uring_sqe* entry) noexcept {
  const call_request& r = request_;
  switch (r.what) {
    case call_request::kind::open:
      io_uring_prep_openat(entry, AT_FDCWD, r.path, r.flags, 0666);
      break;
    case call_request::kind::read:
      io_uring_prep_read(entry, r.fd, r.data, static_cast<unsigned>(r.size), r.offset);
      break;
    case call_request::kind::write:
      io_uring_prep_write(entry, r.fd, r.data, static_cast<unsigned>(r.size), r.offset);
      break;
    case call_request::kind::sync:
      io_uring_prep_fsync(entry, r.fd, 0);
      break;
  }
}

// One entry is the whole call: its completion ends the operation either way.
bool ring_call::completed(int result) noexcept {
  if (result < 0) {
    error_ = std::error_code(-result, std::generic_category());
  } else {
    result_ = result;
  }
  return true;
}

// ---- file_call ----

// io_uring takes offset -1 as "the file position", and pread refuses a negative off_t: both are
// EINVAL here, before either path sees them.
bool file_call::suspend(std::coroutine_handle<> coroutine, dispatch::detail::branch* owner) {
  constexpr auto kMaxOffset = static_cast<std::uint64_t>(std::numeric_limits<off_t>::max());
  if (request_.offset > kMaxOffset) {
    refused_ = std::make_error_code(std::errc::invalid_argument);
    return false;
  }
  if (event::detail::ring* ring = ring_here(); ring != nullptr) {
    return ring_.emplace(request_).start(*ring, coroutine, owner, timeout_);
  }
  return pool_.emplace(request_).start(coroutine, owner, timeout_);
}

int file_call::finish(const char* what) {
  std::error_code error = refused_;
  int result = 0;
  if (ring_) {
    error = ring_->finish();
    result = ring_->result();
  } else if (pool_) {
    error = pool_->finish();
    result = pool_->result();
  }
  if (error) {
    std::string message = what;
    message += " '";
    message += request_.path != nullptr ? request_.path : "";
    message += '\'';
    throw std::system_error(error, message);
  }
  return result;
}

// ---- open_op ----

open_op::open_op(std::filesystem::path path, int flags, timeout_type timeout)
    : file_call(call_request{}, timeout), path_(std::move(path)) {
  request_.what = call_request::kind::open;
  request_.path = path_.c_str();
  request_.flags = flags;
}

file open_op::await_resume() {
  const int fd = finish("cyan::fs::file::open");
  return file(fd, std::move(path_));
}

}  // namespace cyan::fs::detail
