#include "cyan/lockfree/stack.h"

#include <gtest/gtest.h>

#include "node_container_tests.h"

#include <cstddef>
#include <optional>

// cyan::lockfree::stack: what it shares with the queue runs in node_container_tests.h; the LIFO
// order is checked here.

namespace {

using cyan::lockfree::stack;
namespace detail = cyan::lockfree::detail;

// LIFO; an empty stack holds no slab.
using stack_kind = cyan::test::node_container::kind<stack, detail::stack_node, false, 0>;

}  // namespace

namespace cyan::test::node_container {
INSTANTIATE_TYPED_TEST_SUITE_P(stack, node_container_test, ::stack_kind);
}  // namespace cyan::test::node_container

namespace {

TEST(stack_test, pops_in_lifo_order) {
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

TEST(stack_test, interleaved_push_and_pop_keep_order) {
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
