#include "cyan/lockfree/detail/hazard_record.h"

#include <pthread.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <utility>

#include "cyan/common/noncopyable.h"
#include "cyan/lockfree/detail/node_pool.h"
#include "cyan/lockfree/detail/slab.h"
#include "hazard_domain.h"

namespace cyan::lockfree::detail {
namespace {

// Trivially destructible and constant-initialised: usable from any thread at any time, even
// during static destruction.
constinit hazard_domain global_domain;

[[noreturn]] void fail(const char* what) noexcept {
  std::fputs(what, stderr);
  std::terminate();
}

// Runs when a thread that claimed a record exits. POSIX runs it after the thread's C++
// thread_local destructors, so they may still use containers; if they claim a record again,
// glibc runs it again.
void release_at_exit(void* record) noexcept {
  static_cast<hazard_record*>(record)->on_release();
}

pthread_key_t exit_key() noexcept {
  static const pthread_key_t key = [] {
    pthread_key_t created;
    if (pthread_key_create(&created, release_at_exit) != 0) {
      fail("cyan::lockfree: pthread_key_create failed\n");
    }
    return created;
  }();
  return key;
}

hazard_record* reuse_idle_record() noexcept {
  // acquire: pairs with the CAS in add_record(), so next_ of each record is visible.
  hazard_record* record = domain().records_.load(std::memory_order_acquire);
  for (; record != nullptr; record = record->next_) {
    // relaxed: a cheap pre-check; the exchange decides, and its acquire pairs with the release
    // store in on_release(), so the new owner sees the record as its last owner left it.
    if (!record->active_.load(std::memory_order_relaxed) && !record->active_.exchange(true)) {
      return record;
    }
  }
  return nullptr;
}

hazard_record* add_record() noexcept {
  auto* record = new (std::nothrow) hazard_record;
  if (record == nullptr) {
    fail("cyan::lockfree: out of memory for a thread's hazard record\n");
  }
  // relaxed: published by the CAS below.
  record->active_.store(true, std::memory_order_relaxed);
  domain().slot_count_.fetch_add(hazard_slot_block::kSlots);
  // relaxed: only a first guess for the CAS.
  hazard_record* head = domain().records_.load(std::memory_order_relaxed);
  do {
    record->next_ = head;
    // seq_cst: a scan that misses this record comes before the record's first hazard in the
    // single total order, so that hazard's confirming load sees whatever the scan's owner unlinked.
  } while (!domain().records_.compare_exchange_weak(head, record));
  return record;
}

// Gathers a scan's block returns per slab, so that it pays one atomic add per slab rather than
// one per node: with several consumers, neighbouring nodes of one slab end up in different
// threads' retired lists, and every add is on a line the other consumers also write.
class slab_returns : noncopyable {
 public:
  explicit slab_returns(std::size_t block_class) noexcept
      : block_class_(block_class), slab_mask_(~(slab_bytes(block_class) - 1)) {}
  ~slab_returns() {
    for (std::size_t i = 0; i < used_; ++i) {
      return_blocks(block_class_, entries_[i].slab, entries_[i].count);
    }
  }

  void add(void* block) noexcept {
    poison_blocks(block, 1, block_class_);
    auto* slab =
        reinterpret_cast<slab_header*>(reinterpret_cast<std::uintptr_t>(block) & slab_mask_);
    for (std::size_t i = 0; i < used_; ++i) {
      if (entries_[i].slab == slab) {
        ++entries_[i].count;
        return;
      }
    }
    if (used_ < kEntries) {
      entries_[used_++] = { slab, 1 };
      return;
    }
    entry& evicted = entries_[next_eviction_++ % kEntries];
    return_blocks(block_class_, evicted.slab, evicted.count);
    evicted = { slab, 1 };
  }

 private:
  // Enough for the slabs a scan meets at once: one being carved per producing thread.
  static constexpr std::size_t kEntries = 16;
  struct entry {
    slab_header* slab;
    std::uint32_t count;
  };
  std::size_t block_class_;
  std::uintptr_t slab_mask_;
  std::array<entry, kEntries> entries_;  // the first used_ are valid
  std::size_t used_ = 0;
  std::size_t next_eviction_ = 0;
};

}  // namespace

hazard_domain& domain() noexcept {
  return global_domain;
}

std::size_t scan_threshold() noexcept {
  // relaxed: a tuning value; a stale count only moves the next scan a little.
  return kScanBase + 2 * domain().slot_count_.load(std::memory_order_relaxed);
}

hazard_record& claim_record() noexcept {
  hazard_record* record = reuse_idle_record();
  if (record == nullptr) {
    record = add_record();
  }
  record->on_claim();
  tls_record = record;
  if (pthread_setspecific(exit_key(), record) != 0) {
    fail("cyan::lockfree: pthread_setspecific failed\n");
  }
  return *record;
}

void hazard_record::on_claim() noexcept {
  scan_threshold_ = scan_threshold();
}

void hazard_record::on_release() noexcept {
  scan();
  for (std::size_t block_class = 0; block_class < kBlockClassCount; ++block_class) {
    orphan_retired(block_class);
    stop_carving(block_class);
  }
  tls_record = nullptr;
  // release: pairs with the exchange in reuse_idle_record() and with the load of active_ in
  // collect_hazards(): every read this thread made of any node happens before its reclamation.
  active_.store(false, std::memory_order_release);
}

std::atomic<void*>& hazard_record::overflow_slot(std::size_t index) noexcept {
  hazard_slot_block* block = &slots_;
  for (; index >= hazard_slot_block::kSlots; index -= hazard_slot_block::kSlots) {
    // relaxed: only this thread writes next_.
    hazard_slot_block* next = block->next_.load(std::memory_order_relaxed);
    if (next == nullptr) {
      next = new (std::nothrow) hazard_slot_block;
      if (next == nullptr) {
        fail("cyan::lockfree: out of memory for nested hazard slots\n");
      }
      domain().slot_count_.fetch_add(hazard_slot_block::kSlots);
      block->next_.store(next);  // seq_cst: for the same reason as add_record()'s CAS
    }
    block = next;
  }
  return block->slots_[index];
}

void hazard_record::scan() noexcept {
  adopt_orphans();
  scan_threshold_ = scan_threshold();
  if (!collect_hazards()) {
    // A slot block appeared after the snapshot was sized: keep everything until next time.
    scan_threshold_ += retired_total_;
    return;
  }
  std::size_t kept = 0;
  for (std::size_t block_class = 0; block_class < kBlockClassCount; ++block_class) {
    if (caches_[block_class].retired_count_ != 0) {
      kept += reclaim_unprotected(block_class);
    }
  }
  retired_total_ = kept;
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

std::size_t hazard_record::reclaim_unprotected(std::size_t block_class) noexcept {
  class_cache& cache = caches_[block_class];
  reclaimable* node = std::exchange(cache.retired_, nullptr);
  cache.retired_count_ = 0;
  slab_returns returns(block_class);
  while (node != nullptr) {
    reclaimable* next = node->retired_next_;
    const void* address = node;
    if (std::binary_search(hazards_.get(), hazards_.get() + hazard_count_, address,
                           std::less<>())) {
      node->retired_next_ = cache.retired_;
      cache.retired_ = node;
      ++cache.retired_count_;
    } else {
      returns.add(node);
    }
    node = next;
  }
  return cache.retired_count_;
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
    class_cache& cache = caches_[block_class];
    while (node != nullptr) {
      reclaimable* next = node->retired_next_;
      node->retired_next_ = cache.retired_;
      cache.retired_ = node;
      ++cache.retired_count_;
      ++retired_total_;
      node = next;
    }
  }
}

void hazard_record::orphan_retired(std::size_t block_class) noexcept {
  class_cache& cache = caches_[block_class];
  if (cache.retired_ == nullptr) {
    return;
  }
  reclaimable* last = cache.retired_;
  while (last->retired_next_ != nullptr) {
    last = last->retired_next_;
  }
  std::atomic<reclaimable*>& orphans = shared(block_class).orphans_;
  // relaxed: only a first guess for the CAS.
  reclaimable* head = orphans.load(std::memory_order_relaxed);
  do {
    last->retired_next_ = head;
    // release: pairs with the acquire exchange in adopt_orphans().
  } while (!orphans.compare_exchange_weak(head, cache.retired_, std::memory_order_release,
                                          std::memory_order_relaxed));
  retired_total_ -= cache.retired_count_;
  cache.retired_ = nullptr;
  cache.retired_count_ = 0;
}

}  // namespace cyan::lockfree::detail
