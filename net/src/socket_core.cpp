#include "cyan/net/detail/socket_core.h"

#include <liburing.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <new>
#include <stdexcept>
#include <utility>

namespace cyan::net::detail {

using dispatch::detail::this_thread_kind;
using dispatch::detail::thread_kind;

void throw_if(const std::error_code& error, const char* what) {
  if (error) {
    throw std::system_error(error, what);
  }
}

int open_socket(int family, int type, const char* what) {
  const int fd = ::socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    throw std::system_error(last_error(), what);
  }
  return fd;
}

std::error_code last_error() noexcept {
  return { errno, std::generic_category() };
}

void set_option(int fd, int level, int name, int value, const char* what) {
  if (::setsockopt(fd, level, name, &value, sizeof value) != 0) {
    throw std::system_error(last_error(), what);
  }
}

endpoint socket_name(int fd, bool peer, const char* what) {
  endpoint result;
  ::socklen_t size = endpoint::capacity();
  const int rc = peer ? ::getpeername(fd, result.storage(), &size)
                      : ::getsockname(fd, result.storage(), &size);
  if (rc != 0) {
    throw std::system_error(last_error(), what);
  }
  return endpoint::from_sockaddr(result.storage(), size);
}

// ---- socket_core ----

socket_core::socket_core(int fd) : fd_(fd) {
  if (this_thread_kind() == thread_kind::handler_thread) {
    attach_here("creating a socket");
  }
}

socket_core::socket_core(socket_core& from, handing_over) noexcept
    : fd_(std::exchange(from.fd_, -1)),
      loop_(from.loop_),
      ring_(from.ring_),
      thread_(from.thread_),
      multishot_(std::move(from.multishot_)) {}

socket_core::~socket_core() {
  if (destroyed_ != nullptr) {
    *destroyed_ = true;
  }
  close();
}

void socket_core::attach_here(const char* operation) {
  if (this_thread_kind() == thread_kind::pool_worker) {
    throw std::logic_error(
        "cyan::net: a socket operation in a task on a thread_pool (a pool task resumes on any "
        "worker, a socket is one thread's): run it in a task on a handler_thread");
  }
  if (loop_) {
    check_thread(operation);
    return;
  }
  if (this_thread_kind() == thread_kind::none) {
    throw std::logic_error(
        "cyan::net: sockets run on handler threads: use a socket in a cyan::dispatch::task "
        "spawned on a handler_thread");
  }
  ring_ = event::detail::ring::this_thread();  // throws when io_uring is chosen and refused
  loop_ = this_thread::get_event_loop();
  thread_ = dispatch::detail::thread_anchor::this_thread();
  if (ring_ != nullptr) {
    return;  // the ring's completions tell what the watcher would
  }
  watcher_.emplace(loop_);
  watcher_->set_file_descriptor(fd_);
  watcher_->set_callback([this](event::io_events ready) { on_ready(ready); });
}

void socket_core::check_thread([[maybe_unused]] const char* operation) const noexcept {
#ifndef NDEBUG
  if (!loop_->may_be_used_here()) {
    std::fprintf(stderr,
                 "cyan::net: %s on a socket that belongs to another thread's loop (a socket is "
                 "used only by the handler thread that created or accepted it; hand it over "
                 "with release() and adopt())\n",
                 operation);
    std::abort();
  }
#endif
}

void socket_core::close() noexcept {
  if (fd_ < 0) {
    return;
  }
  if (thread_ && !has_waiters() && !loop_->is_loop_thread()) {
    hand_close_to_thread();
    return;
  }
  close_here();
}

// A close on another thread would race the socket's thread: its loop may still make a deferred
// epoll_ctl() on the descriptor (libev reifies watcher changes in its next turn, and removes a
// descriptor it reports events for that no watcher wants), and the number, once closed, may be
// reused by a socket that loop then watches under the old one's state. What the close needs
// moves to a core of its own, closed on the socket's thread (or here, once that has finished).
void socket_core::hand_close_to_thread() noexcept {
  std::unique_ptr<socket_core> moved(new (std::nothrow) socket_core(*this, handing_over{}));
  if (!moved) {
    close_here();  // out of memory: as before hand-overs, here
    return;
  }
  thread_->run_on_thread([core = std::move(moved)] { core->close_here(); });
}

void socket_core::close_here() noexcept {
  if (watcher_) {
    watcher_->stop();
  }
  bool interrupted = false;
  for (io_wait* op : { std::exchange(reader_, nullptr), std::exchange(writer_, nullptr) }) {
    if (op != nullptr) {
      op->core_ = nullptr;
      if (op->on_ring()) {
        op->interrupt(std::make_error_code(std::errc::operation_canceled));
        interrupted = true;
      } else {
        op->closed();
      }
    }
  }
  if (interrupted) {
    // A call still queued would otherwise reach the kernel after the descriptor's number was
    // closed, and perhaps reused: submitted now, it holds the file until it is cancelled.
    try {
      ring_->submit();
    } catch (const std::system_error&) {
      // Refused: those calls fail with the kernel's error, reported as operation_canceled.
    }
  }
  end_multishot();
  ::close(fd_);
  fd_ = -1;
}

int socket_core::release() {
  if (has_waiters()) {
    throw std::logic_error("cyan::net: release() of a socket with a pending operation");
  }
  if (watcher_) {
    watcher_->stop();
  }
  end_multishot();
  return std::exchange(fd_, -1);
}

// ---- io_wait ----

io_wait::~io_wait() {
  // First: the kernel may still use the derived operation's buffers, and withdraw_from_socket()
  // needs the io_wait whole.
  withdraw_operation();
}

void io_wait::withdraw_from_socket(timed_wait& wait) noexcept {
  auto& op = static_cast<io_wait&>(wait);
  if (op.core_ != nullptr) {
    op.core_->unwait(op);
  }
}

bool io_wait::suspend(std::coroutine_handle<> coroutine, dispatch::detail::branch* owner) {
  if (error_) {
    return false;  // failed before it started (e.g. socket() in connect)
  }
  if (core_ == nullptr || !core_->is_open()) {
    error_ = std::make_error_code(std::errc::bad_file_descriptor);
    return false;
  }
  core_->attach_here("an operation");
  core_->check_direction_free(direction_);  // before the system call: no byte moves
  if (const admission refused = admit(coroutine, owner); refused != admission::wait) {
    return refused == admission::dropped;  // dropped: stays suspended; stopped: goes on
  }
  if (stream_read() && core_->has_held() && attempt()) {
    return yield_after_reads_at_once(coroutine, owner);  // served from what the socket holds
  }
  if (event::detail::ring* ring = core_->ring(); ring != nullptr) {
    if (adaptive_read()) {
      core_->read_waited();
    }
    return suspend_on_ring(*ring, coroutine, owner);
  }
  if (!adaptive_read()) {
    if (attempt()) {
      return false;  // speculative: done without waiting
    }
  } else if (core_->speculate_read()) {
    const bool done = attempt();
    core_->speculated_read(!done);
    if (done) {
      return yield_after_reads_at_once(coroutine, owner);
    }
  }
  if (adaptive_read()) {
    core_->read_waited();
  }
  start_wait(coroutine, owner, timeout_);  // may throw: before the socket knows the operation
  core_->wait(*this, direction_);
  return true;
}

// Fair reads: a read that finished without waiting goes on at once, except every
// kReadsBeforeYield-th in a row on the socket, whose coroutine resumes through its thread's
// queue (with the bytes it read), behind what the thread's other tasks queued meanwhile — so a
// connection whose data keeps arriving faster than it reads cannot keep the thread to itself.
bool io_wait::yield_after_reads_at_once(std::coroutine_handle<> coroutine,
                                        dispatch::detail::branch* owner) noexcept {
  if (!core_->read_finished_at_once()) {
    return false;
  }
  dispatch::detail::resume_later_on(dispatch::detail::current_executor(), coroutine, owner);
  return true;
}

// A stream read waits for the socket's multishot receive when it has one (or switched to one),
// as a plain timed wait; any other operation (a datagram receive too) queues its call on the
// ring.
bool io_wait::suspend_on_ring(event::detail::ring& ring, std::coroutine_handle<> coroutine,
                              dispatch::detail::branch* owner) {
  if (stream_read() && core_->plan_ring_read() == socket_core::ring_read::multishot) {
    start_wait(coroutine, owner, timeout_);  // may throw: the receive stays armed, harmlessly
    core_->wait(*this, direction_);
    core_->wait_for_multishot(*this);
    return true;
  }
  polling_ = poll_first();
  start_ring_wait(ring, coroutine, owner, timeout_);  // may throw: before anything queued
  core_->wait(*this, direction_);
  return true;
}

void io_wait::multishot_arrived() noexcept {
  if (!begin_retry()) {
    return;  // a cancel job is on its way
  }
  if (!attempt()) {
    if (retry_failed()) {
      if (core_->keep_waiting_for_multishot()) {
        return;
      }
      try {
        start_ring_operation(*core_->ring());  // a single-shot receive into the span
        return;
      } catch (const std::system_error& error) {
        error_ = error.code();
      }
    } else {
      error_ = std::make_error_code(std::errc::operation_canceled);
    }
  }
  end_wait();
}

void io_wait::ready() noexcept {
  if (!begin_retry()) {
    return;  // a cancel job is on its way
  }
  if (!attempt()) {
    if (retry_failed()) {
      return;  // still would block: wait on
    }
    error_ = std::make_error_code(std::errc::operation_canceled);
  }
  end_wait();
}

// The core already forgot the operation. The coroutine resumes through its thread's queue:
// close() may run inside another of that thread's tasks.
void io_wait::closed() noexcept {
  error_ = std::make_error_code(std::errc::operation_canceled);
  end_wait_later();
}

// The io_uring backend's steps: the operation's call, or a poll for its direction after the
// kernel answered EAGAIN.
void io_wait::prepare(io_uring_sqe* entry) noexcept {
  if (!polling_) {
    submitted_before_ = core_->ring()->reaps();
    prepare_call(entry);
    return;
  }
  const bool read = direction_ == event::io_events::read;
  io_uring_prep_poll_add(entry, core_->fd(), read ? POLLIN : POLLOUT);
}

bool io_wait::completed(int result) noexcept {
  if (polling_) {
    polling_ = false;
    if (result < 0) {
      error_ = { -result, std::generic_category() };
      return true;
    }
    return false;  // ready: make the call
  }
  switch (result) {
    case -EAGAIN:
#if EAGAIN != EWOULDBLOCK
    case -EWOULDBLOCK:
#endif
    case -EINPROGRESS:  // a connect on a kernel that honours O_NONBLOCK for ring operations
      polling_ = true;
      if (stream_read() && core_ != nullptr) {
        core_->ring_read_completed(true);
      }
      return false;
    case -EINTR:
      return false;
    default:
      if (stream_read() && core_ != nullptr) {
        // Reaped right after the entry that submitted it: the data was there.
        core_->ring_read_completed(core_->ring()->reaps() > submitted_before_ + 1);
      }
      return call_completed(result);
  }
}

void io_wait::finish(const char* what) {
  throw_if(finish_wait(), what);
}

void io_wait::finish_transfer(const char* what, std::size_t transferred) {
  if (finish_wait()) {
    throw transfer_error(error_, what, transferred);
  }
}

}  // namespace cyan::net::detail
