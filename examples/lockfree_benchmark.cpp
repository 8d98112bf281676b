// Lock-free containers benchmark: cyan's queues and SPSC ring against their peers.
//   queue 1P1C, 2P2C, 4P4C — P producers push ITEMS values in total, P consumers pop and sum
//       them: cyan::lockfree::queue (Michael–Scott) and cyan::lockfree::segmented_queue (the
//       pool's queue) vs boost::lockfree::queue, moodycamel::ConcurrentQueue (token-less API,
//       like the others), libcds MSQueue (hazard pointers) and a std::mutex around a
//       std::deque;
//   spsc — one producer, one consumer, a ring of 1024 slots: cyan::lockfree::spsc_ring one item
//       at a time and in batches vs boost::lockfree::spsc_queue one item at a time and in batches.
// Every arm moves the values 0..ITEMS-1 and its consumers sum what they pop: the checksum (the
// total) must match across arms. Threads are started, and queues built, before the timed region;
// the threads are released together by a latch and the region ends when every item is consumed.
//
//   CYAN_BENCH_QUEUE_ITEMS   items per queue workload (default 2000000)
//   CYAN_BENCH_SPSC_ITEMS    items through the SPSC rings (default 10000000)
//   CYAN_BENCH_REPS          repetitions per arm (default 11)

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <latch>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <cds/container/msqueue.h>
#include <cds/gc/hp.h>
#include <cds/init.h>
#include <concurrentqueue/concurrentqueue.h>
#include <boost/lockfree/queue.hpp>
#include <boost/lockfree/spsc_queue.hpp>

#include <cyan/common/cache_line.h>
#include <cyan/common/detail/backoff.h>
#include <cyan/common/thread.h>
#include <cyan/lockfree/queue.h>
#include <cyan/lockfree/segmented_queue.h>
#include <cyan/lockfree/spsc_ring.h>

#include "bench/harness.h"

namespace {

using cyan::bench::sample;
using item = std::uint64_t;

constexpr std::size_t kRingCapacity = 1024;
constexpr std::size_t kBatch = 64;  // items per batch call: 1/16 of the ring, so both sides overlap

/// How every arm's threads wait after a call that made no progress: spin 1, 2, 4, ... 64
/// pauses, then yield on each further wait, since the queue workloads run more threads than
/// there are cores (cyan's one back-off, common/detail/backoff.h).
using backoff = cyan::detail::backoff;

/// Default per-thread set-up for an arm: nothing.
struct no_thread_setup {};

/// Runs `producers` + `consumers` threads; `produce(i)` and `consume(i)` do thread i's share.
/// Each thread builds a ThreadSetup (e.g. to attach to libcds), optionally pins itself to a CPU,
/// then waits; the clock starts when all are released together and stops when every consumer
/// has returned. The checksum is the sum of the consumers' results.
template <typename ThreadSetup = no_thread_setup>
sample run_threads(std::size_t producers, std::size_t consumers,
                   const std::function<void(std::size_t)>& produce,
                   const std::function<item(std::size_t)>& consume, bool pin = false) {
  const std::size_t threads = producers + consumers;
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  std::latch ready(static_cast<std::ptrdiff_t>(threads));
  std::latch go(1);
  std::latch consumed(static_cast<std::ptrdiff_t>(consumers));
  std::vector<cyan::cache_padded<item>> sums(consumers);
  std::vector<std::thread> pool;
  for (std::size_t t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      [[maybe_unused]] const ThreadSetup setup;
      if (pin) {
        cyan::this_thread::set_affinity(static_cast<unsigned>(t % cpus));
      }
      ready.count_down();
      go.wait();
      if (t < producers) {
        produce(t);
      } else {
        sums[t - producers].value = consume(t - producers);
        consumed.count_down();
      }
    });
  }
  ready.wait();
  const auto start = std::chrono::steady_clock::now();
  go.count_down();
  consumed.wait();
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  for (std::thread& thread : pool) {
    thread.join();
  }
  item checksum = 0;
  for (const auto& sum : sums) {
    checksum += sum.value;
  }
  return { elapsed.count(), checksum };
}

// ---------------------------------------------------------------------------------------------
// MPMC queues. Each arm adapts one queue to push(item) / try_pop(item&).

// Both node-based queues pool nodes for 64 Ki items before timing (boost needs a capacity to
// pool anything); beyond that, push allocates in both.
constexpr std::size_t kPooledNodes = 1u << 16;

struct cyan_queue_arm {
  cyan::lockfree::queue<item> queue{ kPooledNodes };
  void push(item value) { queue.push(value); }
  bool try_pop(item& value) { return queue.try_pop(value); }
};

// One block per 255 pushes at most; drained blocks are kept as spares and reused.
struct cyan_segmented_queue_arm {
  cyan::lockfree::segmented_queue<item> queue;
  void push(item value) {
    if (!queue.try_push(std::move(value))) {
      std::abort();  // refused only after seal() or close_if_empty(), which no arm calls
    }
  }
  bool try_pop(item& value) { return queue.try_pop(value); }
};

struct boost_queue_arm {
  boost::lockfree::queue<item> queue{ kPooledNodes };
  void push(item value) {
    while (!queue.push(value)) {
      cyan::cpu_relax();
    }
  }
  bool try_pop(item& value) { return queue.pop(value); }
};

struct moodycamel_arm {
  moodycamel::ConcurrentQueue<item> queue;
  void push(item value) {
    while (!queue.enqueue(value)) {
      cyan::cpu_relax();
    }
  }
  bool try_pop(item& value) { return queue.try_dequeue(value); }
};

struct libcds_arm {
  cds::container::MSQueue<cds::gc::HP, item> queue;
  void push(item value) { queue.enqueue(value); }
  bool try_pop(item& value) { return queue.dequeue(value); }
};

/// libcds needs every thread that touches a hazard-pointer container attached to its GC.
struct libcds_thread {
  libcds_thread() { cds::threading::Manager::attachThread(); }
  ~libcds_thread() { cds::threading::Manager::detachThread(); }
  libcds_thread(const libcds_thread&) = delete;
  libcds_thread& operator=(const libcds_thread&) = delete;
};

/// libcds itself, initialised before (and terminated after) anything else of libcds is built.
struct libcds_library {
  libcds_library() { cds::Initialize(); }
  ~libcds_library() { cds::Terminate(); }
  libcds_library(const libcds_library&) = delete;
  libcds_library& operator=(const libcds_library&) = delete;
};

/// libcds's process-wide state: the library, the hazard-pointer GC, and main attached to it
/// (main destroys the queues, which uses hazard pointers).
struct libcds_runtime : libcds_library {
  cds::gc::HP gc;
  libcds_thread main_thread;
};

struct mutex_deque_arm {
  std::mutex mutex;
  std::deque<item> deque;
  void push(item value) {
    const std::lock_guard lock(mutex);
    deque.push_back(value);
  }
  bool try_pop(item& value) {
    const std::lock_guard lock(mutex);
    if (deque.empty()) {
      return false;
    }
    value = deque.front();
    deque.pop_front();
    return true;
  }
};

/// Producer p pushes its slice of 0..items-1. Consumers pop and sum until all items are counted:
/// each adds its count to `consumed` only when it finds the queue empty, so no arm pays a shared
/// counter per item, and no arm relies on its queue's emptiness being exact.
template <typename Arm, typename ThreadSetup = no_thread_setup>
sample run_queue(std::size_t pairs, item items) {
  Arm arm;
  std::atomic<item> consumed{ 0 };
  const auto produce = [&](std::size_t p) {
    for (item value = items * p / pairs, end = items * (p + 1) / pairs; value != end; ++value) {
      arm.push(value);
    }
  };
  const auto consume = [&](std::size_t) {
    item sum = 0;
    item count = 0;
    backoff wait;
    for (;;) {
      if (item value; arm.try_pop(value)) {
        sum += value;
        ++count;
        wait.reset();
        continue;
      }
      // relaxed (both): only the count matters; the sums are read after the consumed latch.
      const item total = count == 0 ? consumed.load(std::memory_order_relaxed)
                                    : consumed.fetch_add(count, std::memory_order_relaxed) + count;
      if (total == items) {
        return sum;
      }
      count = 0;
      wait.wait();
    }
  };
  return run_threads<ThreadSetup>(pairs, pairs, produce, consume);
}

bool run_queue_workload(std::size_t pairs, item items) {
  const std::string workload = "queue " + std::to_string(pairs) + "P" + std::to_string(pairs) + "C";
  cyan::bench::suite s{ "lockfree", workload };
  s.add("cyan lockfree::queue", [&] { return run_queue<cyan_queue_arm>(pairs, items); });
  s.add("cyan lockfree::segmented_queue",
        [&] { return run_queue<cyan_segmented_queue_arm>(pairs, items); });
  s.add("boost::lockfree::queue", [&] { return run_queue<boost_queue_arm>(pairs, items); });
  s.add("moodycamel::ConcurrentQueue", [&] { return run_queue<moodycamel_arm>(pairs, items); });
  s.add("libcds MSQueue<HP>", [&] { return run_queue<libcds_arm, libcds_thread>(pairs, items); });
  s.add("std::mutex + std::deque", [&] { return run_queue<mutex_deque_arm>(pairs, items); });
  const bool ok = s.run();
  s.goal("cyan lockfree::queue", "boost::lockfree::queue", 1.0);
  return ok;
}

// ---------------------------------------------------------------------------------------------
// SPSC rings: the producer pushes 0..items-1, the consumer sums them. Producer and consumer are
// pinned to different CPUs in every arm.

/// One item per call: the producer hands 0..items-1 to `try_push(value)`, the consumer sums what
/// `try_pop(value)` gives until it has them all. Each side backs off after a failed call.
template <typename TryPush, typename TryPop>
sample spsc_one_at_a_time(item items, TryPush try_push, TryPop try_pop) {
  const auto produce = [&](std::size_t) {
    backoff wait;
    for (item value = 0; value != items; ++value) {
      while (!try_push(value)) {
        wait.wait();
      }
      wait.reset();
    }
  };
  const auto consume = [&](std::size_t) {
    item sum = 0;
    backoff wait;
    for (item count = 0; count != items;) {
      if (item value; try_pop(value)) {
        sum += value;
        ++count;
        wait.reset();
      } else {
        wait.wait();
      }
    }
    return sum;
  };
  return run_threads(1, 1, produce, consume, true);
}

/// In batches: the producer hands kBatch consecutive values at a time to `push_some(first, n)`,
/// which returns how many it took; the consumer calls `consume_all(add)` until it has them all.
template <typename PushSome, typename ConsumeAll>
sample spsc_in_batches(item items, PushSome push_some, ConsumeAll consume_all) {
  const auto produce = [&](std::size_t) {
    item batch[kBatch];
    backoff wait;
    for (item next = 0; next != items;) {
      const std::size_t n = static_cast<std::size_t>(std::min<item>(kBatch, items - next));
      std::iota(batch, batch + n, next);
      for (std::size_t done = 0; done != n;) {
        const std::size_t pushed = push_some(batch + done, n - done);
        done += pushed;
        wait.after(pushed);
      }
      next += n;
    }
  };
  const auto consume = [&](std::size_t) {
    item sum = 0;
    backoff wait;
    const auto add = [&sum](item value) { sum += value; };
    for (item count = 0; count != items;) {
      const std::size_t taken = consume_all(add);
      count += taken;
      wait.after(taken);
    }
    return sum;
  };
  return run_threads(1, 1, produce, consume, true);
}

sample spsc_cyan_single(item items) {
  cyan::lockfree::spsc_ring<item> ring(kRingCapacity);
  return spsc_one_at_a_time(
      items, [&](item value) { return ring.try_push(value); },
      [&](item& value) { return ring.try_pop(value); });
}

sample spsc_cyan_batched(item items) {
  cyan::lockfree::spsc_ring<item> ring(kRingCapacity);
  return spsc_in_batches(
      items, [&](const item* first, std::size_t n) { return ring.try_push_n(first, n); },
      [&](const auto& add) { return ring.consume_all(add); });
}

sample spsc_boost_single(item items) {
  boost::lockfree::spsc_queue<item> ring(kRingCapacity);
  return spsc_one_at_a_time(
      items, [&](item value) { return ring.push(value); },
      [&](item& value) { return ring.pop(value); });
}

sample spsc_boost_batched(item items) {
  boost::lockfree::spsc_queue<item> ring(kRingCapacity);
  return spsc_in_batches(
      items, [&](const item* first, std::size_t n) { return ring.push(first, n); },
      [&](const auto& add) { return ring.consume_all(add); });
}

bool run_spsc_workload(item items) {
  cyan::bench::suite s{ "lockfree", "spsc ring 1024" };
  s.add("cyan spsc_ring single", [&] { return spsc_cyan_single(items); });
  s.add("cyan spsc_ring batched", [&] { return spsc_cyan_batched(items); });
  s.add("boost spsc_queue single", [&] { return spsc_boost_single(items); });
  s.add("boost spsc_queue batched", [&] { return spsc_boost_batched(items); });
  const bool ok = s.run();
  s.goal("cyan spsc_ring single", "boost spsc_queue single", 1.0);
  s.goal("cyan spsc_ring batched", "boost spsc_queue single", 2.0);
  s.goal("cyan spsc_ring batched", "boost spsc_queue batched", 1.0);
  return ok;
}

}  // namespace

int main() {
  const item queue_items = cyan::bench::env_or("CYAN_BENCH_QUEUE_ITEMS", 2'000'000);
  const item spsc_items = cyan::bench::env_or("CYAN_BENCH_SPSC_ITEMS", 10'000'000);
  std::printf(
      "lockfree benchmark: %llu items per queue workload, %llu through the SPSC rings, "
      "%u CPUs\n",
      static_cast<unsigned long long>(queue_items), static_cast<unsigned long long>(spsc_items),
      std::thread::hardware_concurrency());

  const libcds_runtime libcds;
  bool ok = true;
  for (const std::size_t pairs : { 1, 2, 4 }) {
    ok = run_queue_workload(pairs, queue_items) && ok;
  }
  ok = run_spsc_workload(spsc_items) && ok;
  return cyan::bench::exit_status(ok);
}
