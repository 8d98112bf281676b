#pragma once

// The tests that cyan::lockfree::queue and cyan::lockfree::stack share: both are node-based
// containers with hazard-pointer reclamation, pooled node slabs and the same element
// guarantees; they differ in the order elements leave and in the queue's dummy node. A
// container's test file instantiates the suite with its kind<> (see queue_test.cpp).

#include <gtest/gtest.h>

#include "cyan/lockfree/detail/node_pool.h"
#include "support/lifecycle.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace cyan::test::node_container {

namespace detail = cyan::lockfree::detail;

// What the suite needs to know of a container: its template, its node (for the pool's block
// class), whether it pops in FIFO or LIFO order, and how many slabs it holds when empty.
template <template <typename> class Container, template <typename> class Node, bool Fifo,
          std::size_t DummySlabs>
struct kind {
  template <typename T>
  using container = Container<T>;
  template <typename T>
  static constexpr std::size_t kBlockClass = detail::node_pool<Node<T>>::kBlockClass;
  static constexpr bool kFifo = Fifo;
  static constexpr std::size_t kDummySlabs = DummySlabs;
};

// Every test starts and ends with no lifecycle instance alive.
template <typename Kind>
class node_container_test : public ::testing::Test {
 protected:
  template <typename T>
  using container = typename Kind::template container<T>;

  void SetUp() override { lifecycle::reset(); }
  void TearDown() override { EXPECT_EQ(lifecycle::live(), 0); }

  // The order in which elements pushed as `pushed` (one after the other, no pop between) leave.
  template <typename V>
  static std::vector<V> pop_order(std::vector<V> pushed) {
    if constexpr (!Kind::kFifo) {
      std::reverse(pushed.begin(), pushed.end());
    }
    return pushed;
  }
};

TYPED_TEST_SUITE_P(node_container_test);

// Lock-free with pointer-sized atomics only, so no libatomic; non-copyable; noexcept follows
// the element type.
TYPED_TEST_P(node_container_test, contracts_hold_in_the_type) {
  using ints = typename TestFixture::template container<int>;
  using strings = typename TestFixture::template container<std::string>;
  using counted = typename TestFixture::template container<lifecycle>;
  static_assert(ints::is_always_lock_free);
  static_assert(strings::is_lock_free());
  static_assert(!std::is_copy_constructible_v<ints>);
  static_assert(!std::is_copy_assignable_v<ints>);
  static_assert(noexcept(std::declval<ints&>().try_pop()));
  static_assert(noexcept(std::declval<ints&>().try_pop(std::declval<int&>())));
  static_assert(!noexcept(std::declval<counted&>().try_pop()));
  static_assert(!noexcept(std::declval<counted&>().push(std::declval<lifecycle>())));
}

TYPED_TEST_P(node_container_test, empty_is_true_only_without_elements) {
  typename TestFixture::template container<int> c;
  EXPECT_TRUE(c.empty());
  c.push(1);
  EXPECT_FALSE(c.empty());
  c.push(2);
  EXPECT_TRUE(c.try_pop().has_value());
  EXPECT_FALSE(c.empty());
  EXPECT_TRUE(c.try_pop().has_value());
  EXPECT_TRUE(c.empty());
}

TYPED_TEST_P(node_container_test, optional_and_reference_forms_of_try_pop) {
  typename TestFixture::template container<std::string> c;
  EXPECT_EQ(c.try_pop(), std::nullopt);
  std::string out = "untouched";
  EXPECT_FALSE(c.try_pop(out));
  EXPECT_EQ(out, "untouched") << "a failed try_pop must leave its target alone";

  c.push(std::string(100, 'a'));  // longer than any small-string buffer
  c.emplace(3, 'b');
  const std::vector<std::string> order =
      TestFixture::pop_order(std::vector<std::string>{ std::string(100, 'a'), "bbb" });
  EXPECT_TRUE(c.try_pop(out));
  EXPECT_EQ(out, order[0]);
  EXPECT_EQ(c.try_pop(), std::optional<std::string>(order[1]));
  EXPECT_EQ(c.try_pop(), std::nullopt);
}

TYPED_TEST_P(node_container_test, carries_move_only_elements) {
  typename TestFixture::template container<std::unique_ptr<int>> c;
  c.push(std::make_unique<int>(1));
  c.emplace(new int(2));
  const std::vector<int> order = TestFixture::pop_order(std::vector<int>{ 1, 2 });
  std::unique_ptr<int> out;
  ASSERT_TRUE(c.try_pop(out));
  EXPECT_EQ(*out, order[0]);
  std::optional<std::unique_ptr<int>> second = c.try_pop();
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(**second, order[1]);
  EXPECT_TRUE(c.empty());
}

TYPED_TEST_P(node_container_test, constructs_and_destroys_each_element_exactly_once) {
  const std::vector<std::int64_t> order =
      TestFixture::pop_order(std::vector<std::int64_t>{ 1, 2, 3 });
  {
    typename TestFixture::template container<lifecycle> c;
    const lifecycle original(1);
    c.push(original);      // one copy
    c.push(lifecycle(2));  // a temporary and one move
    c.emplace(3);          // constructed in place
    EXPECT_EQ(lifecycle::constructed.load(), 5);
    EXPECT_EQ(lifecycle::destroyed.load(), 1);  // the temporary

    lifecycle out(0);             // 6th
    ASSERT_TRUE(c.try_pop(out));  // move-assigned: no construction, the node's copy destroyed
    EXPECT_EQ(out.value, order[0]);
    EXPECT_EQ(lifecycle::constructed.load(), 6);
    EXPECT_EQ(lifecycle::destroyed.load(), 2);

    std::optional<lifecycle> popped = c.try_pop();  // move-constructed, the node's destroyed
    ASSERT_TRUE(popped.has_value());
    EXPECT_EQ(popped->value, order[1]);
    EXPECT_EQ(lifecycle::constructed.load(), 7);
    EXPECT_EQ(lifecycle::destroyed.load(), 3);
    EXPECT_EQ(lifecycle::live(), 4);  // original, out, popped, and one still held
  }
  EXPECT_EQ(lifecycle::constructed.load(), 7);
  EXPECT_EQ(lifecycle::destroyed.load(), 7);
}

TYPED_TEST_P(node_container_test, throwing_constructor_leaves_the_container_unchanged) {
  typename TestFixture::template container<lifecycle> c;
  c.emplace(1);
  c.emplace(2);
  constexpr std::size_t block_class = TypeParam::template kBlockClass<lifecycle>;
  detail::release_cached_nodes();  // from now on every block in use is one of this container's
  const std::int64_t blocks = detail::system_blocks(block_class);

  lifecycle::throw_countdown = 1;  // the element's construction inside emplace
  EXPECT_THROW(c.emplace(3), std::runtime_error);
  const lifecycle copy_source(4);
  lifecycle::throw_countdown = 1;  // the copy inside push
  EXPECT_THROW(c.push(copy_source), std::runtime_error);

  detail::release_cached_nodes();
  EXPECT_EQ(detail::system_blocks(block_class), blocks) << "the failed nodes leaked";
  EXPECT_EQ(lifecycle::live(), 3);  // 1, 2 and copy_source
  const std::vector<std::int64_t> order = TestFixture::pop_order(std::vector<std::int64_t>{ 1, 2 });
  EXPECT_EQ(c.try_pop()->value, order[0]);
  EXPECT_EQ(c.try_pop()->value, order[1]);
  EXPECT_FALSE(c.try_pop().has_value());
  c.emplace(5);  // still usable
  EXPECT_EQ(c.try_pop()->value, 5);
}

TYPED_TEST_P(node_container_test, destroying_a_non_empty_container_destroys_each_element_once) {
  std::vector<std::int64_t> pushed;
  {
    typename TestFixture::template container<lifecycle> c;
    for (int i = 0; i < 100; ++i) {
      c.emplace(i);
      pushed.push_back(i);
    }
    const std::vector<std::int64_t> order = TestFixture::pop_order(pushed);
    for (int i = 0; i < 40; ++i) {
      EXPECT_EQ(c.try_pop()->value, order[i]);
    }
    EXPECT_EQ(lifecycle::live(), 60);
  }
  EXPECT_EQ(lifecycle::constructed.load(), 140);  // 100 emplaced, 40 moved out into optionals
  EXPECT_EQ(lifecycle::destroyed.load(), 140);
}

TYPED_TEST_P(node_container_test, throwing_move_out_destroys_the_element) {
  typename TestFixture::template container<lifecycle> c;
  c.emplace(1);
  c.emplace(2);
  const std::vector<std::int64_t> order = TestFixture::pop_order(std::vector<std::int64_t>{ 1, 2 });
  lifecycle::throw_countdown = 1;  // the move into the optional
  EXPECT_THROW((void)c.try_pop(), std::runtime_error);
  EXPECT_EQ(lifecycle::live(), 1) << "element " << order[0] << " was destroyed, not leaked";
  EXPECT_EQ(c.try_pop()->value, order[1]);
}

TYPED_TEST_P(node_container_test, retains_bounded_nodes_after_a_million_items_drained) {
  constexpr int kItems = 1'000'000;
  constexpr std::size_t block_class = TypeParam::template kBlockClass<int>;
  const std::size_t dummy_nodes = TypeParam::kDummySlabs * detail::usable_blocks(block_class);
  detail::release_cached_nodes();
  const std::int64_t baseline = detail::system_blocks(block_class);
  {
    typename TestFixture::template container<int> c;
    for (int i = 0; i < kItems; ++i) {
      c.push(i);
    }
    EXPECT_GE(detail::system_blocks(block_class) - baseline, kItems);
    std::int64_t sum = 0;
    while (std::optional<int> out = c.try_pop()) {
      sum += *out;
    }
    EXPECT_EQ(sum, std::int64_t{ kItems } * (kItems - 1) / 2);

    // The dummy node's slab (a queue's) plus what one thread may keep: under the documented
    // bound, which is small next to the million nodes the container held.
    const std::int64_t retained = detail::system_blocks(block_class) - baseline;
    const std::size_t bound = dummy_nodes + detail::retention_bound(block_class, 1);
    EXPECT_LE(retained, static_cast<std::int64_t>(bound));
    EXPECT_LE(bound, 20'000u);
    ::testing::Test::RecordProperty("retained_nodes", std::to_string(retained));
    ::testing::Test::RecordProperty("retention_bound", std::to_string(bound));

    detail::release_cached_nodes();
    EXPECT_EQ(detail::system_blocks(block_class) - baseline, static_cast<std::int64_t>(dummy_nodes))
        << "an empty container holds no node but a queue's dummy";
  }
  detail::release_cached_nodes();
  EXPECT_EQ(detail::system_blocks(block_class), baseline);
}

TYPED_TEST_P(node_container_test, reserved_nodes_stay_pooled_until_the_container_is_destroyed) {
  constexpr std::size_t kReserved = 10'000;
  constexpr int kItems = 100'000;
  constexpr std::size_t block_class = TypeParam::template kBlockClass<int>;
  const std::size_t slab_nodes = detail::usable_blocks(block_class);
  const std::size_t reserved_slabs = (kReserved + slab_nodes - 1) / slab_nodes;
  detail::release_cached_nodes();
  const std::int64_t baseline = detail::system_blocks(block_class);
  {
    typename TestFixture::template container<int> c(kReserved);
    // Allocated up front (a queue's dummy is carved out of one of the reserved slabs).
    EXPECT_EQ(detail::system_blocks(block_class) - baseline,
              static_cast<std::int64_t>(reserved_slabs * slab_nodes));
    std::vector<int> pushed;
    for (int i = 0; i < kItems; ++i) {
      c.push(i);
      pushed.push_back(i);
    }
    const std::vector<int> order = TestFixture::pop_order(std::move(pushed));
    for (int i = 0; i < kItems; ++i) {
      ASSERT_EQ(c.try_pop(), order[i]);
    }
    detail::release_cached_nodes();  // keeps what live containers reserved
    EXPECT_EQ(detail::system_blocks(block_class) - baseline,
              static_cast<std::int64_t>((reserved_slabs + TypeParam::kDummySlabs) * slab_nodes))
        << "the reserved slabs, and a queue's slab holding its dummy";
  }
  detail::release_cached_nodes();
  EXPECT_EQ(detail::system_blocks(block_class), baseline) << "the reservation went with it";
}

REGISTER_TYPED_TEST_SUITE_P(node_container_test, contracts_hold_in_the_type,
                            empty_is_true_only_without_elements,
                            optional_and_reference_forms_of_try_pop, carries_move_only_elements,
                            constructs_and_destroys_each_element_exactly_once,
                            throwing_constructor_leaves_the_container_unchanged,
                            destroying_a_non_empty_container_destroys_each_element_once,
                            throwing_move_out_destroys_the_element,
                            retains_bounded_nodes_after_a_million_items_drained,
                            reserved_nodes_stay_pooled_until_the_container_is_destroyed);

}  // namespace cyan::test::node_container
