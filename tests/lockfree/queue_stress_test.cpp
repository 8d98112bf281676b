#include "cyan/lockfree/queue.h"

#include <gtest/gtest.h>

#include "mpmc_stress.h"
#include "support/lifecycle.h"

#include <cstddef>
#include <cstdint>
#include <string>

// Stress tests of cyan::lockfree::queue: many producers and consumers at once; every item
// delivered exactly once, each consumer seeing each producer's items in push order, and every
// node returned. Sizes and seed: see mpmc_stress.h.

namespace {

using cyan::lockfree::queue;
using cyan::test::lifecycle;
namespace detail = cyan::lockfree::detail;
namespace mpmc = cyan::test::mpmc;

template <typename T>
constexpr std::size_t kBlockClass = detail::node_pool<detail::queue_node<T>>::kBlockClass;

template <typename Element>
void expect_fifo_exactly_once(const mpmc::stress_config& config, const mpmc::shape& s) {
  SCOPED_TRACE(mpmc::describe(config, s));
  const mpmc::node_accounting nodes(kBlockClass<Element>);
  {
    queue<Element> q;
    const mpmc::delivery seen = mpmc::run<Element>(q, s, config.seed);
    EXPECT_TRUE(mpmc::each_item_exactly_once(seen, s));
    EXPECT_TRUE(mpmc::each_producer_in_order(seen));
    EXPECT_TRUE(q.empty());
  }
  EXPECT_EQ(nodes.leaked(), 0) << "node blocks still allocated after the queue and its threads";
}

TEST(queue_stress, four_producers_four_consumers) {
  const mpmc::stress_config config;
  const auto items = static_cast<std::uint32_t>(config.scaled(1'000'000));
  expect_fifo_exactly_once<mpmc::item>(config, { 4, 4, items });
}

TEST(queue_stress, eight_producers_eight_consumers) {
  const mpmc::stress_config config;
  const auto items = static_cast<std::uint32_t>(config.scaled(250'000));
  expect_fifo_exactly_once<mpmc::item>(config, { 8, 8, items });
}

TEST(queue_stress, non_trivial_elements_constructed_and_destroyed_once) {
  const mpmc::stress_config config;
  const auto items = static_cast<std::uint32_t>(config.scaled(100'000));
  lifecycle::reset();
  expect_fifo_exactly_once<lifecycle>(config, { 4, 4, items });
  EXPECT_EQ(lifecycle::live(), 0);
}

// Thread pools and tests create threads over and over: each exiting thread's hazard record is
// reused by the next one, so there are never more records than threads alive at once. The scan
// threshold grows by 2 * kSlots per record, which makes the record count observable. A wave's
// threads need not all overlap (one may exit before another makes its first operation), so the
// first wave may need fewer records than a later one: the bound is what holds, not the first
// wave's count. Without reuse, 50 waves of 4 threads would make 200 records.
TEST(queue_stress, short_lived_threads_reuse_records) {
  const mpmc::stress_config config;
  const mpmc::shape s{ 2, 2, static_cast<std::uint32_t>(config.scaled(2'000)) };
  constexpr int kWaves = 50;
  SCOPED_TRACE(mpmc::describe(config, s) + " waves=" + std::to_string(kWaves));
  const mpmc::node_accounting nodes(kBlockClass<mpmc::item>);
  {
    queue<mpmc::item> q;
    // The main thread may hold a record of its own (the queue's first node); the threshold now
    // counts every record that exists before the first wave.
    const std::size_t before = detail::scan_threshold();
    constexpr std::size_t kPerRecord = 2 * detail::hazard_slot_block::kSlots;
    const std::size_t bound = before + kPerRecord * (s.producers + s.consumers);
    for (int wave = 0; wave < kWaves; ++wave) {
      const mpmc::delivery seen = mpmc::run<mpmc::item>(q, s, config.seed + wave);
      ASSERT_TRUE(mpmc::each_item_exactly_once(seen, s)) << "wave " << wave;
      ASSERT_TRUE(mpmc::each_producer_in_order(seen)) << "wave " << wave;
      ASSERT_LE(detail::scan_threshold(), bound)
          << "wave " << wave << ": more hazard records than threads alive at once";
    }
  }
  EXPECT_EQ(nodes.leaked(), 0) << "node blocks still allocated after the queue and its threads";
}

}  // namespace
