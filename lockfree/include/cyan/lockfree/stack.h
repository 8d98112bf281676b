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

/// An unbounded multi-producer multi-consumer LIFO stack (Treiber, 1986): linearizable,
/// lock-free, every member except construction and destruction callable from any thread at once.
///
/// Memory: popped nodes are reclaimed with hazard pointers and their memory recycled exactly as
/// in cyan::lockfree::queue: no use after free, no ABA, and a drained stack's traffic keeps at
/// most detail::retention_bound() nodes' memory (plus any reservation).
///
/// Elements: any move-constructible T, including move-only and non-trivial ones, constructed in
/// its node by push/emplace and moved out and destroyed only by the consumer that unlinked it.
/// Destroying the stack destroys each element still in it exactly once.
template <typename T>
class stack : noncopyable {
  using node = detail::stack_node<T>;
  using pool = detail::node_pool<node>;

 public:
  using value_type = T;

  static_assert(std::is_nothrow_destructible_v<T>);
  static_assert(std::is_move_constructible_v<T>);

  /// True wherever pointer-sized atomics are lock-free (x86-64, AArch64): only single-word
  /// loads, exchanges and CASes are used. As for the queue, the system allocator is called only
  /// when a push needs a new slab and the pool has none.
  static constexpr bool is_always_lock_free = std::atomic<node*>::is_always_lock_free;

  /// Same as is_always_lock_free. [any thread]
  static constexpr bool is_lock_free() noexcept { return is_always_lock_free; }

  stack() noexcept = default;

  /// An empty stack that also keeps free memory for `reserved_nodes` nodes in the process-wide
  /// node pool for as long as it lives, allocated now (see queue's constructor of the same
  /// form). Throws std::bad_alloc.
  explicit stack(std::size_t reserved_nodes)
      : reserved_slabs_(detail::reserve_nodes(pool::kBlockClass, reserved_nodes)) {}

  /// Destroys the elements still stacked, each exactly once. No other thread may be using the
  /// stack, and every thread that did must have finished (e.g. joined) before.
  ~stack() {
    // relaxed: the caller guarantees every other thread's operations happen before this.
    node* current = top_.value.load(std::memory_order_relaxed);
    if (current != nullptr) {
      detail::hazard_record& record = detail::local_record();
      while (current != nullptr) {
        node* next = current->next_;
        current->value_.destroy();
        pool::destroy(record, current);
        current = next;
      }
    }
    detail::release_reservation(pool::kBlockClass, reserved_slabs_);
  }

  /// Pushes a copy of `value`. Throws what T's copy constructor throws, or std::bad_alloc; the
  /// stack is then unchanged. [any thread]
  void push(const T& value) requires std::is_copy_constructible_v<T> { emplace(value); }

  /// Pushes `value`, moved. Throws what T's move constructor throws, or std::bad_alloc; the
  /// stack is then unchanged. [any thread]
  void push(T&& value) { emplace(std::move(value)); }

  /// Pushes a T constructed from `args`. Throws what that constructor throws, or
  /// std::bad_alloc; the stack is then unchanged. [any thread]
  template <typename... Args>
  void emplace(Args&&... args) {
    detail::hazard_record& record = detail::local_record();
    node* fresh = pool::create_with_value(record, std::forward<Args>(args)...);
    // relaxed: only a first guess for the CAS, which never dereferences it.
    node* top = top_.value.load(std::memory_order_relaxed);
    do {
      fresh->next_ = top;
      // release: publishes `fresh`'s link and value to the acquire in pop_top()'s protect.
      // relaxed on failure: the new guess is again never dereferenced.
    } while (!top_.value.compare_exchange_weak(top, fresh, std::memory_order_release,
                                               std::memory_order_relaxed));
  }

  /// Moves the top element into `out` and returns true, or returns false when the stack is
  /// empty. If T's move assignment throws, the element is destroyed and no longer stacked, and
  /// the exception propagates. [any thread]
  [[nodiscard]] bool try_pop(T& out) noexcept(std::is_nothrow_move_assignable_v<T>) {
    return pop_top([&out](T& value) { out = std::move(value); });
  }

  /// The top element, moved out, or nullopt when the stack is empty. If T's move constructor
  /// throws, the element is destroyed and no longer stacked, and the exception propagates.
  /// [any thread]
  [[nodiscard]] std::optional<T> try_pop() noexcept(std::is_nothrow_move_constructible_v<T>) {
    std::optional<T> result;
    pop_top([&result](T& value) { result.emplace(std::move(value)); });
    return result;
  }

  /// Whether the stack was empty at the moment of the call: a snapshot that other threads may
  /// already have changed by the time it returns. [any thread]
  [[nodiscard]] bool empty() const noexcept { return top_.value.load() == nullptr; }

 private:
  // Unlinks the top node and passes its value to `take`; false when the stack is empty.
  template <typename Take>
  bool pop_top(Take&& take) {
    detail::hazard_record& record = detail::local_record();
    detail::retire_on_exit<node> popped(record);
    detail::hazard_guard top_guard(record);
    node* top = unlink_top(top_guard);
    if (top == nullptr) {
      return false;
    }
    popped.unlinked_ = top;
    // Only this thread reaches the value now, and it retires the node only afterwards.
    detail::destroy_on_exit<T> destroy(top->value_);
    take(top->value_.get());
    return true;
  }

  // Swings top to its successor and returns the old top (published in top_guard); null when
  // the stack is empty.
  node* unlink_top(detail::hazard_guard& top_guard) noexcept {
    for (;;) {
      node* top = top_guard.protect(top_.value);
      if (top == nullptr) {
        return nullptr;
      }
      // top's block cannot be reused while guarded, so finding its address still on top means
      // it was never popped in between and its link is the one it was pushed with: no ABA.
      if (top_.value.compare_exchange_strong(top, top->next_)) {
        return top;
      }
    }
  }

  // Written by every push and pop.
  cache_padded<std::atomic<node*>> top_;
  const std::size_t reserved_slabs_ = 0;
};

}  // namespace cyan::lockfree
