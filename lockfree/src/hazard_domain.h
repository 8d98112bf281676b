#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "cyan/common/cache_line.h"
#include "cyan/lockfree/detail/block_class.h"
#include "cyan/lockfree/detail/hazard_record.h"
#include "cyan/lockfree/detail/slab.h"

/// Process-wide state behind the hazard records: the list of records and, per block class, the
/// shared pool of free slabs and the nodes that exited threads left protected.
namespace cyan::lockfree::detail {

/// Retired nodes between scans beyond twice the hazard slots: keeps a scan's cost (one pass over
/// every record) spread over many retirements even when there are few threads.
inline constexpr std::size_t kScanBase = 64;

/// Free slabs of one class kept for reuse: kSharedSlabs, plus what live containers reserved.
/// Containers' operations only ever try_lock the mutex: a thread that finds it busy allocates
/// from, or frees to, the system instead, so no operation waits here. Only reservations lock.
struct slab_pool {
  std::mutex mutex_;
  slab_header** slabs_ = nullptr;        // guarded; an array of allocated_ entries, size_ in use
  std::size_t size_ = 0;                 // guarded
  std::size_t allocated_ = 0;            // guarded
  std::size_t capacity_ = kSharedSlabs;  // guarded
};

/// Process-wide state of one block class.
struct shared_class {
  slab_pool pool_;
  // Retired nodes that exited threads left protected; the next scan adopts them all at once.
  std::atomic<reclaimable*> orphans_{ nullptr };
  // Node blocks in slabs taken from the system allocator and not yet given back.
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

}  // namespace cyan::lockfree::detail
