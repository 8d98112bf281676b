#pragma once

#include <algorithm>
#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdlib>
#include <limits>
#include <memory>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "cyan/common/cache_line.h"
#include "cyan/common/noncopyable.h"
#include "cyan/lockfree/spsc_ring.h"

namespace cyan::lockfree {
namespace detail {

/// spsc_queue's default ProducerData: nothing.
struct no_producer_data {};

}  // namespace detail

/// An unbounded FIFO queue for one producer thread and one consumer thread: a chain of
/// spsc_ring blocks. The producer fills the newest block; when it is full it links a new one
/// (twice as big, up to the maximum block capacity) and never touches the old one again. The
/// consumer empties the oldest block, follows the link once the block is empty, and hands the
/// emptied block back for reuse (one spare), so a busy queue stops allocating.
///
/// Members are [producer] (one thread), [consumer] (one thread, which may be the producer) or
/// [any thread], as marked; as with spsc_ring, debug builds abort when a second thread uses
/// either side. A push is wait-free except when it needs a new block (an allocation, unless the
/// spare fits); a consume is wait-free. No CAS on either path except the spare's hand-back.
///
/// ProducerData: fields of the caller's own that the producer writes with each push (a post
/// counter, a "push in progress" flag), kept on the producer's cache line beside its block
/// pointer so that a push writes one line; see producer_data(). Their own atomics order them.
///
/// Elements: T must be nothrow destructible. Every element pushed is destroyed exactly once: by
/// its consume, or by ~spsc_queue() / free_blocks().
template <typename T, typename ProducerData = detail::no_producer_data>
class spsc_queue : noncopyable {
  static_assert(std::is_nothrow_destructible_v<T>,
                "spsc_queue elements must not throw on destruction");

 public:
  using value_type = T;
  using size_type = std::size_t;

  static constexpr size_type kDefaultFirstBlock = 256;
  static constexpr size_type kDefaultMaxBlock = 8192;

  /// An empty queue whose first block holds `first_block` elements and whose blocks grow, by
  /// doubling, up to `max_block` (both rounded up to powers of two by spsc_ring). Throws
  /// std::invalid_argument when `first_block` is 0 or above `max_block`, std::bad_alloc.
  explicit spsc_queue(size_type first_block = kDefaultFirstBlock,
                      size_type max_block = kDefaultMaxBlock)
      : rare_(check_max_block(first_block, max_block)) {
    block* first = new block(first_block);
    producer_.tail = first;
    consumer_.head = first;
  }

  /// Destroys the elements still queued, oldest first. Neither side may be in a call.
  ~spsc_queue() { free_blocks(); }

  // ---- producer side ---------------------------------------------------------------------------

  /// Appends an element constructed from `args`. Throws what the construction throws, or
  /// std::bad_alloc when a new block is needed and cannot be allocated; nothing is appended
  /// then. [producer]
  template <typename... Args>
  requires std::constructible_from<T, Args...>
  void emplace(Args&&... args) {
    if (!producer_.tail->ring.try_emplace(std::forward<Args>(args)...)) {
      emplace_in_new_block(std::forward<Args>(args)...);
    }
  }

  /// emplace() from a copy of `value`. [producer]
  void push(const T& value) requires std::copy_constructible<T> { emplace(value); }
  /// emplace() from `value`, moved. [producer]
  void push(T&& value) requires std::move_constructible<T> { emplace(std::move(value)); }

  /// The caller's fields on the producer's cache line (see ProducerData). [any thread]
  [[nodiscard]] ProducerData& producer_data() noexcept { return producer_.data; }
  [[nodiscard]] const ProducerData& producer_data() const noexcept { return producer_.data; }

  // ---- consumer side ---------------------------------------------------------------------------

  /// Calls `f(std::move(element))` for up to `max` elements, oldest first, destroying each one
  /// after its call; returns how many. Elements pushed during the call may or may not be
  /// included. If `f` throws, the element it was given and those before it are consumed, and the
  /// exception propagates. [consumer]
  template <typename F>
  requires std::invocable<F&, T&&> size_type consume_n(size_type max, F&& f)
  noexcept(std::is_nothrow_invocable_v<F&, T&&>) {
    size_type taken = 0;
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

  /// consume_n() without a limit: every element pushed before the call. [consumer]
  template <typename F>
  requires std::invocable<F&, T&&> size_type consume_all(F&& f)
  noexcept(std::is_nothrow_invocable_v<F&, T&&>) {
    return consume_n(std::numeric_limits<size_type>::max(), f);
  }

  /// Move-assigns the oldest element to `out` and removes it; false (and `out` untouched) when
  /// the queue is empty. If the assignment throws, the element is destroyed all the same and the
  /// exception propagates. [consumer]
  [[nodiscard]] bool try_pop(T& out) noexcept(
      std::is_nothrow_move_assignable_v<T>) requires std::is_move_assignable_v<T> {
    const auto assign = [&out](T&& element) noexcept(std::is_nothrow_move_assignable_v<T>) {
      out = std::move(element);
    };
    return consume_n(1, assign) != 0;
  }

  /// Whether the queue holds no element (a snapshot: the producer may push meanwhile).
  /// [consumer]
  [[nodiscard]] bool empty() const noexcept {
    const block* head = consumer_.head;
    // acquire: pairs with the release store in link().
    return head->ring.empty() && head->next.load(std::memory_order_acquire) == nullptr;
  }

  /// Destroys the elements still queued and frees every block early, e.g. when the consumer is
  /// gone while the queue lives on; after it, the queue may only be destroyed. [consumer, and
  /// the producer will never push again]
  void free_blocks() noexcept {
    block* b = consumer_.head;
    while (b != nullptr) {
      block* next = b->next.load(std::memory_order_relaxed);  // relaxed: both sides are done
      delete b;
      b = next;
    }
    delete rare_.spare.exchange(nullptr, std::memory_order_relaxed);  // relaxed: as above
    consumer_.head = nullptr;
    producer_.tail = nullptr;
  }

 private:
  struct block : noncopyable {
    explicit block(size_type slots) : ring(slots) {}
    spsc_ring<T> ring;
    // Written once by the producer when it moves on to the next block; read by the consumer.
    std::atomic<block*> next{ nullptr };
  };

  static size_type check_max_block(size_type first_block, size_type max_block) {
    if (first_block == 0 || first_block > max_block) {
      throw std::invalid_argument("cyan::lockfree::spsc_queue: block capacities out of order");
    }
    return max_block;
  }

  template <typename... Args>
  [[gnu::noinline]] void emplace_in_new_block(Args&&... args) {
    const size_type wanted = std::min(producer_.tail->ring.capacity() * 2, rare_.max_block);
    block* fresh = take_spare();
    if (fresh != nullptr && fresh->ring.capacity() < wanted) {
      delete fresh;  // grow instead of reusing a small block
      fresh = nullptr;
    }
    if (fresh == nullptr) {
      fresh = new block(wanted);
    }
    std::unique_ptr<block> owner(fresh);
    if (!fresh->ring.try_emplace(std::forward<Args>(args)...)) {
      std::abort();  // an empty ring always has room
    }
    link(owner.release());
  }

  // [producer] A block the consumer emptied and handed back, or nullptr.
  block* take_spare() noexcept {
    // acquire: pairs with the release CAS in recycle(); the consumer's reads of the block and
    // its reset of `next` happen before our reuse.
    return rare_.spare.exchange(nullptr, std::memory_order_acquire);
  }

  // [producer] Moves on to `fresh`, whose first element is in place.
  void link(block* fresh) noexcept {
    // release: pairs with the acquire load in consume_n() and empty().
    producer_.tail->next.store(fresh, std::memory_order_release);
    producer_.tail = fresh;
  }

  // [consumer] Keeps one emptied block for the producer to reuse; frees any other.
  void recycle(block* emptied) noexcept {
    emptied->next.store(nullptr, std::memory_order_relaxed);  // published by the CAS below
    block* expected = nullptr;
    // release: pairs with the acquire exchange in take_spare().
    if (!rare_.spare.compare_exchange_strong(expected, emptied, std::memory_order_release,
                                             std::memory_order_relaxed)) {
      delete emptied;
    }
  }

  // The producer's line: written on every push.
  struct alignas(cache_line_size) producer_side {
    block* tail = nullptr;
    [[no_unique_address]] ProducerData data;
  };

  // The consumer's line.
  struct alignas(cache_line_size) consumer_side {
    block* head = nullptr;
  };

  // Rarely written: the spare block (handed back by the consumer, taken by the producer), and
  // the growth limit, read only when a block fills up.
  struct alignas(cache_line_size) rare_side {
    explicit rare_side(size_type max) : max_block(max) {}
    std::atomic<block*> spare{ nullptr };
    const size_type max_block;
  };

  producer_side producer_;
  consumer_side consumer_;
  rare_side rare_;
};

}  // namespace cyan::lockfree
