#include "cyan/event/loop.h"

#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

#include "cyan/common/detail/print_exception.h"
#include "libev.h"

namespace cyan::event {

static_assert(static_cast<unsigned>(backend::select) == EVBACKEND_SELECT);
static_assert(static_cast<unsigned>(backend::poll) == EVBACKEND_POLL);
static_assert(static_cast<unsigned>(backend::epoll) == EVBACKEND_EPOLL);
static_assert(static_cast<unsigned>(backend::kqueue) == EVBACKEND_KQUEUE);
static_assert(static_cast<unsigned>(backend::port) == EVBACKEND_PORT);
static_assert(static_cast<unsigned>(backend::linux_aio) == EVBACKEND_LINUXAIO);
static_assert(static_cast<unsigned>(backend::io_uring) == EVBACKEND_IOURING);

namespace detail {

// libev's entry points into a loop; ev_userdata() holds the cyan loop.
struct loop_callbacks {
  static void invoke_pending(struct ev_loop* raw) noexcept {
    static_cast<loop*>(ev_userdata(raw))->invoke_pending();
  }

  static void stop_request(struct ev_loop* raw, ev_async*, int) noexcept {
    auto* self = static_cast<loop*>(ev_userdata(raw));
    // A request already consumed by a run() that returned at once leaves this event behind;
    // it must not stop the next run.
    if (self->stop_requested_.exchange(false)) {
      ev_break(raw, EVBREAK_ALL);
    }
  }

  // The timerfd of loop::wake_by() expired: waking up was the whole point. Clears the expiry;
  // the round that follows runs the timers that are due.
  static void precise_wake(struct ev_loop* raw, ev_io* watcher, int) noexcept {
    auto* self = static_cast<loop*>(ev_userdata(raw));
    std::uint64_t expirations = 0;
    [[maybe_unused]] const ssize_t got = ::read(watcher->fd, &expirations, sizeof expirations);
    self->precise_wake_at_ = loop::clock::time_point::max();
  }
};

}  // namespace detail

namespace {

// libev's order of preference (see loop_init in ev.c).
constexpr backend kBackendsByPreference[] = { backend::io_uring, backend::linux_aio, backend::port,
                                              backend::kqueue,   backend::epoll,     backend::poll,
                                              backend::select };

std::vector<backend> backends_in(unsigned flags) {
  std::vector<backend> result;
  for (backend candidate : kBackendsByPreference) {
    if ((flags & static_cast<unsigned>(candidate)) != 0) {
      result.push_back(candidate);
    }
  }
  return result;
}

std::string describe(const std::vector<backend>& backends) {
  std::string text;
  for (backend value : backends) {
    text += text.empty() ? "" : ", ";
    text += to_string(value);
  }
  return text;
}

bool is_process_main_thread() noexcept {
  return ::gettid() == ::getpid();
}

struct ev_loop* create_raw_loop(backend requested) {
  const auto flag = static_cast<unsigned>(requested);
  if (requested != backend::automatic && (ev_supported_backends() & flag) == 0) {
    throw std::runtime_error("cyan::event::loop: backend " + std::string(to_string(requested)) +
                             " is not supported by libev on this system (supported: " +
                             describe(loop::supported_backends()) + ")");
  }
  errno = 0;
  // An explicit choice must not be overridden by the LIBEV_FLAGS environment variable.
  struct ev_loop* raw = ev_loop_new(requested == backend::automatic ? 0u : flag | EVFLAG_NOENV);
  if (raw == nullptr) {
    const int error = errno != 0 ? errno : ENOSYS;
    throw std::system_error(error, std::generic_category(),
                            "cyan::event::loop: could not create a loop with backend " +
                                std::string(to_string(requested)));
  }
  return raw;
}

}  // namespace

std::string_view to_string(backend value) noexcept {
  switch (value) {
    case backend::automatic:
      return "automatic";
    case backend::select:
      return "select";
    case backend::poll:
      return "poll";
    case backend::epoll:
      return "epoll";
    case backend::kqueue:
      return "kqueue";
    case backend::port:
      return "port";
    case backend::linux_aio:
      return "linux_aio";
    case backend::io_uring:
      return "io_uring";
  }
  return "unknown";
}

loop::loop(event::backend backend) : is_main_(false), owner_(std::this_thread::get_id()) {
  attach(create_raw_loop(backend));
}

// owner_ stays unbound (a default id): is_loop_thread() then means "the process's main thread".
loop::loop(main_loop_tag) : is_main_(true) {
  struct ev_loop* raw = ev_default_loop(0);
  if (raw == nullptr) {
    throw std::runtime_error("cyan::event: libev could not create its default loop");
  }
  attach(raw);
}

void loop::attach(struct ev_loop* raw) {
  raw_ = raw;
  ev_set_userdata(raw_, this);
  ev_set_invoke_pending_cb(raw_, &detail::loop_callbacks::invoke_pending);
  auto* stop_watcher = ::new (static_cast<void*>(stop_watcher_.bytes)) ev_async{};
  ev_async_init(stop_watcher, &detail::loop_callbacks::stop_request);
  ev_async_start(raw_, stop_watcher);
  const unsigned precise = EVBACKEND_SELECT | EVBACKEND_KQUEUE | EVBACKEND_PORT;
  coarse_waits_ = (ev_backend(raw_) & precise) == 0;
  now_ = clock::now();
}

loop::~loop() {
  assert(queued_events_.empty());
  ev_async_stop(raw_, detail::as<ev_async>(stop_watcher_));
  if (precise_wake_fd_ >= 0) {
    ev_io_stop(raw_, detail::as<ev_io>(precise_wake_watcher_));
    ::close(precise_wake_fd_);
  }
  ev_loop_destroy(raw_);
}

// Best effort: without a timerfd (descriptors exhausted) short timers fire late, not never.
void loop::wake_by(clock::time_point deadline) noexcept {
  if (!coarse_waits_ || deadline >= precise_wake_at_) {
    return;  // the backend waits precisely, or an earlier wake is armed already
  }
  if (precise_wake_fd_ < 0) {
    precise_wake_fd_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (precise_wake_fd_ < 0) {
      coarse_waits_ = false;
      return;
    }
    auto* watcher = ::new (static_cast<void*>(precise_wake_watcher_.bytes)) ev_io{};
    ev_io_init(watcher, &detail::loop_callbacks::precise_wake, precise_wake_fd_, EV_READ);
    ev_io_start(raw_, watcher);
  }
  // steady_clock is CLOCK_MONOTONIC, the timerfd's clock.
  static_assert(clock::is_steady);
  const auto since_epoch = deadline.time_since_epoch();
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(since_epoch);
  itimerspec spec{};
  spec.it_value.tv_sec = static_cast<time_t>(seconds.count());
  spec.it_value.tv_nsec = static_cast<long>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(since_epoch - seconds).count());
  if (spec.it_value.tv_sec == 0 && spec.it_value.tv_nsec == 0) {
    spec.it_value.tv_nsec = 1;  // zero would disarm the timerfd
  }
  if (::timerfd_settime(precise_wake_fd_, TFD_TIMER_ABSTIME, &spec, nullptr) == 0) {
    precise_wake_at_ = deadline;
  }
}

bool loop::may_be_used_here() const noexcept {
  return !has_run_.load() || is_loop_thread();
}

void loop::begin_run() {
  if (!has_run_.load()) {
    owner_.store(std::this_thread::get_id());
    has_run_.store(true);
  }
  assert(is_loop_thread() && "cyan::event: loop-thread-only call made from another thread");
  if (running_) {
    throw std::logic_error(
        "cyan::event::loop: run/run_once/run_nowait called from one of the loop's callbacks");
  }
  running_ = true;
}

void loop::run() {
  begin_run();
  if (!stop_requested_.exchange(false)) {
    ev_run(raw_, 0);
  }
  end_run();
}

void loop::run_once() {
  begin_run();
  ev_run(raw_, EVRUN_ONCE);
  end_run();
}

bool loop::run_nowait() {
  begin_run();
  ran_callbacks_ = false;
  ev_run(raw_, EVRUN_NOWAIT);
  end_run();
  return ran_callbacks_;
}

void loop::stop() noexcept {
  if (is_loop_thread() && running_) {
    ev_break(raw_, EVBREAK_ALL);
    return;
  }
  stop_requested_.store(true);
  ev_async_send(raw_, detail::as<ev_async>(stop_watcher_));
}

event::backend loop::backend() const noexcept {
  return static_cast<event::backend>(ev_backend(raw_));
}

bool loop::is_loop_thread() const noexcept {
  const std::thread::id owner = owner_.load();
  if (owner == std::thread::id{}) {
    return is_main_ && is_process_main_thread();
  }
  return owner == std::this_thread::get_id();
}

void loop::set_error_handler(error_handler handler) noexcept {
  assert(may_be_used_here() && "cyan::event: loop-thread-only call made from another thread");
  error_handler_ = std::move(handler);
}

std::vector<event::backend> loop::supported_backends() {
  return backends_in(ev_supported_backends());
}

std::vector<event::backend> loop::recommended_backends() {
  return backends_in(ev_recommended_backends());
}

// libev calls this once per round, also when nothing is pending: then there is no callback to
// give a time to, and the clock is not read.
void loop::invoke_pending() noexcept {
  if (ev_pending_count(raw_) == 0 && queued_events_.empty()) {
    return;
  }
  ran_callbacks_ = true;
  now_ = clock::now();
  ev_invoke_pending(raw_);
  if (!queued_events_.empty()) {
    run_queued_events();
  }
}

// Callbacks may stop, destroy or move queued watchers (which clears or updates their entry
// through queued_slot_), so entries are visited by index and re-read each time.
void loop::run_queued_events() noexcept {
  std::sort(queued_events_.begin(), queued_events_.end(), [](const auto& a, const auto& b) {
    return a.deadline < b.deadline || (a.deadline == b.deadline && a.sequence < b.sequence);
  });
  for (std::size_t slot = 0; slot < queued_events_.size(); ++slot) {
    if (queued_events_[slot].watcher != nullptr) {
      queued_events_[slot].watcher->queued_slot_ = slot;
    }
  }
  for (std::size_t slot = 0; slot < queued_events_.size(); ++slot) {
    detail::watcher_base* watcher = std::exchange(queued_events_[slot].watcher, nullptr);
    if (watcher != nullptr) {
      watcher->queued_slot_ = detail::watcher_base::kNotQueued;
      watcher->dispatch(queued_events_[slot].revents);
    }
  }
  queued_events_.clear();
}

void loop::report_error(std::exception_ptr error) noexcept {
  if (error_handler_) {
    try {
      error_handler_(error);
      return;
    } catch (...) {
      cyan::detail::print_exception("cyan::event::loop", "the error handler threw",
                                    std::current_exception());
    }
  }
  cyan::detail::print_exception("cyan::event::loop", "a callback threw", error);
}

// In this order: libev's reading is the later one.
loop::clock::time_point loop::refresh_time() noexcept {
  now_ = clock::now();
  ev_now_update(raw_);
  return now_;
}

std::shared_ptr<loop> get_main_loop() {
  static const std::shared_ptr<loop> main_loop(new loop(loop::main_loop_tag{}));
  // Bind eagerly once the main thread shows up, so is_loop_thread() stops asking the kernel.
  if (main_loop->owner_.load() == std::thread::id{} && is_process_main_thread()) {
    std::thread::id unbound{};
    main_loop->owner_.compare_exchange_strong(unbound, std::this_thread::get_id());
  }
  return main_loop;
}

}  // namespace cyan::event

namespace cyan::this_thread {

std::shared_ptr<event::loop> get_event_loop() {
  thread_local std::shared_ptr<event::loop> current;
  if (!current) {
    current =
        event::is_process_main_thread() ? event::get_main_loop() : std::make_shared<event::loop>();
  }
  return current;
}

}  // namespace cyan::this_thread
