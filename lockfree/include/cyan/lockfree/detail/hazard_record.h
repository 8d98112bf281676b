#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <memory>
#include <new>

#include "cyan/common/cache_line.h"
#include "cyan/common/noncopyable.h"
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

/// Hazard pointers (Maged Michael, 2004) for cyan's lock-free containers, with a per-thread cache
/// of node memory. A reader publishes the node it is about to read in one of its hazard slots and
/// re-checks that the node is still reachable; a thread that unlinks a node retires it, and frees
/// it (to its cache) only once a scan finds it in no thread's slot. So no node is freed while a
/// thread may read it, and no node is reused while a thread may compare against its address (no
/// ABA).
namespace cyan::lockfree::detail {

/// Base of every node the domain reclaims. The link belongs to the thread that retired the node;
/// other threads may still read the rest of the node until it is reclaimed.
struct reclaimable {
  reclaimable* retired_next_ = nullptr;
};

/// A reclaimed block of node memory, linked through its first bytes.
struct free_block {
  free_block* next_ = nullptr;
};

/// Under AddressSanitizer a free block is poisoned but for its link, so that reading a reclaimed
/// node is reported even though its memory is reused rather than freed.
inline void poison_free_block(void* block, std::size_t block_class) noexcept {
#if defined(CYAN_LOCKFREE_ASAN)
  ASAN_POISON_MEMORY_REGION(static_cast<char*>(block) + sizeof(free_block),
                            block_size(block_class) - sizeof(free_block));
#else
  (void)block;
  (void)block_class;
#endif
}

/// Makes a whole block addressable again, before it holds a node or goes back to the system.
inline void unpoison_block(void* block, std::size_t block_class) noexcept {
#if defined(CYAN_LOCKFREE_ASAN)
  ASAN_UNPOISON_MEMORY_REGION(block, block_size(block_class));
#else
  (void)block;
  (void)block_class;
#endif
}

/// Hazard slots. A record's first block is inline; more are chained on only when operations nest
/// deeper (an element's move or destructor that itself uses a lock-free container).
struct hazard_slot_block {
  static constexpr std::size_t kSlots = 4;  // two queue operations deep
  // Written only by the owning thread; read by every thread's scans.
  std::array<std::atomic<void*>, kSlots> slots_{};
  // Appended only by the owning thread; read by every thread's scans.
  std::atomic<hazard_slot_block*> next_{ nullptr };
};

/// The owning thread's free blocks and retired nodes of one block class.
struct class_cache {
  free_block* free_ = nullptr;  // at most one batch
  std::size_t free_count_ = 0;
  free_block* full_batch_ = nullptr;  // one whole batch kept back before sharing
  reclaimable* retired_ = nullptr;
  std::size_t retired_count_ = 0;
};

/// One thread's share of the process-wide hazard-pointer domain: its hazard slots, its retired
/// nodes and its cache of free node blocks. A thread claims a record on its first lock-free
/// operation and gives it back when it exits, after reclaiming what it can and handing what is
/// still protected to the domain; a later thread reuses it, so there are never more records than
/// threads alive at once. Records are never freed.
/// Every member is owner-thread-only except `slots_`, `active_` and `next_`.
class alignas(cache_line_size) hazard_record : noncopyable {
 public:
  /// A free hazard slot, taken in stack order. Calls std::terminate if nesting needs a new slot
  /// block and memory is exhausted.
  std::atomic<void*>& acquire_slot() noexcept {
    const std::size_t index = depth_++;
    if (index < hazard_slot_block::kSlots) [[likely]] {
      return slots_.slots_[index];
    }
    return overflow_slot(index);
  }

  /// Clears and gives back the slot taken last.
  void release_slot(std::atomic<void*>& slot) noexcept {
    // release: pairs with the load of the slot in collect_hazards(), so every read this thread
    // made of the node happens before the node is reclaimed.
    slot.store(nullptr, std::memory_order_release);
    --depth_;
  }

  /// A free block of `block_class`. Throws std::bad_alloc when the system has no memory.
  void* allocate(std::size_t block_class) {
    class_cache& cache = caches_[block_class];
    if (free_block* block = cache.free_) [[likely]] {
      cache.free_ = block->next_;
      --cache.free_count_;
      unpoison_block(block, block_class);
      return block;
    }
    return refill(block_class);
  }

  /// Takes back a block of `block_class` that no other thread can reach.
  void deallocate(std::size_t block_class, void* block) noexcept {
    class_cache& cache = caches_[block_class];
    if (cache.free_count_ == batch_blocks(block_class)) [[unlikely]] {
      spill(block_class);
    }
    cache.free_ = ::new (block) free_block{ cache.free_ };
    ++cache.free_count_;
    poison_free_block(block, block_class);
  }

  /// Takes a node that its container has unlinked; its block is reused once no slot holds it.
  void retire(std::size_t block_class, reclaimable* node) noexcept {
    class_cache& cache = caches_[block_class];
    node->retired_next_ = cache.retired_;
    cache.retired_ = node;
    ++cache.retired_count_;
    if (++retired_total_ >= scan_threshold_) [[unlikely]] {
      scan();
    }
  }

  /// Reclaims every retired node that no hazard slot holds, after adopting orphaned ones.
  void scan() noexcept;

  /// Scans, then returns every cached free block to the system.
  void trim() noexcept;

  /// Prepares a freshly claimed record for its new owner.
  void on_claim() noexcept;

  /// Leaves the record clean for the next owner: reclaims what it can, hands still-protected
  /// nodes to the domain and frees the cache.
  void on_release() noexcept;

  hazard_slot_block slots_;
  // Set by the thread that claims the record, cleared by it when it exits.
  std::atomic<bool> active_{ false };
  // The next record in the domain's list; written once, before the record is published.
  hazard_record* next_ = nullptr;

 private:
  std::atomic<void*>& overflow_slot(std::size_t index) noexcept;
  void* refill(std::size_t block_class);
  void spill(std::size_t block_class) noexcept;
  void release_cache(std::size_t block_class, bool share) noexcept;
  void adopt_orphans() noexcept;
  void orphan_retired(std::size_t block_class) noexcept;
  bool collect_hazards() noexcept;
  std::size_t reclaim_unprotected(std::size_t block_class) noexcept;

  alignas(cache_line_size) std::size_t depth_ = 0;  // slots in use
  std::size_t retired_total_ = 0;
  std::size_t scan_threshold_ = 0;
  std::array<class_cache, kBlockClassCount> caches_{};
  std::unique_ptr<const void*[]> hazards_;  // scan()'s sorted snapshot of published hazards
  std::size_t hazard_count_ = 0;
  std::size_t hazard_capacity_ = 0;
};

/// The calling thread's record: null before its first operation and after it has exited.
inline constinit thread_local hazard_record* tls_record = nullptr;

/// Claims a record for the calling thread: the slow path of local_record(). Calls std::terminate
/// if a new record (about 1 KB, once per thread) cannot be allocated.
hazard_record& claim_record() noexcept;

/// The calling thread's record. [any thread]
inline hazard_record& local_record() noexcept {
  if (hazard_record* record = tls_record) [[likely]] {
    return *record;
  }
  return claim_record();
}

/// Holds one hazard slot of the calling thread for its scope: the node published in it is not
/// reclaimed until the guard publishes another or goes away. Guards must nest in stack order.
class hazard_guard : noncopyable {
 public:
  explicit hazard_guard(hazard_record& record) noexcept
      : record_(record), slot_(record.acquire_slot()) {}
  ~hazard_guard() { record_.release_slot(slot_); }

  /// Publishes `source`'s node and returns it once `source` still holds it after publication, so
  /// the node stays readable until the guard changes.
  template <typename Node>
  Node* protect(const std::atomic<Node*>& source) noexcept {
    // relaxed: a guess; only a value confirmed by the seq_cst reload below is returned.
    Node* node = source.load(std::memory_order_relaxed);
    for (;;) {
      publish(node);
      Node* again = source.load();
      if (again == node) {
        return node;
      }
      node = again;
    }
  }

  /// Publishes `node`. The caller must then confirm, by a load made after this call, that the
  /// node was still reachable; until then the node must not be read.
  template <typename Node>
  void publish(Node* node) noexcept {
    // seq_cst exchange: with the seq_cst unlinking CAS and scan()'s seq_cst slot loads, either
    // the scan sees this slot or the caller's confirming load sees the node unlinked. The slot
    // holds the reclaimable base, the address that retire() records.
    slot_.exchange(static_cast<reclaimable*>(node));
  }

 private:
  hazard_record& record_;
  std::atomic<void*>& slot_;
};

}  // namespace cyan::lockfree::detail
