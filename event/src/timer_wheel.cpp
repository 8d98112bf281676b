#include "cyan/event/timer_wheel.h"

#include <algorithm>
#include <cassert>
#include <stdexcept>
#include <utility>

#include "libev.h"

namespace cyan::event {
namespace {

using clock_type = loop::clock;

timer_wheel::duration checked_resolution(timer_wheel::duration resolution) {
  if (resolution <= timer_wheel::duration::zero()) {
    throw std::invalid_argument("cyan::event::timer_wheel: the resolution must be positive");
  }
  return resolution;
}

// How many ticks of `resolution` make `unit`, or 0 when that is not a whole number.
std::uint64_t whole_ticks(timer_wheel::duration unit, timer_wheel::duration resolution) {
  return unit % resolution == timer_wheel::duration::zero()
             ? static_cast<std::uint64_t>(unit / resolution)
             : 0;
}

}  // namespace

static_assert(detail::fits_raw_watcher<ev_prepare>);

struct detail::wheel_round_end {
  static void call(struct ev_loop*, ev_prepare* watcher, int) noexcept {
    static_cast<timer_wheel*>(watcher->data)->on_round_end();
  }
};

timer_wheel::timer_wheel(std::shared_ptr<loop> owner, duration resolution)
    : resolution_(checked_resolution(resolution)),
      per_tick_(static_cast<std::uint64_t>(resolution_.count())),
      ticks_per_ms_(whole_ticks(std::chrono::milliseconds(1), resolution_)),
      core_([this](std::exception_ptr error) { on_callback_error(std::move(error)); }),
      timer_(std::move(owner)) {
  timer_.set_callback([this] { on_timer(); });
  auto* round_end = ::new (static_cast<void*>(round_end_.bytes)) ev_prepare{};
  ev_prepare_init(round_end, &detail::wheel_round_end::call);
  round_end->data = this;
}

timer_wheel::~timer_wheel() {
  assert(!core_.advancing() && "cyan::event::timer_wheel: destroyed from one of its callbacks");
  // The callbacks go first, while every member is alive: their destructors may post or cancel.
  // Stopped first, so that a post made meanwhile does not arm the timer.
  running_ = false;
  disarm();
  core_.clear();
  unwatch_round_end();  // a destructor's post may have started it
}

void timer_wheel::start() {
  assert_loop_thread();
  if (running_) {
    return;
  }
  running_ = true;
  if (!core_.advancing()) {  // otherwise on_timer() arms the timer when the callback returns
    rearm();
  }
}

void timer_wheel::stop() noexcept {
  assert_loop_thread();
  running_ = false;
  if (core_.advancing()) {
    core_.interrupt();
  }
  disarm();
}

timer_wheel::tick_type timer_wheel::due_after(std::uint64_t now, std::uint64_t delay_ns) {
  if (core_.empty() && !core_.advancing()) {
    catch_up(clock_type::time_point(duration(static_cast<duration::rep>(now))));
  }
  if (ticks_per_ms_ != 0) {
    ceiling_ = per_tick_.divide_up(now);  // below 2^63: divide_up's domain
  }
  // The sum stays below 2^63 + 2^62, within divide_up's domain.
  return per_tick_.divide_up(now + delay_ns);
}

std::uint64_t timer_wheel::read_clock() noexcept {
  const std::uint64_t now = since_epoch(clock_type::now());
  take_reading(now);
  return now;
}

void timer_wheel::take_reading(std::uint64_t now) noexcept {
  if (ceiling_ == kNoCeiling) {
    assert(batch_size_ == 0 && "timer_wheel: a batch without a ceiling");
    return;
  }
  const tick_type ceiling = per_tick_.divide_up(now);
  if (batch_size_ != 0 && ceiling > ceiling_) {
    postpone_batch(ceiling - ceiling_);
  }
  batch_size_ = 0;
  ceiling_ = ceiling;
}

void timer_wheel::postpone_batch(tick_type ticks) noexcept {
  // In post order, so that entries of the batch due at the same tick keep their order; entries
  // cancelled meanwhile are skipped (ids are never reused).
  for (std::size_t i = 0; i < batch_size_; ++i) {
    const batched& posted = batch_[i];
    core_.postpone(static_cast<detail::timer_wheel_core::id_type>(posted.entry),
                   posted.due + ticks);
  }
}

void timer_wheel::on_batch_grown() noexcept {
  if (batch_size_ == kBatchPosts) {
    take_reading(since_epoch(clock_type::now()));
  } else {
    watch_round_end();
  }
}

void timer_wheel::on_round_end() noexcept {
  if (batch_size_ != 0) {
    const clock_type::time_point loop_time = get_loop()->now();
    take_reading(since_epoch(loop_time != loop_time_at_last_post_ ? loop_time : clock_type::now()));
  }
  unwatch_round_end();
}

// Unreferenced while active: a batch waiting for its check keeps no loop running.
void timer_wheel::watch_round_end() noexcept {
  auto* watcher = detail::as<ev_prepare>(round_end_);
  if (!ev_is_active(watcher)) {
    struct ev_loop* raw = get_loop()->native_handle();
    ev_prepare_start(raw, watcher);
    ev_unref(raw);
  }
}

void timer_wheel::unwatch_round_end() noexcept {
  auto* watcher = detail::as<ev_prepare>(round_end_);
  if (ev_is_active(watcher)) {
    struct ev_loop* raw = get_loop()->native_handle();
    ev_ref(raw);
    ev_prepare_stop(raw, watcher);
  }
}

void timer_wheel::drop_ceiling() noexcept {
  if (batch_size_ != 0 && !core_.empty()) {
    take_reading(since_epoch(clock_type::now()));  // the batch's entries may outlive the ceiling
  }
  batch_size_ = 0;
  ceiling_ = kNoCeiling;
  unwatch_round_end();
}

void timer_wheel::catch_up(clock_type::time_point now) noexcept {
  core_.advance_to(tick_at(now));  // nothing to run: new entries are placed from today
}

timer_wheel::id timer_wheel::post(std::nullptr_t, duration) {
  assert_loop_thread();
  throw std::invalid_argument("cyan::event::timer_wheel: empty callback");
}

void timer_wheel::reserve(std::size_t entries) {
  assert_loop_thread();
  core_.reserve(entries);
}

timer_wheel::tick_type timer_wheel::tick_at(clock_type::time_point t) const noexcept {
  const duration since_epoch = std::chrono::duration_cast<duration>(t.time_since_epoch());
  return since_epoch > duration::zero()
             ? per_tick_.divide(static_cast<tick_type>(since_epoch.count()))
             : 0;
}

void timer_wheel::on_timer() {
  // The loop timer fires no earlier than the tick it was set for, which may hold nothing to run
  // now (a far slot's entries move closer), or later, past further ticks: advance to the clock.
  // The batch is checked first: none of it may run before its due tick.
  const std::uint64_t now = read_clock();
  core_.advance_to(tick_at(clock_type::time_point(duration(static_cast<duration::rep>(now)))));
  rearm();
  if (pending_error_) {
    std::rethrow_exception(std::exchange(pending_error_, nullptr));  // to the loop's handler
  }
}

void timer_wheel::on_callback_error(std::exception_ptr error) noexcept {
  // The loop's error handler is reached by rethrowing from on_timer(); the rest of the tick
  // runs in the next round (rearm() sees it as due now).
  pending_error_ = std::move(error);
  core_.interrupt();
}

void timer_wheel::rearm() {
  if (!running_ || core_.empty()) {
    disarm();
    return;
  }
  const tick_type next = core_.next_event();
  if (timer_.is_active() && next == armed_for_) {
    return;
  }
  timer_.set_timeout(time_until(next));
  timer_.reset();
  armed_for_ = next;
}

clock_type::duration timer_wheel::time_until(tick_type tick) const noexcept {
  // Measured from a clock reading taken before the loop timer's own (reset() reads the clock),
  // so the timer fires no earlier than the tick. A tick more than a day ahead (only the
  // overflow list's, or a coarse resolution's) is looked at again in a day instead, which keeps
  // the multiplication below from overflowing.
  constexpr std::chrono::hours kLongestWait{ 24 };
  const clock_type::time_point now = clock_type::now();
  const tick_type current = tick_at(now);
  if (tick > current && tick - current > static_cast<tick_type>(kLongestWait / resolution_)) {
    return kLongestWait;
  }
  const clock_type::time_point at{ resolution_ * static_cast<std::int64_t>(tick) };
  return std::max(at - now, clock_type::duration::zero());
}

void timer_wheel::disarm() noexcept {
  timer_.stop();
  armed_for_ = detail::timer_wheel_core::kNever;
  drop_ceiling();  // the core may be empty: the next post catches it up
}

}  // namespace cyan::event
