#include "cyan/lockfree/stack.h"

#include <gtest/gtest.h>

#include "support/lifecycle.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

namespace {

using cyan::lockfree::stack;
using cyan::test::lifecycle;
namespace detail = cyan::lockfree::detail;

// Lock-free with pointer-sized atomics only, so no libatomic.
static_assert(stack<int>::is_always_lock_free);
static_assert(stack<std::string>::is_lock_free());

// Non-copyable; noexcept follows the element type.
static_assert(!std::is_copy_constructible_v<stack<int>>);
static_assert(!std::is_copy_assignable_v<stack<int>>);
static_assert(noexcept(std::declval<stack<int>&>().try_pop()));
static_assert(noexcept(std::declval<stack<int>&>().try_pop(std::declval<int&>())));
static_assert(!noexcept(std::declval<stack<lifecycle>&>().try_pop()));
static_assert(!noexcept(std::declval<stack<lifecycle>&>().push(std::declval<lifecycle>())));

template <typename T>
constexpr std::size_t kBlockClass = detail::node_pool<detail::stack_node<T>>::kBlockClass;

// Every test starts and ends with no lifecycle instance alive.
class StackTest : public ::testing::Test {
 protected:
  void SetUp() override { lifecycle::reset(); }
  void TearDown() override { EXPECT_EQ(lifecycle::live(), 0); }
};

TEST_F(StackTest, PopsInLifoOrder) {
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

TEST_F(StackTest, InterleavedPushAndPopKeepOrder) {
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

TEST_F(StackTest, EmptyIsTrueOnlyWithoutElements) {
  stack<int> s;
  EXPECT_TRUE(s.empty());
  s.push(1);
  EXPECT_FALSE(s.empty());
  s.push(2);
  EXPECT_TRUE(s.try_pop().has_value());
  EXPECT_FALSE(s.empty());
  EXPECT_TRUE(s.try_pop().has_value());
  EXPECT_TRUE(s.empty());
}

TEST_F(StackTest, OptionalAndReferenceFormsOfTryPop) {
  stack<std::string> s;
  EXPECT_EQ(s.try_pop(), std::nullopt);
  std::string out = "untouched";
  EXPECT_FALSE(s.try_pop(out));
  EXPECT_EQ(out, "untouched");

  s.push(std::string(100, 'a'));  // longer than any small-string buffer
  s.emplace(3, 'b');
  EXPECT_TRUE(s.try_pop(out));
  EXPECT_EQ(out, "bbb");
  EXPECT_EQ(s.try_pop(), std::optional<std::string>(std::string(100, 'a')));
  EXPECT_EQ(s.try_pop(), std::nullopt);
}

TEST_F(StackTest, CarriesMoveOnlyElements) {
  stack<std::unique_ptr<int>> s;
  s.push(std::make_unique<int>(1));
  s.emplace(new int(2));
  std::unique_ptr<int> out;
  ASSERT_TRUE(s.try_pop(out));
  EXPECT_EQ(*out, 2);
  std::optional<std::unique_ptr<int>> second = s.try_pop();
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(**second, 1);
  EXPECT_TRUE(s.empty());
}

TEST_F(StackTest, ConstructsAndDestroysEachElementExactlyOnce) {
  {
    stack<lifecycle> s;
    const lifecycle original(1);
    s.push(original);      // one copy
    s.push(lifecycle(2));  // a temporary and one move
    s.emplace(3);          // constructed in place
    EXPECT_EQ(lifecycle::constructed.load(), 5);
    EXPECT_EQ(lifecycle::destroyed.load(), 1);  // the temporary

    lifecycle out(0);             // 6th
    ASSERT_TRUE(s.try_pop(out));  // move-assigned: no construction, the node's copy destroyed
    EXPECT_EQ(out.value, 3);
    EXPECT_EQ(lifecycle::constructed.load(), 6);
    EXPECT_EQ(lifecycle::destroyed.load(), 2);

    std::optional<lifecycle> popped = s.try_pop();  // move-constructed, the node's destroyed
    ASSERT_TRUE(popped.has_value());
    EXPECT_EQ(popped->value, 2);
    EXPECT_EQ(lifecycle::constructed.load(), 7);
    EXPECT_EQ(lifecycle::destroyed.load(), 3);
    EXPECT_EQ(lifecycle::live(), 4);  // original, out, popped, and 1 still stacked
  }
  EXPECT_EQ(lifecycle::constructed.load(), 7);
  EXPECT_EQ(lifecycle::destroyed.load(), 7);
}

TEST_F(StackTest, ThrowingConstructorLeavesStackUnchanged) {
  stack<lifecycle> s;
  s.emplace(1);
  s.emplace(2);
  detail::release_cached_nodes();  // from now on every block in use is one of this container's
  const std::int64_t blocks = detail::system_blocks(kBlockClass<lifecycle>);

  lifecycle::throw_countdown = 1;  // the element's construction inside emplace
  EXPECT_THROW(s.emplace(3), std::runtime_error);
  const lifecycle copy_source(4);
  lifecycle::throw_countdown = 1;  // the copy inside push
  EXPECT_THROW(s.push(copy_source), std::runtime_error);

  detail::release_cached_nodes();
  EXPECT_EQ(detail::system_blocks(kBlockClass<lifecycle>), blocks) << "the failed nodes leaked";
  EXPECT_EQ(lifecycle::live(), 3);  // 1, 2 and copy_source
  EXPECT_EQ(s.try_pop()->value, 2);
  EXPECT_EQ(s.try_pop()->value, 1);
  EXPECT_FALSE(s.try_pop().has_value());
  s.emplace(5);  // still usable
  EXPECT_EQ(s.try_pop()->value, 5);
}

TEST_F(StackTest, DestroyingNonEmptyStackDestroysEachElementOnce) {
  {
    stack<lifecycle> s;
    for (int i = 0; i < 100; ++i) {
      s.emplace(i);
    }
    for (int i = 99; i >= 60; --i) {
      EXPECT_EQ(s.try_pop()->value, i);
    }
    EXPECT_EQ(lifecycle::live(), 60);
  }
  EXPECT_EQ(lifecycle::constructed.load(), 140);  // 100 emplaced, 40 moved out into optionals
  EXPECT_EQ(lifecycle::destroyed.load(), 140);
}

TEST_F(StackTest, ThrowingMoveOutDestroysTheElement) {
  stack<lifecycle> s;
  s.emplace(1);
  s.emplace(2);
  lifecycle::throw_countdown = 1;  // the move into the optional
  EXPECT_THROW((void)s.try_pop(), std::runtime_error);
  EXPECT_EQ(lifecycle::live(), 1) << "element 2 was destroyed, not leaked";
  EXPECT_EQ(s.try_pop()->value, 1);
}

TEST_F(StackTest, RetainsBoundedNodesAfterMillionItemsDrained) {
  constexpr int kItems = 1'000'000;
  constexpr std::size_t block_class = kBlockClass<int>;
  detail::release_cached_nodes();
  const std::int64_t baseline = detail::system_blocks(block_class);
  {
    stack<int> s;
    for (int i = 0; i < kItems; ++i) {
      s.push(i);
    }
    EXPECT_GE(detail::system_blocks(block_class) - baseline, kItems);
    std::int64_t sum = 0;
    while (std::optional<int> out = s.try_pop()) {
      sum += *out;
    }
    EXPECT_EQ(sum, std::int64_t{ kItems } * (kItems - 1) / 2);

    // What one thread may keep: under the documented bound, which is small next to the million
    // nodes the stack held.
    const std::int64_t retained = detail::system_blocks(block_class) - baseline;
    const std::size_t bound = detail::retention_bound(block_class, 1);
    EXPECT_LE(retained, static_cast<std::int64_t>(bound));
    EXPECT_LE(bound, 20'000u);
    RecordProperty("retained_nodes", std::to_string(retained));
    RecordProperty("retention_bound", std::to_string(bound));

    detail::release_cached_nodes();
    EXPECT_EQ(detail::system_blocks(block_class), baseline) << "an empty stack holds no node";
  }
}

TEST_F(StackTest, ReservedNodesStayPooledUntilTheStackIsDestroyed) {
  constexpr std::size_t kReserved = 10'000;
  constexpr std::size_t block_class = kBlockClass<int>;
  const std::size_t slab_nodes = detail::usable_blocks(block_class);
  const std::size_t reserved_slabs = (kReserved + slab_nodes - 1) / slab_nodes;
  detail::release_cached_nodes();
  const std::int64_t baseline = detail::system_blocks(block_class);
  {
    stack<int> s(kReserved);
    EXPECT_EQ(detail::system_blocks(block_class) - baseline,
              static_cast<std::int64_t>(reserved_slabs * slab_nodes))
        << "allocated up front";
    for (int i = 0; i < 100'000; ++i) {
      s.push(i);
    }
    for (int i = 99'999; i >= 0; --i) {
      ASSERT_EQ(s.try_pop(), i);
    }
    detail::release_cached_nodes();  // keeps what live containers reserved
    EXPECT_EQ(detail::system_blocks(block_class) - baseline,
              static_cast<std::int64_t>(reserved_slabs * slab_nodes));
  }
  detail::release_cached_nodes();
  EXPECT_EQ(detail::system_blocks(block_class), baseline) << "the reservation went with the stack";
}

}  // namespace
