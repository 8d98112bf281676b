#include "cyan/lockfree/segmented_queue.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "cyan/common/unique_function.h"
#include "support/allocation_counter.h"
#include "support/lifecycle.h"

// Single-threaded behaviour of cyan::lockfree::segmented_queue: order, batch claims, block
// reuse, admission (seal/close) and element lifetimes. Concurrency: segmented_queue_stress_test.

namespace {

using cyan::lockfree::segmented_queue;
using cyan::test::lifecycle;
using int_queue = segmented_queue<int>;
using task = cyan::unique_function<void()>;

constexpr int kBlockSlots = static_cast<int>(int_queue::kBlockSlots);

// Non-copyable; a pop never throws (a claimed slot cannot be given back).
static_assert(!std::is_copy_constructible_v<int_queue>);
static_assert(!std::is_copy_assignable_v<int_queue>);
static_assert(noexcept(std::declval<int_queue&>().try_pop(std::declval<int&>())));
static_assert(std::is_same_v<int_queue::value_type, int>);

// Pops everything left, in order.
std::vector<int> drain(int_queue& queue) {
  std::vector<int> popped;
  for (int value = 0; queue.try_pop(value);) {
    popped.push_back(value);
  }
  return popped;
}

std::vector<int> iota(int first, int end) {
  std::vector<int> values;
  for (int i = first; i < end; ++i) {
    values.push_back(i);
  }
  return values;
}

// Every test starts and ends with no lifecycle instance alive.
class segmented_queue_test : public ::testing::Test {
 protected:
  void SetUp() override { lifecycle::reset(); }
  void TearDown() override { EXPECT_EQ(lifecycle::live(), 0); }
};

// Expect: 10,000 elements (40 blocks) leave in push order, and empty() follows.
TEST_F(segmented_queue_test, is_fifo_across_many_blocks) {
  int_queue queue;
  EXPECT_TRUE(queue.empty());
  constexpr int kElements = 10'000;
  for (int i = 0; i < kElements; ++i) {
    int value = i;
    ASSERT_TRUE(queue.try_push(std::move(value)));
  }
  EXPECT_FALSE(queue.empty());
  EXPECT_EQ(drain(queue), iota(0, kElements));
  EXPECT_TRUE(queue.empty());
  int untouched = -1;
  EXPECT_FALSE(queue.try_pop(untouched));
  EXPECT_EQ(untouched, -1) << "a failed pop leaves its target alone";
}

// The pool's element: closures run in push order.
TEST_F(segmented_queue_test, carries_move_only_closures) {
  segmented_queue<task> queue;
  std::vector<int> ran;
  for (int i = 0; i < 300; ++i) {
    ASSERT_TRUE(queue.try_push([&ran, i] { ran.push_back(i); }));
  }
  for (task t; queue.try_pop(t);) {
    t();
  }
  EXPECT_EQ(ran, iota(0, 300));
}

// A backlog of 40 blocks, drained, then built again: the second one reuses the first one's
// blocks instead of taking new ones from malloc (which would give the memory back to the
// system, and the next backlog would fault every page in again).
TEST_F(segmented_queue_test, a_drained_backlog_keeps_its_blocks_for_the_next) {
  constexpr int kElements = 40 * kBlockSlots;
  int_queue queue;
  const auto fill = [&] {
    for (int i = 0; i < kElements; ++i) {
      int value = i;
      ASSERT_TRUE(queue.try_push(std::move(value)));
    }
  };
  fill();
  EXPECT_EQ(drain(queue), iota(0, kElements));
  cyan::test::start_counting_allocations();
  fill();
  const int allocations = cyan::test::stop_counting_allocations();
  EXPECT_EQ(allocations, 0);
  EXPECT_EQ(drain(queue), iota(0, kElements));
  EXPECT_TRUE(queue.empty());
}

// Expect: a claim takes one in `share` of the elements it sees (at least one, at most `max`), in
// order, never past the head block's end (255 slots), and says whether it left elements behind.
TEST_F(segmented_queue_test, a_batch_claim_takes_a_share_of_the_backlog_in_order) {
  static_assert(kBlockSlots == 255, "the counts below assume 255 slots per block");
  int_queue queue;
  for (int i = 0; i < 300; ++i) {  // slots 0..254 in the first block, 255..299 in the second
    int value = i;
    ASSERT_TRUE(queue.try_push(std::move(value)));
  }
  std::vector<int> popped;
  int batch[16];
  const auto claim = [&](std::size_t max, std::size_t share, bool expect_more) {
    bool more = !expect_more;
    const std::size_t n = queue.try_pop_many(batch, max, share, &more);
    EXPECT_EQ(more, expect_more);
    popped.insert(popped.end(), batch, batch + n);
    return n;
  };
  EXPECT_EQ(claim(16, 4, true), 16u);  // the first block: 255 seen, 63 would be a share
  for (int i = 16, value = 0; i < 250; ++i) {
    ASSERT_TRUE(queue.try_pop(value));
    popped.push_back(value);
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
  EXPECT_EQ(popped, iota(0, 300));
}

// A consumer's tail hint: it learns the tail once and then claims without reading it, until
// the hint no longer shows more than a claim could take.
TEST_F(segmented_queue_test, a_tail_hint_follows_the_tail) {
  int_queue queue;
  for (int i = 0; i < 100; ++i) {
    int value = i;
    ASSERT_TRUE(queue.try_push(std::move(value)));
  }
  int_queue::tail_hint hint;
  std::vector<int> popped;
  for (int value = 0; queue.try_pop(value, nullptr, &hint);) {
    popped.push_back(value);
  }
  EXPECT_EQ(popped, iota(0, 100));
  EXPECT_NE(hint.tail, 0u) << "the hint was filled from the tail";
  int value = 100;
  ASSERT_TRUE(queue.try_push(std::move(value)));
  ASSERT_TRUE(queue.try_pop(value, nullptr, &hint)) << "a stale hint must not hide a push";
  EXPECT_EQ(value, 100);
}

// Expect `more` true exactly while elements are left behind the one popped (within one block).
TEST_F(segmented_queue_test, pop_says_whether_elements_were_left_behind) {
  int_queue queue;
  for (int i = 0; i < 3; ++i) {
    int value = i;
    ASSERT_TRUE(queue.try_push(std::move(value)));
  }
  std::vector<bool> more;
  for (int i = 0, value = 0; i < 3; ++i) {
    bool left = false;
    ASSERT_TRUE(queue.try_pop(value, &left));
    EXPECT_EQ(value, i);
    more.push_back(left);
  }
  bool untouched = true;
  int value = 0;
  EXPECT_FALSE(queue.try_pop(value, &untouched));
  EXPECT_TRUE(untouched) << "an empty pop leaves `more` alone";
  EXPECT_EQ(more, (std::vector<bool>{ true, true, false }));
}

// 600 elements over three blocks, 40 popped: the destructor destroys the 560 left, each once,
// walking from the head's block into the next ones.
TEST_F(segmented_queue_test, destruction_destroys_leftover_elements_once) {
  {
    segmented_queue<std::unique_ptr<lifecycle>> queue;
    for (int i = 0; i < 600; ++i) {
      ASSERT_TRUE(queue.try_push(std::make_unique<lifecycle>(i)));
    }
    std::unique_ptr<lifecycle> out;
    for (int i = 0; i < 40; ++i) {
      ASSERT_TRUE(queue.try_pop(out));
      EXPECT_EQ(out->value, i);
    }
    out.reset();
    EXPECT_EQ(lifecycle::live(), 560);
  }
  EXPECT_EQ(lifecycle::constructed.load(), 600);
  EXPECT_EQ(lifecycle::destroyed.load(), 600);
}

// The same with the head in a later block than the first and the tail at a block's start.
TEST_F(segmented_queue_test, destruction_starts_at_the_head_block) {
  {
    segmented_queue<std::unique_ptr<lifecycle>> queue;
    for (int i = 0; i < 2 * kBlockSlots; ++i) {
      ASSERT_TRUE(queue.try_push(std::make_unique<lifecycle>(i)));
    }
    std::unique_ptr<lifecycle> out;
    for (int i = 0; i < kBlockSlots + 10; ++i) {
      ASSERT_TRUE(queue.try_pop(out));
    }
    EXPECT_EQ(out->value, kBlockSlots + 9);
    out.reset();
    EXPECT_EQ(lifecycle::live(), kBlockSlots - 10);
  }
  EXPECT_EQ(lifecycle::live(), 0);
}

// seal(): unless_sealed pushes are refused, their element untouched; unless_closed ones still
// go in. close_if_empty(): refused while elements are queued, then final.
TEST_F(segmented_queue_test, seal_refuses_ordinary_pushes_and_close_waits_for_empty) {
  segmented_queue<std::unique_ptr<lifecycle>> queue;
  ASSERT_TRUE(queue.try_push(std::make_unique<lifecycle>(1)));
  EXPECT_FALSE(queue.sealed());
  queue.seal();
  EXPECT_TRUE(queue.sealed());
  auto refused = std::make_unique<lifecycle>(100);
  EXPECT_FALSE(queue.try_push(std::move(refused)));
  ASSERT_NE(refused, nullptr) << "a refused element is left untouched";
  EXPECT_EQ(refused->value, 100);
  using policy = segmented_queue<std::unique_ptr<lifecycle>>::push_policy;
  EXPECT_TRUE(queue.try_push(std::make_unique<lifecycle>(2), policy::unless_closed));
  EXPECT_FALSE(queue.close_if_empty());  // two elements queued
  std::vector<std::int64_t> popped;
  for (std::unique_ptr<lifecycle> out; queue.try_pop(out);) {
    popped.push_back(out->value);
  }
  EXPECT_EQ(popped, (std::vector<std::int64_t>{ 1, 2 }));
  EXPECT_TRUE(queue.close_if_empty());
  EXPECT_TRUE(queue.close_if_empty());  // stays closed
  EXPECT_FALSE(queue.try_push(std::make_unique<lifecycle>(3), policy::unless_closed));
  EXPECT_TRUE(queue.empty());
}

}  // namespace
