#pragma once

// The members of cyan::lockfree::segmented_queue (included by segmented_queue.h). They are
// defined out of the class, not inline, so that a library can compile them once for its element
// type (explicit instantiation) and keep them out of its callers, as dispatch's task_queue does.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <thread>
#include <utility>

#include "cyan/common/cache_line.h"
#include "cyan/common/detail/backoff.h"

namespace cyan::lockfree {

// A slot has cache lines of its own: a consumer right behind the producer marks slot k read
// while the producer writes slot k + 1, and on a shared line each would take it from the other.
template <typename T>
struct alignas(cache_line_size) segmented_queue<T>::slot {
  T* value() noexcept { return std::launder(reinterpret_cast<T*>(storage)); }

  alignas(T) unsigned char storage[sizeof(T)];
  std::atomic<std::uint32_t> state{ 0 };
};

template <typename T>
struct segmented_queue<T>::block {
  alignas(cache_line_size) std::atomic<block*> next{ nullptr };
  slot slots[kBlockSlots];
};

template <typename T>
segmented_queue<T>::segmented_queue() {
  block* first = new block;
  // relaxed: the queue is published to other threads by whatever hands them its address.
  head_.value.current.store(first, std::memory_order_relaxed);
  tail_.value.current.store(first, std::memory_order_relaxed);
}

template <typename T>
segmented_queue<T>::~segmented_queue() {
  // Destroys the unread elements in place, from head to tail, freeing each block passed.
  // relaxed (all): no other thread uses the queue any more.
  const std::size_t tail = tail_.value.index.load(std::memory_order_relaxed) >> kShift;
  std::size_t head = head_.value.index.load(std::memory_order_relaxed) >> kShift;
  block* current = head_.value.current.load(std::memory_order_relaxed);
  for (; head != tail; ++head) {
    const std::size_t offset = head % kLap;
    if (offset == kBlockSlots) {  // past the block's end: the next one holds the rest
      block* next = current->next.load(std::memory_order_relaxed);
      delete current;
      current = next;
    } else {
      std::destroy_at(current->slots[offset].value());
    }
  }
  delete current;
  while (block* spare = spares_.first) {
    spares_.first = spare->next.load(std::memory_order_relaxed);
    delete spare;
  }
}

template <typename T>
bool segmented_queue<T>::try_push(T&& value, push_policy policy) {
  const std::size_t refused = policy == push_policy::unless_sealed ? kSealed | kClosed : kClosed;
  block* next_block = nullptr;
  // acquire: pairs with the release stores of tail_ when a block is installed.
  std::size_t tail = tail_.value.index.load(std::memory_order_acquire);
  block* current = tail_.value.current.load(std::memory_order_acquire);
  for (cyan::detail::backoff backoff;;) {
    if ((tail & refused) != 0) {
      if (next_block != nullptr) {
        recycle(next_block);
      }
      return false;
    }
    const std::size_t offset = (tail >> kShift) % kLap;
    if (offset == kBlockSlots) {  // another producer is installing the next block
      backoff.wait();
      tail = tail_.value.index.load(std::memory_order_acquire);
      current = tail_.value.current.load(std::memory_order_acquire);
      continue;
    }
    if (offset + 1 == kBlockSlots && next_block == nullptr) {
      next_block = new_block();  // before the claim, so that others wait only briefly
    }
    const std::size_t new_tail = tail + (1 << kShift);
    // seq_cst: a claim is a total-order point, which a sleep handshake built on empty() relies
    // on (a pushed element is seen by an empty() that follows a sleeper's announcement).
    if (tail_.value.index.compare_exchange_weak(tail, new_tail, std::memory_order_seq_cst,
                                                std::memory_order_acquire)) {
      if (offset + 1 == kBlockSlots) {  // claimed the last slot: install the next block
        // release: pairs with the acquire loads of tail_ in try_push() and of next in
        // wait_next(). An add, not a store: seal() may have set a flag meanwhile.
        tail_.value.current.store(next_block, std::memory_order_release);
        tail_.value.index.fetch_add(1 << kShift, std::memory_order_release);
        current->next.store(next_block, std::memory_order_release);
        next_block = nullptr;
      }
      slot& s = current->slots[offset];
      ::new (static_cast<void*>(s.storage)) T(std::move(value));
      // release: pairs with the acquire load in wait_written(); publishes the element.
      s.state.fetch_or(kWritten, std::memory_order_release);
      if (next_block != nullptr) {
        recycle(next_block);
      }
      return true;
    }
    current = tail_.value.current.load(std::memory_order_acquire);
  }
}

template <typename T>
void segmented_queue<T>::seal() noexcept {
  tail_.value.index.fetch_or(kSealed, std::memory_order_seq_cst);  // a total-order point
}

template <typename T>
bool segmented_queue<T>::sealed() const noexcept {
  return (tail_.value.index.load(std::memory_order_seq_cst) & kSealed) != 0;
}

template <typename T>
bool segmented_queue<T>::close_if_empty() noexcept {
  std::size_t tail = tail_.value.index.load(std::memory_order_seq_cst);
  for (;;) {
    if ((tail & kClosed) != 0) {
      return true;
    }
    // A claim moves tail, so the CAS below fails if a push came after this look.
    if ((head_.value.index.load(std::memory_order_seq_cst) >> kShift) != (tail >> kShift)) {
      return false;
    }
    if (tail_.value.index.compare_exchange_weak(tail, tail | kClosed, std::memory_order_seq_cst)) {
      return true;
    }
  }
}

template <typename T>
std::size_t segmented_queue<T>::try_pop_many(T* out, std::size_t max, std::size_t share, bool* more,
                                             tail_hint* hint) noexcept {
  // acquire: pairs with the release stores of head_ when a consumer moves to the next block.
  std::size_t head = head_.value.index.load(std::memory_order_acquire);
  block* current = head_.value.current.load(std::memory_order_acquire);
  for (cyan::detail::backoff backoff;;) {
    const std::size_t offset = (head >> kShift) % kLap;
    if (offset == kBlockSlots) {  // another consumer is moving head to the next block
      backoff.wait();
      head = head_.value.index.load(std::memory_order_acquire);
      current = head_.value.current.load(std::memory_order_acquire);
      continue;
    }
    std::size_t has_next = head & kHasNext;
    // Elements this claim may see in the head block: the whole rest of it once it has a
    // successor.
    std::size_t available = kBlockSlots - offset;
    if (has_next == 0) {
      // The hint suffices when it shows more than a claim could take (so `more` is true without
      // a look at the tail); otherwise read the tail. seq_cst: see empty().
      std::size_t tail = hint != nullptr ? hint->tail : 0;
      if ((tail >> kShift) < (head >> kShift) + max * share + 1) {
        tail = tail_.value.index.load(std::memory_order_seq_cst);
        if (hint != nullptr) {
          hint->tail = tail;
        }
      }
      if ((head >> kShift) / kLap != (tail >> kShift) / kLap) {
        has_next = kHasNext;
      } else {
        available = (tail >> kShift) - (head >> kShift);
        if (available == 0) {
          return 0;
        }
      }
    }
    const std::size_t claimed = std::clamp<std::size_t>(available / share, 1, max);
    const std::size_t new_head = (((head >> kShift) + claimed) << kShift) | has_next;
    if (head_.value.index.compare_exchange_weak(head, new_head, std::memory_order_seq_cst,
                                                std::memory_order_acquire)) {
      for (std::size_t i = 0; i < claimed; ++i) {
        take(current, offset + i, new_head, out[i]);
      }
      if (more != nullptr) {
        *more = has_next != 0 || available > claimed;
      }
      return claimed;
    }
    current = head_.value.current.load(std::memory_order_acquire);
  }
}

// After a consumer claimed slot `offset` of `current` (head now `new_head`, past the claim):
// moves head to the next block if it claimed the last slot, moves the element out, and marks the
// slot read, taking part in the block's destruction.
template <typename T>
void segmented_queue<T>::take(block* current, std::size_t offset, std::size_t new_head,
                              T& out) noexcept {
  const bool last = offset + 1 == kBlockSlots;
  if (last) {
    block* next = wait_next(current);
    std::size_t next_index = (new_head & ~kHasNext) + (1 << kShift);  // past the sentinel
    if (next->next.load(std::memory_order_relaxed) != nullptr) {
      next_index |= kHasNext;
    }
    // release: pairs with the acquire loads of head_ in try_pop_many().
    head_.value.current.store(next, std::memory_order_release);
    head_.value.index.store(next_index, std::memory_order_release);
  }
  slot& s = current->slots[offset];
  wait_written(s);
  out = std::move(*s.value());
  std::destroy_at(s.value());
  if (last) {  // the last slot is never marked
    destroy_block(current, 0);
    return;
  }
  // acq_rel: the release orders this read before the destroyer's free; the acquire pairs with
  // the destroyer's kDestroy, handing the rest of the destruction to this reader.
  if ((s.state.fetch_or(kRead, std::memory_order_acq_rel) & kDestroy) != 0) {
    destroy_block(current, offset + 1);
  }
}

template <typename T>
bool segmented_queue<T>::empty() const noexcept {
  // seq_cst: the tail load takes part in the total order with the producers' seq_cst claims,
  // which a sleep handshake relies on (see try_push()).
  const std::size_t head = head_.value.index.load(std::memory_order_seq_cst);
  const std::size_t tail = tail_.value.index.load(std::memory_order_seq_cst);
  return (head >> kShift) == (tail >> kShift);
}

template <typename T>
typename segmented_queue<T>::block* segmented_queue<T>::new_block() {
  {
    const std::lock_guard lock(spares_.mutex);
    if (block* reused = spares_.first) {
      // relaxed: the mutex orders this with recycle(), which reset the block first.
      spares_.first = reused->next.load(std::memory_order_relaxed);
      --spares_.count;
      reused->next.store(nullptr, std::memory_order_relaxed);
      return reused;
    }
  }
  return new block;
}

template <typename T>
void segmented_queue<T>::recycle(block* b) noexcept {
  // relaxed: the block is private to this thread until the mutex publishes it.
  for (slot& s : b->slots) {
    s.state.store(0, std::memory_order_relaxed);
  }
  {
    const std::lock_guard lock(spares_.mutex);
    if (spares_.count < kSpareBlocks) {
      b->next.store(spares_.first, std::memory_order_relaxed);
      spares_.first = b;
      ++spares_.count;
      return;
    }
  }
  delete b;
}

// Frees `b` once every slot from `start` on has been read. A slot whose reader is still busy
// gets kDestroy instead, and that reader resumes here from the next slot. The last slot is not
// checked: its reader is the one that starts the destruction (start == 0).
template <typename T>
void segmented_queue<T>::destroy_block(block* b, std::size_t start) noexcept {
  for (std::size_t i = start; i + 1 < kBlockSlots; ++i) {
    slot& s = b->slots[i];
    // acquire / acq_rel: pair with the reader's acq_rel fetch_or of kRead in take().
    if ((s.state.load(std::memory_order_acquire) & kRead) == 0 &&
        (s.state.fetch_or(kDestroy, std::memory_order_acq_rel) & kRead) == 0) {
      return;
    }
  }
  recycle(b);
}

template <typename T>
typename segmented_queue<T>::block* segmented_queue<T>::wait_next(block* b) noexcept {
  cyan::detail::backoff backoff;
  // acquire: pairs with the release store of next in try_push().
  for (block* next = b->next.load(std::memory_order_acquire);;
       next = b->next.load(std::memory_order_acquire)) {
    if (next != nullptr) {
      return next;
    }
    backoff.wait();
  }
}

template <typename T>
void segmented_queue<T>::wait_written(slot& s) noexcept {
  cyan::detail::backoff backoff;
  // acquire: pairs with the release fetch_or of kWritten in try_push().
  while ((s.state.load(std::memory_order_acquire) & kWritten) == 0) {
    backoff.wait();
  }
}

}  // namespace cyan::lockfree
