#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <type_traits>

#include "cyan/common/cache_line.h"
#include "cyan/common/noncopyable.h"

namespace cyan::lockfree {

/// An unbounded multi-producer multi-consumer FIFO queue made of fixed-size blocks (crossbeam's
/// SegQueue design), with admission policies for shutting it down: cyan's thread_pool queue.
///
/// Every member except construction and destruction may be called from any thread at once.
/// Elements of one producer leave in the order that producer pushed them.
///
/// Progress: without locks on the element path, but not strictly lock-free. A producer claims a
/// slot with one CAS on the tail index and then writes its element in place; a consumer claims a
/// slot with one CAS on the head index and then waits for that write, so a consumer that claimed
/// the slot of a producer preempted between its claim and its write waits for that producer
/// (only that consumer: the others claim the slots after it). Whoever reads a block's last slot
/// frees the block, or hands that on to the last reader still busy in it, so no hazard pointers
/// are needed. Freed blocks are kept as spares (up to 1024, behind the queue's only lock, taken
/// once per block), so a queue in steady state allocates nothing.
///
/// Compared with lockfree::queue (Michael–Scott): no node and no hazard pointer per element, one
/// uncontended CAS per push; memory is held per block, not per element, and the lock on spare
/// blocks is taken once per block.
///
/// Admission: try_push() refuses elements according to its push_policy once seal() or
/// close_if_empty() was called, as one step with its claim: a push either comes before the seal
/// or close in the queue's order, or is refused and leaves its element untouched. A pool seals
/// its queue on stop() (user posts are refused, work it already promised is still accepted) and
/// closes it once it has drained.
///
/// Elements: T must be nothrow move-constructible, nothrow move-assignable and nothrow
/// destructible (a claimed slot cannot be given back); every element pushed is destroyed exactly
/// once, after it was moved out or by ~segmented_queue().
template <typename T>
class segmented_queue : noncopyable {
  static_assert(std::is_nothrow_move_constructible_v<T> && std::is_nothrow_move_assignable_v<T> &&
                    std::is_nothrow_destructible_v<T>,
                "segmented_queue elements must move and be destroyed without throwing");

 public:
  using value_type = T;

  /// An empty queue. Throws std::bad_alloc.
  segmented_queue();
  /// Destroys the elements still queued, each exactly once. No other thread may use the queue
  /// any more, and every thread that did must have finished with it (e.g. joined).
  ~segmented_queue();

  /// Which pushes try_push() refuses.
  enum class push_policy {
    unless_sealed,  ///< refused once seal() was called (e.g. a pool's user posts)
    unless_closed,  ///< refused only once close_if_empty() succeeded (work already promised)
  };

  /// Appends `value` (moving from it) and returns true, or returns false, leaving `value`
  /// untouched, when the queue refuses it (see push_policy). Throws std::bad_alloc only when a
  /// new block is needed and cannot be allocated; the queue and `value` are then unchanged.
  /// [any thread]
  [[nodiscard]] bool try_push(T&& value, push_policy policy = push_policy::unless_sealed);

  /// Refuses unless_sealed pushes from now on. A seq_cst RMW. [any thread]
  void seal() noexcept;
  /// Whether seal() was called. [any thread]
  [[nodiscard]] bool sealed() const noexcept;

  /// Refuses every push from now on, if the queue is empty; returns whether it is closed (also
  /// true when it already was). [any thread]
  [[nodiscard]] bool close_if_empty() noexcept;

  /// One consumer's private lower bound of the tail: while it knows of elements beyond the head,
  /// a pop need not read the tail, the cache line every push writes (a consumer that lags behind
  /// a producer then costs it one cache miss per batch, not per element). Starts at 0; one per
  /// consumer thread, never shared.
  struct tail_hint {
    std::size_t tail = 0;
  };

  /// Moves the first element into `out` and returns true, or returns false when the queue is
  /// empty. With `more`, also says whether elements were left behind it: true whenever one pushed
  /// before the call's end was left (it may also be true when none is, e.g. at a block's end).
  /// `hint` (see tail_hint) belongs to the calling consumer. [any thread]
  [[nodiscard]] bool try_pop(T& out, bool* more = nullptr, tail_hint* hint = nullptr) noexcept {
    return try_pop_many(&out, 1, 1, more, hint) != 0;
  }

  /// Like try_pop(), but claims up to `max` consecutive elements with one claim when many are
  /// queued: at most one in `share` of those it sees (at least one), and never past the head
  /// block's end, so a consumer takes a batch only from a backlog that leaves work for the
  /// others. Move-assigns them, in order, to out[0..n) and returns n (0: empty; `more` is then
  /// left as it was). `max` and `share` must be at least 1. [any thread]
  [[nodiscard]] std::size_t try_pop_many(T* out, std::size_t max, std::size_t share,
                                         bool* more = nullptr, tail_hint* hint = nullptr) noexcept;

  /// Whether the queue was empty at one moment during the call. seq_cst, so it can close a
  /// store–load (Dekker) handshake with a producer's push: a push whose claim precedes the
  /// call in the seq_cst order is seen. [any thread]
  [[nodiscard]] bool empty() const noexcept;

  /// Elements per block: one allocation (or spare block taken) per this many pushes at most.
  static constexpr std::size_t kBlockSlots = 255;

 private:
  // Index layout: position << kShift. In head_, bit 0 (kHasNext) says the head block already
  // has a successor, so a consumer need not look at the tail to know the queue is not empty.
  // In tail_, bits 0 and 1 are the admission flags, which every claim compares and keeps.
  static constexpr std::size_t kShift = 2;
  static constexpr std::size_t kHasNext = 1;
  static constexpr std::size_t kSealed = 1;
  static constexpr std::size_t kClosed = 2;
  // Positions per block; the last one never holds an element: a tail or head there means "the
  // next block is being installed". A block is kBlockSlots slots of at least one cache line each
  // (so 16 KiB or more): one allocation per 255 pushes at most, which matters because blocks are
  // allocated by producers and freed by consumers (a cross-thread free, which glibc's malloc
  // serialises on its arena lock for blocks this size).
  static constexpr std::size_t kLap = kBlockSlots + 1;

  // Slot states.
  static constexpr std::uint32_t kWritten = 1;  // the producer stored the element
  static constexpr std::uint32_t kRead = 2;     // the consumer moved the element out
  static constexpr std::uint32_t kDestroy = 4;  // the block's destroyer left this slot's reader

  struct slot;
  struct block;
  struct position {
    std::atomic<std::size_t> index{ 0 };
    std::atomic<block*> current{ nullptr };
  };

  void take(block* current, std::size_t offset, std::size_t new_head, T& out) noexcept;
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
  // at most that many blocks beyond the current one). A burst of pushes that runs ahead of the
  // consumers needs a block per kBlockSlots elements of backlog; handing them back to malloc
  // lets it return the memory to the system, and the next burst faults every page in again,
  // which costs more than the work itself (docs/bench/notes.md).
  static constexpr std::size_t kSpareBlocks = 1024;
  struct alignas(cache_line_size) spare_blocks {
    std::mutex mutex;
    block* first = nullptr;  // linked through block::next; guarded by mutex
    std::size_t count = 0;   // guarded by mutex
  } spares_;
};

}  // namespace cyan::lockfree

#include "cyan/lockfree/detail/segmented_queue_impl.h"  // IWYU pragma: export
