#pragma once

// The buffer of a bounded channel<T>: a fixed array of slots, multi-producer multi-consumer,
// with a closed mark (crossbeam's array channel, after Vyukov's bounded queue). Each slot has a
// stamp that says whose turn it is: a producer claims a slot by advancing the tail with one CAS
// and then writes it, a consumer claims one by advancing the head and then reads it, and each
// publishes with the slot's stamp. Nobody waits for another thread between its claim and its
// publication: a pop that meets a slot being written says "empty", a push that meets a slot
// being read says "full", and the channel's waiting takes over (the other thread looks for
// waiters once it has published).
//
// Memory order: the stamps' loads and stores and the look at the tail for emptiness are
// seq_cst, so that they close a store–load (Dekker) handshake with the channel's waiter flags
// without fences (which ThreadSanitizer does not model): a push publishes its slot and then
// reads the receivers' flag; a receiver about to wait sets the flag and then looks at the slot;
// in the seq_cst order one of them sees the other. The same holds for a pop and a sender.
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
      const std::size_t stamp = s.stamp.load(std::memory_order_seq_cst);
      if (position == stamp) {
        // The slot is free in this lap: claim it (keeping the mark).
        const std::size_t next = (index + 1 < capacity_ ? position + 1 : lap + one_lap_) | closed;
        if (tail_.compare_exchange_weak(tail, next, std::memory_order_seq_cst,
                                        std::memory_order_relaxed)) {
          ::new (static_cast<void*>(s.storage)) T(std::move(value));
          s.stamp.store(position + 1, std::memory_order_seq_cst);
          return ring_result::done;
        }
        wait.reset();
      } else if (stamp + one_lap_ == position + 1) {
        // The slot still holds the last lap's element: full — or a consumer claimed it and is
        // reading it, which counts as full too: no spinning on a thread that may have been
        // preempted. The channel's waiting covers it: that consumer looks for waiting senders
        // once it has released the slot.
        return ring_result::full;
      } else {
        // Another producer claimed this position already: catch up with the tail.
        wait.wait();
        tail = tail_.load(std::memory_order_relaxed);
      }
    }
  }

  /// Moves the first element into `out` (done), or says the ring is empty, or empty and closed.
  /// [any]
  ring_result pop(std::optional<T>& out) noexcept { return pop_into(&out); }

  /// Marks the ring closed: later pushes are refused. Returns whether this call closed it.
  bool close() noexcept { return (tail_.fetch_or(mark_, std::memory_order_seq_cst) & mark_) == 0; }
  [[nodiscard]] bool closed() const noexcept {
    return (tail_.load(std::memory_order_seq_cst) & mark_) != 0;
  }
  /// Whether nothing is in it or on its way in (no position claimed and not yet read), and it
  /// is open. [any]
  [[nodiscard]] bool empty_and_open() const noexcept {
    const std::size_t tail = tail_.load(std::memory_order_seq_cst);
    return tail == head_.load(std::memory_order_seq_cst);  // equal: no mark either
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
      const std::size_t stamp = s.stamp.load(std::memory_order_seq_cst);
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
          s.stamp.store(head + one_lap_, std::memory_order_seq_cst);
          return ring_result::done;
        }
        wait.reset();
      } else if (stamp == head) {
        // Not written in this lap: empty — or a producer claimed it and is writing it, which
        // counts as empty too (no spinning on a thread that may have been preempted: that
        // producer looks for waiting receivers once it has published the slot). Closed only
        // when nothing was claimed.
        const std::size_t tail = tail_.load(std::memory_order_seq_cst);
        return (tail & ~mark_) == head && (tail & mark_) != 0 ? ring_result::closed
                                                              : ring_result::empty;
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
