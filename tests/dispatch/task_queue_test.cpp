#include "cyan/dispatch/detail/task_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <thread>
#include <vector>

#include "support/lifecycle.h"

namespace {

using cyan::dispatch::detail::task_queue;
using cyan::test::lifecycle;

std::size_t env_or(const char* name, std::size_t fallback) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::strtoull(value, nullptr, 10) : fallback;
}

TEST(task_queue, is_fifo_across_many_blocks) {
  task_queue queue;
  std::vector<int> ran;
  EXPECT_TRUE(queue.empty());
  for (int i = 0; i < 1000; ++i) {  // 1000 tasks span 33 blocks of 31 slots
    queue.push([&ran, i] { ran.push_back(i); });
  }
  EXPECT_FALSE(queue.empty());
  task_queue::task t;
  while (queue.try_pop(t)) {
    t();
  }
  EXPECT_TRUE(queue.empty());
  ASSERT_EQ(ran.size(), 1000u);
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(ran[i], i);
  }
}

TEST(task_queue, destruction_destroys_leftover_tasks_once) {
  lifecycle::reset();
  {
    task_queue queue;
    for (int i = 0; i < 100; ++i) {
      queue.push([captured = lifecycle(i)] {});
    }
    task_queue::task t;
    for (int i = 0; i < 40; ++i) {
      ASSERT_TRUE(queue.try_pop(t));
    }
    t = nullptr;
    EXPECT_EQ(lifecycle::live(), 60);
  }
  EXPECT_EQ(lifecycle::live(), 0);
}

// Every task runs exactly once, and tasks of one producer leave the queue in push order
// (checked per consumer: what one consumer pops of one producer's tasks increases).
TEST(task_queue, concurrent_producers_and_consumers) {
  const std::size_t per_producer = env_or("CYAN_STRESS_ITEMS", 200000);
  constexpr int kProducers = 3;
  constexpr int kConsumers = 3;
  task_queue queue;
  std::vector<std::atomic<std::uint8_t>> runs(per_producer * kProducers);
  std::atomic<int> producers_done{ 0 };
  std::atomic<int> order_errors{ 0 };
  // The consumer running a task: its own record of the last index seen per producer.
  thread_local std::vector<std::int64_t>* last_seen = nullptr;

  std::vector<std::thread> threads;
  for (int p = 0; p < kProducers; ++p) {
    threads.emplace_back([&, p] {
      for (std::size_t i = 0; i < per_producer; ++i) {
        queue.push([&, p, i] {
          runs[p * per_producer + i].fetch_add(1, std::memory_order_relaxed);
          if (static_cast<std::int64_t>(i) <= (*last_seen)[p]) {
            order_errors.fetch_add(1);
          }
          (*last_seen)[p] = static_cast<std::int64_t>(i);
        });
      }
      producers_done.fetch_add(1);
    });
  }
  for (int c = 0; c < kConsumers; ++c) {
    threads.emplace_back([&] {
      std::vector<std::int64_t> mine(kProducers, -1);
      last_seen = &mine;
      task_queue::task t;
      for (;;) {
        if (queue.try_pop(t)) {
          t();
        } else if (producers_done.load() == kProducers && queue.empty()) {
          return;
        }
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(order_errors.load(), 0);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    ASSERT_EQ(runs[i].load(), 1) << "task " << i << " (" << per_producer << " per producer)";
  }
}

}  // namespace
