#include "cyan/lockfree/detail/node_pool.h"

#include <algorithm>
#include <mutex>
#include <new>
#include <vector>

#include "cyan/lockfree/detail/slab.h"
#include "hazard_domain.h"

namespace cyan::lockfree::detail {
namespace {

slab_header* system_allocate_slab(std::size_t block_class) {
  void* memory =
      ::operator new (slab_bytes(block_class), std::align_val_t{ slab_bytes(block_class) });
  // relaxed: a statistic; readers that need an exact value synchronise with the threads first.
  shared(block_class)
      .system_blocks_.fetch_add(usable_blocks(block_class), std::memory_order_relaxed);
  return ::new (memory) slab_header;
}

void system_free_slab(std::size_t block_class, slab_header* slab) noexcept {
  unpoison_blocks(slab, slab_blocks(block_class), block_class);
  ::operator delete (slab, slab_bytes(block_class), std::align_val_t{ slab_bytes(block_class) });
  // relaxed: a statistic, as in system_allocate_slab().
  shared(block_class)
      .system_blocks_.fetch_sub(usable_blocks(block_class), std::memory_order_relaxed);
}

// Makes room for `wanted` entries; false when memory for a longer array is missing. The caller
// holds the mutex.
bool fit_pool(slab_pool& pool, std::size_t wanted) noexcept {
  if (pool.allocated_ >= wanted) {
    return true;
  }
  auto* longer = new (std::nothrow) slab_header*[wanted];
  if (longer == nullptr) {
    return false;
  }
  std::copy(pool.slabs_, pool.slabs_ + pool.size_, longer);
  delete[] pool.slabs_;
  pool.slabs_ = longer;
  pool.allocated_ = wanted;
  return true;
}

bool share_slab(std::size_t block_class, slab_header* slab) noexcept {
  slab_pool& pool = shared(block_class).pool_;
  std::unique_lock lock(pool.mutex_, std::try_to_lock);
  if (!lock || pool.size_ == pool.capacity_ || !fit_pool(pool, pool.capacity_)) {
    return false;
  }
  pool.slabs_[pool.size_++] = slab;
  return true;
}

slab_header* take_slab(std::size_t block_class) noexcept {
  slab_pool& pool = shared(block_class).pool_;
  std::unique_lock lock(pool.mutex_, std::try_to_lock);
  return lock && pool.size_ != 0 ? pool.slabs_[--pool.size_] : nullptr;
}

// Takes the pooled slabs beyond `keep` out of the pool and gives them back to the system.
void shrink_pool(std::size_t block_class, std::size_t keep) noexcept {
  slab_pool& pool = shared(block_class).pool_;
  std::unique_lock lock(pool.mutex_);
  while (pool.size_ > keep) {
    slab_header* slab = pool.slabs_[--pool.size_];
    lock.unlock();
    system_free_slab(block_class, slab);
    lock.lock();
  }
}

}  // namespace

slab_header* obtain_slab(std::size_t block_class) {
  if (slab_header* slab = take_slab(block_class)) {
    return slab;
  }
  return system_allocate_slab(block_class);
}

void return_blocks(std::size_t block_class, slab_header* slab, std::uint32_t count) noexcept {
  // acq_rel: the release orders this thread's last use of the blocks before the count; the
  // acquire gives the thread that completes the count every other returner's uses.
  const std::uint32_t returned = slab->returned_.fetch_add(count, std::memory_order_acq_rel);
  if (returned + count != usable_blocks(block_class)) {
    return;
  }
  // relaxed: no other thread can reach the slab until share_slab() publishes it.
  slab->returned_.store(0, std::memory_order_relaxed);
  if (!share_slab(block_class, slab)) {
    system_free_slab(block_class, slab);
  }
}

std::byte* hazard_record::start_slab(std::size_t block_class) {
  std::byte* base = reinterpret_cast<std::byte*>(obtain_slab(block_class));
  caches_[block_class].carve_end_ = base + slab_bytes(block_class);
  return base + block_size(block_class);  // the first block holds the header
}

void hazard_record::stop_carving(std::size_t block_class) noexcept {
  class_cache& cache = caches_[block_class];
  if (cache.carve_next_ != cache.carve_end_) {
    const auto unused = static_cast<std::uint32_t>((cache.carve_end_ - cache.carve_next_) /
                                                   block_size(block_class));
    poison_blocks(cache.carve_next_, unused, block_class);
    return_blocks(block_class, slab_of(cache.carve_next_, block_class), unused);
  }
  cache.carve_next_ = nullptr;
  cache.carve_end_ = nullptr;
}

void hazard_record::trim() noexcept {
  scan();
  for (std::size_t block_class = 0; block_class < kBlockClassCount; ++block_class) {
    stop_carving(block_class);
  }
}

std::int64_t system_blocks(std::size_t block_class) noexcept {
  // relaxed: a statistic, as in system_allocate_slab().
  return shared(block_class).system_blocks_.load(std::memory_order_relaxed);
}

void release_cached_nodes() noexcept {
  local_record().trim();
  for (std::size_t block_class = 0; block_class < kBlockClassCount; ++block_class) {
    slab_pool& pool = shared(block_class).pool_;
    std::size_t reserved = 0;
    {
      const std::lock_guard lock(pool.mutex_);
      reserved = pool.capacity_ - kSharedSlabs;
    }
    shrink_pool(block_class, reserved);
  }
}

std::size_t reserve_nodes(std::size_t block_class, std::size_t nodes) {
  const std::size_t slabs = (nodes + usable_blocks(block_class) - 1) / usable_blocks(block_class);
  std::vector<slab_header*> fresh;
  try {
    fresh.reserve(slabs);
    while (fresh.size() < slabs) {
      fresh.push_back(system_allocate_slab(block_class));
    }
    slab_pool& pool = shared(block_class).pool_;
    const std::lock_guard lock(pool.mutex_);
    if (!fit_pool(pool, pool.capacity_ + slabs)) {
      throw std::bad_alloc();
    }
    pool.capacity_ += slabs;
    for (slab_header* slab : fresh) {
      pool.slabs_[pool.size_++] = slab;
    }
  } catch (...) {
    for (slab_header* slab : fresh) {
      system_free_slab(block_class, slab);
    }
    throw;
  }
  return slabs;
}

void release_reservation(std::size_t block_class, std::size_t slabs) noexcept {
  slab_pool& pool = shared(block_class).pool_;
  std::size_t keep = 0;
  {
    const std::lock_guard lock(pool.mutex_);
    pool.capacity_ -= slabs;
    keep = pool.capacity_;
  }
  shrink_pool(block_class, keep);
}

}  // namespace cyan::lockfree::detail
