#pragma once

#include <atomic>
#include <cstddef>
#include <optional>
#include <type_traits>
#include <utility>

#include "cyan/common/cache_line.h"
#include "cyan/common/noncopyable.h"
#include "cyan/lockfree/detail/hazard_record.h"
#include "cyan/lockfree/detail/node_pool.h"
#include "cyan/lockfree/detail/value_node.h"

namespace cyan::lockfree {

/// An unbounded multi-producer multi-consumer FIFO queue (Michael & Scott, 1996): linearizable,
/// lock-free, every member except construction and destruction callable from any thread at once.
///
/// Memory: nodes are reclaimed with hazard pointers (detail/hazard_record.h), so no node is freed
/// while another thread may read it and there is no ABA. Each thread carves new nodes in order out
/// of slabs (63 nodes in 4 KiB for nodes up to 64 bytes); a slab whose nodes have all been
/// reclaimed is reused through a small process-wide pool (8 slabs per node size), or given back to
/// the system when the pool is full. Once the queue is drained and the threads that used it are
/// idle, its traffic therefore keeps at most detail::retention_bound() nodes' memory besides the
/// slab holding its dummy: per thread, the slab it is carving and the slabs of its fewer than
/// detail::scan_threshold() (64 + 8 per thread alive) retired nodes, plus the pool. That worst
/// case assumes every retired node in a different slab; a drain by one thread leaves about ten
/// slabs (630 nodes). The reserving constructor keeps more, until the queue is destroyed.
///
/// Elements: any move-constructible T, including move-only and non-trivial ones. A value is
/// constructed in its node by push/emplace and is moved out and destroyed only by the consumer
/// that unlinked it. Destroying the queue destroys each element still in it exactly once.
template <typename T>
class queue : noncopyable {
  using node = detail::queue_node<T>;
  using pool = detail::node_pool<node>;

 public:
  using value_type = T;

  static_assert(std::is_nothrow_destructible_v<T>);
  static_assert(std::is_move_constructible_v<T>);

  /// True on every platform with pointer-sized lock-free atomics (x86-64 and AArch64 among them):
  /// the queue needs only single-word loads, exchanges and CASes, never libatomic. Progress is
  /// lock-free; the only blocking calls are to the system allocator, when a push needs a new slab
  /// and the pool has none, and in a thread's first call, which claims its hazard record.
  static constexpr bool is_always_lock_free = std::atomic<node*>::is_always_lock_free;

  /// Same as is_always_lock_free. [any thread]
  static constexpr bool is_lock_free() noexcept { return is_always_lock_free; }

  /// An empty queue. Throws std::bad_alloc.
  queue() { initialize(); }

  /// An empty queue that also keeps free memory for `reserved_nodes` nodes in the process-wide
  /// node pool for as long as it lives, allocated now: pushes take it instead of calling the
  /// system allocator, and a drained queue retains that much more. The pool is shared by every
  /// container whose nodes have the same size. Like boost::lockfree::queue's capacity argument.
  /// Throws std::bad_alloc.
  explicit queue(std::size_t reserved_nodes)
      : reserved_slabs_(detail::reserve_nodes(pool::kBlockClass, reserved_nodes)) {
    try {
      initialize();
    } catch (...) {
      detail::release_reservation(pool::kBlockClass, reserved_slabs_);
      throw;
    }
  }

  /// Destroys the elements still queued, each exactly once. No other thread may be using the
  /// queue, and every thread that did must have finished (e.g. joined) before.
  ~queue() {
    detail::hazard_record& record = detail::local_record();
    // relaxed: the caller guarantees every other thread's operations happen before this.
    node* current = head_.value.load(std::memory_order_relaxed);
    node* next = current->next_.load(std::memory_order_relaxed);
    pool::destroy(record, current);  // the dummy holds no value
    for (current = next; current != nullptr; current = next) {
      next = current->next_.load(std::memory_order_relaxed);
      current->value_.destroy();
      pool::destroy(record, current);
    }
    detail::release_reservation(pool::kBlockClass, reserved_slabs_);
  }

  /// Appends a copy of `value`. Throws what T's copy constructor throws, or std::bad_alloc; the
  /// queue is then unchanged. [any thread]
  void push(const T& value) requires std::is_copy_constructible_v<T> { emplace(value); }

  /// Appends `value`, moved. Throws what T's move constructor throws, or std::bad_alloc; the
  /// queue is then unchanged. [any thread]
  void push(T&& value) { emplace(std::move(value)); }

  /// Appends a T constructed from `args`. Throws what that constructor throws, or
  /// std::bad_alloc; the queue is then unchanged. [any thread]
  template <typename... Args>
  void emplace(Args&&... args) {
    detail::hazard_record& record = detail::local_record();
    link_last(record, pool::create_with_value(record, std::forward<Args>(args)...));
  }

  /// Moves the first element into `out` and returns true, or returns false when the queue is
  /// empty. If T's move assignment throws, the element is destroyed and no longer queued, and
  /// the exception propagates. [any thread]
  [[nodiscard]] bool try_pop(T& out) noexcept(std::is_nothrow_move_assignable_v<T>) {
    return pop_first([&out](T& value) { out = std::move(value); });
  }

  /// The first element, moved out, or nullopt when the queue is empty. If T's move constructor
  /// throws, the element is destroyed and no longer queued, and the exception propagates.
  /// [any thread]
  [[nodiscard]] std::optional<T> try_pop() noexcept(std::is_nothrow_move_constructible_v<T>) {
    std::optional<T> result;
    pop_first([&result](T& value) { result.emplace(std::move(value)); });
    return result;
  }

  /// Whether the queue was empty at one moment during the call: a snapshot that other threads
  /// may already have changed by the time it returns. [any thread]
  [[nodiscard]] bool empty() const noexcept {
    detail::hazard_guard head_guard(detail::local_record());
    const node* first = head_guard.protect(head_.value);
    return first->next_.load() == nullptr;
  }

 private:
  void initialize() {
    node* dummy = pool::create(detail::local_record());
    // relaxed: the queue is published to other threads by whatever hands them its address.
    head_.value.store(dummy, std::memory_order_relaxed);
    tail_.value.store(dummy, std::memory_order_relaxed);
  }

  void link_last(detail::hazard_record& record, node* fresh) noexcept {
    detail::hazard_guard tail_guard(record);
    for (;;) {
      node* last = tail_guard.protect(tail_.value);
      node* next = last->next_.load();
      if (next != nullptr) {
        tail_.value.compare_exchange_strong(last, next);  // help a push that has not swung tail
        continue;
      }
      // seq_cst (and so release): publishes the value constructed in `fresh` to the consumer
      // that loads this link in unlink_first().
      if (last->next_.compare_exchange_strong(next, fresh)) {
        tail_.value.compare_exchange_strong(last, fresh);
        return;
      }
    }
  }

  // Unlinks the first element and passes it to `take`; false when the queue is empty.
  template <typename Take>
  bool pop_first(Take&& take) {
    detail::hazard_record& record = detail::local_record();
    detail::retire_on_exit<node> old_dummy(record);
    detail::hazard_guard head_guard(record);
    detail::hazard_guard first_guard(record);
    node* first = unlink_first(head_guard, first_guard, old_dummy.unlinked_);
    if (first == nullptr) {
      return false;
    }
    // `first` is the new dummy: other consumers read only its link, never its value, and
    // first_guard keeps it from being reclaimed while the value is moved out.
    detail::destroy_on_exit<T> destroy(first->value_);
    take(first->value_.get());
    return true;
  }

  // Swings head from the dummy to the first element, whose node it returns (published in
  // first_guard) and whose predecessor it stores in `unlinked`; null when empty.
  node* unlink_first(detail::hazard_guard& head_guard, detail::hazard_guard& first_guard,
                     node*& unlinked) noexcept {
    for (;;) {
      node* dummy = head_guard.protect(head_.value);
      node* first = dummy->next_.load();
      if (first == nullptr) {
        return nullptr;  // a linked-past node always has a successor: dummy was last
      }
      first_guard.publish_before_cas(first);
      if (head_.value.load() != dummy) {
        continue;  // dummy was unlinked meanwhile, and first may be gone too
      }
      node* last = tail_.value.load();
      if (last == dummy) {
        // A push linked `first` but has not swung tail yet; head must never pass tail, or the
        // dummy could be reclaimed while tail still points at it.
        tail_.value.compare_exchange_strong(last, first);
        continue;
      }
      // `first` is read only if this CAS succeeds, which proves it was still linked.
      if (head_.value.compare_exchange_strong(dummy, first)) {
        unlinked = dummy;
        return first;
      }
    }
  }

  // Written only by consumers.
  cache_padded<std::atomic<node*>> head_;
  // Written by producers, and by consumers helping a lagging tail.
  cache_padded<std::atomic<node*>> tail_;
  const std::size_t reserved_slabs_ = 0;
};

}  // namespace cyan::lockfree
