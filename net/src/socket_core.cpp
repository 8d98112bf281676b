#include "cyan/net/detail/socket_core.h"

#include <liburing.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cstdio>
#include <cstdlib>
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

// ---- io_uring reads: held bytes and the multishot receive ----

std::size_t socket_core::take_held(std::span<std::byte> into) noexcept {
  std::size_t copied = 0;
  if (carried_offset_ < carried_.size()) {
    copied = std::min(into.size(), carried_.size() - carried_offset_);
    std::memcpy(into.data(), carried_.data() + carried_offset_, copied);
    carried_offset_ += copied;
    if (carried_offset_ == carried_.size()) {
      carried_ = {};
      carried_offset_ = 0;
    }
  }
  if (multishot_ && copied < into.size()) {
    copied += multishot_->take(into.subspan(copied));
  }
  return copied;
}

std::vector<std::byte> socket_core::take_all_held() {
  if (multishot_ && ring_ != nullptr) {
    ring_->cancel_and_complete(*multishot_);  // what is still on its way is held too
  }
  std::vector<std::byte> bytes(carried_.begin() + static_cast<std::ptrdiff_t>(carried_offset_),
                               carried_.end());
  if (multishot_) {
    const std::size_t first = bytes.size();
    bytes.resize(first + multishot_->held_bytes());
    (void)multishot_->take(std::span(bytes).subspan(first));
  }
  carried_ = {};
  carried_offset_ = 0;
  return bytes;
}

socket_core::ring_read socket_core::plan_ring_read() noexcept {
  if (!multishot_ && !multishot_refused_) {
    make_multishot();  // at the first read, so that switching later allocates nothing
  }
  if (multishot_ && multishot_->in_flight()) {
    return ring_read::multishot;  // armed, or ending: its completions come before any other
  }
  if (multishot_ && multishot_->throttled()) {
    use_multishot_ = false;  // it receives faster than it reads: bulk, read into the span
    ring_reads_waited_ = 0;
  }
  if (!use_multishot_ || multishot_refused_) {
    return ring_read::single_shot;
  }
  if (multishot_ && multishot_->starved()) {
    multishot_->clear_starved();  // this read goes without it; the next one that waits arms it
    return ring_read::single_shot;
  }
  return arm_multishot() ? ring_read::multishot : ring_read::single_shot;
}

void socket_core::ring_read_completed(bool waited) noexcept {
  if (!waited) {
    ring_reads_waited_ = 0;
  } else if (++ring_reads_waited_ >= 2) {
    use_multishot_ = true;
  }
}

bool socket_core::keep_waiting_for_multishot() noexcept {
  if (multishot_->in_flight()) {
    return true;
  }
  if (multishot_->throttled()) {
    use_multishot_ = false;  // as in plan_ring_read()
    ring_reads_waited_ = 0;
  } else if (!multishot_->starved() && !multishot_->refused() && arm_multishot()) {
    return true;
  }
  multishot_refused_ = multishot_refused_ || multishot_->refused();
  multishot_->clear_starved();
  multishot_->reader = nullptr;
  return false;
}

// The thread's provided buffers (set up by its first stream socket's first read) and the
// socket's receive, not armed; without buffers the socket keeps single-shot receives.
void socket_core::make_multishot() noexcept {
  event::detail::buffer_ring* buffers = ring_->provided_buffers();
  if (buffers == nullptr) {
    multishot_refused_ = true;
    return;
  }
  try {
    multishot_ = std::make_unique<multishot_receive>(*ring_, *buffers);
  } catch (const std::bad_alloc&) {
    // Single-shot receives until a later read makes it.
  }
}

// Arms the multishot receive when the thread's buffer ring has a buffer to give.
bool socket_core::arm_multishot() noexcept {
  if (!multishot_ || multishot_->refused()) {
    multishot_refused_ = multishot_refused_ || (multishot_ && multishot_->refused());
    return false;
  }
  if (ring_->provided_buffers()->available() == 0) {
    return false;
  }
  try {
    multishot_->arm(fd_);
  } catch (const std::system_error&) {
    return false;  // the ring refused the entry: a single-shot read
  }
  return true;
}

// On the ring's thread: cancelled, its last completions run (they hold buffers) and the held
// buffers given back. Elsewhere (a socket destroyed on another thread) it cannot be touched:
// shutdown() makes it complete with end of stream, and its ring's thread frees it then.
void socket_core::end_multishot() noexcept {
  if (!multishot_) {
    return;
  }
  multishot_->reader = nullptr;
  if (event::detail::ring::this_thread_if_set_up() == ring_) {
    ring_->cancel_and_complete(*multishot_);
    multishot_.reset();
    return;
  }
  if (multishot_->in_flight()) {
    ::shutdown(fd_, SHUT_RDWR);
    multishot_.release()->orphan();
  } else {
    multishot_->abandon_buffers();  // the ring's, which this thread must not touch
    multishot_.reset();
  }
}

void socket_core::check_direction_free(event::io_events direction) const {
  const bool read = direction == event::io_events::read;
  if ((read ? reader_ : writer_) != nullptr) {
    throw std::logic_error(read ? "cyan::net: a second read (or accept) while one is pending"
                                : "cyan::net: a second write (or connect) while one is pending");
  }
}

void socket_core::wait(io_wait& op, event::io_events direction) noexcept {
  (direction == event::io_events::read ? reader_ : writer_) = &op;
  update_watcher();
}

void socket_core::unwait(io_wait& op) noexcept {
  if (reader_ == &op) {
    reader_ = nullptr;
    if (multishot_ && multishot_->reader == &op) {
      multishot_->reader = nullptr;
    }
  } else if (writer_ == &op) {
    writer_ = nullptr;
  } else {
    return;
  }
  update_watcher();
}

// The watcher runs only while someone waits, for the directions they wait in.
void socket_core::update_watcher() noexcept {
  if (!watcher_) {
    return;  // the io_uring backend: nothing to watch
  }
  const event::io_events wanted = (reader_ != nullptr ? event::io::read : event::io_events::none) |
                                  (writer_ != nullptr ? event::io::write : event::io_events::none);
  if (wanted == event::io_events::none) {
    watcher_->stop();
    return;
  }
  if (watcher_->interest() != wanted) {
    watcher_->set_events(wanted);  // restarts an active watcher; never throws for these bits
  }
  watcher_->start();
}

// Resuming a waiter may end the socket: its task may destroy it, or finish something that
// another thread then destroys it after. So nothing of the core is touched after the last
// resumption; only when both directions are ready does destroyed_ tell whether the writer
// is still there.
void socket_core::on_ready(event::io_events ready) noexcept {
  io_wait* const reader = event::has(ready, event::io::read) ? reader_ : nullptr;
  io_wait* const writer = event::has(ready, event::io::write) ? writer_ : nullptr;
  if (reader == nullptr || writer == nullptr) {
    if (reader != nullptr) {
      reader->ready();
    } else if (writer != nullptr) {
      writer->ready();
    }
    return;
  }
  bool destroyed = false;
  destroyed_ = &destroyed;
  reader->ready();
  if (destroyed) {
    return;
  }
  destroyed_ = nullptr;
  if (writer_ == writer) {
    writer->ready();
  }
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
  if (adaptive_read() && core_->has_held() && attempt()) {
    return false;  // served from what the socket holds, without waiting
  }
  if (event::detail::ring* ring = core_->ring(); ring != nullptr) {
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
      return false;
    }
  }
  start_wait(coroutine, owner, timeout_);  // may throw: before the socket knows the operation
  core_->wait(*this, direction_);
  return true;
}

// A read waits for the socket's multishot receive when it has one (or switched to one), as a
// plain timed wait; any other operation queues its call on the ring.
bool io_wait::suspend_on_ring(event::detail::ring& ring, std::coroutine_handle<> coroutine,
                              dispatch::detail::branch* owner) {
  if (adaptive_read() && core_->plan_ring_read() == socket_core::ring_read::multishot) {
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
      if (adaptive_read() && core_ != nullptr) {
        core_->ring_read_completed(true);
      }
      return false;
    case -EINTR:
      return false;
    default:
      if (adaptive_read() && core_ != nullptr) {
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
