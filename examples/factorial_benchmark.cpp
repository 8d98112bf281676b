// Factorial benchmark: cyan's global pool against std::async, OpenMP, a Boost.Asio thread_pool
// and a serial loop, on two workloads:
//   dispatch — 300,000 tiny tasks f(i % 20 + 1): measures the cost of handing a task over;
//   compute  — 60,000 tasks f(i) whose cost grows with i: measures load balance.
// The dispatch workload also has the fork-join peers of forkjoin_benchmark (issue 48), each
// posting every task from one thread and keeping every result:
//   oneTBB task_group  — in this process: run() of each task from the calling thread, results
//                        in a preallocated vector, then wait() (the caller joins the work);
//   Tokio spawn + await — child program tokio_peer (bench/peers.h, "dispatch N"): a
//                        multi_thread runtime of 2 workers, each task spawned from the root
//                        (block_on, on the calling thread: not a worker), every JoinHandle
//                        awaited;
//   Go goroutines + WaitGroup — child program go_peer: a goroutine per task started from main,
//                        results in a slice, GOMAXPROCS at its default (the CPUs).
// Each is skipped with a one-line message when its package or toolchain is missing.
// Every arm computes the same values and keeps every result; the checksum (the wrapping sum of
// all results) must be identical across arms. Thread start-up is excluded alike for every arm:
// each pool (in process or child) is created and has run a task before any timing starts.
// Every arm also has one untimed warm-up run of the whole workload: the first run of 300,000
// awaitables grows cyan's frame pool (about 19 MB, kept from then on), and each peer's first run
// has its own one-time costs (malloc's arenas, OpenMP's team), which would otherwise land in one
// sample. And each timed run comes right after an untimed run of the same arm: the std::async
// arm's ~33,000 thread creations per run leave the first touch of memory that other arms left
// idle slow, in the whole machine, for seconds (docs/bench/notes.md); the untimed run pays that,
// not the sample.
//
//   CYAN_BENCH_DISPATCH_TASKS, CYAN_BENCH_COMPUTE_TASKS   task counts (defaults 300000, 60000)
//   CYAN_BENCH_REPS                                       repetitions per arm (default 11)

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <future>
#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <omp.h>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include <cyan/common/cache_line.h>
#include <cyan/dispatch.h>

#if defined(CYAN_BENCH_HAVE_TBB)
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/task_group.h>
#include <oneapi/tbb/version.h>
#endif

#include "bench/harness.h"
#include "bench/peers.h"

namespace {

using cyan::bench::sample;

/// The task: i! modulo 2^64 (it wraps; every arm wraps alike). Not inlined and not analysed
/// across calls, so every arm pays one real call per task and no arm's loop is folded away.
[[gnu::noinline, gnu::noipa]] std::uint64_t factorial(std::uint64_t i) {
  i = std::max<std::uint64_t>(1, i);
  std::uint64_t result = i;
  while (i > 2) {
    result *= --i;
  }
  return result;
}

/// One workload: how many tasks and which argument task i computes.
struct workload {
  const char* name;
  std::size_t tasks;
  bool small;  // true: f(i % 20 + 1) (dispatch); false: f(i) (compute, cost grows with i)

  [[nodiscard]] std::uint64_t argument(std::size_t i) const { return small ? i % 20 + 1 : i; }
  [[nodiscard]] std::uint64_t run(std::size_t i) const { return factorial(argument(i)); }
};

/// Lets threads left spinning by the previous arm go to sleep before the next arm is timed:
/// libgomp's idle workers spin after a parallel region (about 5–15 ms on this machine), which
/// would otherwise steal a core from whichever arm runs next. Outside every timed region alike.
void settle() {
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

std::uint64_t sum(const std::vector<std::uint64_t>& results) {
  std::uint64_t total = 0;
  for (const std::uint64_t value : results) {
    total += value;
  }
  return total;
}

/// Collects every future's result, then releases the futures (their shared state, and for
/// std::async the thread join, belongs to the work being timed).
template <typename Future>
std::uint64_t get_all(std::vector<Future>& futures) {
  std::uint64_t total = 0;
  for (Future& future : futures) {
    total += future.get();
  }
  futures.clear();
  return total;
}

/// Waits for fire-and-forget tasks: each finishing task decrements an atomic count and the last
/// one opens a std::latch the timing thread blocks on. libstdc++'s latch wait spins briefly and
/// then sleeps in a futex, so the waiting thread does not hold a core the pool needs.
class completion {
 public:
  explicit completion(std::size_t tasks) : remaining_{ tasks } {
    if (tasks == 0) {
      done_.count_down();
    }
  }

  /// [any thread] Called by each task after it stored its result.
  void task_finished() noexcept {
    // acq_rel: the release half publishes this task's result; the acquire half lets the last
    // task (the end of this RMW release sequence) carry every result into its count_down(),
    // which pairs with the acquire in wait().
    if (remaining_.value.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      done_.count_down();
    }
  }

  void wait() { done_.wait(); }

 private:
  cyan::cache_padded<std::atomic<std::size_t>> remaining_;
  std::latch done_{ 1 };
};

// ---- the arms -----------------------------------------------------------------------------

sample cyan_async_awaitable(const workload& w) {
  std::vector<cyan::dispatch::future<std::uint64_t>> futures;
  futures.reserve(w.tasks);
  settle();
  return cyan::bench::time([&] {
    for (std::size_t i = 0; i < w.tasks; ++i) {
      futures.push_back(cyan::dispatch::async_awaitable([&w, i] { return w.run(i); }));
    }
    return get_all(futures);
  });
}

sample cyan_async(const workload& w) {
  std::vector<std::uint64_t> results(w.tasks);
  completion done(w.tasks);
  settle();
  return cyan::bench::time([&] {
    for (std::size_t i = 0; i < w.tasks; ++i) {
      cyan::dispatch::async([&w, &results, &done, i] {
        results[i] = w.run(i);
        done.task_finished();
      });
    }
    done.wait();
    return sum(results);
  });
}

/// What the std::async arm saw: libstdc++ falls back to running a task deferred (on the
/// calling thread, inside get()) when creating its thread fails with EAGAIN, e.g. at the
/// system's thread limit — which tens of thousands of not-yet-joined task threads reach.
struct std_async_report {
  std::size_t fewest_deferred = SIZE_MAX;
  std::size_t most_deferred = 0;

  void print(const workload& w) const {
    if (fewest_deferred == SIZE_MAX) {
      return;  // the arm did not run (CYAN_BENCH_ARMS)
    }
    std::printf(
        "  std::async: %zu to %zu of the %zu tasks per run ran deferred on the calling "
        "thread (thread creation failed with EAGAIN); the others each had a new thread\n",
        fewest_deferred, most_deferred, w.tasks);
  }
};

sample std_async(const workload& w, std_async_report& report) {
  std::vector<std::future<std::uint64_t>> futures;
  futures.reserve(w.tasks);
  const std::thread::id caller = std::this_thread::get_id();
  std::size_t deferred = 0;  // Written only by the calling thread: deferred tasks run there.
  settle();
  const sample timed = cyan::bench::time([&] {
    for (std::size_t i = 0; i < w.tasks; ++i) {
      futures.push_back(std::async([&w, &deferred, caller, i] {
        deferred += std::this_thread::get_id() == caller ? 1 : 0;
        return w.run(i);
      }));
    }
    return get_all(futures);
  });
  report.fewest_deferred = std::min(report.fewest_deferred, deferred);
  report.most_deferred = std::max(report.most_deferred, deferred);
  return timed;
}

sample openmp_dynamic(const workload& w) {
  std::vector<std::uint64_t> results(w.tasks);
  settle();
  return cyan::bench::time([&] {
    const auto tasks = static_cast<std::int64_t>(w.tasks);
#pragma omp parallel for schedule(dynamic, 1)
    for (std::int64_t i = 0; i < tasks; ++i) {
      results[static_cast<std::size_t>(i)] = w.run(static_cast<std::size_t>(i));
    }
    return sum(results);  // the parallel region's closing barrier waited for every task
  });
}

sample openmp_static(const workload& w) {
  std::vector<std::uint64_t> results(w.tasks);
  settle();
  return cyan::bench::time([&] {
    const auto tasks = static_cast<std::int64_t>(w.tasks);
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < tasks; ++i) {
      results[static_cast<std::size_t>(i)] = w.run(static_cast<std::size_t>(i));
    }
    return sum(results);
  });
}

sample asio_packaged_task(boost::asio::thread_pool& pool, const workload& w) {
  std::vector<std::future<std::uint64_t>> futures;
  futures.reserve(w.tasks);
  settle();
  return cyan::bench::time([&] {
    for (std::size_t i = 0; i < w.tasks; ++i) {
      std::packaged_task<std::uint64_t()> task([&w, i] { return w.run(i); });
      futures.push_back(task.get_future());
      boost::asio::post(pool, std::move(task));
    }
    return get_all(futures);
  });
}

#if defined(CYAN_BENCH_HAVE_TBB)
sample tbb_task_group(const workload& w) {
  std::vector<std::uint64_t> results(w.tasks);
  settle();
  return cyan::bench::time([&] {
    tbb::task_group group;
    for (std::size_t i = 0; i < w.tasks; ++i) {
      group.run([&w, &results, i] { results[i] = w.run(i); });
    }
    group.wait();
    return sum(results);
  });
}
#endif

/// The child programs with a dispatch workload, started once for the whole run (absent when
/// not built).
struct peers {
  std::unique_ptr<cyan::bench::peer_program> tokio =
      cyan::bench::peer_program::start("tokio_peer", "Tokio");
  std::unique_ptr<cyan::bench::peer_program> go = cyan::bench::peer_program::start("go_peer", "Go");
};

sample child(cyan::bench::peer_program& peer, const workload& w) {
  settle();
  return peer.run("dispatch " + std::to_string(w.tasks));
}

sample serial(const workload& w) {
  settle();
  return cyan::bench::time([&] {
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < w.tasks; ++i) {
      total += w.run(i);
    }
    return total;
  });
}

// ---- set-up and reporting -----------------------------------------------------------------

unsigned pool_threads() {
  return std::max(1U, std::thread::hardware_concurrency());
}

/// Starts every pool and runs a trivial task on each thread of it, outside any timed region.
void warm_up(boost::asio::thread_pool& asio_pool) {
  std::vector<cyan::dispatch::future<int>> cyan_warm;
  std::vector<std::future<int>> asio_warm;
  for (unsigned t = 0; t < pool_threads(); ++t) {
    cyan_warm.push_back(cyan::dispatch::async_awaitable([] { return 1; }));
    std::packaged_task<int()> task([] { return 1; });
    asio_warm.push_back(task.get_future());
    boost::asio::post(asio_pool, std::move(task));
  }
  get_all(cyan_warm);
  get_all(asio_warm);
#if defined(CYAN_BENCH_HAVE_TBB)
  tbb::task_group tbb_warm;
  for (unsigned t = 0; t < pool_threads(); ++t) {
    tbb_warm.run([] {});
  }
  tbb_warm.wait();
#endif
  int threads = 0;
#pragma omp parallel reduction(+ : threads)
  threads += 1;
  std::printf("OpenMP (_OPENMP %d): a team of %d threads\n", _OPENMP, threads);
}

thread_local unsigned tasks_run_on_this_thread = 0;

/// Says what std::async's default policy does here, by running a few tasks one after another
/// and looking at the thread each ran on: the caller (deferred), a reused thread (a pool) or a
/// fresh thread each time (launch::async — one thread creation per task).
std::string describe_std_async() {
  const std::thread::id caller = std::this_thread::get_id();
  bool on_caller = false;
  bool reused = false;
  for (int k = 0; k < 4; ++k) {
    const auto [id, seen] =
        std::async([] {
          return std::pair{ std::this_thread::get_id(), ++tasks_run_on_this_thread };
        }).get();
    on_caller = on_caller || id == caller;
    reused = reused || seen > 1;
  }
  if (on_caller) {
    return "deferred: each task runs on the calling thread inside get()";
  }
  if (reused) {
    return "tasks run on reused worker threads (a pool)";
  }
  return "launch::async: a new thread is created (and joined) for every task, falling back to "
         "deferred when thread creation fails with EAGAIN";
}

/// The arms both workloads have, in the same order; cyan's awaitable arm is the reference.
void add_arms(cyan::bench::suite& s, boost::asio::thread_pool& pool, const workload& w,
              std_async_report& report) {
  s.add("cyan async_awaitable", [&] { return cyan_async_awaitable(w); });
  s.add("cyan async", [&] { return cyan_async(w); });
  s.add("std::async", [&] { return std_async(w, report); });
  s.add("OpenMP dynamic,1", [&] { return openmp_dynamic(w); });
  s.add("OpenMP static", [&] { return openmp_static(w); });
  s.add("asio thread_pool + packaged_task", [&] { return asio_packaged_task(pool, w); });
}

/// The fork-join peers, on the dispatch workload only.
void add_peer_arms(cyan::bench::suite& s, peers& p, const workload& w) {
#if defined(CYAN_BENCH_HAVE_TBB)
  s.add("oneTBB task_group", [&] { return tbb_task_group(w); });
#endif
  if (p.tokio) {
    s.add("Tokio spawn + await", [&] { return child(*p.tokio, w); });
  }
  if (p.go) {
    s.add("Go goroutines + WaitGroup", [&] { return child(*p.go, w); });
  }
}

bool run_dispatch(boost::asio::thread_pool& pool, peers& p, const workload& w) {
  cyan::bench::suite s{ "factorial", w.name };
  s.warm_up_each_arm();
  s.rerun_before_each_sample();
  std_async_report report;
  add_arms(s, pool, w, report);
  add_peer_arms(s, p, w);
  s.add("serial loop", [&] { return serial(w); });
  const bool ok = s.run();
  report.print(w);
  s.goal("cyan async_awaitable", "asio thread_pool + packaged_task", 8.0);
  s.goal_spread("cyan async_awaitable", 2.0);
  s.goal("cyan async_awaitable", "std::async", 50.0);
  s.goal_at_most("cyan async", "OpenMP dynamic,1", 2.0);
  if (w.name == std::string("dispatch")) {
    // Issue 48: 3x oneTBB's time on a quiet machine, at least its speed on a busy one.
    s.goal("cyan async_awaitable", "oneTBB task_group", cyan::bench::busy_mode() ? 1.0 : 3.0);
  }
  return ok;
}

bool run_compute(boost::asio::thread_pool& pool, const workload& w) {
  cyan::bench::suite s{ "factorial", w.name };
  s.warm_up_each_arm();
  s.rerun_before_each_sample();
  std_async_report report;
  add_arms(s, pool, w, report);
  s.add("serial loop", [&] { return serial(w); });
  const bool ok = s.run();
  report.print(w);
  s.goal_at_most("cyan async", "OpenMP dynamic,1", 1.10);
  s.goal_at_most("cyan async_awaitable", "OpenMP dynamic,1", 1.10);
  return ok;
}

}  // namespace

int main() {
  const workload dispatch{ "dispatch", cyan::bench::env_or("CYAN_BENCH_DISPATCH_TASKS", 300'000),
                           true };
  const workload compute{ "compute", cyan::bench::env_or("CYAN_BENCH_COMPUTE_TASKS", 60'000),
                          false };
  boost::asio::thread_pool asio_pool(pool_threads());
  warm_up(asio_pool);
  std::printf(
      "factorial benchmark: dispatch %zu tasks of f(i %% 20 + 1), compute %zu tasks of "
      "f(i); %d reps\n",
      dispatch.tasks, compute.tasks, cyan::bench::repetitions());
  std::printf("threads: cyan global_concurrent_pool %zu, asio thread_pool %u",
              cyan::dispatch::global_concurrent_pool().size(), pool_threads());
#if defined(CYAN_BENCH_HAVE_TBB)
  std::printf(", oneTBB %d.%d default concurrency %d\n", TBB_VERSION_MAJOR, TBB_VERSION_MINOR,
              tbb::info::default_concurrency());
#else
  std::printf("\noneTBB: skipped (libtbb-dev not found when configured)\n");
#endif
  std::printf("std::async default policy: %s\n", describe_std_async().c_str());
  std::printf("cyan async waits for completion with an atomic countdown + std::latch\n");
  peers p;
  std::fflush(stdout);
  const bool dispatch_ok = run_dispatch(asio_pool, p, dispatch);
  const bool compute_ok = run_compute(asio_pool, compute);
  return cyan::bench::exit_status(dispatch_ok && compute_ok);
}
