// The pool's per-worker deques: posts from pool tasks go local, idle workers steal them, outside
// posts are not starved, stop drains or drops local work, and stats() counts every task once.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <latch>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cyan/dispatch/co_spawn.h"
#include "cyan/dispatch/errors.h"
#include "cyan/dispatch/schedule.h"
#include "cyan/dispatch/stop_mode.h"
#include "cyan/dispatch/task.h"
#include "cyan/dispatch/thread_pool.h"
#include "support/worker_holder.h"

namespace cyan::dispatch {
namespace {

using namespace std::chrono_literals;

// Yields until `count` reaches `target`; false after `limit` (the tests then fail, not hang).
bool reaches(const std::atomic<int>& count, int target, std::chrono::seconds limit = 60s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (count.load(std::memory_order_acquire) < target) {
    if (std::chrono::steady_clock::now() > deadline) {
      return false;
    }
    std::this_thread::yield();
  }
  return true;
}

std::uint64_t tasks_counted(const thread_pool& pool) {
  std::uint64_t total = 0;
  for (const thread_pool_worker_stats& s : pool.stats()) {
    total += s.from_local + s.from_injection + s.stolen + s.next_task_hits;
  }
  return total;
}

class workers : public ::testing::TestWithParam<std::size_t> {};

INSTANTIATE_TEST_SUITE_P(stealing, workers, ::testing::Values(2, 4, 8),
                         [](const auto& info) { return std::to_string(info.param) + "_workers"; });

// Liveness: a task posts N-1 tasks (to its own deque) and blocks until all N run at once. Only
// idle workers stealing them can let it finish: none may wait behind the busy one.
TEST_P(workers, n_workers_run_n_locally_posted_tasks_at_once) {
  const int n = static_cast<int>(GetParam());
  thread_pool pool(GetParam());
  // A round takes milliseconds; a task left unstolen waits for a sleeper's loop timeout (~60 s).
  constexpr auto kLimit = 10s;
  for (int round = 0; round < 100; ++round) {
    std::atomic<int> arrived{ 0 };
    std::atomic<int> all_met{ 0 };
    auto meet = [&] {
      arrived.fetch_add(1, std::memory_order_acq_rel);
      if (reaches(arrived, n, kLimit)) {
        all_met.fetch_add(1, std::memory_order_acq_rel);
      }
    };
    pool.post([&] {
      for (int i = 1; i < n; ++i) {
        pool.post(meet);
      }
      meet();
    });
    ASSERT_TRUE(reaches(all_met, n, kLimit))
        << "round " << round << ": " << arrived.load() << " of " << n << " tasks running at once";
  }
}

// Tasks a pool task posts run newest first on its worker (the deque's owner end).
TEST(stealing, posts_from_a_task_run_newest_first_on_one_worker) {
  thread_pool pool(1);
  std::mutex m;
  std::vector<int> order;
  std::atomic<int> done{ 0 };
  pool.post([&] {
    for (int i = 1; i <= 5; ++i) {
      pool.post([&, i] {
        {
          const std::lock_guard lock(m);
          order.push_back(i);
        }
        done.fetch_add(1, std::memory_order_release);
      });
    }
  });
  ASSERT_TRUE(reaches(done, 5));
  EXPECT_EQ(order, (std::vector<int>{ 5, 4, 3, 2, 1 }));
}

// A task that keeps re-posting itself (to its own deque) must not starve a post from outside:
// after at most 61 local takes the worker looks at the shared queue first.
TEST(stealing, a_self_reposting_task_does_not_starve_outside_posts) {
  thread_pool pool(1);
  constexpr int kCap = 200000;
  std::atomic<int> steps{ 0 };
  std::atomic<bool> stop{ false };
  std::function<void()> step = [&] {
    const int s = steps.fetch_add(1, std::memory_order_acq_rel) + 1;
    if (s < kCap && !stop.load(std::memory_order_acquire)) {
      pool.post(step);
    }
  };
  pool.post(step);
  ASSERT_TRUE(reaches(steps, 100));
  std::atomic<int> posted_at{ 0 };
  std::atomic<int> ran_at{ 0 };
  std::atomic<int> ran{ 0 };
  posted_at = steps.load();
  pool.post([&] {
    ran_at = steps.load();
    stop = true;
    ran.store(1, std::memory_order_release);
  });
  ASSERT_TRUE(reaches(ran, 1));
  EXPECT_LT(ran_at.load(), kCap) << "the outside post ran only after the chain ended";
  EXPECT_LE(ran_at.load() - posted_at.load(), 2 * 64) << "chain steps the outside post waited";
  pool.stop();
  pool.join();
}

// A tree of local posts over many workers: every task runs exactly once, and stats() counts
// each exactly once (from its own deque, the shared queue, or stolen).
TEST(stealing, a_tree_of_local_posts_on_8_to_32_workers_runs_every_task_once) {
  for (std::size_t n : { 8, 16, 32 }) {
    thread_pool pool(n);
    constexpr int kDepth = 13;  // 2^13 - 1 = 8191 tasks
    std::vector<std::atomic<int>> runs((1U << kDepth) - 1);
    std::atomic<int> finished{ 0 };
    std::function<void(int, int)> node = [&](int index, int depth) {
      runs[static_cast<std::size_t>(index)].fetch_add(1, std::memory_order_relaxed);
      if (depth + 1 < kDepth) {
        pool.post([&, index, depth] { node(2 * index + 1, depth + 1); });
        pool.post([&, index, depth] { node(2 * index + 2, depth + 1); });
      }
      finished.fetch_add(1, std::memory_order_acq_rel);
    };
    pool.post([&] { node(0, 0); });
    const int total = static_cast<int>(runs.size());
    ASSERT_TRUE(reaches(finished, total)) << n << " workers: " << finished.load();
    pool.stop();
    pool.join();
    for (std::size_t i = 0; i < runs.size(); ++i) {
      ASSERT_EQ(runs[i].load(), 1) << n << " workers, task " << i;
    }
    EXPECT_EQ(tasks_counted(pool), static_cast<std::uint64_t>(total)) << n << " workers";
    std::uint64_t injected = 0;
    std::uint64_t stolen = 0;
    std::uint64_t suffered = 0;
    for (const auto& s : pool.stats()) {
      injected += s.from_injection;
      stolen += s.stolen;
      suffered += s.taken_by_thieves;
    }
    EXPECT_EQ(injected, 1U) << "only the root came from outside";
    EXPECT_EQ(stolen, suffered) << "every steal has a victim";
  }
}

TEST(stealing, stop_drain_runs_the_local_tasks_queued) {
  thread_pool pool(2);
  std::atomic<int> ran{ 0 };
  pool.post([&] {
    for (int i = 0; i < 1000; ++i) {
      pool.post([&] { ran.fetch_add(1, std::memory_order_relaxed); });
    }
    pool.stop(stop_mode::drain);
  });
  pool.join();
  EXPECT_EQ(ran.load(), 1000);
}

TEST(stealing, stop_discard_drops_the_local_tasks_queued) {
  thread_pool pool(1);
  std::atomic<int> ran{ 0 };
  std::atomic<int> destroyed{ 0 };
  struct counted {
    std::atomic<int>* ran;
    std::atomic<int>* destroyed;
    bool owner = true;
    counted(std::atomic<int>* r, std::atomic<int>* d) : ran(r), destroyed(d) {}
    counted(counted&& other) noexcept
        : ran(other.ran), destroyed(other.destroyed), owner(std::exchange(other.owner, false)) {}
    ~counted() {
      if (owner) {
        destroyed->fetch_add(1, std::memory_order_relaxed);
      }
    }
    void operator()() { ran->fetch_add(1, std::memory_order_relaxed); }
  };
  pool.post([&] {
    for (int i = 0; i < 1000; ++i) {
      pool.post(counted(&ran, &destroyed));
    }
    pool.stop(stop_mode::discard);
  });
  pool.join();
  EXPECT_EQ(ran.load(), 0);
  EXPECT_EQ(destroyed.load(), 1000);
}

TEST(stealing, a_post_from_a_pool_task_after_stop_throws) {
  thread_pool pool(1);
  std::atomic<int> threw{ 0 };
  pool.post([&] {
    pool.stop();
    try {
      pool.post([] {});
    } catch (const executor_stopped&) {
      threw = 1;
    }
  });
  pool.join();
  EXPECT_EQ(threw.load(), 1);
}

// A pool task that waits (future::get) for a task it posted itself, on one worker: the wait
// runs it (before the helping wait: a deadlock).
TEST(stealing, a_get_on_the_only_worker_runs_the_awaited_task) {
  thread_pool pool(1);
  auto outer = pool.post_awaitable([&pool] {
    auto inner = pool.post_awaitable([] { return 41; });
    return inner.get() + 1;
  });
  if (outer.wait_for(60s) != std::future_status::ready) {
    std::fprintf(stderr, "a get on the only worker deadlocked\n");
    std::_Exit(1);
  }
  EXPECT_EQ(outer.get(), 42);
}

task<int> leaf(int i) {
  co_return i;
}

// Item 4 of the scheduler's issue: co_spawn from a pool task goes to that worker's deque. On a
// worker whose only peer is busy, every child comes back from the own deque.
TEST(stealing, co_spawn_from_a_pool_task_goes_to_the_local_deque) {
  thread_pool pool(2);
  cyan::test::worker_holder busy(pool);
  constexpr int kChildren = 200;
  auto root = pool.post_awaitable([&pool] {
    std::vector<future<int>> children;
    for (int i = 0; i < kChildren; ++i) {
      children.push_back(co_spawn(pool, leaf(i)));
    }
    int sum = 0;
    for (auto& child : children) {
      sum += child.get();  // helps: runs the children from the deque
    }
    return sum;
  });
  ASSERT_EQ(root.wait_for(60s), std::future_status::ready);
  EXPECT_EQ(root.get(), kChildren * (kChildren - 1) / 2);
  busy.release();
  pool.stop();
  pool.join();
  std::uint64_t from_local = 0;
  std::uint64_t injected = 0;
  for (const auto& s : pool.stats()) {
    from_local += s.from_local;
    injected += s.from_injection;
  }
  EXPECT_EQ(injected, 2U);  // the busy task and the root
  EXPECT_EQ(from_local, static_cast<std::uint64_t>(kChildren));
}

}  // namespace
}  // namespace cyan::dispatch
