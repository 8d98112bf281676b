// Fork-join benchmark (issue 48): cyan's pool against oneTBB, rayon, Tokio and Go on the same
// work, three workloads:
//   fib cut-off 12 — fib(N) (N = 30: 832,040) with a fork per call at n >= 12 (6,764 forks),
//                    fib_serial below: mostly computation, measures the forks' overhead when
//                    they are few;
//   fib cut-off 2  — the same with a fork per call at n >= 2 (832,039 forks): almost nothing
//                    but forks;
//   sum            — the sum of an array of S = 10^7 elements (element i is i, so the sum is
//                    exactly S(S-1)/2), made before timing.
// Arms (a fork runs fib(n-1) as the forked half and fib(n-2) inline, then joins):
//   cyan co_spawn + co_await     — co_spawn(pool, fib(n-1)) and co_await fib(n-2), then co_await
//                                  the first's future; sum: one async_awaitable per chunk of
//                                  kChunk elements, their futures summed;
//   cyan join / parallel_for     — cyan::dispatch::join and parallel_for (<cyan/dispatch/join.h>,
//                                  compiled in when that header exists; parallel_for over the
//                                  chunks, grain 1);
//   oneTBB task_group / parallel_invoke — in this process (TBB shares it with libev: no symbol
//                                  of libevent's); sum: parallel_reduce over the elements (auto
//                                  partitioner) and parallel_for over the same chunks as cyan;
//   rayon join, par_iter().sum() — child program examples/peers/rust (rayon_peer);
//   Tokio spawn + await          — child program tokio_peer: tokio::spawn(fib(n-1)), fib(n-2)
//                                  awaited inline, on a multi_thread runtime of 2 workers (its
//                                  root spawned too, so the whole tree runs on the workers);
//   Go goroutines + WaitGroup    — child program examples/peers/go (go_peer); sum: halves split
//                                  off to goroutines down to kChunk elements;
//   serial loop                  — the floor.
// The child programs run a workload per line on stdin and time it themselves (bench/peers.h);
// every pool (in process or child) is started and has run work before the first sample, every
// arm has an untimed warm-up run, and every sample starts after settle() (20 ms: spinning
// threads of the arm before go to sleep). Each root runs on its pool (cyan's co_spawn or
// async_awaitable, TBB's arena via the calling thread, rayon's install, Tokio's spawn, Go's
// main goroutine): the timed region ends when the root's result is back on the calling thread.
// Checksums: every arm's result, which must equal fib(N) and S(S-1)/2 (checked, not only
// compared).
//
//   CYAN_BENCH_FIB_N   N (default 30)
//   CYAN_BENCH_SUM_N   S (default 10000000)
//   CYAN_BENCH_REPS    repetitions per arm (default 11)

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <cyan/dispatch.h>
// cyan's fork-join API (issue 48): its arms are compiled in when the header exists.
#if __has_include(<cyan/dispatch/join.h>)
#include <cyan/dispatch/join.h>
#define CYAN_BENCH_HAVE_JOIN 1
#endif

#if defined(CYAN_BENCH_HAVE_TBB)
#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/parallel_invoke.h>
#include <oneapi/tbb/parallel_reduce.h>
#include <oneapi/tbb/task_group.h>
#include <oneapi/tbb/version.h>
#endif

#include "bench/harness.h"
#include "bench/peers.h"

namespace {

using cyan::bench::sample;
using cyan::dispatch::task;
using cyan::dispatch::thread_pool;

/// The sum's chunk (16,384 elements, 128 KiB): the grain of every arm that splits the array
/// itself (cyan's, TBB's parallel_for, Go's), small enough for ~600 chunks at S = 10^7.
constexpr std::size_t kChunk = 16384;

/// Below a fork's cut-off: one real call per node in every arm (the peers' fib_serial is
/// marked the same way), so no arm's leaves are folded into a loop.
[[gnu::noinline]] std::uint64_t fib_serial(unsigned n) {
  return n < 2 ? n : fib_serial(n - 1) + fib_serial(n - 2);
}

std::uint64_t fib_expected(unsigned n) {
  std::uint64_t a = 0;
  std::uint64_t b = 1;
  for (unsigned i = 0; i < n; ++i) {
    a = std::exchange(b, a + b);
  }
  return a;
}

std::uint64_t chunk_sum(const std::vector<std::uint64_t>& input, std::size_t chunk) {
  const std::size_t first = chunk * kChunk;
  const std::size_t last = std::min(input.size(), first + kChunk);
  std::uint64_t total = 0;
  for (std::size_t i = first; i < last; ++i) {
    total += input[i];
  }
  return total;
}

std::size_t chunks_of(const std::vector<std::uint64_t>& input) {
  return (input.size() + kChunk - 1) / kChunk;
}

/// Lets the threads of the arm that ran before go to sleep (libgomp's, TBB's, rayon's and Go's
/// idle workers spin for milliseconds), outside every timed region alike.
void settle() {
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

sample timed(const std::function<std::uint64_t()>& work) {
  settle();
  return cyan::bench::time(work);
}

// ---- cyan ---------------------------------------------------------------------------------

/// A coroutine fork per call: the forked half through co_spawn (a future), the other awaited.
/// Parameters by value; the pool outlives every task.
task<std::uint64_t> spawn_fib(thread_pool& pool, unsigned n, unsigned cutoff) {
  if (n < cutoff) {
    co_return fib_serial(n);
  }
  auto left = cyan::dispatch::co_spawn(pool, spawn_fib(pool, n - 1, cutoff));
  const std::uint64_t right = co_await spawn_fib(pool, n - 2, cutoff);
  co_return co_await left + right;
}

sample cyan_spawn_fib(unsigned n, unsigned cutoff) {
  thread_pool& pool = cyan::dispatch::global_concurrent_pool();
  return timed([&] { return cyan::dispatch::co_spawn(pool, spawn_fib(pool, n, cutoff)).get(); });
}

sample cyan_async_sum(const std::vector<std::uint64_t>& input) {
  std::vector<cyan::dispatch::future<std::uint64_t>> futures;
  futures.reserve(chunks_of(input));
  return timed([&] {
    for (std::size_t c = 0; c < chunks_of(input); ++c) {
      futures.push_back(
          cyan::dispatch::async_awaitable([&input, c] { return chunk_sum(input, c); }));
    }
    std::uint64_t total = 0;
    for (auto& future : futures) {
      total += future.get();
    }
    futures.clear();
    return total;
  });
}

// cyan's fork-join API (issue 48), when its header exists. This block is the only code that
// names it: join(f, g) -> std::pair of both results; parallel_for(first, last, f,
// grain) with f taking an index.
#if defined(CYAN_BENCH_HAVE_JOIN)
std::uint64_t join_fib(unsigned n, unsigned cutoff) {
  if (n < cutoff) {
    return fib_serial(n);
  }
  const auto [left, right] = cyan::dispatch::join([=] { return join_fib(n - 1, cutoff); },
                                                  [=] { return join_fib(n - 2, cutoff); });
  return left + right;
}

void parallel_for_chunks(std::size_t chunks, const std::function<void(std::size_t)>& body) {
  cyan::dispatch::parallel_for(std::size_t{ 0 }, chunks, body, std::size_t{ 1 });
}
#endif

#if defined(CYAN_BENCH_HAVE_JOIN)
sample cyan_join_fib(unsigned n, unsigned cutoff) {
  // The root runs on a pool worker, as every arm's does.
  return timed(
      [&] { return cyan::dispatch::async_awaitable([=] { return join_fib(n, cutoff); }).get(); });
}

sample cyan_parallel_for_sum(const std::vector<std::uint64_t>& input) {
  std::vector<std::uint64_t> partial(chunks_of(input));
  return timed([&] {
    return cyan::dispatch::async_awaitable([&] {
             parallel_for_chunks(partial.size(),
                                 [&](std::size_t c) { partial[c] = chunk_sum(input, c); });
             return std::accumulate(partial.begin(), partial.end(), std::uint64_t{ 0 });
           })
        .get();
  });
}
#endif

// ---- oneTBB -------------------------------------------------------------------------------

#if defined(CYAN_BENCH_HAVE_TBB)
std::uint64_t task_group_fib(unsigned n, unsigned cutoff) {
  if (n < cutoff) {
    return fib_serial(n);
  }
  std::uint64_t left = 0;
  tbb::task_group group;
  group.run([&] { left = task_group_fib(n - 1, cutoff); });
  const std::uint64_t right = task_group_fib(n - 2, cutoff);
  group.wait();
  return left + right;
}

std::uint64_t parallel_invoke_fib(unsigned n, unsigned cutoff) {
  if (n < cutoff) {
    return fib_serial(n);
  }
  std::uint64_t left = 0;
  std::uint64_t right = 0;
  tbb::parallel_invoke([&] { left = parallel_invoke_fib(n - 1, cutoff); },
                       [&] { right = parallel_invoke_fib(n - 2, cutoff); });
  return left + right;
}

sample tbb_reduce_sum(const std::vector<std::uint64_t>& input) {
  return timed([&] {
    return tbb::parallel_reduce(
        tbb::blocked_range<std::size_t>(0, input.size()), std::uint64_t{ 0 },
        [&](const tbb::blocked_range<std::size_t>& r, std::uint64_t total) {
          for (std::size_t i = r.begin(); i != r.end(); ++i) {
            total += input[i];
          }
          return total;
        },
        std::plus<>());
  });
}

sample tbb_parallel_for_sum(const std::vector<std::uint64_t>& input) {
  std::vector<std::uint64_t> partial(chunks_of(input));
  return timed([&] {
    tbb::parallel_for(tbb::blocked_range<std::size_t>(0, partial.size()),
                      [&](const tbb::blocked_range<std::size_t>& r) {
                        for (std::size_t c = r.begin(); c != r.end(); ++c) {
                          partial[c] = chunk_sum(input, c);
                        }
                      });
    return std::accumulate(partial.begin(), partial.end(), std::uint64_t{ 0 });
  });
}
#endif

// ---- suites -------------------------------------------------------------------------------

/// The child programs, started once for the whole run (absent when not built).
struct peers {
  std::unique_ptr<cyan::bench::peer_program> rayon =
      cyan::bench::peer_program::start("rayon_peer", "rayon");
  std::unique_ptr<cyan::bench::peer_program> tokio =
      cyan::bench::peer_program::start("tokio_peer", "Tokio");
  std::unique_ptr<cyan::bench::peer_program> go = cyan::bench::peer_program::start("go_peer", "Go");
};

sample child(cyan::bench::peer_program& peer, const std::string& line) {
  settle();
  return peer.run(line);
}

/// A suite whose every sample's checksum is also checked against the exact expected value.
class checked_suite {
 public:
  checked_suite(const char* workload, std::uint64_t expected)
      : suite_("forkjoin", workload), expected_(expected) {}

  void add(const std::string& arm, std::function<sample()> run) {
    arms_.insert(arm);
    suite_.add(arm, [this, arm, run = std::move(run)] {
      const sample s = run();
      if (s.checksum != expected_) {
        std::printf("  %s: checksum %llu, expected %llu\n", arm.c_str(),
                    static_cast<unsigned long long>(s.checksum),
                    static_cast<unsigned long long>(expected_));
        exact_ = false;
      }
      return s;
    });
  }

  bool run() {
    suite_.warm_up_each_arm();
    const bool same = suite_.run();
    return same && exact_;
  }

  /// goal_at_most(arm, peer, factor) when both arms ran.
  void goal_at_most(const std::string& arm, const std::string& peer, double factor) {
    if (arms_.count(arm) != 0 && arms_.count(peer) != 0) {
      suite_.goal_at_most(arm, peer, factor);
    }
  }

 private:
  cyan::bench::suite suite_;
  std::set<std::string> arms_;
  std::uint64_t expected_;
  bool exact_ = true;
};

bool run_fib(peers& p, unsigned n, unsigned cutoff) {
  const std::string workload = "fib cut-off " + std::to_string(cutoff);
  checked_suite s(workload.c_str(), fib_expected(n));
  const std::string line = "fib " + std::to_string(cutoff) + " " + std::to_string(n);
  s.add("cyan co_spawn + co_await", [=] { return cyan_spawn_fib(n, cutoff); });
#if defined(CYAN_BENCH_HAVE_JOIN)
  s.add("cyan join", [=] { return cyan_join_fib(n, cutoff); });
#endif
#if defined(CYAN_BENCH_HAVE_TBB)
  s.add("oneTBB task_group", [=] { return timed([=] { return task_group_fib(n, cutoff); }); });
  s.add("oneTBB parallel_invoke",
        [=] { return timed([=] { return parallel_invoke_fib(n, cutoff); }); });
#endif
  if (p.rayon) {
    s.add("rayon join", [&, line] { return child(*p.rayon, line); });
  }
  if (p.tokio) {
    s.add("Tokio spawn + await", [&, line] { return child(*p.tokio, line); });
  }
  if (p.go) {
    s.add("Go goroutines + WaitGroup", [&, line] { return child(*p.go, line); });
  }
  s.add("serial loop", [=] { return timed([=] { return fib_serial(n); }); });
  const bool ok = s.run();
  // Issue 48's goals.
  if (cutoff <= 2) {
    s.goal_at_most("cyan join", "oneTBB task_group", 1.0);
    s.goal_at_most("cyan join", "rayon join", 1.5);
    s.goal_at_most("cyan co_spawn + co_await", "Tokio spawn + await", 0.5);
  } else {
    s.goal_at_most("cyan join", "oneTBB task_group", 1.0);
    s.goal_at_most("cyan join", "rayon join", 1.0);
  }
  return ok;
}

bool run_sum(peers& p, std::size_t elements) {
  std::vector<std::uint64_t> input(elements);
  std::iota(input.begin(), input.end(), std::uint64_t{ 0 });
  const std::uint64_t expected =
      elements == 0 ? 0 : static_cast<std::uint64_t>(elements) * (elements - 1) / 2;
  checked_suite s("sum", expected);
  const std::string line = "sum " + std::to_string(elements);
  s.add("cyan async_awaitable per chunk", [&] { return cyan_async_sum(input); });
#if defined(CYAN_BENCH_HAVE_JOIN)
  s.add("cyan parallel_for", [&] { return cyan_parallel_for_sum(input); });
#endif
#if defined(CYAN_BENCH_HAVE_TBB)
  s.add("oneTBB parallel_reduce", [&] { return tbb_reduce_sum(input); });
  s.add("oneTBB parallel_for", [&] { return tbb_parallel_for_sum(input); });
#endif
  if (p.rayon) {
    s.add("rayon par_iter().sum()", [&, line] { return child(*p.rayon, line); });
  }
  if (p.go) {
    s.add("Go goroutines + WaitGroup", [&, line] { return child(*p.go, line); });
  }
  s.add("serial loop", [&] {
    return timed([&] { return std::accumulate(input.begin(), input.end(), std::uint64_t{ 0 }); });
  });
  const bool ok = s.run();
  s.goal_at_most("cyan parallel_for", "oneTBB parallel_reduce", 1.0);
  s.goal_at_most("cyan parallel_for", "rayon par_iter().sum()", 1.0);
  return ok;
}

/// Starts cyan's pool (and TBB's workers) and has each thread run work, outside any timing.
void warm_up() {
  std::vector<cyan::dispatch::future<int>> warm;
  for (std::size_t t = 0; t < cyan::dispatch::global_concurrent_pool().size(); ++t) {
    warm.push_back(cyan::dispatch::async_awaitable([] { return 1; }));
  }
  for (auto& future : warm) {
    (void)future.get();
  }
#if defined(CYAN_BENCH_HAVE_TBB)
  (void)task_group_fib(16, 8);
#endif
}

}  // namespace

int main() {
  const auto n = static_cast<unsigned>(cyan::bench::env_or("CYAN_BENCH_FIB_N", 30));
  const auto elements =
      static_cast<std::size_t>(cyan::bench::env_or("CYAN_BENCH_SUM_N", 10'000'000));
  std::printf(
      "forkjoin benchmark: fib(%u) = %llu at cut-offs 12 and 2, a sum of %zu elements; %d reps\n",
      n, static_cast<unsigned long long>(fib_expected(n)), elements, cyan::bench::repetitions());
  std::printf("threads: cyan global_concurrent_pool %zu",
              cyan::dispatch::global_concurrent_pool().size());
#if defined(CYAN_BENCH_HAVE_TBB)
  std::printf(", oneTBB %d.%d default concurrency %d", TBB_VERSION_MAJOR, TBB_VERSION_MINOR,
              tbb::info::default_concurrency());
#else
  std::printf("; oneTBB: skipped (libtbb-dev not found when configured)");
#endif
#if !defined(CYAN_BENCH_HAVE_JOIN)
  std::printf("; cyan join / parallel_for: skipped (no <cyan/dispatch/join.h> yet)");
#endif
  std::printf("\n");
  warm_up();
  peers p;
  std::fflush(stdout);
  const bool coarse_ok = run_fib(p, n, 12);
  const bool fine_ok = run_fib(p, n, 2);
  const bool sum_ok = run_sum(p, elements);
  return cyan::bench::exit_status(coarse_ok && fine_ok && sum_ok);
}
