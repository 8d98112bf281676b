// Synchronisation benchmark: cyan's channel and async_mutex against the peers a user would pick,
// in one run.
//   ping-pong   — two handler threads pass an item back and forth R round trips through two
//                 channels of capacity 1: cyan channel (tasks on two handler threads), Asio
//                 experimental::concurrent_channel (awaitables on two io_contexts, one thread
//                 each), a std::mutex + std::condition_variable + std::deque queue between
//                 two std::threads, and the peers of forkjoin_benchmark as child programs
//                 (bench/peers.h, "pingpong R"; each skipped with a one-line message when not
//                 built): Tokio — two current_thread runtimes on two threads of their own,
//                 tokio::sync::mpsc channels of capacity 1 (tokio_peer); Go — two goroutines,
//                 unbuffered channels, GOMAXPROCS 2 (go_peer). Each child times the round
//                 trips alone, its threads started before. Go's scheduler runs the goroutine a
//                 send wakes next on the sender's own P (runnext), so the two mostly share one
//                 thread: its row is Go's in-thread hand-over, not the cross-thread one of the
//                 other arms (a goroutine locked to a thread of its own, LockOSThread, hands
//                 over through the scheduler's slow locked-thread path: no fair peer either).
//   streaming   — one sender, one receiver on two threads, N items one way through a channel of
//                 capacity 1,024: the same three arms (the mutex queue is bounded the same way).
//   fan-in      — 2 producer tasks on a pool of 2 threads, 1 consumer on a handler thread,
//                 capacity 64, N items in all: cyan (thread_pool + handler_thread) against Asio
//                 (producers on an io_context run by 2 threads, the consumer on another).
//   mutex uncontended — one task takes and releases a lock L times on a handler thread: cyan
//                 async_mutex (co_await scoped_lock(), guard destroyed) and, for scale, a
//                 std::mutex lock/unlock in the same kind of task.
//   mutex contended — 4 tasks on a pool of 2 each take the lock L times and increment a shared
//                 counter: cyan async_mutex, against an Asio strand on a thread_pool of 2: 4
//                 coroutines that each enter the strand for an increment and leave it again
//                 (taking turns as the tasks do), and, for scale, the same increments posted to
//                 the strand by 4 posters that never wait for their turn.
//   For fan-in and the contended mutex, each run's context switches (voluntary / involuntary)
//   and system CPU are printed after the table, and for the contended rows how many times the
//   turn passed from one thread to the other: what tells a slow run from a fast one
//   (docs/bench/notes.md, "Coroutine synchronisation: the spreads").
// Checksums: ping-pong — the last value (the round trips); streaming and fan-in — the sum of
// the items received; mutex — the counter.
//
//   CYAN_BENCH_PINGPONG     round trips per run (default 1000000)
//   CYAN_BENCH_STREAM       items per streaming run (default 10000000)
//   CYAN_BENCH_FANIN        items per fan-in run (default 4000000)
//   CYAN_BENCH_LOCKS        lock + unlock per task (default 1000000)
//   CYAN_BENCH_REPS         repetitions per arm (default 11)
//   CYAN_SYNC_ROWS          the rows to run, comma-separated, of ping-pong, streaming, fan-in,
//                           uncontended, contended (default: all)

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <future>
#include <latch>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <sys/resource.h>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/experimental/concurrent_channel.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <cyan/dispatch.h>

#include "bench/harness.h"
#include "bench/peers.h"

namespace {

namespace asio = boost::asio;
using cyan::bench::sample;
using cyan::dispatch::channel;
using cyan::dispatch::co_spawn;
using cyan::dispatch::handler_thread;
using cyan::dispatch::task;
using cyan::dispatch::thread_pool;

/// An io_context run by `threads` threads of its own until destroyed.
class asio_threads {
 public:
  explicit asio_threads(int threads = 1) : guard_(io_.get_executor()) {
    for (int i = 0; i < threads; ++i) {
      threads_.emplace_back([this] { io_.run(); });
    }
    asio::post(io_, asio::use_future).get();  // warm: a thread runs
  }
  ~asio_threads() {
    guard_.reset();
    for (auto& t : threads_) {
      t.join();
    }
  }
  asio::io_context& io() { return io_; }

 private:
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> guard_;
  std::vector<std::thread> threads_;
};

using asio_channel =
    asio::experimental::concurrent_channel<void(boost::system::error_code, std::uint64_t)>;

/// The hand-rolled peer: a bounded FIFO behind one std::mutex and two condition variables.
class locked_queue {
 public:
  explicit locked_queue(std::size_t capacity) : capacity_(capacity) {}
  void push(std::uint64_t v) {
    std::unique_lock lock(mutex_);
    not_full_.wait(lock, [&] { return items_.size() < capacity_; });
    items_.push_back(v);
    lock.unlock();
    not_empty_.notify_one();
  }
  std::uint64_t pop() {
    std::unique_lock lock(mutex_);
    not_empty_.wait(lock, [&] { return !items_.empty(); });
    const std::uint64_t v = items_.front();
    items_.pop_front();
    lock.unlock();
    not_full_.notify_one();
    return v;
  }

 private:
  const std::size_t capacity_;
  std::mutex mutex_;
  std::condition_variable not_empty_;
  std::condition_variable not_full_;
  std::deque<std::uint64_t> items_;
};

// ---- ping-pong ----------------------------------------------------------------------------

sample cyan_ping_pong(handler_thread& a, handler_thread& b, std::uint64_t trips) {
  channel<std::uint64_t> there(1);
  channel<std::uint64_t> back(1);
  return cyan::bench::time([&] {
    auto echo = co_spawn(b, [&]() -> task<> {
      for (std::uint64_t i = 0; i < trips; ++i) {
        const std::uint64_t v = *co_await there.receive();
        co_await back.send(v + 1);
      }
    });
    const std::uint64_t last = co_spawn(a, [&]() -> task<std::uint64_t> {
                                 std::uint64_t v = 0;
                                 for (std::uint64_t i = 0; i < trips; ++i) {
                                   co_await there.send(v);
                                   v = *co_await back.receive();
                                 }
                                 co_return v;
                               }).get();
    echo.get();
    return last;
  });
}

sample asio_ping_pong(asio_threads& a, asio_threads& b, std::uint64_t trips) {
  asio_channel there(a.io(), 1);
  asio_channel back(a.io(), 1);
  return cyan::bench::time([&] {
    auto echo = asio::co_spawn(
        b.io(),
        [&]() -> asio::awaitable<void> {
          for (std::uint64_t i = 0; i < trips; ++i) {
            const std::uint64_t v = co_await there.async_receive(asio::use_awaitable);
            co_await back.async_send(boost::system::error_code{}, v + 1, asio::use_awaitable);
          }
        },
        asio::use_future);
    const std::uint64_t last =
        asio::co_spawn(
            a.io(),
            [&]() -> asio::awaitable<std::uint64_t> {
              std::uint64_t v = 0;
              for (std::uint64_t i = 0; i < trips; ++i) {
                co_await there.async_send(boost::system::error_code{}, v, asio::use_awaitable);
                v = co_await back.async_receive(asio::use_awaitable);
              }
              co_return v;
            },
            asio::use_future)
            .get();
    echo.get();
    return last;
  });
}

sample locked_ping_pong(std::uint64_t trips) {
  locked_queue there(1);
  locked_queue back(1);
  return cyan::bench::time([&] {
    std::thread echo([&] {
      for (std::uint64_t i = 0; i < trips; ++i) {
        back.push(there.pop() + 1);
      }
    });
    std::uint64_t v = 0;
    for (std::uint64_t i = 0; i < trips; ++i) {
      there.push(v);
      v = back.pop();
    }
    echo.join();
    return v;
  });
}

// ---- streaming ----------------------------------------------------------------------------

constexpr std::size_t kStreamCapacity = 1024;

sample cyan_streaming(handler_thread& a, handler_thread& b, std::uint64_t items) {
  channel<std::uint64_t> ch(kStreamCapacity);
  return cyan::bench::time([&] {
    auto sender = co_spawn(a, [&]() -> task<> {
      for (std::uint64_t i = 0; i < items; ++i) {
        co_await ch.send(i);
      }
      ch.close();
    });
    const std::uint64_t sum = co_spawn(b, [&]() -> task<std::uint64_t> {
                                std::uint64_t total = 0;
                                while (auto v = co_await ch.receive()) {
                                  total += *v;
                                }
                                co_return total;
                              }).get();
    sender.get();
    return sum;
  });
}

sample asio_streaming(asio_threads& a, asio_threads& b, std::uint64_t items) {
  asio_channel ch(a.io(), kStreamCapacity);
  return cyan::bench::time([&] {
    auto sender = asio::co_spawn(
        a.io(),
        [&]() -> asio::awaitable<void> {
          for (std::uint64_t i = 0; i < items; ++i) {
            co_await ch.async_send(boost::system::error_code{}, i, asio::use_awaitable);
          }
        },
        asio::use_future);
    const std::uint64_t sum = asio::co_spawn(
                                  b.io(),
                                  [&]() -> asio::awaitable<std::uint64_t> {
                                    std::uint64_t total = 0;
                                    for (std::uint64_t i = 0; i < items; ++i) {
                                      total += co_await ch.async_receive(asio::use_awaitable);
                                    }
                                    co_return total;
                                  },
                                  asio::use_future)
                                  .get();
    sender.get();
    return sum;
  });
}

sample locked_streaming(std::uint64_t items) {
  locked_queue q(kStreamCapacity);
  return cyan::bench::time([&] {
    std::thread sender([&] {
      for (std::uint64_t i = 0; i < items; ++i) {
        q.push(i);
      }
    });
    std::uint64_t total = 0;
    for (std::uint64_t i = 0; i < items; ++i) {
      total += q.pop();
    }
    sender.join();
    return total;
  });
}

// ---- fan-in -------------------------------------------------------------------------------

constexpr std::size_t kFanInCapacity = 64;

sample cyan_fan_in(thread_pool& pool, handler_thread& consumer, std::uint64_t items) {
  channel<std::uint64_t> ch(kFanInCapacity);
  const std::uint64_t half = items / 2;
  return cyan::bench::time([&] {
    auto produce = [&](std::uint64_t first) -> task<> {
      for (std::uint64_t i = first; i < first + half; ++i) {
        co_await ch.send(i);
      }
    };
    auto p0 = co_spawn(pool, [&]() -> task<> { co_await produce(0); });
    auto p1 = co_spawn(pool, [&]() -> task<> { co_await produce(half); });
    const std::uint64_t sum = co_spawn(consumer, [&]() -> task<std::uint64_t> {
                                std::uint64_t total = 0;
                                for (std::uint64_t i = 0; i < 2 * half; ++i) {
                                  total += *co_await ch.receive();
                                }
                                co_return total;
                              }).get();
    p0.get();
    p1.get();
    return sum;
  });
}

sample asio_fan_in(asio_threads& producers, asio_threads& consumer, std::uint64_t items) {
  asio_channel ch(consumer.io(), kFanInCapacity);
  const std::uint64_t half = items / 2;
  return cyan::bench::time([&] {
    auto produce = [&](std::uint64_t first) -> asio::awaitable<void> {
      for (std::uint64_t i = first; i < first + half; ++i) {
        co_await ch.async_send(boost::system::error_code{}, i, asio::use_awaitable);
      }
    };
    auto p0 = asio::co_spawn(producers.io(), produce(0), asio::use_future);
    auto p1 = asio::co_spawn(producers.io(), produce(half), asio::use_future);
    const std::uint64_t sum = asio::co_spawn(
                                  consumer.io(),
                                  [&]() -> asio::awaitable<std::uint64_t> {
                                    std::uint64_t total = 0;
                                    for (std::uint64_t i = 0; i < 2 * half; ++i) {
                                      total += co_await ch.async_receive(asio::use_awaitable);
                                    }
                                    co_return total;
                                  },
                                  asio::use_future)
                                  .get();
    p0.get();
    p1.get();
    return sum;
  });
}

// ---- mutex --------------------------------------------------------------------------------

sample cyan_uncontended(handler_thread& h, std::uint64_t locks) {
  cyan::dispatch::async_mutex m;
  std::uint64_t counter = 0;
  return cyan::bench::time([&] {
    co_spawn(h, [&]() -> task<> {
      for (std::uint64_t i = 0; i < locks; ++i) {
        auto guard = co_await m.scoped_lock();
        ++counter;
      }
    }).get();
    return counter;
  });
}

sample std_uncontended(handler_thread& h, std::uint64_t locks) {
  std::mutex m;
  std::uint64_t counter = 0;
  return cyan::bench::time([&] {
    co_spawn(h, [&]() -> task<> {
      for (std::uint64_t i = 0; i < locks; ++i) {
        std::lock_guard guard(m);
        ++counter;
      }
      co_return;
    }).get();
    return counter;
  });
}

constexpr int kLockers = 4;

// How often the turn passed from one thread to the other: counted inside the critical section
// (so it needs no synchronisation of its own) by the cyan and the strand-coroutine arms alike.
struct turn_passes {
  std::thread::id last;
  std::uint64_t passes = 0;
  void note() noexcept {
    const std::thread::id here = std::this_thread::get_id();
    passes += here != last ? 1 : 0;
    last = here;
  }
};

sample cyan_contended(thread_pool& pool, std::uint64_t locks, turn_passes& turns) {
  cyan::dispatch::async_mutex m;
  std::uint64_t counter = 0;
  return cyan::bench::time([&] {
    std::vector<cyan::dispatch::future<void>> done;
    for (int t = 0; t < kLockers; ++t) {
      done.push_back(co_spawn(pool, [&]() -> task<> {
        for (std::uint64_t i = 0; i < locks; ++i) {
          auto guard = co_await m.scoped_lock();
          ++counter;
          turns.note();
        }
      }));
    }
    for (auto& f : done) {
      f.get();
    }
    return counter;
  });
}

// Asio's way to make coroutines take turns: each enters the strand for its increment and
// leaves it for the pool again, as cyan's tasks take and release the lock.
sample asio_strand_coroutines(std::uint64_t locks, turn_passes& turns) {
  asio::thread_pool pool(2);
  auto strand = asio::make_strand(pool);
  std::uint64_t counter = 0;
  const sample result = cyan::bench::time([&] {
    std::vector<std::future<void>> done;
    for (int t = 0; t < kLockers; ++t) {
      done.push_back(asio::co_spawn(
          pool,
          [&]() -> asio::awaitable<void> {
            for (std::uint64_t i = 0; i < locks; ++i) {
              co_await asio::dispatch(asio::bind_executor(strand, asio::use_awaitable));
              ++counter;
              turns.note();
              co_await asio::post(asio::bind_executor(pool, asio::use_awaitable));
            }
          },
          asio::use_future));
    }
    for (auto& f : done) {
      f.get();
    }
    return counter;
  });
  pool.join();
  return result;
}

// The cheapest use of a strand: fire-and-forget increments posted to it by 4 posters (nobody
// waits for its turn).
sample asio_strand_increments(std::uint64_t locks) {
  asio::thread_pool pool(2);
  auto strand = asio::make_strand(pool);
  std::uint64_t counter = 0;
  const std::uint64_t total = kLockers * locks;
  std::latch finished(1);
  const sample result = cyan::bench::time([&] {
    for (int t = 0; t < kLockers; ++t) {
      asio::post(pool, [&] {
        for (std::uint64_t i = 0; i < locks; ++i) {
          asio::post(strand, [&] {
            if (++counter == total) {
              finished.count_down();
            }
          });
        }
      });
    }
    finished.wait();
    return counter;
  });
  pool.join();
  return result;
}

// ---- running and reporting ----------------------------------------------------------------

bool run_ping_pong(std::uint64_t trips) {
  handler_thread a;
  handler_thread b;
  asio_threads asio_a;
  asio_threads asio_b;
  const auto tokio = cyan::bench::peer_program::start("tokio_peer", "Tokio");
  const auto go = cyan::bench::peer_program::start("go_peer", "Go");
  const std::string line = "pingpong " + std::to_string(trips);
  cyan::bench::suite s{ "sync", "channel ping-pong" };
  s.add("cyan channel", [&] { return cyan_ping_pong(a, b, trips); });
  s.add("asio concurrent_channel", [&] { return asio_ping_pong(asio_a, asio_b, trips); });
  s.add("mutex + condition_variable queue", [&] { return locked_ping_pong(trips); });
  if (tokio) {
    s.add("Tokio mpsc channel", [&] { return tokio->run(line); });
  }
  if (go) {
    s.add("Go channel", [&] { return go->run(line); });
  }
  const bool ok = s.run();
  s.goal("cyan channel", "asio concurrent_channel", 10.0);
  s.goal("cyan channel", "mutex + condition_variable queue", 2.0);
  if (cyan::bench::busy_mode()) {
    s.goal_at_most("cyan channel", "Tokio mpsc channel", 1.0);  // issue 48, the busy row
  }
  return ok;
}

bool run_streaming(std::uint64_t items) {
  handler_thread a;
  handler_thread b;
  asio_threads asio_a;
  asio_threads asio_b;
  cyan::bench::suite s{ "sync", "channel streaming" };
  s.add("cyan channel", [&] { return cyan_streaming(a, b, items); });
  s.add("asio concurrent_channel", [&] { return asio_streaming(asio_a, asio_b, items); });
  s.add("mutex + condition_variable queue", [&] { return locked_streaming(items); });
  const bool ok = s.run();
  s.goal("cyan channel", "asio concurrent_channel", 10.0);
  s.goal("cyan channel", "mutex + condition_variable queue", 2.0);
  return ok;
}

// What the process's threads did besides computing during one run: context switches and
// system CPU (getrusage deltas), to tell a run that slept and woke from one that did not.
// For the contended rows also how many times the turn passed between the threads.
struct scheduling {
  long voluntary = 0;
  long involuntary = 0;
  double system_seconds = 0;
  std::optional<std::uint64_t> turn_passes;
};

template <typename Run>
sample with_scheduling(std::vector<std::pair<double, scheduling>>& seen, Run run,
                       turn_passes* turns = nullptr) {
  if (turns != nullptr) {
    *turns = {};
  }
  rusage before{};
  ::getrusage(RUSAGE_SELF, &before);
  const sample out = run();
  rusage after{};
  ::getrusage(RUSAGE_SELF, &after);
  const auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6;
  };
  scheduling s{ after.ru_nvcsw - before.ru_nvcsw, after.ru_nivcsw - before.ru_nivcsw,
                seconds(after.ru_stime) - seconds(before.ru_stime), std::nullopt };
  if (turns != nullptr) {
    s.turn_passes = turns->passes;
  }
  seen.emplace_back(out.seconds, s);
  return out;
}

void print_scheduling(const char* arm, std::vector<std::pair<double, scheduling>> seen) {
  std::sort(seen.begin(), seen.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::printf(
      "  %s, runs fastest first: seconds (context switches voluntary / involuntary, "
      "system CPU s%s)\n   ",
      arm,
      seen.empty() || !seen.front().second.turn_passes ? "" : ", turns passed between threads");
  for (const auto& [seconds, s] : seen) {
    std::printf(" %.3f (%ld / %ld, %.3f", seconds, s.voluntary, s.involuntary, s.system_seconds);
    if (s.turn_passes) {
      std::printf(", %llu", static_cast<unsigned long long>(*s.turn_passes));
    }
    std::printf(")");
  }
  std::printf("\n");
}

bool run_fan_in(std::uint64_t items) {
  thread_pool pool(2);
  handler_thread consumer;
  asio_threads asio_producers(2);
  asio_threads asio_consumer;
  std::vector<std::pair<double, scheduling>> cyan_seen;
  std::vector<std::pair<double, scheduling>> asio_seen;
  cyan::bench::suite s{ "sync", "channel fan-in" };
  s.add("cyan channel", [&] {
    return with_scheduling(cyan_seen, [&] { return cyan_fan_in(pool, consumer, items); });
  });
  s.add("asio concurrent_channel", [&] {
    return with_scheduling(asio_seen,
                           [&] { return asio_fan_in(asio_producers, asio_consumer, items); });
  });
  const bool ok = s.run();
  s.goal("cyan channel", "asio concurrent_channel", 5.0);
  print_scheduling("cyan channel", std::move(cyan_seen));
  print_scheduling("asio concurrent_channel", std::move(asio_seen));
  return ok;
}

bool run_uncontended(std::uint64_t locks) {
  handler_thread h;
  cyan::bench::suite s{ "sync", "mutex uncontended" };
  s.add("cyan async_mutex", [&] { return cyan_uncontended(h, locks); });
  s.add("std::mutex", [&] { return std_uncontended(h, locks); });
  const bool ok = s.run();
  const double ns = s.median("cyan async_mutex") / static_cast<double>(locks) * 1e9;
  const bool met = ns <= 20.0;
  std::printf("goal: cyan async_mutex uncontended lock + unlock <= 20 ns: %.1f ns -- %s\n", ns,
              met ? "met" : "MISSED");
  std::fflush(stdout);
  return ok;
}

bool run_contended(std::uint64_t locks) {
  thread_pool pool(2);
  std::vector<std::pair<double, scheduling>> cyan_seen;
  std::vector<std::pair<double, scheduling>> asio_seen;
  cyan::bench::suite s{ "sync", "mutex contended" };
  turn_passes turns;
  s.add("cyan async_mutex", [&] {
    return with_scheduling(
        cyan_seen, [&] { return cyan_contended(pool, locks, turns); }, &turns);
  });
  s.add("asio strand (coroutines take turns)", [&] {
    return with_scheduling(
        asio_seen, [&] { return asio_strand_coroutines(locks, turns); }, &turns);
  });
  s.add("asio strand (posted increments)", [&] { return asio_strand_increments(locks); });
  const bool ok = s.run();
  s.goal("cyan async_mutex", "asio strand (coroutines take turns)", 3.0);
  print_scheduling("cyan async_mutex", std::move(cyan_seen));
  print_scheduling("asio strand (coroutines take turns)", std::move(asio_seen));
  return ok;
}

}  // namespace

// Whether CYAN_SYNC_ROWS names `row` (or is unset): to probe one row without the others.
bool wanted(const char* row) {
  const char* rows = std::getenv("CYAN_SYNC_ROWS");
  if (rows == nullptr || *rows == '\0') {
    return true;
  }
  const std::size_t length = std::strlen(row);
  for (const char* at = rows; (at = std::strstr(at, row)) != nullptr; at += length) {
    const bool starts = at == rows || at[-1] == ',';
    const bool ends = at[length] == '\0' || at[length] == ',';
    if (starts && ends) {
      return true;
    }
  }
  return false;
}

int main() {
  const std::uint64_t trips = cyan::bench::env_or("CYAN_BENCH_PINGPONG", 1'000'000);
  const std::uint64_t stream = cyan::bench::env_or("CYAN_BENCH_STREAM", 10'000'000);
  const std::uint64_t fan_in = cyan::bench::env_or("CYAN_BENCH_FANIN", 4'000'000);
  const std::uint64_t locks = cyan::bench::env_or("CYAN_BENCH_LOCKS", 1'000'000);
  std::printf(
      "sync benchmark: %llu ping-pong round trips, %llu streamed items, %llu fan-in items, %llu "
      "locks per task; %d reps\n",
      static_cast<unsigned long long>(trips), static_cast<unsigned long long>(stream),
      static_cast<unsigned long long>(fan_in), static_cast<unsigned long long>(locks),
      cyan::bench::repetitions());
  std::fflush(stdout);
  const bool ping_pong_ok = !wanted("ping-pong") || run_ping_pong(trips);
  const bool streaming_ok = !wanted("streaming") || run_streaming(stream);
  const bool fan_in_ok = !wanted("fan-in") || run_fan_in(fan_in);
  const bool uncontended_ok = !wanted("uncontended") || run_uncontended(locks);
  const bool contended_ok = !wanted("contended") || run_contended(locks);
  return cyan::bench::exit_status(ping_pong_ok && streaming_ok && fan_in_ok && uncontended_ok &&
                                  contended_ok);
}
