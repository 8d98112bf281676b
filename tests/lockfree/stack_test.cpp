#include "cyan/lockfree/stack.h"

#include <gtest/gtest.h>

#include "node_container_tests.h"
#include "support/lifecycle.h"

#include <cstddef>
#include <optional>

// cyan::lockfree::stack: what it shares with the queue runs in node_container_tests.h; the LIFO
// order is checked here.

namespace {

using cyan::lockfree::stack;
using cyan::test::lifecycle;
namespace detail = cyan::lockfree::detail;

struct stack_kind {
  template <typename T>
  using container = stack<T>;
  template <typename T>
  static constexpr std::size_t kBlockClass = detail::node_pool<detail::stack_node<T>>::kBlockClass;
  static constexpr bool kFifo = false;
  static constexpr std::size_t kDummySlabs = 0;  // no dummy node
};

}  // namespace

namespace cyan::test::node_container {
INSTANTIATE_TYPED_TEST_SUITE_P(stack, node_container_test, ::stack_kind);
}  // namespace cyan::test::node_container

namespace {

// Every test starts and ends with no lifecycle instance alive.
class stack_test : public ::testing::Test {
 protected:
  void SetUp() override { lifecycle::reset(); }
  void TearDown() override { EXPECT_EQ(lifecycle::live(), 0); }
};

TEST_F(stack_test, pops_in_lifo_order) {
  stack<int> s;
  for (int i = 0; i < 1000; ++i) {
    s.push(i);
  }
  for (int i = 999; i >= 0; --i) {
    int out = -1;
    ASSERT_TRUE(s.try_pop(out));
    EXPECT_EQ(out, i);
  }
  int out = -1;
  EXPECT_FALSE(s.try_pop(out));
  EXPECT_EQ(out, -1) << "a failed try_pop must leave its target alone";
}

TEST_F(stack_test, interleaved_push_and_pop_keep_order) {
  stack<int> s;
  s.push(1);
  s.push(2);
  EXPECT_EQ(s.try_pop(), 2);
  s.push(3);
  s.push(4);
  EXPECT_EQ(s.try_pop(), 4);
  EXPECT_EQ(s.try_pop(), 3);
  EXPECT_EQ(s.try_pop(), 1);
  EXPECT_EQ(s.try_pop(), std::nullopt);
}

}  // namespace
