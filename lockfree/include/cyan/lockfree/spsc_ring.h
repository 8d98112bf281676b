#pragma once

#include "cyan/common/cache_line.h"
#include "cyan/common/noncopyable.h"
#include "cyan/lockfree/detail/spsc_ring_detail.h"
#include "cyan/lockfree/detail/thread_owner.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <concepts>
#include <cstddef>
#include <iterator>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>

namespace cyan::lockfree {

/// A bounded, wait-free ring buffer for one producer thread and one consumer thread.
///
/// Members marked [producer] may be called only by the producer thread, [consumer] only by the
/// consumer thread, [any thread] by anyone. The first thread that calls a [producer] member is the
/// producer and the first that calls a [consumer] member is the consumer (one thread may be both);
/// debug builds (NDEBUG not defined) abort with a message when a second thread calls either side.
/// Construction and destruction must not overlap any other call.
///
/// Every call finishes in a bounded number of steps: no locks, no compare-and-swap, no allocation
/// after construction. Each side publishes its index with one release store per call (batch calls
/// included) and works from a cached copy of the other side's index, re-read when that copy says
/// the ring is full (producer) or empty (consumer), and by the producer every 16 single pushes.
/// Elements live in raw slots, so T needs no default constructor; every element pushed is destroyed
/// exactly once, by a pop or by ~spsc_ring().
template <typename T>
class spsc_ring : noncopyable {
  static_assert(std::is_object_v<T> && !std::is_const_v<T> && !std::is_volatile_v<T>,
                "spsc_ring holds non-const, non-volatile object types");
  static_assert(std::is_nothrow_destructible_v<T>,
                "spsc_ring elements must not throw on destruction");

 public:
  using value_type = T;
  using size_type = std::size_t;

  /// Creates an empty ring that holds `capacity` elements, rounded up to a power of two.
  /// Throws std::invalid_argument when `capacity` is 0, std::length_error when the rounded
  /// capacity cannot be addressed, std::bad_alloc when the slots cannot be allocated.
  explicit spsc_ring(size_type capacity)
      : mask_(detail::ring_capacity(capacity, sizeof(slot)) - 1), slots_(allocate(mask_ + 1)) {}

  /// Destroys the elements still in the ring, oldest first, each exactly once.
  ~spsc_ring() {
    if constexpr (!std::is_trivially_destructible_v<T>) {
      // relaxed: both sides have stopped; the caller synchronised with them (e.g. by joining).
      const size_type tail = producer_.tail.load(std::memory_order_relaxed);
      for (size_type i = consumer_.head.load(std::memory_order_relaxed); i != tail; ++i) {
        std::destroy_at(element(i));
      }
    }
    ::operator delete (slots_, std::align_val_t{ kSlotAlignment });
  }

  /// Copies `value` into the ring; false (and no copy) when the ring is full. [producer]
  [[nodiscard]] bool try_push(const T& value) noexcept(
      std::is_nothrow_copy_constructible_v<T>) requires std::copy_constructible<T> {
    return try_emplace(value);
  }

  /// Moves `value` into the ring; false, with `value` untouched, when the ring is full. [producer]
  [[nodiscard]] bool try_push(T&& value) noexcept(
      std::is_nothrow_move_constructible_v<T>) requires std::move_constructible<T> {
    return try_emplace(std::move(value));
  }

  /// Constructs an element from `args` in the ring; false (nothing constructed) when the ring is
  /// full. If the constructor throws, the ring is unchanged and the exception propagates.
  /// [producer]
  template <typename... Args>
  requires std::constructible_from<T, Args...>
  [[nodiscard]] bool try_emplace(Args&&... args) noexcept(
      std::is_nothrow_constructible_v<T, Args...>) {
    producer_.owner.check("spsc_ring", "producer");
    // relaxed: only this thread writes tail.
    const size_type tail = producer_.tail.load(std::memory_order_relaxed);
    if (free_slots(tail, 1) == 0) {
      return false;
    }
    ::new (storage(tail)) T(std::forward<Args>(args)...);
    publish_tail(tail + 1);
    refresh_head_ahead(tail + 1);
    return true;
  }

  /// Pushes up to `count` elements constructed from `*first`, `*++first`, ... and returns how
  /// many it pushed (fewer when the ring fills up); they become visible together, with one index
  /// store. If constructing one throws, those before it are pushed and the exception propagates.
  /// Pass std::make_move_iterator(first) to move the elements in. [producer]
  template <std::input_iterator It>
  requires std::constructible_from<T, std::iter_reference_t<It>>
  [[nodiscard]] size_type try_push_n(It first,
                                     size_type count) noexcept(detail::nothrow_push_from<T, It>) {
    producer_.owner.check("spsc_ring", "producer");
    // relaxed: only this thread writes tail.
    const size_type tail = producer_.tail.load(std::memory_order_relaxed);
    const size_type end = tail + std::min(count, free_slots(tail, count));
    if (end == tail) {
      return 0;
    }
    size_type next = tail;
    const detail::publish_index_on_exit publish{ producer_.tail, next };  // also when a copy throws
    span().for_each_run(tail, end - tail, [&](slot* run, slot* run_end) {
      for (; run != run_end; ++run, ++first, ++next) {
        ::new (run->storage()) T(*first);
      }
    });
    return end - tail;
  }

  /// The oldest element, or nullptr when the ring is empty. The element stays in the ring, and
  /// the pointer valid, until pop(). [consumer]
  [[nodiscard]] T* front() noexcept {
    consumer_.owner.check("spsc_ring", "consumer");
    return peek(consumer_.head.load(std::memory_order_relaxed));  // relaxed: only we write head
  }

  /// Destroys the oldest element and frees its slot. Precondition: front() returned an element
  /// that has not been popped yet. [consumer]
  void pop() noexcept {
    consumer_.owner.check("spsc_ring", "consumer");
    drop(consumer_.head.load(std::memory_order_relaxed));  // relaxed: only we write head
  }

  /// Move-assigns the oldest element to `out` and removes it; false when the ring is empty.
  /// If the assignment throws, the element stays in the ring. [consumer]
  [[nodiscard]] bool try_pop(T& out) noexcept(
      std::is_nothrow_move_assignable_v<T>) requires std::is_move_assignable_v<T> {
    consumer_.owner.check("spsc_ring", "consumer");
    const size_type head = consumer_.head.load(std::memory_order_relaxed);  // only we write head
    T* item = peek(head);
    if (item == nullptr) {
      return false;
    }
    out = std::move(*item);
    drop(head);
    return true;
  }

  /// Removes and returns the oldest element; std::nullopt when the ring is empty. If moving the
  /// element out throws, it stays in the ring. [consumer]
  [[nodiscard]] std::optional<T> try_pop() noexcept(
      std::is_nothrow_move_constructible_v<T>) requires std::move_constructible<T> {
    consumer_.owner.check("spsc_ring", "consumer");
    const size_type head = consumer_.head.load(std::memory_order_relaxed);  // only we write head
    std::optional<T> result;  // the only object returned, so it is built in place (NRVO)
    if (T* item = peek(head); item != nullptr) {
      result.emplace(std::move(*item));
      drop(head);
    }
    return result;
  }

  /// Move-assigns up to `max` of the oldest elements to `*out++`, oldest first, and returns how
  /// many; their slots are freed together, with one index store. If an assignment throws, the
  /// elements before it are removed, that one and the later ones stay. [consumer]
  template <typename OutputIt>
  requires std::output_iterator<OutputIt, T&&>
  [[nodiscard]] size_type pop_n(OutputIt out,
                                size_type max) noexcept(detail::nothrow_pop_into<T, OutputIt>) {
    return drain(max, [&out](T* item, size_type& next) {
      *out = std::move(*item);
      std::destroy_at(item);
      ++next;  // only once moved: an element whose move throws stays
      ++out;
    });
  }

  /// Calls `f(std::move(element))` for each element in the ring when the call starts, oldest
  /// first, destroying each one after its call; the slots are freed together, with one index
  /// store. Returns how many elements were consumed. If `f` throws, the element it was given and
  /// those before it are consumed, the later ones stay, and the exception propagates. [consumer]
  template <typename F>
  requires std::invocable<F&, T&&> size_type consume_all(F&& f)
  noexcept(std::is_nothrow_invocable_v<F&, T&&>) {
    return consume_n(std::numeric_limits<size_type>::max(), f);
  }

  /// consume_all() limited to the `max` oldest elements, e.g. to bound one drain of an inbox.
  /// [consumer]
  template <typename F>
  requires std::invocable<F&, T&&> size_type consume_n(size_type max, F&& f)
  noexcept(std::is_nothrow_invocable_v<F&, T&&>) {
    return drain(max, [&f](T* item, size_type& next) {
      ++next;  // consumed even if f throws
      const detail::destroy_element_on_exit<T> destroy{ item };
      f(std::move(*item));
    });
  }

  /// How many elements the ring holds. From the producer or the consumer: the count at some
  /// moment during the call. From another thread: an estimate between 0 and capacity().
  /// [any thread]
  [[nodiscard]] size_type size() const noexcept {
    // acquire: pairs with the release store in publish_head(); the consumer read a tail at
    // least this large before storing head, so the tail read next cannot be smaller.
    const size_type head = consumer_.head.load(std::memory_order_acquire);
    // relaxed: only the count is used, no element is read through it.
    const size_type tail = producer_.tail.load(std::memory_order_relaxed);
    return std::min(tail - head, capacity());
  }

  /// Whether size() is 0. [any thread]
  [[nodiscard]] bool empty() const noexcept { return size() == 0; }

  /// How many elements the ring holds when full: a power of two. [any thread]
  [[nodiscard]] size_type capacity() const noexcept { return mask_ + 1; }

 private:
  struct slot {
    alignas(T) std::byte bytes[sizeof(T)];

    void* storage() noexcept { return bytes; }
    T* element() noexcept { return std::launder(reinterpret_cast<T*>(bytes)); }
  };
  static_assert(sizeof(slot) == sizeof(T));

  static constexpr size_type kHeadRefreshInterval = 16;

  // Slots start on a cache line so that the first ones do not share it with another object.
  static constexpr std::size_t kSlotAlignment = std::max(alignof(slot), cache_line_size);

  // The producer's line. tail is written only by the producer and read by the consumer when its
  // cached copy runs out; cached_head is the producer's own copy of the consumer's head.
  struct alignas(cache_line_size) producer_side {
    std::atomic<size_type> tail{ 0 };
    size_type cached_head = 0;
    detail::thread_owner owner;
  };

  // The consumer's line, the mirror image of producer_side.
  struct alignas(cache_line_size) consumer_side {
    std::atomic<size_type> head{ 0 };
    size_type cached_tail = 0;
    detail::thread_owner owner;
  };

  static_assert(sizeof(producer_side) == cache_line_size &&
                    sizeof(consumer_side) == cache_line_size,
                "each side's indexes must fill exactly one cache line");

  static slot* allocate(size_type capacity) {
    const std::size_t bytes = detail::round_up(capacity * sizeof(slot), cache_line_size);
    return static_cast<slot*>(::operator new (bytes, std::align_val_t{ kSlotAlignment }));
  }

  // The slots and mask by value: a batch loop that holds them in locals need not reload them
  // after every element it writes, as it must for members (a T store might alias them).
  struct slot_span {
    slot* slots;
    size_type mask;

    // Calls run(begin, end) for the slots of indexes [from, from + count): one contiguous run,
    // or two when they wrap past the end of the array.
    template <typename Run>
    void for_each_run(size_type from, size_type count, Run&& run) const {
      const size_type offset = from & mask;
      const size_type before_wrap = std::min(count, mask + 1 - offset);
      run(slots + offset, slots + offset + before_wrap);
      if (before_wrap != count) {
        run(slots, slots + (count - before_wrap));
      }
    }
  };

  slot_span span() const noexcept { return { slots_, mask_ }; }
  void* storage(size_type index) const noexcept { return slots_[index & mask_].storage(); }
  T* element(size_type index) const noexcept { return slots_[index & mask_].element(); }

  // [producer] Free slots seen from `tail`; re-reads head only when the cache shows < wanted.
  size_type free_slots(size_type tail, size_type wanted) noexcept {
    size_type free = capacity() - (tail - producer_.cached_head);
    if (free < wanted) {
      // acquire: pairs with the release store in publish_head(); the consumer is done with the
      // slots before head, so they may be reused.
      producer_.cached_head = consumer_.head.load(std::memory_order_acquire);
      free = capacity() - (tail - producer_.cached_head);
    }
    return free;
  }

  // [producer] Every kHeadRefreshInterval single pushes, re-reads head after publishing (off the
  // push's critical path: the value is used from the next call on). Why: measured, not derived
  // (docs/bench/notes.md): when the consumer keeps up with the producer and their cores are far
  // apart, a producer that reads head only when its cache says full is about three times slower
  // per item. Costs one load of the consumer's line per interval.
  void refresh_head_ahead(size_type tail) noexcept {
    if (tail % kHeadRefreshInterval == 0) {
      // acquire: pairs with the release store in publish_head(), as in free_slots().
      producer_.cached_head = consumer_.head.load(std::memory_order_acquire);
    }
  }

  // [consumer] Elements ready from `head`; re-reads tail only when the cache shows < wanted.
  size_type ready(size_type head, size_type wanted) noexcept {
    size_type count = consumer_.cached_tail - head;
    if (count < wanted) {
      // acquire: pairs with the release store in publish_tail(); the elements before tail are
      // fully constructed.
      consumer_.cached_tail = producer_.tail.load(std::memory_order_acquire);
      count = consumer_.cached_tail - head;
    }
    return count;
  }

  // [producer] Makes the elements before `tail` visible. release: pairs with the acquire load in
  // ready(). (publish_index_on_exit does the same store for the batch calls.)
  void publish_tail(size_type tail) noexcept {
    producer_.tail.store(tail, std::memory_order_release);
  }

  // [consumer] Frees the slots before `head`. release: pairs with the acquire load in
  // free_slots(), ordering our reads and destruction before the producer's reuse.
  void publish_head(size_type head) noexcept {
    consumer_.head.store(head, std::memory_order_release);
  }

  // [consumer] Calls take(element, next) for up to `max` ready elements, oldest first; `take`
  // advances `next` past each element it removed. The removed elements' slots are freed with one
  // store of `next`, also when `take` throws. Returns how many it removed.
  template <typename Take>
  size_type drain(size_type max, Take take) {
    consumer_.owner.check("spsc_ring", "consumer");
    const size_type head = consumer_.head.load(std::memory_order_relaxed);  // only we write head
    const size_type end = head + std::min(max, ready(head, max));
    if (end == head) {
      return 0;
    }
    size_type next = head;
    const detail::publish_index_on_exit publish{ consumer_.head, next };
    span().for_each_run(head, end - head, [&](slot* run, slot* run_end) {
      for (; run != run_end; ++run) {
        take(run->element(), next);
      }
    });
    return end - head;
  }

  T* peek(size_type head) noexcept { return ready(head, 1) == 0 ? nullptr : element(head); }

  void drop(size_type head) noexcept {
    assert(head != consumer_.cached_tail && "spsc_ring::pop() needs an element from front()");
    std::destroy_at(element(head));
    publish_head(head + 1);
  }

  const size_type mask_;  // capacity - 1; read-only, like slots_
  slot* const slots_;
  producer_side producer_;
  consumer_side consumer_;
};

}  // namespace cyan::lockfree
