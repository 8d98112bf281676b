#include "cyan/event/detail/ring.h"

#include <liburing.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <system_error>

#include "cyan/event/io.h"
#include "cyan/event/loop.h"

namespace cyan::event::detail {
namespace {

// Entries queued between two drains before prepare() submits on its own; completions the kernel
// holds before it overflows into its (lossless, but slower) overflow list.
constexpr unsigned kSubmissionEntries = 256;
constexpr unsigned kCompletionEntries = 4096;
// Completions reaped per io_uring_enter and run per drain(): bounds the time between two looks
// at the thread's other sources.
constexpr std::size_t kReapBatch = 256;
constexpr std::size_t kDrainBudget = 1024;
// The user_data of a cancellation's own entry: its completion says only whether the cancel
// found the operation, which the operation's completion tells anyway.
constexpr std::uint64_t kCancelTag = 0;

backend_choice parse_backend(const char* value) noexcept {
  if (value == nullptr || *value == '\0') {
    return backend_choice::automatic;
  }
  const std::string_view text(value);
  if (text == "auto") {
    return backend_choice::automatic;
  }
  if (text == "epoll") {
    return backend_choice::epoll;
  }
  if (text == "io_uring") {
    return backend_choice::io_uring;
  }
  std::fprintf(stderr, "cyan: CYAN_NET_BACKEND=%s is not epoll, io_uring or auto: using auto\n",
               value);
  return backend_choice::automatic;
}

// The setups tried in order: the kernel refuses flags it does not know with EINVAL.
//
// Not DEFER_TASKRUN, though it is the cheapest where a thread sleeps in io_uring_enter: this
// thread sleeps in its libev loop (epoll_wait) and is woken by the ring's eventfd, and with
// DEFER_TASKRUN a completion produced in softirq context (any loopback or NIC receive)
// signals that eventfd only after an RCU grace period: 10-15 ms per wake-up on kernel 6.x
// (measured; see docs/bench/notes.md, "io_uring"). COOP_TASKRUN runs the completions at the
// thread's next system call and wakes a sleeping thread at once; TASKRUN_FLAG tells us when
// to make that call.
constexpr unsigned kSetups[] = {
  IORING_SETUP_SUBMIT_ALL | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN |
      IORING_SETUP_TASKRUN_FLAG,
  IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
  0,
};

// Sets `ring` up; 0, or the errno of the last setup tried.
int set_up(io_uring& ring, unsigned& accepted) noexcept {
  int error = EINVAL;
  for (const unsigned flags : kSetups) {
    io_uring_params params{};
    params.flags = flags | IORING_SETUP_CQSIZE;
    params.cq_entries = kCompletionEntries;
    const int rc = io_uring_queue_init_params(kSubmissionEntries, &ring, &params);
    if (rc == 0) {
      accepted = params.flags;
      return 0;
    }
    error = -rc;
    if (error != EINVAL) {
      break;  // not a flag the kernel does not know: another setup will not do better
    }
  }
  return error;
}

std::string why_not(int error) {
  std::string text = "cyan: CYAN_NET_BACKEND=io_uring, but io_uring_setup failed";
  switch (error) {
    case EPERM:
      text +=
          " (blocked: a seccomp filter, as containers' default profiles have, or the sysctl "
          "kernel.io_uring_disabled)";
      break;
    case ENOSYS:
      text += " (this kernel has no io_uring)";
      break;
    case ENOMEM:
      text += " (out of memory, or the locked-memory limit: ulimit -l)";
      break;
    case EMFILE:
    case ENFILE:
      text += " (out of file descriptors: a ring and its eventfd need two)";
      break;
    default:
      break;
  }
  text += "; CYAN_NET_BACKEND=auto or epoll uses the epoll path";
  return text;
}

// The calling thread's decision, made once.
struct thread_ring {
  bool decided = false;
  int failure = 0;  // io_uring chosen and refused: the errno, thrown at every this_thread()
  std::unique_ptr<ring> instance;
};

thread_local thread_ring this_thread_ring;

}  // namespace

backend_choice configured_backend() noexcept {
  static const backend_choice choice = parse_backend(std::getenv("CYAN_NET_BACKEND"));
  return choice;
}

// A failure for want of descriptors or memory may pass: it decides nothing (auto: this socket
// uses epoll, the next one tries again; io_uring: this call throws). Any other failure (EPERM
// from seccomp or the sysctl, ENOSYS, EINVAL) decides the thread's backend for good.
ring* ring::this_thread() {
  thread_ring& state = this_thread_ring;
  if (!state.decided && configured_backend() == backend_choice::epoll) {
    state.decided = true;
  }
  if (!state.decided) {
    try {
      state.instance.reset(new ring(this_thread::get_event_loop()));
      state.decided = true;
    } catch (const std::system_error& error) {
      const int code = error.code().value();
      const bool passing = code == EMFILE || code == ENFILE || code == ENOMEM;
      state.decided = !passing;
      if (configured_backend() == backend_choice::io_uring) {
        if (passing) {
          throw std::system_error(code, std::generic_category(), why_not(code));
        }
        state.failure = code;
      }
    }
  }
  if (state.failure != 0) {
    throw std::system_error(state.failure, std::generic_category(), why_not(state.failure));
  }
  return state.instance.get();
}

ring* ring::this_thread_if_set_up() noexcept {
  return this_thread_ring.instance.get();
}

void ring::reset_this_thread() noexcept {
  this_thread_ring.instance.reset();
}

ring::ring(std::shared_ptr<loop> owner) : ring_(std::make_unique<io_uring>()) {
  if (const int error = set_up(*ring_, setup_flags_); error != 0) {
    throw std::system_error(error, std::generic_category(), "io_uring_setup");
  }
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0 || io_uring_register_eventfd(ring_.get(), wake_fd_) != 0) {
    const int error = wake_fd_ < 0 ? errno : EINVAL;
    if (wake_fd_ >= 0) {
      ::close(wake_fd_);
    }
    io_uring_queue_exit(ring_.get());
    throw std::system_error(error, std::generic_category(), "io_uring eventfd");
  }
  // Waking the loop is the point; reading the counter re-arms the level-triggered watcher.
  wake_ = std::make_unique<io>(std::move(owner));
  wake_->set_file_descriptor(wake_fd_);
  wake_->set_events(io::read);
  wake_->set_callback([fd = wake_fd_](io_events) {
    std::uint64_t count = 0;
    [[maybe_unused]] const ssize_t n = ::read(fd, &count, sizeof count);
  });
  wake_->start();
  held_.reserve(kReapBatch);  // one reap's worth: a steady-state drain allocates nothing
}

// Operations still in flight when the ring goes (after the thread's tasks, see
// reset_this_thread()) are ones their owners handed over to it: a multishot receive whose socket
// was destroyed on another thread, freed by its last completion. Cancel them all and wait,
// boundedly, running their completions, so that the kernel is done with their buffers and they
// are freed before the ring goes.
ring::~ring() {
  run_held();  // reaped for cancel_and_wait() and not run yet
  if (in_flight_ > 0) {
    if (io_uring_sqe* entry = io_uring_get_sqe(ring_.get()); entry != nullptr) {
      io_uring_prep_cancel64(entry, 0, IORING_ASYNC_CANCEL_ANY);
      io_uring_sqe_set_data64(entry, kCancelTag);
    }
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (in_flight_ > 0 && std::chrono::steady_clock::now() < give_up) {
      __kernel_timespec wait{ 0, 10'000'000 };
      io_uring_cqe* completion = nullptr;
      io_uring_submit_and_wait_timeout(ring_.get(), &completion, 1, &wait, nullptr);
      unsigned head = 0;
      unsigned seen = 0;
      io_uring_for_each_cqe(ring_.get(), head, completion) {
        ++seen;
        if (completion->user_data == kCancelTag) {
          continue;
        }
        auto* op = static_cast<ring_operation*>(io_uring_cqe_get_data(completion));
        if ((completion->flags & IORING_CQE_F_MORE) == 0) {
          op->in_flight_ = false;
          --in_flight_;
        }
        op->complete(completion->res, completion->flags);  // may free op
      }
      io_uring_cq_advance(ring_.get(), seen);
    }
  }
  wake_.reset();
  io_uring_unregister_eventfd(ring_.get());
  ::close(wake_fd_);
  io_uring_queue_exit(ring_.get());
}

io_uring_sqe* ring::prepare(ring_operation& op) {
  io_uring_sqe* entry = io_uring_get_sqe(ring_.get());
  if (entry == nullptr) {
    submit_queued();
    entry = io_uring_get_sqe(ring_.get());
    if (entry == nullptr) {
      throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again),
                              "cyan: io_uring submission ring full");
    }
  }
  io_uring_sqe_set_data(entry, &op);
  op.in_flight_ = true;
  ++in_flight_;
  return entry;
}

void ring::submit_queued() {
  publish_buffers();
  for (;;) {
    const int rc = io_uring_submit(ring_.get());
    if (rc >= 0 || (rc != -EINTR && rc != -EAGAIN && rc != -EBUSY)) {
      if (rc < 0) {
        throw std::system_error(-rc, std::generic_category(), "cyan: io_uring_submit");
      }
      return;
    }
    if (rc == -EBUSY) {
      reap();  // the completion ring is full: make room (they run at the next drain)
    }
  }
}

void ring::cancel(ring_operation& op) {
  if (!op.in_flight_) {
    return;
  }
  io_uring_sqe* entry = io_uring_get_sqe(ring_.get());
  if (entry == nullptr) {
    submit_queued();
    entry = io_uring_get_sqe(ring_.get());
  }
  if (entry == nullptr) {
    return;  // cannot happen after a submit; the operation then simply runs to its end
  }
  io_uring_prep_cancel(entry, &op, 0);
  io_uring_sqe_set_data64(entry, kCancelTag);
}

// Blocks until `op`'s last completion is reaped (held in held_).
void ring::wait_until_done(ring_operation& op) noexcept {
  if (!op.in_flight_) {
    return;
  }
  try {
    cancel(op);
  } catch (...) {
    // The submission failed: the operation's completion comes when it ends by itself.
  }
  publish_buffers();
  while (op.in_flight_) {
    const int rc = io_uring_submit_and_wait(ring_.get(), 1);
    if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY && rc != -ETIME) {
      std::fprintf(stderr, "cyan: io_uring wait for a cancelled operation failed: %s\n",
                   std::strerror(-rc));
      std::abort();  // returning would let the kernel write into freed memory
    }
    reap();
  }
}

void ring::cancel_and_wait(ring_operation& op) noexcept {
  wait_until_done(op);
  for (std::size_t i = 0; op.held_ > 0 && i < held_.size(); ++i) {
    if (held_[i].op == &op) {
      held_[i].op = nullptr;  // reaped, not run: it must not run now
      --op.held_;
    }
  }
}

void ring::cancel_and_complete(ring_operation& op) noexcept {
  wait_until_done(op);
  for (std::size_t i = 0; op.held_ > 0 && i < held_.size(); ++i) {
    if (held_[i].op == &op) {
      const held_completion held = held_[i];
      held_[i].op = nullptr;
      --op.held_;
      op.complete(held.result, held.flags);
    }
  }
}

buffer_ring* ring::provided_buffers() noexcept {
  if (!buffers_tried_) {
    buffers_tried_ = true;
    buffers_ = buffer_ring::set_up(*ring_);
  }
  return buffers_.get();
}

void ring::publish_buffers() noexcept {
  if (buffers_ != nullptr) {
    buffers_->publish();
  }
}

// Moves what completed into held_ (in completion order); an operation is no longer in flight
// once its last completion (one without IORING_CQE_F_MORE) is there.
std::size_t ring::reap() noexcept {
  ++reaps_;
  io_uring_cqe* completion = nullptr;
  unsigned head = 0;
  unsigned seen = 0;
  io_uring_for_each_cqe(ring_.get(), head, completion) {
    ++seen;
    if (completion->user_data == kCancelTag) {
      continue;
    }
    auto* op = static_cast<ring_operation*>(io_uring_cqe_get_data(completion));
    if ((completion->flags & IORING_CQE_F_MORE) == 0) {
      op->in_flight_ = false;  // a multishot operation's last completion, or a single one's
      --in_flight_;
    }
    ++op->held_;
    held_.push_back({ op, completion->res, completion->flags });
    if (seen == kReapBatch) {
      break;
    }
  }
  io_uring_cq_advance(ring_.get(), seen);
  return seen;
}

// Entries to submit, or completions the kernel holds until this thread enters it.
bool ring::kernel_has_work() const noexcept {
  io_uring* const r = ring_.get();
  return io_uring_sq_ready(r) > 0 ||
         (IO_URING_READ_ONCE(*r->sq.kflags) & (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW)) != 0;
}

bool ring::has_work() const noexcept {
  return !held_.empty() || io_uring_cq_ready(ring_.get()) > 0 || kernel_has_work();
}

// Runs held_ in order. A completion that ends another operation's frame (a task destroying
// another task) reaches cancel_and_wait(), which blanks that operation's entry here.
std::size_t ring::drain() noexcept {
  std::size_t ran = 0;
  while (ran < kDrainBudget) {
    if (held_.empty()) {
      publish_buffers();
      if (kernel_has_work()) {
        const int rc = io_uring_submit_and_get_events(ring_.get());
        if (rc == -EBUSY) {
          reap();  // completions first: the submission is retried by the next drain
        }
      }
      if (reap() == 0) {
        break;
      }
    }
    ran += run_held();
  }
  return ran;
}

std::size_t ring::run_held() noexcept {
  std::size_t ran = 0;
  for (std::size_t i = 0; i < held_.size(); ++i) {
    const held_completion held = held_[i];  // complete() may grow held_
    if (held.op != nullptr) {
      held_[i].op = nullptr;
      --held.op->held_;
      held.op->complete(held.result, held.flags);
      ++ran;
    }
  }
  held_.clear();
  return ran;
}

}  // namespace cyan::event::detail
