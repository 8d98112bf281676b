#include "cyan/lockfree/segmented_queue.h"

#include <gtest/gtest.h>

#include "mpmc_stress.h"
#include "support/lifecycle.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

// Stress tests of cyan::lockfree::segmented_queue: many producers and consumers at once, with
// single and batch claims; every element delivered exactly once, each consumer seeing each
// producer's elements in push order, every element destroyed; a seal racing with pushes loses
// nothing. Sizes and seed: see mpmc_stress.h.

namespace {

using cyan::lockfree::segmented_queue;
using cyan::test::lifecycle;
namespace mpmc = cyan::test::mpmc;

// A non-trivial element the queue accepts (it must move without throwing): an owned lifecycle.
struct boxed {
  boxed() = default;
  explicit boxed(std::int64_t value) : counted(std::make_unique<lifecycle>(value)) {}
  boxed(const boxed& other) : counted(std::make_unique<lifecycle>(*other.counted)) {}
  boxed(boxed&&) noexcept = default;
  boxed& operator=(boxed&&) noexcept = default;
  std::unique_ptr<lifecycle> counted;
};

// How mpmc_stress.h builds and reads a boxed (found by argument-dependent lookup).
boxed make_item(std::uint32_t producer, std::uint32_t sequence, boxed*) {
  return boxed(static_cast<std::int64_t>(producer) << 32 | sequence);
}
mpmc::item read_item(const boxed& element) {
  return mpmc::read_item(*element.counted);
}

// The push/emplace/try_pop interface mpmc_stress.h drives, over a segmented_queue. Pushes are
// never refused (nothing seals the queue).
template <typename T>
struct mpmc_adapter {
  template <typename U>
  void push(U&& value) {
    T element(std::forward<U>(value));
    if (!queue.try_push(std::move(element))) {
      std::abort();
    }
  }
  template <typename U>
  void emplace(U&& value) {
    push(std::forward<U>(value));
  }
  bool try_pop(T& out) noexcept { return queue.try_pop(out); }
  std::optional<T> try_pop() {
    std::optional<T> result(std::in_place);
    if (!queue.try_pop(*result)) {
      result.reset();
    }
    return result;
  }
  bool empty() const noexcept { return queue.empty(); }

  segmented_queue<T> queue;
};

template <typename Element>
void expect_fifo_exactly_once(const mpmc::stress_config& config, const mpmc::shape& s) {
  SCOPED_TRACE(mpmc::describe(config, s));
  mpmc_adapter<Element> q;
  const mpmc::delivery seen = mpmc::run<Element>(q, s, config.seed);
  EXPECT_TRUE(mpmc::each_item_exactly_once(seen, s));
  EXPECT_TRUE(mpmc::each_producer_in_order(seen));
  EXPECT_TRUE(q.empty());
}

TEST(segmented_queue_stress, four_producers_four_consumers) {
  const mpmc::stress_config config;
  const auto items = static_cast<std::uint32_t>(config.scaled(1'000'000));
  expect_fifo_exactly_once<mpmc::item>(config, { 4, 4, items });
}

TEST(segmented_queue_stress, non_trivial_elements_constructed_and_destroyed_once) {
  const mpmc::stress_config config;
  const auto items = static_cast<std::uint32_t>(config.scaled(100'000));
  lifecycle::reset();
  expect_fifo_exactly_once<boxed>(config, { 4, 4, items });
  EXPECT_EQ(lifecycle::live(), 0);
}

// Consumers claim batches (up to 8, a share of 1 in 2 of what they see) with a tail hint each,
// as a pool's workers do: still each element exactly once, each producer's in order.
TEST(segmented_queue_stress, batch_claims_keep_each_producer_in_order) {
  const mpmc::stress_config config;
  const mpmc::shape s{ 3, 3, static_cast<std::uint32_t>(config.scaled(500'000)) };
  SCOPED_TRACE(mpmc::describe(config, s));
  mpmc_adapter<mpmc::item> q;
  const auto claim_batches = [&](std::uint32_t, const std::atomic<std::uint32_t>& producers_done,
                                 std::vector<std::vector<std::uint32_t>>& seen) {
    segmented_queue<mpmc::item>::tail_hint hint;
    mpmc::item batch[8];
    mpmc::backoff idle;
    for (;;) {
      const bool producers_finished = producers_done.load() == s.producers;  // before the pop
      bool more = false;
      const std::size_t n = q.queue.try_pop_many(batch, 8, 2, &more, &hint);
      for (std::size_t i = 0; i < n; ++i) {
        seen[std::min(batch[i].producer, s.producers)].push_back(batch[i].sequence);
      }
      if (n != 0) {
        idle.reset();
      } else if (producers_finished) {
        return;
      } else {
        idle.wait();
      }
    }
  };
  const mpmc::delivery seen = mpmc::run_with<mpmc::item>(q, s, config.seed, claim_batches);
  EXPECT_TRUE(mpmc::each_item_exactly_once(seen, s));
  EXPECT_TRUE(mpmc::each_producer_in_order(seen));
  EXPECT_TRUE(q.empty());
}

// A seal racing with producers: every push that was accepted is popped, none after the seal.
TEST(segmented_queue_stress, a_seal_racing_with_pushes_loses_nothing) {
  const mpmc::stress_config config;
  const std::uint64_t per_producer = config.scaled(100'000);
  SCOPED_TRACE(config.describe());
  segmented_queue<std::uint64_t> queue;
  std::atomic<std::uint64_t> accepted{ 0 };
  std::atomic<std::uint64_t> accepted_sum{ 0 };
  std::vector<std::thread> producers;
  for (int p = 0; p < 2; ++p) {
    producers.emplace_back([&] {
      for (std::uint64_t i = 1; i <= per_producer; ++i) {
        std::uint64_t value = i;
        if (!queue.try_push(std::move(value))) {
          return;
        }
        accepted.fetch_add(1);
        accepted_sum.fetch_add(i);
      }
    });
  }
  std::uint64_t popped = 0;
  std::uint64_t popped_sum = 0;
  std::uint64_t value = 0;
  while (popped < per_producer / 2 && accepted.load() < 2 * per_producer) {
    if (queue.try_pop(value)) {
      ++popped;
      popped_sum += value;
    }
  }
  queue.seal();
  for (auto& producer : producers) {
    producer.join();
  }
  while (queue.try_pop(value)) {
    ++popped;
    popped_sum += value;
  }
  std::uint64_t refused = 1;
  EXPECT_FALSE(queue.try_push(std::move(refused))) << "sealed";
  EXPECT_TRUE(queue.close_if_empty());
  EXPECT_EQ(popped, accepted.load());
  EXPECT_EQ(popped_sum, accepted_sum.load());
}

}  // namespace
