#include "cyan/lockfree/detail/hazard_record.h"

#include <pthread.h>

#include <cstdio>
#include <exception>

#include "cyan/lockfree/detail/node_pool.h"
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
