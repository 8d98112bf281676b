#include "cyan/lockfree/stack.h"

#include <gtest/gtest.h>

#include "mpmc_stress.h"
#include "support/lifecycle.h"

#include <cstddef>
#include <cstdint>
#include <string>

// Stress tests of cyan::lockfree::stack: many producers and consumers at once; every item
// delivered exactly once and every node returned. Sizes and seed: see mpmc_stress.h.

namespace {

using cyan::lockfree::stack;
using cyan::test::lifecycle;
namespace detail = cyan::lockfree::detail;
namespace mpmc = cyan::test::mpmc;

template <typename T>
constexpr std::size_t kBlockClass = detail::node_pool<detail::stack_node<T>>::kBlockClass;

template <typename Element>
void expect_exactly_once(const mpmc::stress_config& config, const mpmc::shape& s) {
  SCOPED_TRACE(mpmc::describe(config, s));
  const mpmc::node_accounting nodes(kBlockClass<Element>);
  {
    stack<Element> st;
    const mpmc::delivery seen = mpmc::run<Element>(st, s, config.seed);
    EXPECT_TRUE(mpmc::each_item_exactly_once(seen, s));
    EXPECT_TRUE(st.empty());
  }
  EXPECT_EQ(nodes.leaked(), 0) << "node blocks still allocated after the stack and its threads";
}

TEST(stack_stress, four_producers_four_consumers) {
  const mpmc::stress_config config;
  const auto items = static_cast<std::uint32_t>(config.scaled(500'000));
  expect_exactly_once<mpmc::item>(config, { 4, 4, items });
}

TEST(stack_stress, non_trivial_elements_constructed_and_destroyed_once) {
  const mpmc::stress_config config;
  const auto items = static_cast<std::uint32_t>(config.scaled(100'000));
  lifecycle::reset();
  expect_exactly_once<lifecycle>(config, { 4, 4, items });
  EXPECT_EQ(lifecycle::live(), 0);
}

}  // namespace
