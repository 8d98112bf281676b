#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "cyan/common/cache_line.h"
#include "cyan/common/noncopyable.h"
#include "cyan/common/unique_function.h"

namespace cyan::dispatch::detail {

/// A thread_pool's shared queue: unbounded, lock-free, multi-producer multi-consumer FIFO of
/// tasks. The design is crossbeam's SegQueue: a linked list of blocks of kBlockSlots slots; a
/// producer claims a slot with one CAS on the tail index, writes the task in place and flags
/// the slot written; a consumer claims a slot with one CAS on the head index, waits for the
/// flag (a producer between its claim and its write), moves the task out and flags the slot
/// read. A block is freed by whoever reads its last slot, or, when readers of earlier slots
/// are still busy, by the last of them (the DESTROY hand-off), so no hazard pointers are
/// needed: a block is only reached through head_/tail_ after a successful claim.
///
/// Why not lockfree::queue: that Michael–Scott queue pays hazard pointers and a node per
/// element; a pool moves millions of tiny tasks, and here a task costs one uncontended CAS to
/// post, with one block allocation per kBlockSlots tasks (none in steady state: the last freed
/// block is kept as a spare).
///
/// Every member except construction and destruction may be called from any thread at once.
class task_queue : noncopyable {
 public:
  using task = unique_function<void()>;

  /// An empty queue. Throws std::bad_alloc.
  task_queue();
  /// Destroys the tasks still queued, unrun. No other thread may use the queue any more.
  ~task_queue();

  /// Appends `value`. Throws std::bad_alloc (only when a new block is needed and cannot be
  /// allocated); the queue is then unchanged and `value` untouched. [any thread]
  void push(task&& value);

  /// Moves the first task into `out` and returns true, or returns false when the queue is
  /// empty. [any thread]
  [[nodiscard]] bool try_pop(task& out) noexcept;

  /// Whether the queue was empty at one moment during the call. seq_cst, so it can close a
  /// store–load (Dekker) handshake with a producer's push. [any thread]
  [[nodiscard]] bool empty() const noexcept;

 private:
  // Index layout: position << kShift; in head_, bit 0 (kHasNext) says the head block already
  // has a successor, so a consumer need not look at the tail to know the queue is not empty.
  static constexpr std::size_t kShift = 1;
  static constexpr std::size_t kHasNext = 1;
  // Positions per block; the last one never holds a task: a tail or head there means "the next
  // block is being installed".
  static constexpr std::size_t kLap = 32;
  static constexpr std::size_t kBlockSlots = kLap - 1;

  struct slot;
  struct block;
  struct position {
    std::atomic<std::size_t> index{ 0 };
    std::atomic<block*> current{ nullptr };
  };

  block* new_block();
  void recycle(block* b) noexcept;
  void destroy_block(block* b, std::size_t start) noexcept;
  static block* wait_next(block* b) noexcept;
  static void wait_written(slot& s) noexcept;

  // Written by consumers.
  cache_padded<position> head_;
  // Written by producers.
  cache_padded<position> tail_;
  // One freed block kept for the next producer that needs one.
  cache_padded<std::atomic<block*>> spare_;
};

}  // namespace cyan::dispatch::detail
