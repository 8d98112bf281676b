#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "cyan/common/cache_line.h"
#include "cyan/lockfree/detail/block_class.h"
#include "cyan/lockfree/detail/hazard_record.h"

/// Process-wide state behind the hazard records: the list of records and, per block class, the
/// shared pool of free batches and the nodes that exited threads left protected.
namespace cyan::lockfree::detail {

/// Retired nodes between scans beyond twice the hazard slots: keeps a scan's cost (one pass over
/// every record) spread over many retirements even when there are few threads.
inline constexpr std::size_t kScanBase = 64;

/// Process-wide state of one block class.
struct shared_class {
  // Each slot holds one whole batch or null: taken whole by exchange and put back only into an
  // empty slot, so a batch's links are never read by two threads and there is no ABA.
  std::array<std::atomic<free_block*>, kSharedBatches> batches_{};
  // Retired nodes that exited threads left protected; the next scan adopts them all at once.
  std::atomic<reclaimable*> orphans_{ nullptr };
  // Blocks taken from the system allocator and not yet returned.
  std::atomic<std::int64_t> system_blocks_{ 0 };
};

struct hazard_domain {
  // Every record ever created, newest first; only ever pushed onto.
  std::atomic<hazard_record*> records_{ nullptr };
  // Hazard slots in all records, so a scan can size its snapshot.
  std::atomic<std::size_t> slot_count_{ 0 };
  std::array<cache_padded<shared_class>, kBlockClassCount> classes_{};
};

hazard_domain& domain() noexcept;

inline shared_class& shared(std::size_t block_class) noexcept {
  return domain().classes_[block_class].value;
}

/// A new block from the system allocator. Throws std::bad_alloc.
void* system_allocate(std::size_t block_class);
void system_free(std::size_t block_class, void* block) noexcept;
void system_free_chain(std::size_t block_class, free_block* chain) noexcept;

/// Offers a whole batch to the shared pool; false when the pool is full.
bool share_batch(std::size_t block_class, free_block* batch) noexcept;

/// A whole batch from the shared pool, or null when it is empty.
free_block* take_batch(std::size_t block_class) noexcept;

}  // namespace cyan::lockfree::detail
