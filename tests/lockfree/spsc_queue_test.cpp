#include "cyan/lockfree/spsc_queue.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "cyan/common/cache_line.h"
#include "support/allocation_counter.h"
#include "support/lifecycle.h"
#include "support/stress_env.h"

// cyan::lockfree::spsc_queue: an unbounded SPSC queue of chained rings. Small blocks (4 slots,
// growing to 16) make every test cross many ring boundaries.

namespace {

using cyan::lockfree::spsc_queue;
using cyan::test::lifecycle;

static_assert(!std::is_copy_constructible_v<spsc_queue<int>>);
static_assert(noexcept(std::declval<spsc_queue<int>&>().try_pop(std::declval<int&>())));

constexpr std::size_t kFirstBlock = 4;
constexpr std::size_t kMaxBlock = 16;

// Every test starts and ends with no lifecycle instance alive.
class spsc_queue_test : public ::testing::Test {
 protected:
  void SetUp() override { lifecycle::reset(); }
  void TearDown() override { EXPECT_EQ(lifecycle::live(), 0); }
};

// Pops everything left, in order.
template <typename T>
std::vector<std::int64_t> drain(spsc_queue<T>& queue) {
  std::vector<std::int64_t> popped;
  queue.consume_all([&popped](T&& element) {
    if constexpr (std::is_same_v<T, lifecycle>) {
      popped.push_back(element.value);
    } else {
      popped.push_back(element);
    }
  });
  return popped;
}

std::vector<std::int64_t> iota(std::int64_t first, std::int64_t end) {
  std::vector<std::int64_t> values;
  for (std::int64_t i = first; i < end; ++i) {
    values.push_back(i);
  }
  return values;
}

TEST_F(spsc_queue_test, rejects_block_capacities_out_of_order) {
  EXPECT_THROW(spsc_queue<int>(0, 16), std::invalid_argument);
  EXPECT_THROW(spsc_queue<int>(32, 16), std::invalid_argument);
}

// Expect: 1,000 elements through blocks of 4, 8, 16, 16, ... leave in push order.
TEST_F(spsc_queue_test, is_fifo_across_ring_boundaries) {
  spsc_queue<int> queue(kFirstBlock, kMaxBlock);
  EXPECT_TRUE(queue.empty());
  for (int i = 0; i < 1000; ++i) {
    queue.push(i);
  }
  EXPECT_FALSE(queue.empty());
  EXPECT_EQ(drain(queue), iota(0, 1000));
  EXPECT_TRUE(queue.empty());
  int untouched = -1;
  EXPECT_FALSE(queue.try_pop(untouched));
  EXPECT_EQ(untouched, -1) << "a failed pop leaves its target alone";
}

// Pushes and pops interleaved, so the consumer follows the producer from block to block, with
// both the limited and the single forms of the consumer side.
TEST_F(spsc_queue_test, interleaved_pushes_and_pops_keep_order) {
  spsc_queue<int> queue(kFirstBlock, kMaxBlock);
  std::vector<std::int64_t> popped;
  const auto take = [&popped](int&& value) { popped.push_back(value); };
  int next = 0;
  for (int round = 1; round <= 40; ++round) {
    for (int i = 0; i < round; ++i) {
      queue.push(next++);
    }
    EXPECT_EQ(queue.consume_n(static_cast<std::size_t>(round / 2), take),
              static_cast<std::size_t>(round / 2));
    if (int value = 0; queue.try_pop(value)) {
      popped.push_back(value);
    }
  }
  queue.consume_all(take);
  EXPECT_EQ(popped, iota(0, next));
  EXPECT_TRUE(queue.empty());
}

// Every element constructed is destroyed exactly once: by its consume or by the destructor,
// which walks the blocks still linked.
TEST_F(spsc_queue_test, destroys_each_element_exactly_once) {
  {
    spsc_queue<lifecycle> queue(kFirstBlock, kMaxBlock);
    for (int i = 0; i < 100; ++i) {
      queue.emplace(i);
    }
    std::vector<std::int64_t> popped;
    EXPECT_EQ(queue.consume_n(30, [&popped](lifecycle&& e) { popped.push_back(e.value); }), 30u);
    EXPECT_EQ(popped, iota(0, 30));
    EXPECT_EQ(lifecycle::live(), 70);
  }
  EXPECT_EQ(lifecycle::constructed.load(), 100);
  EXPECT_EQ(lifecycle::destroyed.load(), 100);
}

TEST_F(spsc_queue_test, free_blocks_destroys_what_is_left) {
  spsc_queue<lifecycle> queue(kFirstBlock, kMaxBlock);
  for (int i = 0; i < 50; ++i) {
    queue.emplace(i);
  }
  queue.free_blocks();
  EXPECT_EQ(lifecycle::live(), 0);
}

// A construction that throws appends nothing, also when it needed a new block; the queue goes
// on in order.
TEST_F(spsc_queue_test, a_throwing_construction_appends_nothing) {
  spsc_queue<lifecycle> queue(kFirstBlock, kMaxBlock);
  for (int i = 0; i < 3; ++i) {
    queue.emplace(i);
  }
  lifecycle::throw_countdown = 1;
  EXPECT_THROW(queue.emplace(100), std::runtime_error);  // room left in the first block
  queue.emplace(3);                                      // the first block is now full
  lifecycle::throw_countdown = 1;
  EXPECT_THROW(queue.emplace(101), std::runtime_error);  // in a new block
  for (int i = 4; i < 10; ++i) {
    queue.emplace(i);
  }
  EXPECT_EQ(drain(queue), iota(0, 10));
}

// Blocks of 4 only: after a warm-up, the consumer's emptied block comes back as the producer's
// next one, so a steady stream allocates nothing.
TEST_F(spsc_queue_test, a_busy_queue_stops_allocating) {
  spsc_queue<int> queue(kFirstBlock, kFirstBlock);
  int expected = 0;
  bool in_order = true;
  const auto take = [&](int&& value) {
    in_order = in_order && value == expected;
    ++expected;
  };
  const auto round = [&](int first) {
    for (int i = first; i < first + 8; ++i) {  // two blocks' worth
      queue.push(i);
    }
    EXPECT_EQ(queue.consume_all(take), 8u);
  };
  round(0);  // the warm-up allocates the second block
  cyan::test::start_counting_allocations();
  for (int r = 1; r <= 10; ++r) {
    round(8 * r);
  }
  const int allocations = cyan::test::stop_counting_allocations();
  EXPECT_EQ(allocations, 0);
  EXPECT_TRUE(in_order);
  EXPECT_EQ(expected, 88);
}

// One producer thread and one consumer thread: the consumer sees 0, 1, 2, ... exactly once
// each, across many block hand-overs, and every element is destroyed.
TEST_F(spsc_queue_test, two_threads_deliver_in_order) {
  const std::uint64_t items = cyan::test::env_or("CYAN_STRESS_ITEMS", 200'000);
  SCOPED_TRACE("CYAN_STRESS_ITEMS=" + std::to_string(items));
  spsc_queue<lifecycle> queue(kFirstBlock, kMaxBlock);
  std::thread producer([&] {
    for (std::uint64_t i = 0; i < items; ++i) {
      queue.emplace(static_cast<std::int64_t>(i));
    }
  });
  std::uint64_t expected = 0;
  std::uint64_t wrong = 0;
  const auto take = [&](lifecycle&& element) {
    wrong += static_cast<std::uint64_t>(element.value) != expected ? 1 : 0;
    ++expected;
  };
  while (expected < items) {
    if (queue.consume_n(64, take) == 0) {
      std::this_thread::yield();
    }
  }
  producer.join();
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(expected, items);
  EXPECT_TRUE(queue.empty());
}

}  // namespace
