#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "cyan/common/cache_line.h"
#include "cyan/common/noncopyable.h"
#include "cyan/common/unique_function.h"

namespace cyan::dispatch::detail {

/// A thread_pool's shared queue: an unbounded multi-producer multi-consumer FIFO of tasks,
/// without locks but not strictly lock-free: a consumer that claimed the slot of a producer
/// preempted between its claim and its write waits for that producer (below); every other
/// thread goes on. The design is crossbeam's SegQueue: a linked list of blocks of kBlockSlots
/// slots; a producer claims a slot with one CAS on the tail index, writes the task in place and
/// flags the slot written; a consumer claims a slot with one CAS on the head index, waits for the
/// flag (a producer between its claim and its write: it was preempted in a window of a few
/// instructions; only that consumer waits, the others claim the slots after it), moves the task
/// out and flags the slot read. A block is freed by whoever reads its last slot, or, when readers
/// of earlier slots are still busy, by the last of them (the DESTROY hand-off), so no hazard
/// pointers are needed: a block is only reached through head_/tail_ after a successful claim.
///
/// Why not lockfree::queue: that Michael–Scott queue pays hazard pointers and a node per
/// element; a pool moves millions of tiny tasks, and here a task costs one uncontended CAS to
/// post, with one block allocation per kBlockSlots tasks (none in steady state: freed blocks
/// are kept as spares, behind the queue's only lock, taken once per kBlockSlots tasks).
///
/// Every member except construction and destruction may be called from any thread at once.
class task_queue : noncopyable {
 public:
  using task = unique_function<void()>;

  /// An empty queue. Throws std::bad_alloc.
  task_queue();
  /// Destroys the tasks still queued, unrun. No other thread may use the queue any more.
  ~task_queue();

  /// Which pushes try_push() refuses.
  enum class push_policy {
    unless_sealed,  ///< refused once seal() was called (the pool's user posts)
    unless_closed,  ///< refused only once close_if_empty() succeeded (work already promised)
  };

  /// Appends `value` and returns true, or returns false, leaving `value` untouched, when the
  /// queue refuses it (see push_policy). The check is part of the claim, so a push either
  /// precedes seal()/close_if_empty() or is refused. Throws std::bad_alloc (only when a new block
  /// is needed and cannot be allocated); the queue is then unchanged. [any thread]
  [[nodiscard]] bool try_push(task&& value, push_policy policy = push_policy::unless_sealed);

  /// Refuses unless_sealed pushes from now on. [any thread]
  void seal() noexcept;
  [[nodiscard]] bool sealed() const noexcept;

  /// Refuses every push from now on, if the queue is empty; returns whether it is closed.
  /// [any thread]
  [[nodiscard]] bool close_if_empty() noexcept;

  /// One consumer's private lower bound of the tail: while it knows of tasks beyond the head, a
  /// pop need not read the tail, the cache line every push writes (a consumer that lags behind
  /// a producer then costs it one cache miss per batch, not per task). Starts at 0.
  struct tail_hint {
    std::size_t tail = 0;
  };

  /// Moves the first task into `out` and returns true, or returns false when the queue is
  /// empty. With `more`, also says whether tasks were left behind it: true whenever one pushed
  /// before the call's end was left (it may also be true when none is, e.g. at a block's end).
  /// `hint` (see tail_hint) belongs to the calling consumer. [any thread]
  [[nodiscard]] bool try_pop(task& out, bool* more = nullptr, tail_hint* hint = nullptr) noexcept {
    return try_pop_many(&out, 1, 1, more, hint) != 0;
  }

  /// Like try_pop(), but claims up to `max` consecutive tasks with one claim when many are
  /// queued: at most one in `share` of those it sees (at least one), and never past the head
  /// block's end, so a consumer takes a batch only from a backlog that leaves work for the
  /// others. Moves them, in order, into out[0..n) and returns n (0: empty; `more` is then left
  /// as it was). [any thread]
  [[nodiscard]] std::size_t try_pop_many(task* out, std::size_t max, std::size_t share,
                                         bool* more = nullptr, tail_hint* hint = nullptr) noexcept;

  /// Whether the queue was empty at one moment during the call. seq_cst, so it can close a
  /// store–load (Dekker) handshake with a producer's push. [any thread]
  [[nodiscard]] bool empty() const noexcept;

 private:
  // Index layout: position << kShift. In head_, bit 0 (kHasNext) says the head block already
  // has a successor, so a consumer need not look at the tail to know the queue is not empty.
  // In tail_, bits 0 and 1 are the admission flags, which every claim compares and keeps.
  static constexpr std::size_t kShift = 2;
  static constexpr std::size_t kHasNext = 1;
  static constexpr std::size_t kSealed = 1;
  static constexpr std::size_t kClosed = 2;
  // Positions per block; the last one never holds a task: a tail or head there means "the next
  // block is being installed".
  // 255 tasks (32 KiB: a slot is two cache lines) per block: one allocation per 255 posts at
  // most, which matters because blocks are allocated by producers and freed by consumers (a
  // cross-thread free, which glibc's malloc serialises on its arena lock for blocks this size).
  static constexpr std::size_t kLap = 256;
  static constexpr std::size_t kBlockSlots = kLap - 1;

  struct slot;
  struct block;
  struct position {
    std::atomic<std::size_t> index{ 0 };
    std::atomic<block*> current{ nullptr };
  };

  void take(block* current, std::size_t offset, std::size_t new_head, task& out) noexcept;
  block* new_block();
  void recycle(block* b) noexcept;
  void destroy_block(block* b, std::size_t start) noexcept;
  static block* wait_next(block* b) noexcept;
  static void wait_written(slot& s) noexcept;

  // Written by consumers.
  cache_padded<position> head_;
  // Written by producers.
  cache_padded<position> tail_;
  // Freed blocks kept for producers that need one, up to kSpareBlocks (memory held when idle:
  // at most that many blocks beyond the current one). A burst of posts that runs ahead of the
  // workers needs a block per kBlockSlots tasks of backlog; handing them back to malloc lets it
  // return the memory to the system, and the next burst faults every page in again, which
  // costs more than running the tasks (docs/bench/notes.md).
  static constexpr std::size_t kSpareBlocks = 1024;
  struct alignas(cache_line_size) spare_blocks {
    std::mutex mutex;
    block* first = nullptr;  // linked through block::next; guarded by mutex
    std::size_t count = 0;   // guarded by mutex
  } spares_;
};

}  // namespace cyan::dispatch::detail
