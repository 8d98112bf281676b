// Coroutine synchronisation in one program: a pipeline of channels (a producer, workers on a
// pool, a collector on a handler thread), an async_mutex around shared state, an
// async_semaphore bounding the work in flight, an async_latch for "all workers started", an
// async_event as a start signal, an async_generator as the source, and with_timeout around a
// step that may be slow. It checks its results and exits, so a test runs it.

#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <system_error>

#include <cyan/dispatch.h>

using namespace std::chrono_literals;
namespace dispatch = cyan::dispatch;
using dispatch::task;

namespace {

// The source: numbers, produced lazily, with a pause now and then.
dispatch::async_generator<int> numbers(int n) {
  for (int i = 1; i <= n; ++i) {
    if (i % 100 == 0) {
      co_await dispatch::sleep_for(1ms);
    }
    co_yield i;
  }
}

// A step that is usually quick and sometimes far too slow.
task<int> square(int v) {
  if (v % 250 == 0) {
    co_await dispatch::sleep_for(1h);  // with_timeout stops this one
  }
  co_return v* v;
}

}  // namespace

int main() {
  constexpr int kItems = 1000;
  constexpr int kWorkers = 4;
  dispatch::thread_pool pool(2);
  dispatch::handler_thread collector_thread;

  dispatch::channel<int> inputs(64);
  dispatch::channel<long> results(dispatch::channel<long>::unbounded);
  dispatch::async_event go;
  dispatch::async_latch workers_ready(kWorkers);
  dispatch::async_semaphore in_flight(8);
  dispatch::async_mutex stats_lock;
  std::map<std::string, int> stats;  // guarded by stats_lock

  // Workers: take numbers, square them within 50 ms, report.
  auto worker = [&]() -> task<> {
    workers_ready.count_down();
    co_await go.wait();
    while (std::optional<int> v = co_await inputs.receive()) {
      co_await in_flight.acquire();
      std::string outcome = "squared";
      try {
        co_await results.send(co_await dispatch::with_timeout(square(*v), 50ms));
      } catch (const std::system_error& e) {
        if (e.code() != std::errc::timed_out) {
          throw;
        }
        outcome = "timed out";
      }
      in_flight.release();
      auto guard = co_await stats_lock.scoped_lock();
      ++stats[outcome];
    }
  };
  dispatch::async_scope workers;
  for (int i = 0; i < kWorkers; ++i) {
    workers.spawn(pool, worker);
  }

  // The producer: waits until every worker is ready, starts them, feeds the generator's numbers.
  auto produced = dispatch::co_spawn(pool, [&]() -> task<int> {
    co_await workers_ready.wait();
    go.set();
    int sent = 0;
    auto source = numbers(kItems);
    while (std::optional<int> v = co_await source.next()) {
      co_await inputs.send(*v);
      ++sent;
    }
    inputs.close();  // the workers drain what was sent, then see nullopt
    co_return sent;
  });

  const int sent = produced.get();
  workers.join_blocking();
  results.close();
  // The collector sums on its handler thread.
  const long sum = dispatch::co_spawn(collector_thread, [&]() -> task<long> {
                     long total = 0;
                     while (std::optional<long> r = co_await results.receive()) {
                       total += *r;
                     }
                     co_return total;
                   }).get();

  long expected = 0;
  for (long v = 1; v <= kItems; ++v) {
    expected += v % 250 == 0 ? 0 : v * v;
  }
  std::printf("sent %d, squared %d, timed out %d, sum %ld (expected %ld)\n", sent, stats["squared"],
              stats["timed out"], sum, expected);
  const bool ok = sent == kItems && stats["squared"] == kItems - kItems / 250 &&
                  stats["timed out"] == kItems / 250 && sum == expected;
  return ok ? 0 : 1;
}
