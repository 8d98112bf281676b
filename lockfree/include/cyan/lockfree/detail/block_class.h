#pragma once

#include <algorithm>
#include <cstddef>

#include "cyan/common/cache_line.h"

namespace cyan::lockfree::detail {

/// Node memory comes in power-of-two blocks, from one cache line (so a producer filling one node
/// never shares a line with a consumer reading the one before it) up to 1 MiB on x86-64.
inline constexpr std::size_t kBlockClassCount = 15;

/// Block alignment is capped here; a node type must not need more.
inline constexpr std::size_t kMaxBlockAlign = 4096;

/// A thread's cache keeps at most this many batches of free blocks per class.
inline constexpr std::size_t kCachedBatches = 2;

/// The process-wide pool keeps at most this many batches of free blocks per class.
inline constexpr std::size_t kSharedBatches = 8;

/// Bytes in one block of `block_class`.
constexpr std::size_t block_size(std::size_t block_class) noexcept {
  return cache_line_size << block_class;
}

/// Alignment of every block of `block_class`.
constexpr std::size_t block_align(std::size_t block_class) noexcept {
  return std::min(block_size(block_class), kMaxBlockAlign);
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

/// Blocks moved at once between a thread's cache and the shared pool: 64 amortises the pool's
/// atomic exchange to almost nothing, and the 16 KiB cap keeps caches of large blocks small.
constexpr std::size_t batch_blocks(std::size_t block_class) noexcept {
  return std::clamp<std::size_t>(16384 / block_size(block_class), 1, 64);
}

static_assert(block_class_for(1, 1) == 0);
static_assert(block_class_for(cache_line_size + 1, 8) == 1);
static_assert(block_align(kBlockClassCount - 1) == kMaxBlockAlign);

}  // namespace cyan::lockfree::detail
