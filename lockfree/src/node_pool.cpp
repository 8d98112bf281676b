#include "cyan/lockfree/detail/node_pool.h"

#include <new>
#include <utility>

#include "hazard_domain.h"

namespace cyan::lockfree::detail {

void* system_allocate(std::size_t block_class) {
  void* block =
      ::operator new (block_size(block_class), std::align_val_t{ block_align(block_class) });
  // relaxed: a statistic; readers that need an exact value synchronise with the threads first.
  shared(block_class).system_blocks_.fetch_add(1, std::memory_order_relaxed);
  return block;
}

void system_free(std::size_t block_class, void* block) noexcept {
  unpoison_block(block, block_class);
  ::operator delete (block, block_size(block_class), std::align_val_t{ block_align(block_class) });
  // relaxed: a statistic, as in system_allocate().
  shared(block_class).system_blocks_.fetch_sub(1, std::memory_order_relaxed);
}

void system_free_chain(std::size_t block_class, free_block* chain) noexcept {
  while (chain != nullptr) {
    free_block* next = chain->next_;
    system_free(block_class, chain);
    chain = next;
  }
}

bool share_batch(std::size_t block_class, free_block* batch) noexcept {
  for (std::atomic<free_block*>& slot : shared(block_class).batches_) {
    free_block* empty = nullptr;
    // relaxed pre-check: skips full slots without a locked instruction. release on success:
    // pairs with the acquire exchange in take_batch(), making the batch's links visible.
    if (slot.load(std::memory_order_relaxed) == nullptr &&
        slot.compare_exchange_strong(empty, batch, std::memory_order_release,
                                     std::memory_order_relaxed)) {
      return true;
    }
  }
  return false;
}

free_block* take_batch(std::size_t block_class) noexcept {
  for (std::atomic<free_block*>& slot : shared(block_class).batches_) {
    // relaxed pre-check: skips empty slots without a locked instruction. acquire: pairs with the
    // release CAS in share_batch().
    if (slot.load(std::memory_order_relaxed) != nullptr) {
      if (free_block* batch = slot.exchange(nullptr, std::memory_order_acquire)) {
        return batch;
      }
    }
  }
  return nullptr;
}

void* hazard_record::refill(std::size_t block_class) {
  class_cache& cache = caches_[block_class];
  free_block* batch = std::exchange(cache.full_batch_, nullptr);
  if (batch == nullptr) {
    batch = take_batch(block_class);
  }
  if (batch == nullptr) {
    return system_allocate(block_class);
  }
  cache.free_ = batch->next_;
  cache.free_count_ = batch_blocks(block_class) - 1;
  unpoison_block(batch, block_class);
  return batch;
}

void hazard_record::spill(std::size_t block_class) noexcept {
  class_cache& cache = caches_[block_class];
  if (cache.full_batch_ != nullptr && !share_batch(block_class, cache.full_batch_)) {
    system_free_chain(block_class, cache.full_batch_);
  }
  cache.full_batch_ = std::exchange(cache.free_, nullptr);
  cache.free_count_ = 0;
}

void hazard_record::release_cache(std::size_t block_class, bool share) noexcept {
  class_cache& cache = caches_[block_class];
  free_block* full = std::exchange(cache.full_batch_, nullptr);
  if (full != nullptr && !(share && share_batch(block_class, full))) {
    system_free_chain(block_class, full);
  }
  system_free_chain(block_class, std::exchange(cache.free_, nullptr));
  cache.free_count_ = 0;
}

void hazard_record::trim() noexcept {
  scan();
  for (std::size_t block_class = 0; block_class < kBlockClassCount; ++block_class) {
    release_cache(block_class, /*share=*/false);
  }
}

std::int64_t system_blocks(std::size_t block_class) noexcept {
  // relaxed: a statistic, as in system_allocate().
  return shared(block_class).system_blocks_.load(std::memory_order_relaxed);
}

void release_cached_nodes() noexcept {
  local_record().trim();
  for (std::size_t block_class = 0; block_class < kBlockClassCount; ++block_class) {
    while (free_block* batch = take_batch(block_class)) {
      system_free_chain(block_class, batch);
    }
  }
}

}  // namespace cyan::lockfree::detail
