#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "cyan/lockfree/detail/block_class.h"

#if defined(__SANITIZE_ADDRESS__)
#define CYAN_LOCKFREE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CYAN_LOCKFREE_ASAN 1
#endif
#endif
#if defined(CYAN_LOCKFREE_ASAN)
#include <sanitizer/asan_interface.h>
#endif

namespace cyan::lockfree::detail {

/// The header of a slab of node blocks, in the slab's first block.
struct slab_header {
  // Blocks given back since the slab was last handed out. The thread whose return completes the
  // count owns the slab again and recycles it.
  std::atomic<std::uint32_t> returned_{ 0 };
};

/// ~(slab_bytes() - 1) per class, from a table: computing it is a division.
inline constexpr auto kSlabMasks = [] {
  std::array<std::uintptr_t, kBlockClassCount> masks{};
  for (std::size_t block_class = 0; block_class < kBlockClassCount; ++block_class) {
    masks[block_class] = ~(slab_bytes(block_class) - 1);
  }
  return masks;
}();

/// The slab a block of `block_class` was carved from.
inline slab_header* slab_of(const void* block, std::size_t block_class) noexcept {
  const auto address = reinterpret_cast<std::uintptr_t>(block);
  return reinterpret_cast<slab_header*>(address & kSlabMasks[block_class]);
}

/// Under AddressSanitizer a returned block is poisoned, so that reading a reclaimed node is
/// reported even though its memory is recycled rather than freed.
inline void poison_blocks(void* first, std::size_t count, std::size_t block_class) noexcept {
#if defined(CYAN_LOCKFREE_ASAN)
  ASAN_POISON_MEMORY_REGION(first, count * block_size(block_class));
#else
  (void)first;
  (void)count;
  (void)block_class;
#endif
}

/// Makes blocks addressable again, before they hold a node or go back to the system.
inline void unpoison_blocks(void* first, std::size_t count, std::size_t block_class) noexcept {
#if defined(CYAN_LOCKFREE_ASAN)
  ASAN_UNPOISON_MEMORY_REGION(first, count * block_size(block_class));
#else
  (void)first;
  (void)count;
  (void)block_class;
#endif
}

/// A slab whose blocks are all free: recycled from the shared pool, else new from the system.
/// Throws std::bad_alloc.
slab_header* obtain_slab(std::size_t block_class);

/// Gives back `count` blocks of `slab` that no thread will touch again. The call that returns the
/// slab's last block recycles it: into the shared pool, or to the system when the pool is full.
void return_blocks(std::size_t block_class, slab_header* slab, std::uint32_t count) noexcept;

}  // namespace cyan::lockfree::detail
