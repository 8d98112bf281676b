#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "cyan/common/cache_line.h"
#include "cyan/common/noncopyable.h"
#include "cyan/common/unique_function.h"
#include "cyan/dispatch/detail/asymmetric_fence.h"
#include "cyan/lockfree/spsc_queue.h"

namespace cyan::dispatch::detail {

/// What an inbox runs: a closure, stored inline when it fits (no allocation per post).
using inbox_task = unique_function<void()>;

/// One producer thread's private lane into one inbox: an unbounded SPSC queue of tasks
/// (lockfree::spsc_queue, a chain of rings that stops allocating once busy), with what the
/// inbox's protocol needs around it: the producer's "post in progress" flag and post count
/// (on the producer's cache line, see lane_producer_state), the closed and target-dead flags,
/// and the two references.
///
/// Members are [producer] (the one thread that posts through the lane), [consumer] (the
/// inbox's thread) or [any thread], as marked.
///
/// Lifetime: two references, the producer's (its thread cache) and the inbox's. The producer
/// drops its reference when its thread exits, after close(); the inbox drops its reference
/// when it has emptied a closed lane, or when it is destroyed (after mark_target_dead(), so the
/// producer's cache forgets the lane). The last reference deletes the lane.
class inbox_lane : noncopyable {
 public:
  /// Blocks of 256 tasks first (16 KiB of 64-byte tasks), doubling up to 8192 (512 KiB: one
  /// malloc per 8192 posts).
  static constexpr std::size_t kFirstBlockSlots = 256;
  static constexpr std::size_t kMaxBlockSlots = 8192;

  explicit inbox_lane(std::uint64_t target)
      : target_(target), tasks_(kFirstBlockSlots, kMaxBlockSlots) {}

  /// The id of the inbox this lane feeds. [any thread]
  [[nodiscard]] std::uint64_t target() const noexcept { return target_; }

  // ---- producer side -------------------------------------------------------------------------

  /// Announces a post in progress; the inbox checks it before it sleeps or finishes. Ordered
  /// before the producer's next load by asymmetric_fence (see inbox.h, "No lost wake-up").
  void begin_post() noexcept { asymmetric_fence::light_store(producer().active, true); }

  /// Ends the post begun by begin_post(). release: pairs with the seq_cst (acquire) load in
  /// posting(); whoever sees the flag cleared also sees the task pushed before.
  void end_post() noexcept { producer().active.store(false, std::memory_order_release); }

  /// Appends a task built from `f`. Throws what building it throws, or std::bad_alloc; nothing
  /// is appended then. [producer]
  template <typename F>
  void push(F&& f) {
    std::atomic<std::uint64_t>& posted = producer().posted;
    // relaxed: only this thread writes posted; readers synchronise through the ring's release.
    posted.store(posted.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    try {
      tasks_.emplace(std::forward<F>(f));
    } catch (...) {
      posted.store(posted.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
      throw;
    }
  }

  /// Tells the inbox that no more tasks will come through this lane. [producer]
  void close() noexcept {
    // release: pairs with the acquire load in closed(); the tasks pushed before are visible to
    // a consumer that sees the flag.
    closed_.store(true, std::memory_order_release);
  }

  // ---- consumer side -------------------------------------------------------------------------

  /// Calls `f(task&&)` for up to `max` tasks, oldest first; returns how many. `f` must not
  /// throw. [consumer]
  template <typename F>
  std::size_t consume(std::size_t max, F& f) noexcept {
    return tasks_.consume_n(max, f);
  }

  /// True while a post is in progress. seq_cst (so also acquire, pairing with end_post()): part
  /// of the store-load pair with inbox::state_ (see inbox.h), after asymmetric_fence::heavy().
  /// [consumer]
  [[nodiscard]] bool posting() const noexcept {
    return producer().active.load(std::memory_order_seq_cst);
  }

  /// True when a task is queued (a snapshot). [consumer]
  [[nodiscard]] bool has_tasks() const noexcept { return !tasks_.empty(); }

  /// True after close(). [any thread]
  [[nodiscard]] bool closed() const noexcept {
    // acquire: pairs with the release store in close().
    return closed_.load(std::memory_order_acquire);
  }

  /// Tasks pushed so far (an exact count once the producer is quiet). [any thread]
  [[nodiscard]] std::uint64_t posted() const noexcept {
    // relaxed: a counter; callers order it against their other reads themselves.
    return producer().posted.load(std::memory_order_relaxed);
  }

  /// Frees the blocks early: the inbox is gone and the producer will never post here again.
  /// Its tasks must have been consumed. [consumer, after the inbox's thread has finished]
  void free_blocks() noexcept { tasks_.free_blocks(); }

  /// The next lane in the consumer's list. [consumer]
  inbox_lane* next_lane = nullptr;

  // ---- both sides ----------------------------------------------------------------------------

  /// Marks that the inbox is gone: the producer's cache drops the lane on its next clean-up.
  void mark_target_dead() noexcept {
    // release: pairs with the acquire load in target_dead().
    target_dead_.store(true, std::memory_order_release);
  }

  [[nodiscard]] bool target_dead() const noexcept {
    return target_dead_.load(std::memory_order_acquire);  // pairs with mark_target_dead()
  }

  /// Drops one of the two references; the last one deletes the lane. [any thread]
  static void release(inbox_lane* lane) noexcept {
    // acq_rel: each owner's accesses happen before the deletion by the other.
    if (lane->references_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      delete lane;
    }
  }

 private:
  // What the producer writes on every post, kept on the queue's producer line.
  struct lane_producer_state {
    // Written only by the producer (a count, not an RMW); read by stats().
    std::atomic<std::uint64_t> posted{ 0 };
    // True while a post is between begin_post() and end_post(); read by the consumer.
    std::atomic<bool> active{ false };
  };

  lane_producer_state& producer() noexcept { return tasks_.producer_data(); }
  const lane_producer_state& producer() const noexcept { return tasks_.producer_data(); }

  // Rarely written, beside next_lane: the closed and dead flags, the reference count.
  std::atomic<bool> closed_{ false };
  std::atomic<bool> target_dead_{ false };
  std::atomic<int> references_{ 2 };
  const std::uint64_t target_;
  // Its own cache lines: the producer's, the consumer's and the spare block's.
  lockfree::spsc_queue<inbox_task, lane_producer_state> tasks_;
};

}  // namespace cyan::dispatch::detail
