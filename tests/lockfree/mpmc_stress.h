#pragma once

// The machinery shared by the MPMC stress tests (queue_stress_test.cpp, stack_stress_test.cpp).
// P producers each push the items (producer, sequence 0..N-1); C consumers pop until every
// producer is done and the container is empty. Afterwards every item must have been delivered
// exactly once, and every node the run allocated must go back to the system.
//
// Environment overrides, printed when a test fails:
//   CYAN_STRESS_ITEMS  default 1,000,000: the items per producer of the 4 × 4 queue test; every
//                      other test scales its own count by the same factor.
//   CYAN_STRESS_SEED   default 1: picks each thread's burst lengths, push and pop forms.

#include <gtest/gtest.h>

#include "cyan/common/cache_line.h"
#include "cyan/lockfree/detail/node_pool.h"
#include "support/lifecycle.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <latch>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>
#include "support/stress_env.h"

namespace cyan::test::mpmc {

inline constexpr std::uint64_t kReferenceItems = 1'000'000;

struct stress_config {
  std::uint64_t items = env_or("CYAN_STRESS_ITEMS", kReferenceItems);
  std::uint64_t seed = env_or("CYAN_STRESS_SEED", 1);

  // `reference` at the default CYAN_STRESS_ITEMS, scaled with it; at least 1.
  std::uint64_t scaled(std::uint64_t reference) const {
    return std::max<std::uint64_t>(1, reference * items / kReferenceItems);
  }
  std::string describe() const {
    return "CYAN_STRESS_ITEMS=" + std::to_string(items) +
           " CYAN_STRESS_SEED=" + std::to_string(seed);
  }
};

struct shape {
  std::uint32_t producers;
  std::uint32_t consumers;
  std::uint32_t items_per_producer;
};

// The configuration and shape of a run, for SCOPED_TRACE.
inline std::string describe(const stress_config& config, const shape& s) {
  return config.describe() + " producers=" + std::to_string(s.producers) +
         " consumers=" + std::to_string(s.consumers) +
         " items_per_producer=" + std::to_string(s.items_per_producer);
}

// The trivially copyable element: which producer pushed it, and its place in that producer's
// sequence.
struct item {
  std::uint32_t producer;
  std::uint32_t sequence;
};

// How an element type carries an item.
inline item make_item(std::uint32_t producer, std::uint32_t sequence, item*) {
  return { producer, sequence };
}
inline item read_item(const item& element) {
  return element;
}

inline lifecycle make_item(std::uint32_t producer, std::uint32_t sequence, lifecycle*) {
  return lifecycle(static_cast<std::int64_t>(producer) << 32 | sequence);
}
inline item read_item(const lifecycle& element) {
  return { static_cast<std::uint32_t>(element.value >> 32),
           static_cast<std::uint32_t>(element.value & 0xffffffff) };
}

// [consumer][producer]: the sequences each consumer popped from each producer, in pop order.
using delivery = std::vector<std::vector<std::vector<std::uint32_t>>>;

// Spins politely: the test machine may have fewer cores than busy threads.
class backoff {
 public:
  void wait() {
    if (++spins_ < 32) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
  void reset() { spins_ = 0; }

 private:
  unsigned spins_ = 0;
};

// Pushes the producer's items in bursts of random length, yielding between bursts; each burst
// uses one of push(const&), push(&&) and emplace.
template <typename Element, typename Container>
void produce(Container& container, std::uint32_t producer, std::uint32_t items,
             std::uint64_t seed) {
  std::mt19937_64 random(seed * 1'000'003 + producer);
  std::uint32_t sequence = 0;
  while (sequence < items) {
    const std::uint32_t burst = std::min<std::uint32_t>(items - sequence, 1 + random() % 256);
    const auto form = random() % 3;
    for (const std::uint32_t end = sequence + burst; sequence < end; ++sequence) {
      Element element = make_item(producer, sequence, static_cast<Element*>(nullptr));
      if (form == 0) {
        container.push(element);
      } else if (form == 1) {
        container.push(std::move(element));
      } else {
        container.emplace(std::move(element));
      }
    }
    std::this_thread::yield();
  }
}

// Pops until a pop finds the container empty after every producer had finished (every push had
// completed, so it is empty for good), alternating the reference and optional forms of try_pop.
template <typename Element, typename Container>
void consume(Container& container, const std::atomic<std::uint32_t>& producers_done,
             std::uint32_t producers, std::uint64_t seed, std::uint32_t consumer,
             std::vector<std::vector<std::uint32_t>>& seen) {
  std::mt19937_64 random(seed * 1'000'033 + consumer);
  Element out = make_item(0, 0, static_cast<Element*>(nullptr));
  const auto pop = [&](bool by_reference) {
    if (by_reference) {
      return container.try_pop(out);
    }
    std::optional<Element> popped = container.try_pop();
    if (popped) {
      out = std::move(*popped);
    }
    return popped.has_value();
  };
  backoff idle;
  bool by_reference = true;
  for (std::uint32_t attempts = 0;; ++attempts) {
    if (attempts % 64 == 0) {
      by_reference = random() % 2 == 0;
    }
    const bool producers_finished = producers_done.load() == producers;  // before the pop
    if (pop(by_reference)) {
      const item got = read_item(out);
      seen[std::min(got.producer, producers)].push_back(got.sequence);  // [producers]: garbage
      idle.reset();
    } else if (producers_finished) {
      return;
    } else {
      idle.wait();
    }
  }
}

// Runs the producers and consumers, all released together by one latch, and joins them.
// Consumer c runs `consumer(c, producers_done, seen[c])`, which records what it pops by
// producer in seen[c] and returns once it finds the container empty after every producer had
// finished (producers_done == s.producers).
template <typename Element, typename Container, typename Consumer>
delivery run_with(Container& container, const shape& s, std::uint64_t seed, Consumer consumer) {
  delivery seen(s.consumers, std::vector<std::vector<std::uint32_t>>(s.producers + 1));
  std::latch start(s.producers + s.consumers);
  std::atomic<std::uint32_t> producers_done{ 0 };
  std::vector<std::thread> threads;
  for (std::uint32_t p = 0; p < s.producers; ++p) {
    threads.emplace_back([&, p] {
      start.arrive_and_wait();
      produce<Element>(container, p, s.items_per_producer, seed);
      producers_done.fetch_add(1);
    });
  }
  for (std::uint32_t c = 0; c < s.consumers; ++c) {
    threads.emplace_back([&, c] {
      start.arrive_and_wait();
      consumer(c, std::as_const(producers_done), seen[c]);
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  return seen;
}

// run_with() whose consumers pop one element at a time (consume() above).
template <typename Element, typename Container>
delivery run(Container& container, const shape& s, std::uint64_t seed) {
  return run_with<Element>(container, s, seed,
                           [&](std::uint32_t c, const std::atomic<std::uint32_t>& producers_done,
                               std::vector<std::vector<std::uint32_t>>& seen) {
                             consume<Element>(container, producers_done, s.producers, seed, c,
                                              seen);
                           });
}

// Every producer's sequences 0..N-1 seen exactly once over all consumers, and nothing else.
inline ::testing::AssertionResult each_item_exactly_once(const delivery& seen, const shape& s) {
  std::uint64_t total = 0;
  for (std::uint32_t p = 0; p < s.producers; ++p) {
    std::vector<std::uint8_t> hits(s.items_per_producer, 0);
    for (const auto& consumer : seen) {
      total += consumer[p].size();
      for (const std::uint32_t sequence : consumer[p]) {
        if (sequence >= s.items_per_producer) {
          return ::testing::AssertionFailure() << "producer " << p << " never pushed " << sequence;
        }
        if (++hits[sequence] > 1) {
          return ::testing::AssertionFailure()
                 << "item (" << p << ", " << sequence << ") delivered twice";
        }
      }
    }
    if (auto missing = std::find(hits.begin(), hits.end(), 0); missing != hits.end()) {
      return ::testing::AssertionFailure()
             << "item (" << p << ", " << (missing - hits.begin()) << ") never delivered";
    }
  }
  for (const auto& consumer : seen) {
    if (!consumer[s.producers].empty()) {
      return ::testing::AssertionFailure() << "an item named a producer that does not exist";
    }
  }
  if (total != std::uint64_t{ s.producers } * s.items_per_producer) {
    return ::testing::AssertionFailure() << total << " items delivered";
  }
  return ::testing::AssertionSuccess() << total << " items, each exactly once";
}

// Each consumer saw each producer's sequence strictly increasing (FIFO per producer).
inline ::testing::AssertionResult each_producer_in_order(const delivery& seen) {
  for (std::size_t c = 0; c < seen.size(); ++c) {
    for (std::size_t p = 0; p < seen[c].size(); ++p) {
      const auto& sequences = seen[c][p];
      auto wrong = std::adjacent_find(sequences.begin(), sequences.end(),
                                      [](std::uint32_t a, std::uint32_t b) { return a >= b; });
      if (wrong != sequences.end()) {
        return ::testing::AssertionFailure() << "consumer " << c << " saw producer " << p << "'s "
                                             << *wrong << " before " << *(wrong + 1);
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// Counts the node blocks of one class taken from the system around a run: after the run's
// threads have exited and the container is gone, every block must have gone back.
class node_accounting {
 public:
  explicit node_accounting(std::size_t block_class) : block_class_(block_class) {
    lockfree::detail::release_cached_nodes();
    baseline_ = lockfree::detail::system_blocks(block_class_);
  }
  std::int64_t leaked() const {
    lockfree::detail::release_cached_nodes();
    return lockfree::detail::system_blocks(block_class_) - baseline_;
  }

 private:
  std::size_t block_class_;
  std::int64_t baseline_ = 0;
};

}  // namespace cyan::test::mpmc
