// Timer benchmark: very many one-shot timeouts on one loop.
//   post + cancel — N timeouts are posted (delays spread over 1..1000 ms), then all cancelled in
//                   post order: the request-deadline pattern, where most timeouts never fire.
//   firing        — N timeouts are posted and the loop runs until every one has fired.
// Arms, on the same kind of cyan::event::loop:
//   timer_wheel — cyan::event::timer_wheel (1 ms ticks) driven by its one loop timer;
//   ev_timer    — one raw libev ev_timer per timeout, in a vector allocated before timing (the
//                 honest baseline: no wrapper cost), started with ev_timer_start and stopped with
//                 ev_timer_stop, on the loop's native handle.
// Both arms have their storage grown before timing (wheel.reserve(N); libev's timer heap by a
// warm-up start/stop of N timers), and post from inside one of the loop's callbacks, as a server
// does while it handles events. No wheel entry runs before its delay has passed since its post:
// posts in milliseconds from a callback are due as if posted at the wheel's last clock reading and
// checked against a later one (one read per 64 posts, see timer_wheel.h); ev_timer_start counts
// from the loop's cached time (read when the round began) without reading the clock, and may fire
// that much early.
//
// Timing: post + cancel is wall time. Firing spans ~1 s of wall time in every arm (the delays
// do), so it is measured as the loop thread's CPU time (CLOCK_THREAD_CPUTIME_ID) from the first
// post to the last callback: the work each arm does, not the waiting.
// Checksums: post + cancel — timeouts cancelled + the sum of their delays in ms; firing —
// callbacks run + the sum of their indexes.
//
//   CYAN_BENCH_TIMERS  timeouts per run (default 1000000)
//   CYAN_BENCH_REPS    repetitions per arm (default 11)

#include <ev.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include <cyan/event/loop.h>
#include <cyan/event/timer.h>
#include <cyan/event/timer_wheel.h>

#include "bench/harness.h"

namespace {

using cyan::bench::sample;
using cyan::event::loop;
using cyan::event::timer_wheel;

/// The i-th timeout's delay: spread over 1..1000 ms, the same set in every arm.
std::chrono::milliseconds delay_of(std::uint64_t i) {
  return std::chrono::milliseconds(1 + (i * 7919) % 1000);
}

/// Runs `work` inside one of `owner`'s callbacks (a zero timeout timer's).
template <typename Work>
void run_in_callback(const std::shared_ptr<loop>& owner, Work work) {
  bool done = false;
  cyan::event::timer kickoff{ owner };
  kickoff.set_callback([&] {
    work();
    done = true;
  });
  kickoff.start();
  while (!done) {
    owner->run_once();
  }
}

/// What every firing callback adds to.
struct fired_count {
  std::uint64_t count = 0;
  std::uint64_t index_sum = 0;
  [[nodiscard]] std::uint64_t checksum() const { return count + index_sum; }
};

sample wheel_post_cancel(std::uint64_t n) {
  auto owner = std::make_shared<loop>();
  timer_wheel wheel{ owner };
  wheel.reserve(n);
  wheel.start();
  std::vector<timer_wheel::id> ids(n);
  std::uint64_t never_run = 0;
  sample result;
  run_in_callback(owner, [&] {
    result = cyan::bench::time([&] {
      for (std::uint64_t i = 0; i < n; ++i) {
        ids[i] = wheel.post([&never_run] { ++never_run; }, delay_of(i));
      }
      std::uint64_t checksum = never_run;
      for (std::uint64_t i = 0; i < n; ++i) {
        if (wheel.cancel(ids[i])) {
          checksum += 1 + static_cast<std::uint64_t>(delay_of(i).count());
        }
      }
      return checksum;
    });
  });
  return result;
}

/// N raw ev_timers on one cyan loop, with libev's heap grown by a warm-up.
struct ev_timers {
  ev_timers(std::uint64_t n, struct ev_loop* raw) : timers(n), raw_loop(raw) {
    for (auto& t : timers) {
      ev_timer_init(&t, &on_expiry, 1.0, 0.0);
      ev_timer_start(raw_loop, &t);
    }
    for (auto& t : timers) {
      ev_timer_stop(raw_loop, &t);
    }
  }
  static void on_expiry(struct ev_loop*, ev_timer* t, int) {
    auto* self = static_cast<ev_timers*>(t->data);
    ++self->fired.count;
    self->fired.index_sum += static_cast<std::uint64_t>(t - self->timers.data());
  }
  void arm(std::uint64_t i) {
    ev_timer& t = timers[i];
    ev_timer_init(&t, &on_expiry, std::chrono::duration<double>(delay_of(i)).count(), 0.0);
    t.data = this;
    ev_timer_start(raw_loop, &t);
  }
  std::vector<ev_timer> timers;
  struct ev_loop* raw_loop;
  fired_count fired;
};

sample ev_post_cancel(std::uint64_t n) {
  auto owner = std::make_shared<loop>();
  ev_timers evs(n, owner->native_handle());
  sample result;
  run_in_callback(owner, [&] {
    result = cyan::bench::time([&] {
      for (std::uint64_t i = 0; i < n; ++i) {
        evs.arm(i);
      }
      std::uint64_t checksum = evs.fired.count;
      for (std::uint64_t i = 0; i < n; ++i) {
        ev_timer& t = evs.timers[i];
        if (ev_is_active(&t)) {
          ev_timer_stop(evs.raw_loop, &t);
          checksum += 1 + static_cast<std::uint64_t>(delay_of(i).count());
        }
      }
      return checksum;
    });
  });
  return result;
}

sample wheel_firing(std::uint64_t n) {
  auto owner = std::make_shared<loop>();
  timer_wheel wheel{ owner };
  wheel.reserve(n);
  wheel.start();
  fired_count fired;
  double started = 0;
  run_in_callback(owner, [&] {
    started = cyan::bench::cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
    for (std::uint64_t i = 0; i < n; ++i) {
      wheel.post(
          [&fired, i] {
            ++fired.count;
            fired.index_sum += i;
          },
          delay_of(i));
    }
  });
  while (fired.count < n) {
    owner->run_once();
  }
  return { cyan::bench::cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - started, fired.checksum() };
}

sample ev_firing(std::uint64_t n) {
  auto owner = std::make_shared<loop>();
  ev_timers evs(n, owner->native_handle());
  double started = 0;
  run_in_callback(owner, [&] {
    started = cyan::bench::cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
    for (std::uint64_t i = 0; i < n; ++i) {
      evs.arm(i);
    }
  });
  while (evs.fired.count < n) {
    owner->run_once();
  }
  return { cyan::bench::cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - started, evs.fired.checksum() };
}

}  // namespace

int main() {
  const std::uint64_t n = cyan::bench::env_or("CYAN_BENCH_TIMERS", 1000000);
  std::printf("timer benchmark: %llu timeouts per run, delays 1..1000 ms\n",
              static_cast<unsigned long long>(n));

  cyan::bench::suite cancel{ "timer", "post + cancel (wall s)" };
  cancel.add("timer_wheel", [n] { return wheel_post_cancel(n); });
  cancel.add("ev_timer", [n] { return ev_post_cancel(n); });
  bool ok = cancel.run();
  cancel.goal("timer_wheel", "ev_timer", 3.0);  // the goals of #47

  cyan::bench::suite firing{ "timer", "all fire (loop-thread CPU s)" };
  firing.add("timer_wheel", [n] { return wheel_firing(n); });
  firing.add("ev_timer", [n] { return ev_firing(n); });
  ok = firing.run() && ok;
  firing.goal("timer_wheel", "ev_timer", 3.0);
  return cyan::bench::exit_status(ok);
}
