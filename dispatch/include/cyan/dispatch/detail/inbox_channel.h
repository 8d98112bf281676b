#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <utility>

#include "cyan/common/cache_line.h"
#include "cyan/common/noncopyable.h"
#include "cyan/common/unique_function.h"
#include "cyan/dispatch/detail/asymmetric_fence.h"
#include "cyan/lockfree/spsc_ring.h"

namespace cyan::dispatch::detail {

/// What an inbox runs: a closure, stored inline when it fits (no allocation per post).
using inbox_task = unique_function<void()>;

/// One producer thread's private lane into one inbox: an unbounded SPSC queue made of chained
/// lockfree::spsc_ring blocks. The producer fills the newest block; when it is full it links a
/// new one (twice as big, up to kMaxBlockSlots) and never touches the old one again. The
/// consumer empties the oldest block, follows the link once the block is empty, and hands the
/// emptied block back for reuse (one spare), so a busy lane stops allocating.
///
/// Members are [producer] (the one thread that posts through the lane), [consumer] (the
/// inbox's thread) or [any thread], as marked.
///
/// Lifetime: two references, the producer's (its thread cache) and the inbox's. The producer
/// drops its reference when its thread exits, after close(); the inbox drops its reference
/// when it has emptied a closed lane, or when it is destroyed (after mark_target_dead(), so the
/// producer's cache forgets the lane). The last reference deletes the lane.
class inbox_channel : noncopyable {
 public:
  static constexpr std::size_t kFirstBlockSlots = 256;  // 16 KiB of 64-byte tasks
  static constexpr std::size_t kMaxBlockSlots = 8192;   // 512 KiB: one malloc per 8192 posts

  explicit inbox_channel(std::uint64_t target) : target_(target) {
    block* first = new block(kFirstBlockSlots);
    producer_.tail = first;
    consumer_.head = first;
  }

  ~inbox_channel() { free_blocks(); }

  /// The id of the inbox this lane feeds. [any thread]
  [[nodiscard]] std::uint64_t target() const noexcept { return target_; }

  // ---- producer side -------------------------------------------------------------------------

  /// Announces a post in progress; the inbox checks it before it sleeps or finishes. Ordered
  /// before the producer's next load by asymmetric_fence (see inbox.h, "No lost wake-up").
  void begin_post() noexcept { asymmetric_fence::light_store(producer_.active, true); }

  /// Ends the post begun by begin_post(). release: pairs with the seq_cst (acquire) load in
  /// posting(); whoever sees the flag cleared also sees the task pushed before.
  void end_post() noexcept { producer_.active.store(false, std::memory_order_release); }

  /// Appends a task built from `f`. Throws what building it throws, or std::bad_alloc; nothing
  /// is appended then. [producer]
  template <typename F>
  void push(F&& f) {
    // relaxed: only this thread writes posted; readers synchronise through the ring's release.
    producer_.posted.store(producer_.posted.load(std::memory_order_relaxed) + 1,
                           std::memory_order_relaxed);
    try {
      if (!producer_.tail->ring.try_emplace(std::forward<F>(f))) {
        push_to_new_block(std::forward<F>(f));
      }
    } catch (...) {
      producer_.posted.store(producer_.posted.load(std::memory_order_relaxed) - 1,
                             std::memory_order_relaxed);
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
    std::size_t taken = 0;
    while (taken < max) {
      block* head = consumer_.head;
      taken += head->ring.consume_n(max - taken, f);
      if (taken == max) {
        break;
      }
      // acquire: pairs with the release store in link(); everything pushed into `head` before
      // the producer moved on is visible to the consume_n() below.
      block* next = head->next.load(std::memory_order_acquire);
      if (next == nullptr) {
        break;
      }
      if (!head->ring.empty()) {
        continue;  // the rest of head became visible with the link
      }
      consumer_.head = next;
      recycle(head);
    }
    return taken;
  }

  /// True while a post is in progress. seq_cst (so also acquire, pairing with end_post()): part
  /// of the store-load pair with inbox::state_ (see inbox.h), after asymmetric_fence::heavy().
  /// [consumer]
  [[nodiscard]] bool posting() const noexcept {
    return producer_.active.load(std::memory_order_seq_cst);
  }

  /// True when a task is queued (a snapshot). [consumer]
  [[nodiscard]] bool has_tasks() const noexcept {
    const block* head = consumer_.head;
    // acquire: pairs with the release store in link().
    return !head->ring.empty() || head->next.load(std::memory_order_acquire) != nullptr;
  }

  /// True after close(). [any thread]
  [[nodiscard]] bool closed() const noexcept {
    // acquire: pairs with the release store in close().
    return closed_.load(std::memory_order_acquire);
  }

  /// Tasks pushed so far (an exact count once the producer is quiet). [any thread]
  [[nodiscard]] std::uint64_t posted() const noexcept {
    // relaxed: a counter; callers order it against their other reads themselves.
    return producer_.posted.load(std::memory_order_relaxed);
  }

  /// Frees the blocks early: the inbox is gone and the producer will never post here again.
  /// Its tasks must have been consumed. [consumer, after the inbox's thread has finished]
  void free_blocks() noexcept {
    block* b = consumer_.head;
    while (b != nullptr) {
      block* next = b->next.load(std::memory_order_relaxed);  // relaxed: both sides are done
      delete b;
      b = next;
    }
    delete spare_.exchange(nullptr, std::memory_order_relaxed);  // relaxed: as above
    consumer_.head = nullptr;
    producer_.tail = nullptr;
  }

  /// The next lane in the consumer's list. [consumer]
  inbox_channel* next_lane = nullptr;

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
  static void release(inbox_channel* channel) noexcept {
    // acq_rel: each owner's accesses happen before the deletion by the other.
    if (channel->references_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      delete channel;
    }
  }

 private:
  struct block : noncopyable {
    explicit block(std::size_t slots) : ring(slots) {}
    lockfree::spsc_ring<inbox_task> ring;
    // Written once by the producer when it moves on to the next block; read by the consumer.
    std::atomic<block*> next{ nullptr };
  };

  template <typename F>
  [[gnu::noinline]] void push_to_new_block(F&& f) {
    const std::size_t wanted = std::min(producer_.tail->ring.capacity() * 2, kMaxBlockSlots);
    block* fresh = take_spare();
    if (fresh != nullptr && fresh->ring.capacity() < wanted) {
      delete fresh;  // grow instead of reusing a small block
      fresh = nullptr;
    }
    if (fresh == nullptr) {
      fresh = new block(wanted);
    }
    std::unique_ptr<block> owner(fresh);
    if (!fresh->ring.try_emplace(std::forward<F>(f))) {
      std::abort();  // an empty ring always has room
    }
    link(owner.release());
  }

  // [producer] A block the consumer emptied and handed back, or nullptr.
  block* take_spare() noexcept {
    // acquire: pairs with the release CAS in recycle(); the consumer's reads of the block and
    // its reset of `next` happen before our reuse.
    return spare_.exchange(nullptr, std::memory_order_acquire);
  }

  // [producer] Moves on to `fresh`, whose first task is in place.
  void link(block* fresh) noexcept {
    // release: pairs with the acquire load in consume() and has_tasks().
    producer_.tail->next.store(fresh, std::memory_order_release);
    producer_.tail = fresh;
  }

  // [consumer] Keeps one emptied block for the producer to reuse; frees any other.
  void recycle(block* emptied) noexcept {
    emptied->next.store(nullptr, std::memory_order_relaxed);  // published by the CAS below
    block* expected = nullptr;
    // release: pairs with the acquire exchange in take_spare().
    if (!spare_.compare_exchange_strong(expected, emptied, std::memory_order_release,
                                        std::memory_order_relaxed)) {
      delete emptied;
    }
  }

  // The producer's line: written on every post.
  struct alignas(cache_line_size) producer_side {
    block* tail = nullptr;
    // Written only by the producer (a count, not an RMW); read by stats().
    std::atomic<std::uint64_t> posted{ 0 };
    // True while a post is between begin_post() and end_post(); read by the consumer.
    std::atomic<bool> active{ false };
  };

  // The consumer's line.
  struct alignas(cache_line_size) consumer_side {
    block* head = nullptr;
  };

  producer_side producer_;
  consumer_side consumer_;
  // Rarely written: the spare block, the closed and dead flags, the reference count.
  alignas(cache_line_size) std::atomic<block*> spare_{ nullptr };
  std::atomic<bool> closed_{ false };
  std::atomic<bool> target_dead_{ false };
  std::atomic<int> references_{ 2 };
  const std::uint64_t target_;
};

}  // namespace cyan::dispatch::detail
