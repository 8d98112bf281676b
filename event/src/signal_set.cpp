#include "cyan/event/signal_set.h"

#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

namespace cyan::event {

namespace {

// The mask of `numbers`, each checked.
sigset_t mask_of(std::initializer_list<int> numbers) {
  sigset_t mask;
  sigemptyset(&mask);
  for (const int number : numbers) {
    if (number <= 0 || number >= NSIG) {
      throw std::invalid_argument("cyan::event::signal_set: no signal number " +
                                  std::to_string(number));
    }
    if (number == SIGKILL || number == SIGSTOP) {
      throw std::invalid_argument("cyan::event::signal_set: signal " + std::to_string(number) +
                                  " cannot be caught");
    }
    sigaddset(&mask, number);
  }
  return mask;
}

void block(const sigset_t& mask) {
  if (const int error = ::pthread_sigmask(SIG_BLOCK, &mask, nullptr); error != 0) {
    throw std::system_error(error, std::generic_category(), "pthread_sigmask");
  }
}

}  // namespace

void block_signals(std::initializer_list<int> numbers) {
  block(mask_of(numbers));
}

signal_set::signal_set(std::shared_ptr<loop> owner, std::initializer_list<int> numbers)
    : loop_(owner), numbers_(numbers), watcher_(owner), canceler_(std::move(owner)) {
  if (numbers_.empty()) {
    throw std::invalid_argument("cyan::event::signal_set: no signal to watch");
  }
  const sigset_t mask = mask_of(numbers);
  block(mask);
  fd_ = ::signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd_ < 0) {
    throw std::system_error(errno, std::generic_category(), "cyan::event::signal_set: signalfd");
  }
  watcher_.set_file_descriptor(fd_);
  watcher_.set_events(io::read);
  watcher_.set_callback([this](io_events /*ready*/) { read_signals(); });
  canceler_.set_callback([this] { end_canceled_waits(); });
}

signal_set::~signal_set() {
  std::vector<wait_awaiter*> waiting;
  waiting.swap(waiters_);
  watcher_.stop();
  canceler_.stop();
  ::close(fd_);
  for (wait_awaiter* waiter : waiting) {
    waiter->finish(0);  // touches only the waiter and its coroutine, not this set
  }
}

void signal_set::set_callback(unique_function<void(int)> callback) {
  callback_ = std::move(callback);
}

void signal_set::start() {
  watcher_.start();
  canceler_.start();
}

void signal_set::stop() noexcept {
  watcher_.stop();
  canceler_.stop();
  std::vector<wait_awaiter*> waiting;
  waiting.swap(waiters_);
  for (wait_awaiter* waiter : waiting) {
    waiter->finish(0);
  }
}

signal_set::wait_awaiter signal_set::wait() noexcept {
  return wait_awaiter(*this);
}

// One signal per round of the loop (the watcher is level-triggered: the next round reads the
// next), because delivering it may resume a task or run a callback that destroys this set:
// nothing of the set is touched after the delivery. What the callback throws goes to the
// loop's error handler (through the watcher).
void signal_set::read_signals() {
  signalfd_siginfo info{};
  ssize_t n = 0;
  do {
    n = ::read(fd_, &info, sizeof info);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof info)) {
    return;  // EAGAIN: another set (or thread) read it first
  }
  deliver(static_cast<int>(info.ssi_signo));
}

void signal_set::deliver(int number) {
  if (!waiters_.empty()) {
    wait_awaiter* first = waiters_.front();
    waiters_.erase(waiters_.begin());
    first->finish(number);
    return;
  }
  if (callback_) {
    callback_(number);
    return;
  }
  kept_.push_back(number);
}

// On the loop thread after a stop request on any thread: ends one stopped wait per call (its
// resumption may destroy the set), asking for another call first when more are stopped.
void signal_set::end_canceled_waits() noexcept {
  const auto stopped = [](const wait_awaiter* w) { return w->stop_requested_.load(); };
  const auto first = std::find_if(waiters_.begin(), waiters_.end(), stopped);
  if (first == waiters_.end()) {
    return;
  }
  wait_awaiter* waiter = *first;
  waiters_.erase(first);
  if (std::any_of(waiters_.begin(), waiters_.end(), stopped)) {
    canceler_.send();
  }
  waiter->finish(0);
}

bool signal_set::add_waiter(wait_awaiter& waiter) {
  if (!kept_.empty()) {
    waiter.number_ = kept_.front();
    kept_.pop_front();
    return false;
  }
  start();
  waiters_.push_back(&waiter);
  return true;
}

void signal_set::remove_waiter(wait_awaiter& waiter) noexcept {
  std::erase(waiters_, &waiter);
}

// ---- wait_awaiter ----

signal_set::wait_awaiter::~wait_awaiter() {
  stop_.reset();
  if (waiting_) {
    set_.remove_waiter(*this);  // the frame is destroyed while it waits
  }
}

bool signal_set::wait_awaiter::suspend(std::stop_token token) {
  if (token.stop_requested()) {
    return false;  // await_resume() reports the cancellation
  }
  if (!set_.add_waiter(*this)) {
    return false;  // a kept signal
  }
  waiting_ = true;
  if (token.stop_possible()) {
    stop_.emplace(std::move(token), on_stop{ this });
  }
  return true;
}

void signal_set::wait_awaiter::on_stop::operator()() const noexcept {
  self->stop_requested_.store(true);
  self->set_.canceler_.send();  // the loop thread ends the wait (end_canceled_waits)
}

void signal_set::wait_awaiter::finish(int number) noexcept {
  number_ = number;
  waiting_ = false;
  coroutine_.resume();
}

int signal_set::wait_awaiter::await_resume() {
  stop_.reset();  // waits for a stop callback still running on another thread
  if (number_ == 0) {
    throw std::system_error(std::make_error_code(std::errc::operation_canceled));
  }
  return number_;
}

}  // namespace cyan::event
