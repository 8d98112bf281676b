#include "cyan/event/timer.h"

#include <stdexcept>
#include <string>
#include <utility>

#include "libev.h"

namespace cyan::event {
namespace {

double checked_seconds(timer::duration value, const char* what) {
  if (!(value.count() >= 0.0)) {  // also rejects NaN
    throw std::invalid_argument(std::string("cyan::event::timer: ") + what +
                                " must be zero or positive");
  }
  return value.count();
}

}  // namespace

timer::timer(std::shared_ptr<loop> owner)
    : basic_watcher(detail::watcher_kind::timer, std::move(owner)) {}

timer::timer(timer&& other) noexcept
    : basic_watcher(std::move(other)),
      timeout_(other.timeout_),
      repeat_(other.repeat_),
      deadline_(other.deadline_),
      sequence_(other.sequence_) {
  if (is_active()) {
    deadline_ = detail::as<ev_timer>(raw())->at;  // restarted by the move: libev recomputed it
  }
}

timer& timer::operator=(timer&& other) noexcept {
  basic_watcher::operator=(std::move(other));
  timeout_ = other.timeout_;
  repeat_ = other.repeat_;
  deadline_ = is_active() ? detail::as<ev_timer>(raw())->at : other.deadline_;
  sequence_ = other.sequence_;
  return *this;
}

void timer::set_timeout(duration timeout) {
  timeout_ = checked_seconds(timeout, "the timeout");
}

void timer::set_repeat(duration repeat) {
  repeat_ = checked_seconds(repeat, "the repeat");
}

void timer::start() {
  if (!is_active()) {
    start_countdown();
  }
}

void timer::reset() {
  stop();
  start_countdown();
}

timer::duration timer::remaining() const noexcept {
  if (!is_active()) {
    return duration(0.0);
  }
  // ev_timer_remaining does not modify the timer; it only takes a non-const pointer.
  auto* raw_timer = const_cast<ev_timer*>(detail::as<ev_timer>(raw()));
  const double left = ev_timer_remaining(get_loop()->native_handle(), raw_timer);
  return duration(left > 0.0 ? left : 0.0);
}

void timer::start_countdown() {
  assert_loop_thread();
  get_loop()->refresh_time_if_idle();
  ev_timer* raw_timer = detail::as<ev_timer>(raw());
  ev_timer_set(raw_timer, timeout_, repeat_);
  sequence_ = get_loop()->next_timer_sequence();
  start_raw();
  deadline_ = raw_timer->at;
  wake_on_time(timeout_);
}

void timer::on_raw_event(int revents) noexcept {
  const double expired = deadline_;
  if (is_active()) {
    deadline_ = detail::as<ev_timer>(raw())->at;  // a repeating timer is already rescheduled
    wake_on_time(repeat_);
  }
  queue_event(expired, sequence_, revents);
}

// A wait shorter than the backend honours (see loop::wake_by) would end up to 1 ms late.
void timer::wake_on_time(double wait) noexcept {
  using seconds = std::chrono::duration<double>;
  if (wait > 0.0 && seconds(wait) < loop::kCoarseBackendWait) {
    const auto& owner = get_loop();
    owner->wake_by(owner->now() + std::chrono::ceil<loop::clock::duration>(seconds(wait)));
  }
}

}  // namespace cyan::event
