// Boost.Asio benchmark: handing tiny tasks to one consumer thread.
//   one producer  — the main thread posts N tasks to one cyan::dispatch::handler_thread, or with
//                   boost::asio::post to an io_context run by one thread (with a work guard);
//   two producers — two threads post N/2 each (started before timing, released together);
//   ping-pong     — a task bounces between two consumer threads, R round trips; then the cyan
//                   pair's CPU use while idle is measured (the goal: none).
// Each tiny task increments a plain counter owned by the consumer thread; the task that brings
// it to N opens a latch, which ends the timed region. The checksum is the count, read after the
// consumer thread was joined, so lost or repeated tasks show as a mismatch. Consumer threads are
// started and have run a task before timing, in every arm alike.
//
//   CYAN_BENCH_POSTS        tasks posted in total (default 30000000)
//   CYAN_BENCH_ROUND_TRIPS  ping-pong round trips (default 200000)
//   CYAN_BENCH_REPS         repetitions per arm (default 11)

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <future>
#include <latch>
#include <string>
#include <thread>
#include <utility>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <cyan/dispatch/handler_thread.h>

#include "bench/harness.h"

namespace {

using cyan::bench::sample;

/// The counter every tiny task increments. The task that brings it to `expected` opens
/// `reached`, which the timing thread waits on.
class counter {
 public:
  explicit counter(std::uint64_t expected) : expected_(expected) {
    if (expected_ == 0) {
      reached_.count_down();
    }
  }

  /// [consumer thread only]
  void increment() {
    if (++count_ == expected_) {
      reached_.count_down();
    }
  }

  /// [any thread] Blocks until the count reached `expected` (futex wait after a brief spin).
  void wait() { reached_.wait(); }

  /// [after the consumer thread was joined]
  [[nodiscard]] std::uint64_t count() const { return count_; }

 private:
  std::uint64_t count_ = 0;  // Written only by the consumer thread.
  const std::uint64_t expected_;
  std::latch reached_{ 1 };
};

/// One cyan handler thread, running and warmed (it has run a task) once constructed.
class cyan_consumer {
 public:
  cyan_consumer() {
    thread_.post_awaitable([] {}).get();
  }

  template <typename F>
  void post(F&& f) {
    thread_.post(std::forward<F>(f));
  }

  /// Runs what is still queued, then joins the thread.
  void finish() {
    thread_.stop();
    thread_.join();
  }

 private:
  cyan::dispatch::handler_thread thread_;
};

/// One io_context run by one thread and kept running by a work guard; warmed once constructed.
/// Concurrency hint 1 tells Asio only one thread runs it — its own advice for this set-up.
class asio_consumer {
 public:
  asio_consumer() : thread_([this] { context_.run(); }) {
    std::promise<void> ran;
    boost::asio::post(context_, [&ran] { ran.set_value(); });
    ran.get_future().get();
  }

  ~asio_consumer() {
    if (thread_.joinable()) {
      finish();
    }
  }

  asio_consumer(const asio_consumer&) = delete;
  asio_consumer& operator=(const asio_consumer&) = delete;

  template <typename F>
  void post(F&& f) {
    boost::asio::post(context_, std::forward<F>(f));
  }

  /// Lets run() return once the queue is empty, then joins the thread.
  void finish() {
    guard_.reset();
    thread_.join();
  }

 private:
  boost::asio::io_context context_{ 1 };
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_{
    context_.get_executor()
  };
  std::thread thread_;
};

// ---- the workloads ------------------------------------------------------------------------

template <typename Consumer>
sample one_producer(std::uint64_t posts) {
  Consumer consumer;
  counter tally(posts);
  const sample timed = cyan::bench::time([&] {
    for (std::uint64_t i = 0; i < posts; ++i) {
      consumer.post([&tally] { tally.increment(); });
    }
    tally.wait();
    return posts;
  });
  consumer.finish();
  return { timed.seconds, tally.count() };
}

template <typename Consumer>
sample two_producers(std::uint64_t posts) {
  Consumer consumer;
  counter tally(posts);
  std::latch ready{ 2 };  // both producer threads are running
  std::latch go{ 1 };     // the barrier that releases them together, after the clock started
  const auto produce = [&](std::uint64_t count) {
    ready.count_down();
    go.wait();
    for (std::uint64_t i = 0; i < count; ++i) {
      consumer.post([&tally] { tally.increment(); });
    }
  };
  std::thread first(produce, posts / 2);
  std::thread second(produce, posts - posts / 2);
  ready.wait();
  const sample timed = cyan::bench::time([&] {
    go.count_down();
    tally.wait();
    return posts;
  });
  first.join();
  second.join();
  consumer.finish();
  return { timed.seconds, tally.count() };
}

/// A ball bounced between consumers `a` and `b`: each round trip is a post a→b and one b→a.
template <typename Consumer>
class rally {
 public:
  explicit rally(std::uint64_t round_trips) : round_trips_(round_trips) {}

  /// [any thread] Serves the first ball and waits until every round trip was played.
  void play() {
    a_.post([this] { serve(); });
    finished_.wait();
  }

  /// Joins both consumer threads; returns the round trips played.
  std::uint64_t finish() {
    a_.finish();
    b_.finish();
    return completed_;
  }

 private:
  /// [a's thread only]
  void serve() {
    if (completed_ == round_trips_) {
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

  Consumer a_;
  Consumer b_;
  const std::uint64_t round_trips_;
  std::uint64_t completed_ = 0;  // Written only on a's thread.
  std::latch finished_{ 1 };
};

template <typename Consumer>
sample ping_pong(std::uint64_t round_trips) {
  rally<Consumer> game(round_trips);
  const sample timed = cyan::bench::time([&] {
    game.play();
    return round_trips;
  });
  return { timed.seconds, game.finish() };
}

// ---- running and reporting ----------------------------------------------------------------

bool run_one_producer(std::uint64_t posts) {
  cyan::bench::suite s{ "boost_asio", "one producer" };
  s.add("cyan handler_thread::post", [&] { return one_producer<cyan_consumer>(posts); });
  s.add("asio post to io_context", [&] { return one_producer<asio_consumer>(posts); });
  const bool ok = s.run();
  s.goal("cyan handler_thread::post", "asio post to io_context", 10.0);
  return ok;
}

bool run_two_producers(std::uint64_t posts) {
  cyan::bench::suite s{ "boost_asio", "two producers" };
  s.add("cyan handler_thread::post", [&] { return two_producers<cyan_consumer>(posts); });
  s.add("asio post to io_context", [&] { return two_producers<asio_consumer>(posts); });
  const bool ok = s.run();
  s.goal("cyan handler_thread::post", "asio post to io_context", 5.0);
  return ok;
}

bool run_ping_pong(std::uint64_t round_trips) {
  cyan::bench::suite s{ "boost_asio", "ping-pong" };
  s.add("cyan handler_thread pair", [&] { return ping_pong<cyan_consumer>(round_trips); });
  s.add("asio io_context pair", [&] { return ping_pong<asio_consumer>(round_trips); });
  const bool ok = s.run();
  for (const char* arm : { "cyan handler_thread pair", "asio io_context pair" }) {
    std::printf("  %-40s %10.0f ns per round trip (median)\n", arm,
                s.median(arm) / static_cast<double>(round_trips) * 1e9);
  }
  s.goal("cyan handler_thread pair", "asio io_context pair", 10.0);
  return ok;
}

/// The other half of the ping-pong goal: a pair of handler threads that just played (so their
/// spin budgets are full) must then use no CPU while idle. Measured as the process's CPU time
/// while the main thread sleeps for `idle` (the time asked for, not a synchronisation);
/// more than 2% of one core fails the run.
bool idle_threads_use_no_cpu(std::chrono::milliseconds idle) {
  rally<cyan_consumer> game(1000);
  game.play();
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // let the spins and naps run out
  const double before = cyan::bench::cpu_seconds(CLOCK_PROCESS_CPUTIME_ID);
  std::this_thread::sleep_for(idle);
  const double used = cyan::bench::cpu_seconds(CLOCK_PROCESS_CPUTIME_ID) - before;
  const double share = used / std::chrono::duration<double>(idle).count();
  const bool ok = share <= 0.02 && game.finish() == 1000;
  std::printf(
      "  idle cyan handler_thread pair: %.3f ms CPU in %lld ms idle (%.2f%% of one core) — %s\n",
      used * 1e3, static_cast<long long>(idle.count()), share * 100,
      ok ? "uses no CPU, met" : "FAILED (more than 2%)");
  return ok;
}

}  // namespace

int main() {
  const std::uint64_t posts = cyan::bench::env_or("CYAN_BENCH_POSTS", 30'000'000);
  const std::uint64_t round_trips = cyan::bench::env_or("CYAN_BENCH_ROUND_TRIPS", 200'000);
  std::printf(
      "boost_asio benchmark: %llu posts (two producers: %llu + %llu), %llu ping-pong "
      "round trips; %d reps\n",
      static_cast<unsigned long long>(posts), static_cast<unsigned long long>(posts / 2),
      static_cast<unsigned long long>(posts - posts / 2),
      static_cast<unsigned long long>(round_trips), cyan::bench::repetitions());
  std::fflush(stdout);
  const bool one_ok = run_one_producer(posts);
  const bool two_ok = run_two_producers(posts);
  const bool ping_ok =
      run_ping_pong(round_trips) && idle_threads_use_no_cpu(std::chrono::milliseconds(500));
  return cyan::bench::exit_status(one_ok && two_ok && ping_ok);
}
