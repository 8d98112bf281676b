#pragma once

// The buffer of a bounded channel<T>: a fixed array of slots, multi-producer multi-consumer,
// with a closed mark (crossbeam's array channel, after Vyukov's bounded queue). Each slot has a
// stamp that says whose turn it is: a producer claims a slot by advancing the tail with one CAS
// and then writes it, a consumer claims one by advancing the head and then reads it, and each
// publishes with the slot's stamp. A consumer that claimed nothing because a producer is
// between its claim and its write spins for it (as in lockfree::segmented_queue).
//
// Positions carry a lap count above the index bits, so a stamp tells "written in this lap" from
// "read in the last one"; the tail also carries the closed mark, so a push either comes before
// close() or is refused, and a pop that finds the ring empty and marked knows it is drained.

#include <atomic>
#include <bit>
#include <cstddef>
#include <memory>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>

#include "cyan/common/cache_line.h"
#include "cyan/common/detail/backoff.h"

namespace cyan::dispatch::detail {

/// What a push or a pop found.
enum class ring_result { done, full, empty, closed };

template <typename T>
class bounded_ring {
  static_assert(std::is_nothrow_move_constructible_v<T> && std::is_nothrow_destructible_v<T>);

 public:
  /// A ring of `capacity` slots (at least 1). Throws std::bad_alloc.
  explicit bounded_ring(std::size_t capacity)
      : capacity_(capacity),
        mark_(std::bit_ceil(capacity + 1)),
        one_lap_(mark_ * 2),
        slots_(new slot[capacity]) {
    for (std::size_t i = 0; i < capacity; ++i) {
      slots_[i].stamp.store(i, std::memory_order_relaxed);
    }
  }
  bounded_ring(const bounded_ring&) = delete;
  bounded_ring& operator=(const bounded_ring&) = delete;
  /// Destroys the elements still in it. No other thread may use it any more.
  ~bounded_ring() {
    while (pop_into(nullptr) == ring_result::done) {
    }
  }

  /// Moves `value` in (done), or leaves it untouched when the ring is full or closed (with
  /// `even_closed`: only when full). [any]
  ring_result push(T& value, bool even_closed = false) noexcept {
    cyan::detail::backoff wait;
    std::size_t tail = tail_.load(std::memory_order_relaxed);
    for (;;) {
      const std::size_t closed = tail & mark_;
      if (closed != 0 && !even_closed) {
        return ring_result::closed;
      }
      const std::size_t position = tail & ~mark_;
      const std::size_t index = position & (mark_ - 1);
      const std::size_t lap = position & ~(one_lap_ - 1);
      slot& s = slots_[index];
      const std::size_t stamp = s.stamp.load(std::memory_order_acquire);
      if (position == stamp) {
        // The slot is free in this lap: claim it (keeping the mark).
        const std::size_t next = (index + 1 < capacity_ ? position + 1 : lap + one_lap_) | closed;
        if (tail_.compare_exchange_weak(tail, next, std::memory_order_seq_cst,
                                        std::memory_order_relaxed)) {
          ::new (static_cast<void*>(s.storage)) T(std::move(value));
          s.stamp.store(position + 1, std::memory_order_release);
          return ring_result::done;
        }
        wait.reset();
      } else if (stamp + one_lap_ == position + 1) {
        // The slot still holds the last lap's element: full, unless a consumer just took it.
        std::atomic_thread_fence(std::memory_order_seq_cst);
        if (head_.load(std::memory_order_relaxed) + one_lap_ == position) {
          return ring_result::full;
        }
        tail = tail_.load(std::memory_order_relaxed);
      } else {
        // Another producer claimed it and has not written it yet: wait for the tail to move.
        wait.wait();
        tail = tail_.load(std::memory_order_relaxed);
      }
    }
  }

  /// Moves the first element into `out` (done), or says the ring is empty, or empty and closed.
  /// [any]
  ring_result pop(std::optional<T>& out) noexcept { return pop_into(&out); }

  /// Marks the ring closed: later pushes are refused. Returns whether this call closed it.
  bool close() noexcept {
    return (tail_.fetch_or(mark_, std::memory_order_seq_cst) & mark_) == 0;
  }
  [[nodiscard]] bool closed() const noexcept {
    return (tail_.load(std::memory_order_seq_cst) & mark_) != 0;
  }

 private:
  struct slot {
    std::atomic<std::size_t> stamp;
    alignas(T) unsigned char storage[sizeof(T)];
  };

  ring_result pop_into(std::optional<T>* out) noexcept {
    cyan::detail::backoff wait;
    std::size_t head = head_.load(std::memory_order_relaxed);
    for (;;) {
      const std::size_t index = head & (mark_ - 1);
      const std::size_t lap = head & ~(one_lap_ - 1);
      slot& s = slots_[index];
      const std::size_t stamp = s.stamp.load(std::memory_order_acquire);
      if (head + 1 == stamp) {
        // Written in this lap: claim it.
        const std::size_t next = index + 1 < capacity_ ? head + 1 : lap + one_lap_;
        if (head_.compare_exchange_weak(head, next, std::memory_order_seq_cst,
                                        std::memory_order_relaxed)) {
          T* element = std::launder(reinterpret_cast<T*>(s.storage));
          if (out != nullptr) {
            out->emplace(std::move(*element));
          }
          element->~T();
          s.stamp.store(head + one_lap_, std::memory_order_release);
          return ring_result::done;
        }
        wait.reset();
      } else if (stamp == head) {
        // Not written in this lap: empty, unless a producer claimed it and is writing.
        std::atomic_thread_fence(std::memory_order_seq_cst);
        const std::size_t tail = tail_.load(std::memory_order_relaxed);
        if ((tail & ~mark_) == head) {
          return (tail & mark_) != 0 ? ring_result::closed : ring_result::empty;
        }
        wait.wait();
        head = head_.load(std::memory_order_relaxed);
      } else {
        // Another consumer took it: catch up.
        wait.wait();
        head = head_.load(std::memory_order_relaxed);
      }
    }
  }

  const std::size_t capacity_;
  const std::size_t mark_;     // the closed mark, just above the index bits
  const std::size_t one_lap_;  // one lap: the positions' low bits below it are index and mark
  std::unique_ptr<slot[]> slots_;
  alignas(cache_line_size) std::atomic<std::size_t> head_{ 0 };
  alignas(cache_line_size) std::atomic<std::size_t> tail_{ 0 };
};

}  // namespace cyan::dispatch::detail
