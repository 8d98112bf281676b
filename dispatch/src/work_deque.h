#pragma once

// A pool worker's local run queue: a Chase–Lev work-stealing deque of pool_job pointers with a
// fixed capacity (no resize: a push that finds it full fails, and the caller sends the task to
// the shared injection queue instead).
//
// Design (Chase & Lev 2005; the C11 orderings of Lê, Pop, Cohen & Zappa Nardelli, "Correct and
// Efficient Work-Stealing for Weak Memory Models", PPoPP 2013):
//   - The owner pushes and pops at the bottom; thieves take from the top. The owner writes
//     bottom_ and the slots; thieves write only top_, with a CAS.
//   - push: a store to the slot and a store of bottom_. No read-modify-write, and the only
//     other line it reads is top_ (to see whether the deque is full), which a thief writes only
//     when it steals: the common case touches no line another worker writes.
//   - pop: bottom_ is lowered first, then top_ read; when more than one task is left the owner
//     takes the bottom one with no RMW. Only the last task is contended: owner and thieves
//     then race for it with a CAS on top_.
//   - steal: read top_, then bottom_; if non-empty, read the slot at top_ and CAS top_ up.
//     A failed CAS means another thief (or the owner's pop of the last task) won: the thief
//     gives up this attempt (returns null) and looks elsewhere.
// Orderings. The paper's fences are written here as seq_cst operations (the store of bottom_ in
// pop, the loads of top_ and bottom_ that follow it, and the thief's two loads): the same total
// order the fences give, which is what excludes the owner and a thief both taking the last
// task; ThreadSanitizer, which does not model stand-alone fences, sees it too. The push's store
// of bottom_ is seq_cst as well: the pool's wake protocol needs it ordered before the pusher's
// look at the sleepers (see "Sleep" in pool_worker_round.cpp), and it releases the slot and the
// job to the thief's acquire load of bottom_. Slots are atomics (relaxed): a thief may read a
// slot the owner is rewriting, and discards the value when its CAS fails.
//
// Thread rules: push() and pop() only on the owning worker; steal() and size() on any thread.

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "cyan/common/cache_line.h"
#include "cyan/dispatch/detail/fork_join.h"

namespace cyan::dispatch::detail {

class work_deque {
 public:
  // Enough for the forks a recursion keeps pending at once (one per level) and for a burst of
  // posts from a task; beyond that posts go to the shared queue, which has no bound.
  static constexpr std::size_t kCapacity = 1024;
  static_assert((kCapacity & (kCapacity - 1)) == 0, "the index mask needs a power of two");

  /// Adds `job` at the bottom; false (nothing done) when the deque is full. [owner]
  [[nodiscard]] bool push(pool_job* job) noexcept {
    // relaxed: only the owner writes bottom_.
    const std::int64_t bottom = bottom_.load(std::memory_order_relaxed);
    // acquire: pairs with a thief's CAS of top_, so its read of the slot came before this
    // overwrites it.
    const std::int64_t top = top_.load(std::memory_order_acquire);
    if (bottom - top >= static_cast<std::int64_t>(kCapacity)) {
      return false;
    }
    slot(bottom).store(job, std::memory_order_relaxed);
    // seq_cst: releases the slot and the job to a thief's acquire of bottom_, and comes before
    // the pusher's look at the sleepers (see the file comment).
    bottom_.store(bottom + 1, std::memory_order_seq_cst);
    return true;
  }

  /// Takes the job at the bottom (the newest); null when empty or a thief took the last. [owner]
  [[nodiscard]] pool_job* pop() noexcept {
    const std::int64_t bottom = bottom_.load(std::memory_order_relaxed) - 1;
    // seq_cst store then seq_cst load: the paper's fence between them (see "Orderings").
    bottom_.store(bottom, std::memory_order_seq_cst);
    std::int64_t top = top_.load(std::memory_order_seq_cst);
    if (top > bottom) {  // empty: restore
      bottom_.store(bottom + 1, std::memory_order_relaxed);
      return nullptr;
    }
    pool_job* job = slot(bottom).load(std::memory_order_relaxed);
    if (top == bottom) {  // the last one: race the thieves for it
      // seq_cst: orders this CAS with the thieves' (the paper's seq_cst CAS).
      if (!top_.compare_exchange_strong(top, top + 1, std::memory_order_seq_cst,
                                        std::memory_order_relaxed)) {
        job = nullptr;  // a thief won
      }
      bottom_.store(bottom + 1, std::memory_order_relaxed);
    }
    return job;
  }

  /// Takes the job at the top (the oldest); null when empty or another taker won. [any thread]
  [[nodiscard]] pool_job* steal() noexcept {
    // seq_cst: see "Orderings" (the paper's acquire load and the fence after it).
    std::int64_t top = top_.load(std::memory_order_seq_cst);
    // seq_cst, and an acquire: pairs with push()'s store, making the slot and the job visible.
    const std::int64_t bottom = bottom_.load(std::memory_order_seq_cst);
    if (top >= bottom) {
      return nullptr;
    }
    pool_job* job = slot(top).load(std::memory_order_relaxed);
    if (!top_.compare_exchange_strong(top, top + 1, std::memory_order_seq_cst,
                                      std::memory_order_relaxed)) {
      return nullptr;  // the owner or another thief took it first
    }
    return job;
  }

  /// Jobs in the deque, possibly stale by the time it returns. seq_cst loads: the sleep check's
  /// look (see "Sleep" in pool_worker_round.cpp). [any thread]
  [[nodiscard]] bool empty() const noexcept {
    const std::int64_t top = top_.load(std::memory_order_seq_cst);
    const std::int64_t bottom = bottom_.load(std::memory_order_seq_cst);
    return bottom <= top;
  }

 private:
  std::atomic<pool_job*>& slot(std::int64_t index) noexcept {
    return slots_[static_cast<std::size_t>(index) & (kCapacity - 1)];
  }

  // Written by thieves (CAS) and by the owner's pop of the last job; read by everyone.
  alignas(cache_line_size) std::atomic<std::int64_t> top_{ 0 };
  // Written only by the owner; read by thieves.
  alignas(cache_line_size) std::atomic<std::int64_t> bottom_{ 0 };
  // Written only by the owner; read by thieves.
  alignas(cache_line_size) std::array<std::atomic<pool_job*>, kCapacity> slots_{};
};

}  // namespace cyan::dispatch::detail
