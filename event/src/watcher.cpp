#include "cyan/event/detail/watcher.h"

#include <cassert>
#include <cstring>
#include <exception>
#include <new>
#include <stdexcept>

#include "libev.h"

namespace cyan::event::detail {
namespace {

template <typename Raw>
void construct(raw_watcher& storage, watcher_base* owner) noexcept {
  Raw* raw = ::new (static_cast<void*>(storage.bytes)) Raw{};
  ev_init(raw, &libev_callback<Raw>::call);
  raw->data = owner;
}

ev_watcher* common(raw_watcher& storage) noexcept {
  return as<ev_watcher>(storage);
}

const ev_watcher* common(const raw_watcher& storage) noexcept {
  return as<ev_watcher>(storage);
}

// ev_<kind>_start / ev_<kind>_stop for the struct in `storage`.
void start_libev(watcher_kind kind, struct ev_loop* loop, raw_watcher& storage) noexcept {
  switch (kind) {
    case watcher_kind::io:
      ev_io_start(loop, as<ev_io>(storage));
      break;
    case watcher_kind::timer:
      ev_timer_start(loop, as<ev_timer>(storage));
      break;
    case watcher_kind::signal:
      ev_signal_start(loop, as<ev_signal>(storage));
      break;
    case watcher_kind::async:
      ev_async_start(loop, as<ev_async>(storage));
      break;
    case watcher_kind::idle:
      ev_idle_start(loop, as<ev_idle>(storage));
      break;
  }
}

void stop_libev(watcher_kind kind, struct ev_loop* loop, raw_watcher& storage) noexcept {
  switch (kind) {
    case watcher_kind::io:
      ev_io_stop(loop, as<ev_io>(storage));
      break;
    case watcher_kind::timer:
      ev_timer_stop(loop, as<ev_timer>(storage));
      break;
    case watcher_kind::signal:
      ev_signal_stop(loop, as<ev_signal>(storage));
      break;
    case watcher_kind::async:
      ev_async_stop(loop, as<ev_async>(storage));
      break;
    case watcher_kind::idle:
      ev_idle_stop(loop, as<ev_idle>(storage));
      break;
  }
}

// Turns a copy of an active watcher's struct back into start parameters.
void prepare_restart(watcher_kind kind, struct ev_loop* loop, raw_watcher& copy,
                     raw_watcher& original) noexcept {
  switch (kind) {
    case watcher_kind::io: {
      ev_io* io = as<ev_io>(copy);
      ev_io_set(io, io->fd, io->events & (EV_READ | EV_WRITE));
      break;
    }
    case watcher_kind::timer: {
      // While active, `at` is an absolute deadline; starting wants the time left.
      ev_timer* timer = as<ev_timer>(copy);
      ev_timer_set(timer, ev_timer_remaining(loop, as<ev_timer>(original)), timer->repeat);
      break;
    }
    case watcher_kind::async:
      ev_async_set(as<ev_async>(copy));
      break;
    case watcher_kind::signal:
    case watcher_kind::idle:
      break;
  }
}

}  // namespace

watcher_base::watcher_base(watcher_kind kind, std::shared_ptr<event::loop> owner)
    : loop_(std::move(owner)), kind_(kind) {
  if (!loop_) {
    throw std::invalid_argument("cyan::event: a watcher needs a loop, got a null shared_ptr");
  }
  initialize_raw();
}

watcher_base::watcher_base(watcher_base&& other) noexcept : loop_(other.loop_), kind_(other.kind_) {
  take(other);
}

watcher_base& watcher_base::operator=(watcher_base&& other) noexcept {
  if (this != &other) {
    stop();
    loop_ = other.loop_;
    take(other);
  }
  return *this;
}

watcher_base::~watcher_base() {
  stop();
}

void watcher_base::initialize_raw() noexcept {
  switch (kind_) {
    case watcher_kind::io:
      construct<ev_io>(raw_, this);
      break;
    case watcher_kind::timer:
      construct<ev_timer>(raw_, this);
      break;
    case watcher_kind::signal:
      construct<ev_signal>(raw_, this);
      break;
    case watcher_kind::async:
      construct<ev_async>(raw_, this);
      break;
    case watcher_kind::idle:
      construct<ev_idle>(raw_, this);
      break;
  }
}

// Copies `other`'s parameters; if it is active, starts this copy before stopping `other` (so a
// signal handler is never uninstalled in between), then hands over a pending or queued event.
void watcher_base::take(watcher_base& other) noexcept {
  struct ev_loop* raw_loop = loop_->native_handle();
  std::memcpy(raw_.bytes, other.raw_.bytes, sizeof raw_.bytes);
  ev_watcher* mine = common(raw_);
  mine->active = 0;
  mine->pending = 0;
  mine->data = this;
  if (other.is_active() || other.is_pending()) {
    assert_loop_thread();
  }
  if (other.is_active()) {
    prepare_restart(kind_, raw_loop, raw_, other.raw_);
    start_libev(kind_, raw_loop, raw_);
  }
  if (ev_is_pending(common(other.raw_))) {
    ev_feed_event(raw_loop, mine, ev_clear_pending(raw_loop, common(other.raw_)));
  }
  other.stop_raw();
  if (other.queued_slot_ != kNotQueued) {
    queued_slot_ = std::exchange(other.queued_slot_, kNotQueued);
    loop_->queued_events_[queued_slot_].watcher = this;
  }
}

bool watcher_base::is_active() const noexcept {
  return ev_is_active(common(raw_)) != 0;
}

bool watcher_base::is_pending() const noexcept {
  return ev_is_pending(common(raw_)) != 0 || queued_slot_ != kNotQueued;
}

void watcher_base::start_raw() {
  assert_loop_thread();
  if (is_active()) {
    return;
  }
  cancel_queued();
  struct ev_loop* raw_loop = loop_->native_handle();
  ev_clear_pending(raw_loop, common(raw_));
  start_libev(kind_, raw_loop, raw_);
}

void watcher_base::stop() noexcept {
  if (!is_active() && !is_pending()) {
    return;
  }
  assert_loop_thread();
  cancel_queued();
  stop_raw();
}

// ev_<kind>_stop also drops a pending event, active or not.
void watcher_base::stop_raw() noexcept {
  stop_libev(kind_, loop_->native_handle(), raw_);
}

void watcher_base::cancel_queued() noexcept {
  if (queued_slot_ != kNotQueued) {
    loop_->queued_events_[std::exchange(queued_slot_, kNotQueued)].watcher = nullptr;
  }
}

void watcher_base::queue_event(double deadline, std::uint64_t sequence, int revents) noexcept {
  try {
    loop_->queued_events_.push_back({ deadline, sequence, this, revents });
    queued_slot_ = loop_->queued_events_.size() - 1;
  } catch (const std::bad_alloc&) {
    dispatch(revents);  // out of memory: lose the ordering, not the event
  }
}

void watcher_base::dispatch(int revents) noexcept {
  // The callback may destroy *this; the loop outlives the round, as whoever runs it holds it.
  event::loop& owner = *loop_;
  try {
    invoke_callback(revents);
  } catch (...) {
    owner.report_error(std::current_exception());
  }
}

void watcher_base::assert_loop_thread() const noexcept {
  assert(loop_->may_be_used_here() &&
         "cyan::event: loop-thread-only call made from another thread");
}

}  // namespace cyan::event::detail
