#include "cyan/lockfree/queue.h"

#include <gtest/gtest.h>

#include "node_container_tests.h"

#include <cstddef>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

// cyan::lockfree::queue: what it shares with the stack runs in node_container_tests.h; the
// FIFO order and the nesting of pops are checked here.

namespace {

using cyan::lockfree::queue;
namespace detail = cyan::lockfree::detail;

// FIFO; an empty queue holds the slab of its dummy node.
using queue_kind = cyan::test::node_container::kind<queue, detail::queue_node, true, 1>;

}  // namespace

namespace cyan::test::node_container {
INSTANTIATE_TYPED_TEST_SUITE_P(queue, node_container_test, ::queue_kind);
}  // namespace cyan::test::node_container

namespace {

TEST(queue_test, pops_in_fifo_order) {
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

TEST(queue_test, interleaved_push_and_pop_keep_order) {
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

TEST(queue_test, elements_may_use_queues_while_popped) {
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

}  // namespace
