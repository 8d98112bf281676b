#pragma once

#include <algorithm>
#include <cstddef>

#include "cyan/common/cache_line.h"

namespace cyan::lockfree::detail {

/// Node memory comes in power-of-two blocks, from one cache line (so a producer filling one node
/// never shares a line with a consumer reading the one before it) up to 1 MiB on x86-64. Blocks
/// are carved in order out of slabs: a slab is aligned to its own size, its first block holds the
/// slab's header, and it is reused (or given back to the system) only once all of its other
/// blocks have been returned.
inline constexpr std::size_t kBlockClassCount = 15;

/// The process-wide pool keeps at most this many free slabs per class, beyond what live
/// containers reserved.
inline constexpr std::size_t kSharedSlabs = 8;

/// Bytes in one block of `block_class`; blocks are aligned to their size.
constexpr std::size_t block_size(std::size_t block_class) noexcept {
  return cache_line_size << block_class;
}

/// The smallest class whose blocks hold an object of this size and alignment; kBlockClassCount
/// when none does.
constexpr std::size_t block_class_for(std::size_t size, std::size_t align) noexcept {
  std::size_t block_class = 0;
  while (block_class < kBlockClassCount && block_size(block_class) < std::max(size, align)) {
    ++block_class;
  }
  return block_class;
}

/// Blocks in one slab, the header block included: 64 amortises a system allocation over 63
/// nodes; the 64 KiB cap keeps slabs of large blocks small.
constexpr std::size_t slab_blocks(std::size_t block_class) noexcept {
  return std::clamp<std::size_t>(65536 / block_size(block_class), 2, 64);
}

/// Bytes in (and alignment of) one slab: a power of two, so a block finds its slab by masking.
constexpr std::size_t slab_bytes(std::size_t block_class) noexcept {
  return block_size(block_class) * slab_blocks(block_class);
}

/// Node blocks in one slab.
constexpr std::size_t usable_blocks(std::size_t block_class) noexcept {
  return slab_blocks(block_class) - 1;
}

static_assert(block_class_for(1, 1) == 0);
static_assert(block_class_for(cache_line_size + 1, 8) == 1);
static_assert((slab_bytes(0) & (slab_bytes(0) - 1)) == 0);
static_assert((slab_bytes(kBlockClassCount - 1) & (slab_bytes(kBlockClassCount - 1) - 1)) == 0);

}  // namespace cyan::lockfree::detail
