// Coroutine benchmark: cyan::dispatch::task against boost::asio::awaitable, in one run.
//   awaits    — one coroutine co_awaits a trivial child coroutine N times in a row (each child
//               returns its argument; the parent sums them), on one thread: the cost of a
//               child's frame, its start and its completion.
//   hops      — one coroutine hops between two threads R round trips: cyan's
//               `co_await schedule(other)`, Asio's idiomatic
//               `co_await post(bind_executor(other, use_awaitable))` between two io_contexts
//               each run by one thread; and, as the floor, cyan's closure ping-pong between two
//               handler threads (a post a->b and one b->a per round trip, no coroutine).
//   sleepers  — S coroutines sleep at once on one thread, for 1..100 ms each; measured as that
//               thread's CPU time (CLOCK_THREAD_CPUTIME_ID) from the first spawn to the last
//               wake-up, not wall time (which is ~100 ms in every arm): cyan's
//               `co_await sleep_for(d)` (the thread's timer wheel) in tasks co_spawn-ed on the
//               handler thread, Asio's steady_timer + `co_await async_wait(use_awaitable)` in
//               awaitables co_spawn-ed on the io_context.
// The awaits arms run on threads pinned to the same CPU (see shared_cpu()).
// Checksums: awaits — the sum of the children's results; hops — round trips; sleepers — the
// sleepers that woke plus the sum of their delays in ms.
//
//   CYAN_BENCH_AWAITS       child awaits per run (default 10000000)
//   CYAN_BENCH_HOPS         hop round trips per run (default 200000)
//   CYAN_BENCH_SLEEPERS     sleeping coroutines per run (default 100000)
//   CYAN_BENCH_REPS         repetitions per arm (default 11)

#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <latch>
#include <memory>
#include <optional>
#include <thread>
#include <utility>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <cyan/common/thread.h>
#include <cyan/dispatch.h>

#include "bench/harness.h"

namespace {

namespace asio = boost::asio;
using cyan::bench::sample;
using cyan::dispatch::co_spawn;
using cyan::dispatch::handler_thread;
using cyan::dispatch::task;

// ---- awaits -------------------------------------------------------------------------------

task<std::uint64_t> cyan_child(std::uint64_t i) {
  co_return i;
}

task<std::uint64_t> cyan_parent(std::uint64_t n) {
  std::uint64_t sum = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    sum += co_await cyan_child(i);
  }
  co_return sum;
}

sample cyan_awaits(handler_thread& thread, std::uint64_t n) {
  return cyan::bench::time([&] { return co_spawn(thread, cyan_parent(n)).get(); });
}

asio::awaitable<std::uint64_t> asio_child(std::uint64_t i) {
  co_return i;
}

asio::awaitable<std::uint64_t> asio_parent(std::uint64_t n) {
  std::uint64_t sum = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    sum += co_await asio_child(i);
  }
  co_return sum;
}

/// The CPU the awaits workload pins both arms' threads to, so that
/// both run on the same vCPU: on this host one vCPU runs a loop up to 1.6x slower than the
/// other, for minutes at a time. Null: no pinning (a single-CPU machine).
std::optional<unsigned> shared_cpu() {
  if (std::thread::hardware_concurrency() < 2) {
    return std::nullopt;
  }
  return 1U;
}

/// A handler thread, pinned to shared_cpu() when asked.
handler_thread::options pinned(bool pin) {
  handler_thread::options opts;
  if (pin) {
    opts.cpu = shared_cpu();
  }
  return opts;
}

/// An io_context run by its own thread until destroyed, pinned to shared_cpu() when asked.
class asio_thread {
 public:
  explicit asio_thread(bool pin = false)
      : guard_(io_.get_executor()), thread_([this, pin] {
          if (pin && shared_cpu()) {
            cyan::this_thread::set_affinity(*shared_cpu());
          }
          io_.run();
        }) {
    asio::post(io_, asio::use_future).get();  // warm: the thread runs
  }
  ~asio_thread() {
    guard_.reset();
    thread_.join();
  }
  asio::io_context& io() { return io_; }

 private:
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> guard_;
  std::thread thread_;
};

sample asio_awaits(asio_thread& thread, std::uint64_t n) {
  return cyan::bench::time(
      [&] { return asio::co_spawn(thread.io(), asio_parent(n), asio::use_future).get(); });
}

// ---- hops ---------------------------------------------------------------------------------

task<std::uint64_t> cyan_hopper(handler_thread& a, handler_thread& b, std::uint64_t trips) {
  for (std::uint64_t i = 0; i < trips; ++i) {
    co_await b.schedule();
    co_await a.schedule();
  }
  co_return trips;
}

sample cyan_hops(handler_thread& a, handler_thread& b, std::uint64_t trips) {
  return cyan::bench::time([&] { return co_spawn(a, cyan_hopper(a, b, trips)).get(); });
}

asio::awaitable<std::uint64_t> asio_hopper(asio::io_context& a, asio::io_context& b,
                                           std::uint64_t trips) {
  for (std::uint64_t i = 0; i < trips; ++i) {
    co_await asio::post(asio::bind_executor(b, asio::use_awaitable));
    co_await asio::post(asio::bind_executor(a, asio::use_awaitable));
  }
  co_return trips;
}

sample asio_hops(asio_thread& a, asio_thread& b, std::uint64_t trips) {
  return cyan::bench::time([&] {
    return asio::co_spawn(a.io(), asio_hopper(a.io(), b.io(), trips), asio::use_future).get();
  });
}

/// The closure ping-pong floor: a post a->b and one b->a per round trip.
class rally {
 public:
  rally(handler_thread& a, handler_thread& b, std::uint64_t trips) : a_(a), b_(b), trips_(trips) {}
  std::uint64_t play() {
    a_.post([this] { serve(); });
    finished_.wait();
    return completed_;
  }

 private:
  void serve() {  // on a
    if (completed_ == trips_) {
      finished_.count_down();
      return;
    }
    b_.post([this] {
      a_.post([this] {
        ++completed_;
        serve();
      });
    });
  }
  handler_thread& a_;
  handler_thread& b_;
  const std::uint64_t trips_;
  std::uint64_t completed_ = 0;
  std::latch finished_{ 1 };
};

sample closure_ping_pong(handler_thread& a, handler_thread& b, std::uint64_t trips) {
  rally game(a, b, trips);
  return cyan::bench::time([&] { return game.play(); });
}

// ---- sleepers -----------------------------------------------------------------------------

std::chrono::milliseconds delay_of(std::uint64_t i) {
  return std::chrono::milliseconds(1 + (i * 7919) % 100);
}

/// What the sleepers add to, on the sleeping thread only; the last one reads the CPU clock.
struct wake_tally {
  std::uint64_t expected = 0;
  std::uint64_t woke = 0;
  std::uint64_t delay_sum = 0;
  double cpu_at_end = 0;
  std::latch done{ 1 };

  void wake(std::uint64_t delay_ms) {
    ++woke;
    delay_sum += delay_ms;
    if (woke == expected) {
      cpu_at_end = cyan::bench::cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
      done.count_down();
    }
  }
};

sample cyan_sleepers(handler_thread& thread, std::uint64_t sleepers) {
  wake_tally tally;
  tally.expected = sleepers;
  double cpu_at_start = 0;
  thread.post([&] {
    cpu_at_start = cyan::bench::cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
    for (std::uint64_t i = 0; i < sleepers; ++i) {
      const auto delay = delay_of(i);
      co_spawn(
          thread,
          [&tally, delay]() -> task<> {
            co_await cyan::dispatch::sleep_for(delay);
            tally.wake(static_cast<std::uint64_t>(delay.count()));
          },
          cyan::dispatch::detached);
    }
  });
  tally.done.wait();
  thread.post_awaitable([] {}).get();  // the last task has finished with the tally
  return { tally.cpu_at_end - cpu_at_start, tally.woke + tally.delay_sum };
}

sample asio_sleepers(asio_thread& thread, std::uint64_t sleepers) {
  wake_tally tally;
  tally.expected = sleepers;
  double cpu_at_start = 0;
  asio::io_context& io = thread.io();
  asio::post(io, [&] {
    cpu_at_start = cyan::bench::cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
    for (std::uint64_t i = 0; i < sleepers; ++i) {
      const auto delay = delay_of(i);
      asio::co_spawn(
          io,
          [&tally, &io, delay]() -> asio::awaitable<void> {
            asio::steady_timer timer(io, delay);
            co_await timer.async_wait(asio::use_awaitable);
            tally.wake(static_cast<std::uint64_t>(delay.count()));
          },
          asio::detached);
    }
  });
  tally.done.wait();
  asio::post(io, asio::use_future).get();
  return { tally.cpu_at_end - cpu_at_start, tally.woke + tally.delay_sum };
}

// ---- running and reporting ----------------------------------------------------------------

bool run_awaits(std::uint64_t n) {
  handler_thread cyan_thread(pinned(true));
  asio_thread asio_io(true);
  cyan::bench::suite s{ "coroutine", "awaits" };
  s.add("cyan task", [&] { return cyan_awaits(cyan_thread, n); });
  s.add("asio awaitable", [&] { return asio_awaits(asio_io, n); });
  const bool ok = s.run();
  s.goal("cyan task", "asio awaitable", 1.5);
  return ok;
}

bool run_hops(std::uint64_t trips) {
  handler_thread a;
  handler_thread b;
  asio_thread asio_a;
  asio_thread asio_b;
  cyan::bench::suite s{ "coroutine", "hops" };
  s.add("cyan schedule", [&] { return cyan_hops(a, b, trips); });
  s.add("asio post(bind_executor)", [&] { return asio_hops(asio_a, asio_b, trips); });
  s.add("cyan closure ping-pong", [&] { return closure_ping_pong(a, b, trips); });
  const bool ok = s.run();
  s.goal("cyan schedule", "asio post(bind_executor)", 20.0);
  s.goal_at_most("cyan schedule", "cyan closure ping-pong", 1.5);
  return ok;
}

bool run_sleepers(std::uint64_t sleepers) {
  handler_thread cyan_thread;
  asio_thread asio_io;
  cyan::bench::suite s{ "coroutine", "sleepers (loop-thread CPU)" };
  s.add("cyan sleep_for", [&] { return cyan_sleepers(cyan_thread, sleepers); });
  s.add("asio steady_timer", [&] { return asio_sleepers(asio_io, sleepers); });
  const bool ok = s.run();
  s.goal("cyan sleep_for", "asio steady_timer", 2.0);
  return ok;
}

}  // namespace

int main() {
  const std::uint64_t awaits = cyan::bench::env_or("CYAN_BENCH_AWAITS", 10'000'000);
  const std::uint64_t hops = cyan::bench::env_or("CYAN_BENCH_HOPS", 200'000);
  const std::uint64_t sleepers = cyan::bench::env_or("CYAN_BENCH_SLEEPERS", 100'000);
  std::printf(
      "coroutine benchmark: %llu child awaits, %llu hop round trips, %llu sleepers of 1..100 ms; "
      "%d reps\n",
      static_cast<unsigned long long>(awaits), static_cast<unsigned long long>(hops),
      static_cast<unsigned long long>(sleepers), cyan::bench::repetitions());
  std::fflush(stdout);
  const bool awaits_ok = run_awaits(awaits);
  const bool hops_ok = run_hops(hops);
  const bool sleepers_ok = run_sleepers(sleepers);
  return cyan::bench::exit_status(awaits_ok && hops_ok && sleepers_ok);
}
