#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <utility>

#include "cyan/common/noncopyable.h"
#include "cyan/lockfree/detail/hazard_record.h"
#include "cyan/lockfree/detail/node_pool.h"
#include "cyan/lockfree/detail/slab.h"
#include "hazard_domain.h"

// A record's scan: snapshot every published hazard, then give back the blocks of the retired
// nodes that none protects.
namespace cyan::lockfree::detail {

// Gathers a scan's block returns per slab, so that it pays one atomic add per slab rather than
// one per node: with several consumers, neighbouring nodes of one slab end up in different
// threads' retired nodes, and every add is on a line the other consumers also write.
class slab_returns : noncopyable {
 public:
  ~slab_returns() {
    for (std::size_t i = 0; i < used_; ++i) {
      return_blocks(entries_[i].block_class, entries_[i].slab, entries_[i].count);
    }
  }

  void add(void* block, std::size_t block_class) noexcept {
    poison_blocks(block, 1, block_class);
    slab_header* slab = slab_of(block, block_class);
    for (std::size_t i = 0; i < used_; ++i) {
      if (entries_[i].slab == slab) {
        ++entries_[i].count;
        return;
      }
    }
    entry& free_entry = used_ < kEntries ? entries_[used_++] : evict();
    free_entry = { slab, block_class, 1 };
  }

 private:
  // Enough for the slabs a scan meets at once: one being carved per producing thread.
  static constexpr std::size_t kEntries = 16;
  struct entry {
    slab_header* slab;
    std::size_t block_class;
    std::uint32_t count;
  };

  entry& evict() noexcept {
    entry& victim = entries_[next_eviction_++ % kEntries];
    return_blocks(victim.block_class, victim.slab, victim.count);
    return victim;
  }

  std::array<entry, kEntries> entries_;  // the first used_ are valid
  std::size_t used_ = 0;
  std::size_t next_eviction_ = 0;
};

void hazard_record::scan() noexcept {
  adopt_orphans();
  scan_threshold_ = scan_threshold();
  if (!collect_hazards()) {
    // A slot block appeared after the snapshot was sized: keep everything until next time.
    spill_buffer();
    scan_threshold_ += retired_total_;
    return;
  }
  slab_returns returns;
  std::size_t kept = 0;
  for (std::size_t block_class = 0; block_class < kBlockClassCount; ++block_class) {
    if (caches_[block_class].retired_count_ != 0) {
      kept += reclaim_listed(block_class, returns);
    }
  }
  kept += reclaim_buffered(returns);
  retired_total_ = kept;
}

void hazard_record::spill_buffer() noexcept {
  for (std::size_t i = 0; i < buffered_; ++i) {
    const std::size_t block_class = retire_buffer_[i] & kClassMask;
    list_retired(block_class, reinterpret_cast<reclaimable*>(retire_buffer_[i] & ~kClassMask));
  }
  buffered_ = 0;
}

void hazard_record::list_retired(std::size_t block_class, reclaimable* node) noexcept {
  class_cache& cache = caches_[block_class];
  node->retired_next_ = cache.retired_;
  cache.retired_ = node;
  ++cache.retired_count_;
}

bool hazard_record::collect_hazards() noexcept {
  const std::size_t needed = domain().slot_count_.load();
  if (hazard_capacity_ < needed) {
    std::unique_ptr<const void*[]> bigger(new (std::nothrow) const void*[2 * needed]);
    if (bigger) {
      hazards_ = std::move(bigger);
      hazard_capacity_ = 2 * needed;
    }
  }
  hazard_count_ = 0;
  for (hazard_record* record = domain().records_.load(); record; record = record->next_) {
    // An idle record's slots are clear, and a thread claiming it afterwards confirms every node
    // it publishes is still reachable.
    if (!record->active_.load()) {
      continue;
    }
    for (hazard_slot_block* block = &record->slots_; block; block = block->next_.load()) {
      for (const std::atomic<void*>& slot : block->slots_) {
        if (const void* node = slot.load()) {
          if (hazard_count_ == hazard_capacity_) {
            return false;
          }
          hazards_[hazard_count_++] = node;
        }
      }
    }
  }
  std::sort(hazards_.get(), hazards_.get() + hazard_count_, std::less<>());
  return true;
}

bool hazard_record::is_protected(const void* node) const noexcept {
  return std::binary_search(hazards_.get(), hazards_.get() + hazard_count_, node, std::less<>());
}

std::size_t hazard_record::reclaim_listed(std::size_t block_class, slab_returns& returns) noexcept {
  class_cache& cache = caches_[block_class];
  reclaimable* node = std::exchange(cache.retired_, nullptr);
  cache.retired_count_ = 0;
  while (node != nullptr) {
    reclaimable* next = node->retired_next_;
    if (is_protected(node)) {
      list_retired(block_class, node);
    } else {
      returns.add(node, block_class);
    }
    node = next;
  }
  return cache.retired_count_;
}

std::size_t hazard_record::reclaim_buffered(slab_returns& returns) noexcept {
  std::size_t kept = 0;
  for (std::size_t i = 0; i < buffered_; ++i) {
    const std::size_t block_class = retire_buffer_[i] & kClassMask;
    auto* node = reinterpret_cast<reclaimable*>(retire_buffer_[i] & ~kClassMask);
    if (is_protected(node)) {
      list_retired(block_class, node);
      ++kept;
    } else {
      returns.add(node, block_class);
    }
  }
  buffered_ = 0;
  return kept;
}

void hazard_record::adopt_orphans() noexcept {
  for (std::size_t block_class = 0; block_class < kBlockClassCount; ++block_class) {
    std::atomic<reclaimable*>& orphans = shared(block_class).orphans_;
    // relaxed: a cheap pre-check; the exchange decides.
    if (orphans.load(std::memory_order_relaxed) == nullptr) {
      continue;
    }
    // acquire: pairs with the release CAS in orphan_retired(), making the links visible.
    reclaimable* node = orphans.exchange(nullptr, std::memory_order_acquire);
    while (node != nullptr) {
      reclaimable* next = node->retired_next_;
      list_retired(block_class, node);
      ++retired_total_;
      node = next;
    }
  }
}

}  // namespace cyan::lockfree::detail
