#include "cyan/dispatch/detail/task_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <thread>
#include <vector>

#include "support/allocation_counter.h"
#include "support/lifecycle.h"
#include "support/stress_env.h"

using cyan::test::env_or;

namespace {

using cyan::dispatch::detail::task_queue;
using cyan::test::lifecycle;

TEST(task_queue, is_fifo_across_many_blocks) {
  task_queue queue;
  std::vector<int> ran;
  EXPECT_TRUE(queue.empty());
  constexpr int kTasks = 10'000;  // 40 blocks of 255 slots
  for (int i = 0; i < kTasks; ++i) {
    ASSERT_TRUE(queue.try_push([&ran, i] { ran.push_back(i); }));
  }
  EXPECT_FALSE(queue.empty());
  task_queue::task t;
  while (queue.try_pop(t)) {
    t();
  }
  EXPECT_TRUE(queue.empty());
  ASSERT_EQ(ran.size(), static_cast<std::size_t>(kTasks));
  for (int i = 0; i < kTasks; ++i) {
    ASSERT_EQ(ran[i], i);
  }
}

// A backlog of 40 blocks, drained, then built again: the second one reuses the first one's blocks
// instead of taking new ones from malloc (which would give the memory back to the system, and
// the next backlog would fault every page in again).
TEST(task_queue, a_drained_backlog_keeps_its_blocks_for_the_next) {
  constexpr int kTasks = 40 * 255;  // 255 tasks per block
  task_queue queue;
  int ran = 0;
  const auto fill = [&] {
    for (int i = 0; i < kTasks; ++i) {
      ASSERT_TRUE(queue.try_push([&ran] { ++ran; }));
    }
  };
  const auto drain = [&] {
    task_queue::task t;
    while (queue.try_pop(t)) {
      t();
    }
  };
  fill();
  drain();
  cyan::test::start_counting_allocations();
  fill();
  const int allocations = cyan::test::stop_counting_allocations();
  drain();
  EXPECT_EQ(allocations, 0);
  EXPECT_EQ(ran, 2 * kTasks);
  EXPECT_TRUE(queue.empty());
}

// Expect: a claim takes one in `share` of the tasks it sees (at least one, at most `max`), in
// order, never past the head block's end (255 slots), and says whether it left tasks behind.
TEST(task_queue, a_batch_claim_takes_a_share_of_the_backlog_in_order) {
  task_queue queue;
  std::vector<int> ran;
  for (int i = 0; i < 300; ++i) {  // slots 0..254 in the first block, 255..299 in the second
    ASSERT_TRUE(queue.try_push([&ran, i] { ran.push_back(i); }));
  }
  task_queue::task batch[16];
  const auto claim = [&](std::size_t max, std::size_t share, bool expect_more) {
    bool more = !expect_more;
    const std::size_t n = queue.try_pop_many(batch, max, share, &more);
    EXPECT_EQ(more, expect_more);
    for (std::size_t i = 0; i < n; ++i) {
      batch[i]();
      batch[i] = nullptr;
    }
    return n;
  };
  EXPECT_EQ(claim(16, 4, true), 16u);  // the first block: 255 seen, 63 would be a share
  task_queue::task single;
  for (int i = 16; i < 250; ++i) {
    ASSERT_TRUE(queue.try_pop(single));
    single();
  }
  EXPECT_EQ(claim(16, 1, true), 5u);   // only 5 left in the first block
  EXPECT_EQ(claim(16, 4, true), 11u);  // 45 seen in the second: 45 / 4
  EXPECT_EQ(claim(16, 4, true), 8u);   // 34 / 4
  EXPECT_EQ(claim(16, 4, true), 6u);   // 26 / 4
  EXPECT_EQ(claim(16, 1, true), 16u);  // 20 seen, at most 16
  EXPECT_EQ(claim(16, 4, true), 1u);   // 4 / 4
  EXPECT_EQ(claim(16, 4, true), 1u);   // 3 / 4, but at least one
  EXPECT_EQ(claim(16, 1, false), 2u);  // the last 2
  EXPECT_EQ(queue.try_pop_many(batch, 16, 1), 0u);
  ASSERT_EQ(ran.size(), 300u);
  for (int i = 0; i < 300; ++i) {
    ASSERT_EQ(ran[i], i);
  }
}

// Expect `more` true exactly while tasks are left behind the one popped (within one block).
TEST(task_queue, pop_says_whether_tasks_were_left_behind) {
  task_queue queue;
  int ran = 0;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(queue.try_push([&ran] { ++ran; }));
  }
  task_queue::task next;
  std::vector<bool> more;
  for (int i = 0; i < 3; ++i) {
    bool left = false;
    ASSERT_TRUE(queue.try_pop(next, &left));
    next();
    more.push_back(left);
  }
  bool untouched = true;
  EXPECT_FALSE(queue.try_pop(next, &untouched));
  EXPECT_TRUE(untouched) << "an empty pop leaves `more` alone";
  EXPECT_EQ(more, (std::vector<bool>{ true, true, false }));
  EXPECT_EQ(ran, 3);
}

TEST(task_queue, destruction_destroys_leftover_tasks_once) {
  lifecycle::reset();
  {
    task_queue queue;
    for (int i = 0; i < 100; ++i) {
      ASSERT_TRUE(queue.try_push([captured = lifecycle(i)] {}));
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

TEST(task_queue, seal_refuses_ordinary_pushes_and_close_waits_for_empty) {
  task_queue queue;
  int ran = 0;
  ASSERT_TRUE(queue.try_push([&ran] { ++ran; }));
  EXPECT_FALSE(queue.sealed());
  queue.seal();
  EXPECT_TRUE(queue.sealed());
  task_queue::task refused = [&ran] { ran += 100; };
  EXPECT_FALSE(queue.try_push(std::move(refused)));
  EXPECT_TRUE(static_cast<bool>(refused));  // left untouched
  EXPECT_TRUE(queue.try_push([&ran] { ++ran; }, task_queue::push_policy::unless_closed));
  EXPECT_FALSE(queue.close_if_empty());  // two tasks queued
  task_queue::task t;
  while (queue.try_pop(t)) {
    t();
  }
  EXPECT_EQ(ran, 2);
  EXPECT_TRUE(queue.close_if_empty());
  EXPECT_TRUE(queue.close_if_empty());  // stays closed
  EXPECT_FALSE(queue.try_push([] {}, task_queue::push_policy::unless_closed));
  EXPECT_TRUE(queue.empty());
}

// A seal racing with producers: every push that was accepted is popped, none after the seal.
TEST(task_queue, a_seal_racing_with_pushes_loses_nothing) {
  const std::size_t per_producer = env_or("CYAN_STRESS_ITEMS", 100000);
  task_queue queue;
  std::atomic<std::size_t> accepted{ 0 };
  std::atomic<std::size_t> executed{ 0 };
  std::vector<std::thread> producers;
  for (int p = 0; p < 2; ++p) {
    producers.emplace_back([&] {
      for (std::size_t i = 0; i < per_producer; ++i) {
        if (!queue.try_push([&executed] { executed.fetch_add(1); })) {
          return;
        }
        accepted.fetch_add(1);
      }
    });
  }
  std::size_t popped_before_seal = 0;
  task_queue::task t;
  while (popped_before_seal < per_producer / 2 && accepted.load() < 2 * per_producer) {
    if (queue.try_pop(t)) {
      t();
      ++popped_before_seal;
    }
  }
  queue.seal();
  for (auto& producer : producers) {
    producer.join();
  }
  while (queue.try_pop(t)) {
    t();
  }
  EXPECT_TRUE(queue.close_if_empty());
  EXPECT_EQ(executed.load(), accepted.load());
}

// Every task runs exactly once, and tasks of one producer leave the queue in push order
// (checked per consumer: what one consumer pops of one producer's tasks increases), whether
// consumers claim one task at a time or several.
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
        const bool pushed = queue.try_push([&, p, i] {
          runs[p * per_producer + i].fetch_add(1, std::memory_order_relaxed);
          if (static_cast<std::int64_t>(i) <= (*last_seen)[p]) {
            order_errors.fetch_add(1);
          }
          (*last_seen)[p] = static_cast<std::int64_t>(i);
        });
        ASSERT_TRUE(pushed);
      }
      producers_done.fetch_add(1);
    });
  }
  for (int c = 0; c < kConsumers; ++c) {
    threads.emplace_back([&] {
      std::vector<std::int64_t> mine(kProducers, -1);
      last_seen = &mine;
      task_queue::task next;
      for (;;) {
        const bool popped = queue.try_pop(next);
        if (popped) {
          next();
        }
        if (!popped && producers_done.load() == kProducers && queue.empty()) {
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
