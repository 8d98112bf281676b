#include "cyan/lockfree/spsc_ring.h"

#include <gtest/gtest.h>

#include "cyan/common/cache_line.h"
#include "support/lifecycle.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>
#include "support/stress_env.h"

using cyan::test::env_or;

// Stress tests: one producer thread and one consumer thread move many items through a small ring
// and the consumer checks that it saw 0, 1, 2, ... exactly once each, in order.
// Environment overrides: CYAN_STRESS_ITEMS (default 10,000,000), CYAN_STRESS_SEED (default 1,
// picks the batch sizes). Both are printed when a test fails.

namespace {

using cyan::lockfree::spsc_ring;
using cyan::test::lifecycle;

constexpr std::size_t kCapacity = 1024;

struct stress_config {
  std::uint64_t items = env_or("CYAN_STRESS_ITEMS", 10'000'000);
  std::uint64_t seed = env_or("CYAN_STRESS_SEED", 1);

  std::string describe() const {
    return "CYAN_STRESS_ITEMS=" + std::to_string(items) +
           " CYAN_STRESS_SEED=" + std::to_string(seed);
  }
};

// Spins politely: the test machine may have fewer cores than busy threads.
class backoff {
 public:
  void wait() {
    if (++spins_ < 64) {
      cyan::cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
  void reset() { spins_ = 0; }
  // Waits after a call that made no progress; starts over after one that did.
  void after(std::size_t progress) { progress == 0 ? wait() : reset(); }

 private:
  unsigned spins_ = 0;
};

// What the consumer saw: how many items, and the first one out of order (if any).
struct order_check {
  std::uint64_t expected = 0;
  std::uint64_t first_bad_index = UINT64_MAX;
  std::uint64_t first_bad_value = 0;

  void see(std::uint64_t value) {
    if (value != expected && first_bad_index == UINT64_MAX) {
      first_bad_index = expected;
      first_bad_value = value;
    }
    ++expected;
  }
};

void expect_in_order(const order_check& check, std::uint64_t items) {
  EXPECT_EQ(check.first_bad_index, UINT64_MAX)
      << "item #" << check.first_bad_index << " was " << check.first_bad_value;
  EXPECT_EQ(check.expected, items) << "the consumer saw a different number of items";
}

TEST(spsc_ring_stress, single_items_arrive_in_order) {
  const stress_config config;
  SCOPED_TRACE(config.describe());
  spsc_ring<std::uint64_t> ring(kCapacity);
  std::thread producer([&] {
    backoff wait;
    for (std::uint64_t i = 0; i < config.items; ++i) {
      while (!ring.try_push(i)) {
        wait.wait();
      }
      wait.reset();
    }
  });
  order_check check;
  backoff wait;
  while (check.expected < config.items) {
    std::uint64_t value = 0;
    if (ring.try_pop(value)) {
      check.see(value);
      wait.reset();
    } else {
      wait.wait();
    }
  }
  producer.join();
  expect_in_order(check, config.items);
  EXPECT_TRUE(ring.empty());
}

// The producer pushes batches of random size (1..kCapacity/4) through try_push_n; the consumer
// rotates through consume_all, pop_n and front/pop so each path runs against a live producer.
TEST(spsc_ring_stress, batches_arrive_in_order) {
  const stress_config config;
  SCOPED_TRACE(config.describe());
  spsc_ring<std::uint64_t> ring(kCapacity);
  std::thread producer([&] {
    std::mt19937_64 random(config.seed);
    std::uniform_int_distribution<std::size_t> batch_size(1, kCapacity / 4);
    std::vector<std::uint64_t> batch;
    backoff wait;
    for (std::uint64_t next = 0; next < config.items;) {
      batch.resize(std::min<std::uint64_t>(batch_size(random), config.items - next));
      std::iota(batch.begin(), batch.end(), next);
      for (std::size_t done = 0; done < batch.size();) {
        const std::size_t pushed = ring.try_push_n(batch.begin() + done, batch.size() - done);
        done += pushed;
        wait.after(pushed);
      }
      next += batch.size();
    }
  });
  order_check check;
  std::vector<std::uint64_t> out(kCapacity / 8);
  backoff wait;
  for (unsigned round = 0; check.expected < config.items; ++round) {
    std::size_t taken = 0;
    if (round % 3 == 0) {
      taken = ring.consume_all([&](std::uint64_t&& v) { check.see(v); });
    } else if (round % 3 == 1) {
      taken = ring.pop_n(out.begin(), out.size());
      std::for_each(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(taken),
                    [&](std::uint64_t v) { check.see(v); });
    } else if (std::uint64_t* item = ring.front(); item != nullptr) {
      check.see(*item);
      ring.pop();
      taken = 1;
    }
    wait.after(taken);
  }
  producer.join();
  expect_in_order(check, config.items);
  EXPECT_TRUE(ring.empty());
}

// Counted elements: every item is destroyed exactly once, including those left in the ring for
// its destructor.
TEST(spsc_ring_stress, elements_left_behind_are_destroyed_once) {
  const stress_config config;
  SCOPED_TRACE(config.describe());
  const std::uint64_t items = std::max<std::uint64_t>(config.items / 10, kCapacity);
  const std::uint64_t consumed = items - kCapacity / 2;  // the rest stays in the ring
  lifecycle::reset();
  {
    spsc_ring<lifecycle> ring(kCapacity);
    std::thread producer([&] {
      backoff wait;
      for (std::uint64_t i = 0; i < items; ++i) {
        while (!ring.try_emplace(static_cast<std::int64_t>(i))) {
          wait.wait();
        }
        wait.reset();
      }
    });
    order_check check;
    backoff wait;
    while (check.expected < consumed) {
      const auto take = [&](lifecycle&& item) {
        check.see(static_cast<std::uint64_t>(item.value));
      };
      wait.after(ring.consume_n(consumed - check.expected, take));
    }
    producer.join();
    expect_in_order(check, consumed);
    EXPECT_EQ(ring.size(), items - consumed);
  }
  EXPECT_EQ(lifecycle::constructed.load(), static_cast<std::int64_t>(items));
  EXPECT_EQ(lifecycle::live(), 0);
}

}  // namespace
