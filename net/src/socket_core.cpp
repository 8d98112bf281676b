#include "cyan/net/detail/socket_core.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <utility>

#include "cyan/dispatch/sleep.h"

namespace cyan::net::detail {

using dispatch::detail::current_executor;
using dispatch::detail::resume_job;
using dispatch::detail::this_thread_home;

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

namespace {

// A handler thread runs its own tasks; a pool worker (also a handler thread underneath) runs
// its pool's, which resume on any worker.
[[nodiscard]] bool on_handler_thread() noexcept {
  return this_thread_home.executor && this_thread_home.executor == this_thread_home.thread;
}

}  // namespace

socket_core::socket_core(int fd) : fd_(fd) {
  if (on_handler_thread()) {
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
  if (current_executor() && !on_handler_thread()) {
    throw std::logic_error(
        "cyan::net: a socket operation in a task on a thread_pool (a pool task resumes on any "
        "worker, a socket is one thread's): run it in a task on a handler_thread");
  }
  if (loop_) {
    check_thread(operation);
    return;
  }
  if (!current_executor()) {
    throw std::logic_error(
        "cyan::net: sockets run on handler threads: use a socket in a cyan::dispatch::task "
        "spawned on a handler_thread");
  }
  loop_ = this_thread::get_event_loop();
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
  for (io_wait* op : { std::exchange(reader_, nullptr), std::exchange(writer_, nullptr) }) {
    if (op != nullptr) {
      op->core_ = nullptr;
      op->closed();
    }
  }
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
  return std::exchange(fd_, -1);
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
  } else if (writer_ == &op) {
    writer_ = nullptr;
  } else {
    return;
  }
  update_watcher();
}

// The watcher runs only while someone waits, for the directions they wait in.
void socket_core::update_watcher() noexcept {
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

// The timer wheel's entry: 8 bytes, stored without allocation. Destroyed unrun — by a cancel()
// after the wait ended (kDone is set then), or with the thread's wheel — it reports lost().
struct io_wait::timeout_entry {
  io_wait* self;
  explicit timeout_entry(io_wait* owner) noexcept : self(owner) {}
  timeout_entry(timeout_entry&& other) noexcept : self(std::exchange(other.self, nullptr)) {}
  timeout_entry& operator=(timeout_entry&&) = delete;
  ~timeout_entry() {
    if (self != nullptr) {
      self->wheel_ = nullptr;  // this entry is going: nothing to cancel
      self->lost();
    }
  }
  void operator()() noexcept { std::exchange(self, nullptr)->timed_out(); }
};

// Posted by a stop request to the socket's thread. Destroyed unrun by that thread (a
// stop(discard)), it ends the wait and drops the task's branch like any refused resumption.
// Refused by the thread (it finished), it does nothing: the thread's teardown ends the wait
// (thread_finished()), and it may be doing so right now, so the frame is not ours to touch.
struct io_wait::cancel_job {
  io_wait* self;
  explicit cancel_job(io_wait* owner) noexcept : self(owner) {}
  cancel_job(cancel_job&& other) noexcept : self(std::exchange(other.self, nullptr)) {}
  cancel_job& operator=(cancel_job&&) = delete;
  ~cancel_job() {
    if (self != nullptr && self->thread_ == this_thread_home.thread) {
      self->state_.fetch_or(kDone, std::memory_order_acq_rel);  // the entry's end is not lost()
      self->end_wait();
      resume_job unrun(self->coroutine_, self->owner_);  // its destructor drops the branch
    }
  }
  void operator()() noexcept { std::exchange(self, nullptr)->cancel_on_loop_thread(); }
};

io_wait::~io_wait() {
  stop_watch_.reset();  // waits for a stop callback running on another thread
  // A frame destroyed while it waits: withdraw the operation (kDone first, so that the timeout
  // entry's destruction does not report it lost).
  if (!coroutine_) {
    return;  // never waited: finished at once, or never awaited
  }
  const unsigned previous = state_.fetch_or(kDone, std::memory_order_acq_rel);
  if ((previous & (kDone | kStop)) == 0) {
    end_wait();
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
  if (owner != nullptr) {
    if (owner->abandoned()) {
      dispatch::detail::resume_later_on(current_executor(), coroutine, owner);  // drops it
      return true;
    }
    if (owner->token.stop_requested()) {
      error_ = std::make_error_code(std::errc::operation_canceled);
      return false;
    }
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
  coroutine_ = coroutine;
  owner_ = owner;
  start_waiting();
  return true;
}

void io_wait::start_waiting() {
  home_ = this_thread_home.executor;
  thread_ = this_thread_home.thread;
  core_->wait(*this, direction_);
  link_to_this_thread();
  if (timeout_ != kNoTimeout) {
    event::timer_wheel* wheel = dispatch::detail::this_thread_sleep_wheel();
    // Whole milliseconds (what timeouts usually are) take the wheel's path without a division.
    using std::chrono::milliseconds;
    entry_ =
        timeout_ % milliseconds(1) == timeout_type::zero()
            ? wheel->post(timeout_entry(this), std::chrono::duration_cast<milliseconds>(timeout_))
            : wheel->post(timeout_entry(this), timeout_);
    wheel_ = wheel;
  }
  if (owner_ != nullptr && owner_->token.stop_possible()) {
    stop_watch_.emplace(owner_->token, on_stop{ this });  // runs at once if stopped meanwhile
  }
}

// Withdraws the operation from the socket and the wheel. [loop thread]
void io_wait::end_wait() noexcept {
  unlink_from_thread();
  if (core_ != nullptr) {
    core_->unwait(*this);
  }
  if (wheel_ != nullptr) {
    std::exchange(wheel_, nullptr)->cancel(entry_);
  }
}

void io_wait::ready() noexcept {
  const unsigned previous = state_.fetch_or(kBusy, std::memory_order_acq_rel);
  if ((previous & (kStop | kDone)) != 0) {
    return;  // a cancel job is on its way
  }
  if (!attempt()) {
    // acq_rel: pairs with stop_requested()'s fetch_or; a stop that saw kBusy left it to us.
    const unsigned after = state_.fetch_and(~kBusy, std::memory_order_acq_rel);
    if ((after & kStop) == 0) {
      return;  // still would block: wait on
    }
    error_ = std::make_error_code(std::errc::operation_canceled);
  }
  state_.fetch_or(kDone, std::memory_order_acq_rel);
  end_wait();
  dispatch::detail::resume_on(home_, coroutine_, owner_);
}

void io_wait::timed_out() noexcept {
  wheel_ = nullptr;  // the entry is running: nothing to cancel
  const unsigned previous = state_.fetch_or(kDone, std::memory_order_acq_rel);
  if ((previous & kStop) != 0) {
    return;
  }
  error_ = std::make_error_code(std::errc::timed_out);
  end_wait();
  dispatch::detail::resume_on(home_, coroutine_, owner_);
}

// The core already forgot the operation. The coroutine resumes through its thread's queue:
// close() may run inside another of that thread's tasks.
void io_wait::closed() noexcept {
  const unsigned previous = state_.fetch_or(kDone, std::memory_order_acq_rel);
  if ((previous & kStop) != 0) {
    return;
  }
  error_ = std::make_error_code(std::errc::operation_canceled);
  end_wait();
  dispatch::detail::resume_later_on(home_, coroutine_, owner_);
}

// The thread finished under the wait (or its wheel went away with it): withdraw it from the
// socket and the wheel (an entry still there would report to a destroyed frame), and drop the
// task. A stop request that came first (kStop without kDone) had its cancel job refused: ending
// the wait is ours.
void io_wait::lost() noexcept {
  const unsigned previous = state_.fetch_or(kDone, std::memory_order_acq_rel);
  if ((previous & kDone) != 0) {
    return;
  }
  end_wait();
  if (owner_ != nullptr && owner_->root != nullptr) {
    owner_->drop();
  }
  // A coroutine that belongs to no spawned task stays suspended: nothing owns it to destroy it.
}

void io_wait::stop_requested() noexcept {
  const unsigned previous = state_.fetch_or(kStop, std::memory_order_acq_rel);
  if (previous != 0) {
    return;  // ended already, or the loop thread is retrying and will see kStop
  }
  thread_.vtable->resume_later(thread_.target, unique_function<void()>(cancel_job(this)));
}

void io_wait::cancel_on_loop_thread() noexcept {
  state_.fetch_or(kDone, std::memory_order_acq_rel);
  error_ = std::make_error_code(std::errc::operation_canceled);
  end_wait();
  dispatch::detail::resume_on(home_, coroutine_, owner_);
}

void io_wait::finish(const char* what) {
  stop_watch_.reset();
  throw_if(error_, what);
}

void io_wait::finish_transfer(const char* what, std::size_t transferred) {
  stop_watch_.reset();
  if (error_) {
    throw transfer_error(error_, what, transferred);
  }
}

}  // namespace cyan::net::detail
