#include "cyan/lockfree/queue.h"

#include <gtest/gtest.h>

#include "support/lifecycle.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

using cyan::lockfree::queue;
using cyan::test::lifecycle;
namespace detail = cyan::lockfree::detail;

// Lock-free with pointer-sized atomics only, so no libatomic.
static_assert(queue<int>::is_always_lock_free);
static_assert(queue<std::string>::is_lock_free());

// Non-copyable; noexcept follows the element type.
static_assert(!std::is_copy_constructible_v<queue<int>>);
static_assert(!std::is_copy_assignable_v<queue<int>>);
static_assert(noexcept(std::declval<queue<int>&>().try_pop()));
static_assert(noexcept(std::declval<queue<int>&>().try_pop(std::declval<int&>())));
static_assert(!noexcept(std::declval<queue<lifecycle>&>().try_pop()));
static_assert(!noexcept(std::declval<queue<lifecycle>&>().push(std::declval<lifecycle>())));

template <typename T>
constexpr std::size_t kBlockClass = detail::node_pool<detail::queue_node<T>>::kBlockClass;

// Every test starts and ends with no lifecycle instance alive.
class QueueTest : public ::testing::Test {
 protected:
  void SetUp() override { lifecycle::reset(); }
  void TearDown() override { EXPECT_EQ(lifecycle::live(), 0); }
};

TEST_F(QueueTest, PopsInFifoOrder) {
  queue<int> q;
  for (int i = 0; i < 1000; ++i) {
    q.push(i);
  }
  for (int i = 0; i < 1000; ++i) {
    int out = -1;
    ASSERT_TRUE(q.try_pop(out));
    EXPECT_EQ(out, i);
  }
  int out = -1;
  EXPECT_FALSE(q.try_pop(out));
  EXPECT_EQ(out, -1) << "a failed try_pop must leave its target alone";
}

TEST_F(QueueTest, InterleavedPushAndPopKeepOrder) {
  queue<int> q;
  int next_in = 0;
  int next_out = 0;
  for (int round = 1; round <= 50; ++round) {
    for (int i = 0; i < round; ++i) {
      q.push(next_in++);
    }
    for (int i = 0; i < round / 2; ++i) {
      std::optional<int> out = q.try_pop();
      ASSERT_TRUE(out.has_value());
      EXPECT_EQ(*out, next_out++);
    }
  }
  while (std::optional<int> out = q.try_pop()) {
    EXPECT_EQ(*out, next_out++);
  }
  EXPECT_EQ(next_out, next_in);
}

TEST_F(QueueTest, EmptyIsTrueOnlyWithoutElements) {
  queue<int> q;
  EXPECT_TRUE(q.empty());
  q.push(1);
  EXPECT_FALSE(q.empty());
  q.push(2);
  EXPECT_TRUE(q.try_pop().has_value());
  EXPECT_FALSE(q.empty());
  EXPECT_TRUE(q.try_pop().has_value());
  EXPECT_TRUE(q.empty());
}

TEST_F(QueueTest, OptionalAndReferenceFormsOfTryPop) {
  queue<std::string> q;
  EXPECT_EQ(q.try_pop(), std::nullopt);
  std::string out = "untouched";
  EXPECT_FALSE(q.try_pop(out));
  EXPECT_EQ(out, "untouched");

  q.push(std::string(100, 'a'));  // longer than any small-string buffer
  q.emplace(3, 'b');
  EXPECT_TRUE(q.try_pop(out));
  EXPECT_EQ(out, std::string(100, 'a'));
  EXPECT_EQ(q.try_pop(), std::optional<std::string>("bbb"));
  EXPECT_EQ(q.try_pop(), std::nullopt);
}

TEST_F(QueueTest, CarriesMoveOnlyElements) {
  queue<std::unique_ptr<int>> q;
  q.push(std::make_unique<int>(1));
  q.emplace(new int(2));
  std::unique_ptr<int> out;
  ASSERT_TRUE(q.try_pop(out));
  EXPECT_EQ(*out, 1);
  std::optional<std::unique_ptr<int>> second = q.try_pop();
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(**second, 2);
  EXPECT_TRUE(q.empty());
}

TEST_F(QueueTest, ConstructsAndDestroysEachElementExactlyOnce) {
  {
    queue<lifecycle> q;
    const lifecycle original(1);
    q.push(original);      // one copy
    q.push(lifecycle(2));  // a temporary and one move
    q.emplace(3);          // constructed in place
    EXPECT_EQ(lifecycle::constructed.load(), 5);
    EXPECT_EQ(lifecycle::destroyed.load(), 1);  // the temporary

    lifecycle out(0);             // 6th
    ASSERT_TRUE(q.try_pop(out));  // move-assigned: no construction, the node's copy destroyed
    EXPECT_EQ(out.value, 1);
    EXPECT_EQ(lifecycle::constructed.load(), 6);
    EXPECT_EQ(lifecycle::destroyed.load(), 2);

    std::optional<lifecycle> popped = q.try_pop();  // move-constructed, the node's destroyed
    ASSERT_TRUE(popped.has_value());
    EXPECT_EQ(popped->value, 2);
    EXPECT_EQ(lifecycle::constructed.load(), 7);
    EXPECT_EQ(lifecycle::destroyed.load(), 3);
    EXPECT_EQ(lifecycle::live(), 4);  // original, out, popped, and 3 still queued
  }
  EXPECT_EQ(lifecycle::constructed.load(), 7);
  EXPECT_EQ(lifecycle::destroyed.load(), 7);
}

TEST_F(QueueTest, ThrowingConstructorLeavesQueueUnchanged) {
  queue<lifecycle> q;
  q.emplace(1);
  q.emplace(2);
  detail::release_cached_nodes();  // from now on every block in use is one of this container's
  const std::int64_t blocks = detail::system_blocks(kBlockClass<lifecycle>);

  lifecycle::throw_countdown = 1;  // the element's construction inside emplace
  EXPECT_THROW(q.emplace(3), std::runtime_error);
  const lifecycle copy_source(4);
  lifecycle::throw_countdown = 1;  // the copy inside push
  EXPECT_THROW(q.push(copy_source), std::runtime_error);

  detail::release_cached_nodes();
  EXPECT_EQ(detail::system_blocks(kBlockClass<lifecycle>), blocks) << "the failed nodes leaked";
  EXPECT_EQ(lifecycle::live(), 3);  // 1, 2 and copy_source
  EXPECT_EQ(q.try_pop()->value, 1);
  EXPECT_EQ(q.try_pop()->value, 2);
  EXPECT_FALSE(q.try_pop().has_value());
  q.emplace(5);  // still usable
  EXPECT_EQ(q.try_pop()->value, 5);
}

TEST_F(QueueTest, DestroyingNonEmptyQueueDestroysEachElementOnce) {
  {
    queue<lifecycle> q;
    for (int i = 0; i < 100; ++i) {
      q.emplace(i);
    }
    for (int i = 0; i < 40; ++i) {
      EXPECT_EQ(q.try_pop()->value, i);
    }
    EXPECT_EQ(lifecycle::live(), 60);
  }
  EXPECT_EQ(lifecycle::constructed.load(), 140);  // 100 emplaced, 40 moved out into optionals
  EXPECT_EQ(lifecycle::destroyed.load(), 140);
}

TEST_F(QueueTest, ThrowingMoveOutDestroysTheElement) {
  queue<lifecycle> q;
  q.emplace(1);
  q.emplace(2);
  lifecycle::throw_countdown = 1;  // the move into the optional
  EXPECT_THROW((void)q.try_pop(), std::runtime_error);
  EXPECT_EQ(lifecycle::live(), 1) << "element 1 was destroyed, not leaked";
  EXPECT_EQ(q.try_pop()->value, 2);
}

// An element whose destructor pops from the next queue of a chain into a local whose old value is
// again such an element. try_pop destroys that old value while it still holds its two hazard
// slots, so the pops nest, deeper than a record's inline slots.
struct nesting {
  static constexpr int kDepth = 6;  // 12 hazard slots: three slot blocks
  static inline std::vector<queue<nesting>*> chain;
  static inline int pops = 0;

  explicit nesting(int level = -1) : level_(level) {}
  nesting(nesting&& other) noexcept : level_(std::exchange(other.level_, -1)) {}
  nesting& operator=(nesting&& other) noexcept {
    std::swap(level_, other.level_);  // the old value is destroyed with the source
    return *this;
  }
  ~nesting() {
    if (level_ >= 0 && level_ < kDepth) {
      nesting out(level_ + 1);
      EXPECT_TRUE(chain[level_]->try_pop(out));
      ++pops;
    }
  }
  int level_;
};

TEST_F(QueueTest, ElementsMayUseQueuesWhilePopped) {
  std::vector<std::unique_ptr<queue<nesting>>> queues;
  for (int i = 0; i < nesting::kDepth; ++i) {
    queues.push_back(std::make_unique<queue<nesting>>());
    queues.back()->emplace();
    nesting::chain.push_back(queues.back().get());
  }
  nesting::pops = 0;
  { nesting start(0); }  // pops queue 0, inside which queue 1 is popped, and so on
  EXPECT_EQ(nesting::pops, nesting::kDepth);
  for (const auto& q : queues) {
    EXPECT_TRUE(q->empty());
  }
  nesting::chain.clear();
}

TEST_F(QueueTest, RetainsBoundedNodesAfterMillionItemsDrained) {
  constexpr int kItems = 1'000'000;
  constexpr std::size_t block_class = kBlockClass<int>;
  detail::release_cached_nodes();
  const std::int64_t baseline = detail::system_blocks(block_class);
  {
    queue<int> q;
    for (int i = 0; i < kItems; ++i) {
      q.push(i);
    }
    EXPECT_GE(detail::system_blocks(block_class) - baseline, kItems);
    std::int64_t sum = 0;
    while (std::optional<int> out = q.try_pop()) {
      sum += *out;
    }
    EXPECT_EQ(sum, std::int64_t{ kItems } * (kItems - 1) / 2);

    // The dummy node's slab plus what one thread may keep: under the documented bound, which
    // is small next to the million nodes the queue held.
    const std::int64_t retained = detail::system_blocks(block_class) - baseline;
    const std::size_t bound =
        detail::usable_blocks(block_class) + detail::retention_bound(block_class, 1);
    EXPECT_LE(retained, static_cast<std::int64_t>(bound));
    EXPECT_LE(bound, 20'000u);
    RecordProperty("retained_nodes", std::to_string(retained));
    RecordProperty("retention_bound", std::to_string(bound));

    detail::release_cached_nodes();
    EXPECT_EQ(detail::system_blocks(block_class) - baseline,
              static_cast<std::int64_t>(detail::usable_blocks(block_class)))
        << "only the dummy's slab is left";
  }
  detail::release_cached_nodes();
  EXPECT_EQ(detail::system_blocks(block_class), baseline);
}

TEST_F(QueueTest, ReservedNodesStayPooledUntilTheQueueIsDestroyed) {
  constexpr std::size_t kReserved = 10'000;
  constexpr std::size_t block_class = kBlockClass<int>;
  const std::size_t slab_nodes = detail::usable_blocks(block_class);
  const std::size_t reserved_slabs = (kReserved + slab_nodes - 1) / slab_nodes;
  detail::release_cached_nodes();
  const std::int64_t baseline = detail::system_blocks(block_class);
  {
    queue<int> q(kReserved);
    // Allocated up front (the dummy is carved out of one of the reserved slabs).
    EXPECT_EQ(detail::system_blocks(block_class) - baseline,
              static_cast<std::int64_t>(reserved_slabs * slab_nodes));
    for (int i = 0; i < 100'000; ++i) {
      q.push(i);
    }
    for (int i = 0; i < 100'000; ++i) {
      ASSERT_EQ(q.try_pop(), i);
    }
    detail::release_cached_nodes();  // keeps what live containers reserved
    EXPECT_EQ(detail::system_blocks(block_class) - baseline,
              static_cast<std::int64_t>((reserved_slabs + 1) * slab_nodes))
        << "the reserved slabs, and the slab holding the dummy";
  }
  detail::release_cached_nodes();
  EXPECT_EQ(detail::system_blocks(block_class), baseline) << "the reservation went with the queue";
}

}  // namespace
