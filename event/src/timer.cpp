#include "cyan/event/timer.h"

#include <chrono>
#include <stdexcept>
#include <string>
#include <utility>

#include "cyan/common/detail/saturating_time.h"
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

using clock_type = loop::clock;

// `seconds` after `from`, rounded up to the clock's tick; time_point::max() when that is past it.
clock_type::time_point plus_seconds(clock_type::time_point from, double seconds) noexcept {
  return cyan::detail::saturating_add(from, timer::duration(seconds));
}

// A deadline of libev's timers as a loop::clock time: both count CLOCK_MONOTONIC, libev in
// double seconds. Rounded up and one tick further, since libev runs a timer only once its
// deadline is strictly before the loop's time: a wake-up at the result finds the timer due.
clock_type::time_point from_libev_time(double deadline) noexcept {
  const clock_type::time_point at = plus_seconds(clock_type::time_point(), deadline);
  return at == clock_type::time_point::max() ? at : at + clock_type::duration(1);
}

// A loop::clock time on libev's timer clock (the inverse of from_libev_time, without its tick).
double to_libev_time(clock_type::time_point at) noexcept {
  return timer::duration(at.time_since_epoch()).count();
}

}  // namespace

timer::timer(std::shared_ptr<loop> owner)
    : basic_watcher(detail::watcher_kind::timer, std::move(owner)) {}

timer::timer(timer&& other) noexcept
    : basic_watcher(std::move(other)),
      timeout_(other.timeout_),
      repeat_(other.repeat_),
      deadline_(other.deadline_),
      sequence_(other.sequence_),
      due_(other.due_) {
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
  due_ = other.due_;
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
  // Against a clock reading of its own, not libev's time of the last round (what
  // ev_timer_remaining subtracts): a callback that ran long has used up part of the countdown.
  const double left = detail::as<ev_timer>(raw())->at - to_libev_time(clock_type::now());
  return duration(left > 0.0 ? left : 0.0);
}

void timer::start_countdown() {
  assert_loop_thread();
  loop& owner = *get_loop();
  // Read before libev's own reading, which libev counts its deadline from: deadline_ is no
  // earlier than due_.
  due_ = plus_seconds(owner.refresh_time(), timeout_);
  ev_timer* raw_timer = detail::as<ev_timer>(raw());
  ev_timer_set(raw_timer, timeout_, repeat_);
  sequence_ = owner.next_timer_sequence();
  start_raw();
  deadline_ = raw_timer->at;
  wake_on_time(timeout_);
}

void timer::on_raw_event(int revents) noexcept {
  wait_until_due();
  due_ = loop::clock::time_point::min();
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
    get_loop()->wake_by(from_libev_time(deadline_));
  }
}

// libev expires the timer once its clock, a double, passes deadline_; on a host up for months
// the doubles' rounding reaches nanoseconds, by which the expiry may precede due_. Waiting that
// out keeps the promise exact by steady_clock. The loop read its clock just before this round's
// callbacks, so this rarely reads it again.
void timer::wait_until_due() const noexcept {
  if (get_loop()->now() >= due_) {
    return;
  }
  while (loop::clock::now() < due_) {
  }
}

}  // namespace cyan::event
