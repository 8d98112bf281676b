#pragma once

// Memory for cyan's coroutine frames, spawn states and awaitable tasks: size classes of 64 bytes up
// to 1 KiB, carved from 64 KiB slabs, recycled through per-thread free lists (no lock, no atomic)
// that overflow into, and refill from, one global list per class (a mutex, per batch). So a loop of
// awaits of short-lived child tasks, or 100,000 tasks that live at once, costs a pointer pop
// and push per frame instead of malloc and free, whichever thread frees what another
// allocated. The slabs are kept for the life of the process: the memory held is the peak of
// frames alive at once (at most 1 KiB each; larger frames use operator new). Lists move
// between a thread and the global pool whole (head, tail, count), never walked: the blocks of a
// long list are cold in cache. Under
// AddressSanitizer every block is a plain operator new, so a use of a destroyed frame is still
// caught.

#include <cstddef>
#include <cstdint>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#define CYAN_FRAME_POOL 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CYAN_FRAME_POOL 0
#endif
#endif
#ifndef CYAN_FRAME_POOL
#define CYAN_FRAME_POOL 1
#endif

namespace cyan::dispatch::detail {

struct frame_cache {
  static constexpr std::size_t kGranule = 64;
  static constexpr std::size_t kClasses = 16;  // up to 1 KiB

  struct free_block {
    free_block* next;
  };

  free_block* heads[kClasses];
  free_block* tails[kClasses];  // the last block of each list, to hand a list over in one step
  std::uint32_t counts[kClasses];
  bool registered;  // the thread's exit will hand its blocks to the global lists
  bool closed;      // it did: blocks freed from now on go to the global lists directly
};

// Trivially destructible, so reachable without a TLS wrapper, and usable until the thread's end.
inline thread_local frame_cache this_thread_frames{};

/// The slow paths: an empty or overfull list, the first use on a thread, a large frame.
[[nodiscard]] void* allocate_frame_slow(std::size_t size);
void deallocate_frame_slow(void* block, std::size_t size) noexcept;

/// Blocks a thread keeps per class; a free beyond that hands the whole list to the global pool.
inline constexpr std::uint32_t kFramesKept = 4096;

/// A block of at least `size` bytes. Throws std::bad_alloc. [any thread]
[[nodiscard]] inline void* allocate_frame(std::size_t size) {
#if CYAN_FRAME_POOL
  const std::size_t c = (size - 1) / frame_cache::kGranule;
  if (c < frame_cache::kClasses) {
    frame_cache& cache = this_thread_frames;
    if (frame_cache::free_block* block = cache.heads[c]) {
      cache.heads[c] = block->next;
      --cache.counts[c];
      return block;
    }
  }
#endif
  return allocate_frame_slow(size);
}

/// Gives back a block from allocate_frame(size), on any thread. [any thread]
inline void deallocate_frame(void* block, std::size_t size) noexcept {
#if CYAN_FRAME_POOL
  const std::size_t c = (size - 1) / frame_cache::kGranule;
  frame_cache& cache = this_thread_frames;
  if (c < frame_cache::kClasses && cache.registered && cache.counts[c] < kFramesKept) {
    auto* freed = static_cast<frame_cache::free_block*>(block);
    freed->next = cache.heads[c];
    if (cache.heads[c] == nullptr) {
      cache.tails[c] = freed;
    }
    cache.heads[c] = freed;
    ++cache.counts[c];
    return;
  }
#endif
  deallocate_frame_slow(block, size);
}

/// The operator new/delete of cyan's promise types and spawn states.
struct frame_allocated {
  static void* operator new(std::size_t size) { return allocate_frame(size); }
  static void operator delete(void* block, std::size_t size) noexcept {
    deallocate_frame(block, size);
  }
};

}  // namespace cyan::dispatch::detail
