#include "cyan/dispatch/detail/frame_allocator.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include "cyan/common/cache_line.h"

namespace cyan::dispatch::detail {

#if CYAN_FRAME_POOL
namespace {

using free_block = frame_cache::free_block;
constexpr std::size_t kSlabBytes = 64 * 1024;
constexpr std::align_val_t kSlabAlignment{ cache_line_size };

struct slab_delete {
  void operator()(std::byte* slab) const noexcept { ::operator delete(slab, kSlabAlignment); }
};
using slab_ptr = std::unique_ptr<std::byte, slab_delete>;

std::size_t block_size(std::size_t c) noexcept {
  return (c + 1) * frame_cache::kGranule;
}

// A list of free blocks of one class, moved whole.
struct batch {
  free_block* head;
  free_block* tail;
  std::uint32_t count;
};

// The global lists and the slabs. Never destroyed (a thread may free a frame during static
// destruction); the slabs stay reachable through it.
struct global_pool {
  std::mutex mutex;
  std::vector<batch> batches[frame_cache::kClasses];
  std::vector<slab_ptr> slabs;
};

global_pool& pool() {
  static global_pool* const instance = new global_pool;
  return *instance;
}

void give_back(std::size_t c, batch whole) noexcept {
  global_pool& g = pool();
  const std::lock_guard lock(g.mutex);
  try {
    g.batches[c].push_back(whole);
  } catch (...) {  // no memory for the bookkeeping: these blocks are lost, not corrupted
  }
}

// Moves the thread's list for class c to the global pool.
void hand_over(frame_cache& cache, std::size_t c) noexcept {
  if (cache.heads[c] != nullptr) {
    give_back(c, batch{ cache.heads[c], cache.tails[c], cache.counts[c] });
  }
  cache.heads[c] = nullptr;
  cache.tails[c] = nullptr;
  cache.counts[c] = 0;
}

// Hands the thread's blocks to the global pool when it exits.
struct cache_guard {
  cache_guard() noexcept { this_thread_frames.registered = true; }
  ~cache_guard() {
    frame_cache& cache = this_thread_frames;
    cache.registered = false;
    cache.closed = true;
    for (std::size_t c = 0; c < frame_cache::kClasses; ++c) {
      hand_over(cache, c);
    }
  }
};

thread_local cache_guard guard;

void register_thread() noexcept {
  if (!this_thread_frames.registered && !this_thread_frames.closed) {
    (void)&guard;  // constructs it: this thread's exit hands its blocks back
  }
}

// Fills this thread's (empty) list for c: a batch from the global pool, or a new slab.
void refill(std::size_t c) {
  frame_cache& cache = this_thread_frames;
  global_pool& g = pool();
  const std::lock_guard lock(g.mutex);
  if (!g.batches[c].empty()) {
    const batch taken = g.batches[c].back();
    g.batches[c].pop_back();
    cache.heads[c] = taken.head;
    cache.tails[c] = taken.tail;
    cache.counts[c] = taken.count;
    return;
  }
  const std::size_t size = block_size(c);
  if (g.slabs.size() == g.slabs.capacity()) {
    g.slabs.reserve(std::max<std::size_t>(16, 2 * g.slabs.size()));  // may throw
  }
  // Cache-line aligned, so a 64-byte block (an awaitable task's state) is one line.
  slab_ptr slab(static_cast<std::byte*>(::operator new(kSlabBytes, kSlabAlignment)));  // may throw
  std::byte* base = slab.get();
  g.slabs.push_back(std::move(slab));
  const std::size_t blocks = kSlabBytes / size;
  for (std::size_t i = 0; i + 1 < blocks; ++i) {
    reinterpret_cast<free_block*>(base + i * size)->next =
        reinterpret_cast<free_block*>(base + (i + 1) * size);
  }
  auto* last = reinterpret_cast<free_block*>(base + (blocks - 1) * size);
  last->next = nullptr;
  cache.heads[c] = reinterpret_cast<free_block*>(base);
  cache.tails[c] = last;
  cache.counts[c] = static_cast<std::uint32_t>(blocks);
}

}  // namespace

void* allocate_frame_slow(std::size_t size) {
  const std::size_t c = (size - 1) / frame_cache::kGranule;
  if (c >= frame_cache::kClasses) {
    return ::operator new(size);
  }
  register_thread();
  refill(c);
  return allocate_frame(size);
}

void deallocate_frame_slow(void* block, std::size_t size) noexcept {
  const std::size_t c = (size - 1) / frame_cache::kGranule;
  if (c >= frame_cache::kClasses) {
    ::operator delete(block, size);
    return;
  }
  auto* freed = static_cast<free_block*>(block);
  register_thread();
  frame_cache& cache = this_thread_frames;
  if (!cache.registered) {  // the thread is exiting: straight to the global pool
    freed->next = nullptr;
    give_back(c, batch{ freed, freed, 1 });
    return;
  }
  if (cache.counts[c] >= kFramesKept) {
    hand_over(cache, c);
  }
  deallocate_frame(block, size);
}

#else

void* allocate_frame_slow(std::size_t size) {
  return ::operator new(size);
}

void deallocate_frame_slow(void* block, std::size_t size) noexcept {
  ::operator delete(block, size);
}

#endif

}  // namespace cyan::dispatch::detail
