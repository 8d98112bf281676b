#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

#include "cyan/common/cache_line.h"
#include "cyan/common/noncopyable.h"
#include "cyan/lockfree/detail/block_class.h"
#include "cyan/lockfree/detail/slab.h"

/// Hazard pointers (Maged Michael, 2004) for cyan's lock-free containers, with per-thread carving
/// of node memory out of slabs (slab.h). A reader publishes the node it is about to read in one
/// of its hazard slots and re-checks that the node is still reachable; a thread that unlinks a
/// node retires it, and gives its block back only once a scan finds it in no thread's slot. So no
/// node is freed while a thread may read it, and no node is reused while a thread may compare
/// against its address (no ABA).
namespace cyan::lockfree::detail {

/// Base of every node the domain reclaims. The link belongs to the thread that retired the node;
/// other threads may still read the rest of the node until it is reclaimed.
struct reclaimable {
  reclaimable* retired_next_ = nullptr;
};

/// Hazard slots. A record's first block is inline; more are chained on only when operations nest
/// deeper (an element's move or destructor that itself uses a lock-free container).
struct hazard_slot_block {
  static constexpr std::size_t kSlots = 4;  // two queue operations deep
  // Written only by the owning thread; read by every thread's scans.
  std::array<std::atomic<void*>, kSlots> slots_{};
  // Appended only by the owning thread; read by every thread's scans.
  std::atomic<hazard_slot_block*> next_{ nullptr };
};

class slab_returns;

/// The owning thread's slab being carved and its listed retired nodes, for one block class.
struct class_cache {
  std::byte* carve_next_ = nullptr;  // the slab's next unused block
  std::byte* carve_end_ = nullptr;
  reclaimable* retired_ = nullptr;
  std::size_t retired_count_ = 0;
};

/// One thread's share of the process-wide hazard-pointer domain: its hazard slots, its retired
/// nodes and, per block class, the slab it is carving new nodes from. A thread claims a record on
/// its first lock-free operation and gives it back when it exits, after reclaiming what it can and
/// handing what is still protected to the domain; a later thread reuses it, so there are never more
/// records than threads alive at once. Records are never freed. Every member is owner-thread-only
/// except `slots_`, `active_` and `next_`.
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

  /// A free block of `block_class`: the next one of the slab being carved. Throws
  /// std::bad_alloc when a new slab is needed and the system has no memory.
  void* allocate(std::size_t block_class) {
    class_cache& cache = caches_[block_class];
    std::byte* block = cache.carve_next_;
    if (block == cache.carve_end_) [[unlikely]] {
      block = start_slab(block_class);
    }
    cache.carve_next_ = block + block_size(block_class);
    unpoison_blocks(block, 1, block_class);
    return block;
  }

  /// Gives back a block of `block_class` that no other thread can reach.
  void deallocate(std::size_t block_class, void* block) noexcept {
    poison_blocks(block, 1, block_class);
    return_blocks(block_class, slab_of(block, block_class), 1);
  }

  /// Takes a node that its container has unlinked; its block is reused once no slot holds it.
  /// The node is only noted in a buffer: linking it into a list now would write to a cache line
  /// that other threads were just reading, and stall this thread's next locked instruction.
  void retire(std::size_t block_class, reclaimable* node) noexcept {
    retire_buffer_[buffered_++] = reinterpret_cast<std::uintptr_t>(node) | block_class;
    if (++retired_total_ >= scan_threshold_) [[unlikely]] {
      scan();
    } else if (buffered_ == kRetireBuffer) [[unlikely]] {
      spill_buffer();
    }
  }

  /// Reclaims every retired node that no hazard slot holds, after adopting orphaned ones.
  void scan() noexcept;

  /// Scans, then gives back the unused rest of every slab being carved.
  void trim() noexcept;

  /// Prepares a freshly claimed record for its new owner.
  void on_claim() noexcept;

  /// Leaves the record clean for the next owner: reclaims what it can, hands still-protected
  /// nodes to the domain and gives back the slabs being carved.
  void on_release() noexcept;

  hazard_slot_block slots_;
  // Set by the thread that claims the record, cleared by it when it exits.
  std::atomic<bool> active_{ false };
  // The next record in the domain's list; written once, before the record is published.
  hazard_record* next_ = nullptr;

 private:
  std::atomic<void*>& overflow_slot(std::size_t index) noexcept;
  std::byte* start_slab(std::size_t block_class);
  void stop_carving(std::size_t block_class) noexcept;
  void adopt_orphans() noexcept;
  void orphan_retired(std::size_t block_class) noexcept;
  void spill_buffer() noexcept;
  void list_retired(std::size_t block_class, reclaimable* node) noexcept;
  bool collect_hazards() noexcept;
  bool is_protected(const void* node) const noexcept;
  std::size_t reclaim_listed(std::size_t block_class, slab_returns& returns) noexcept;
  std::size_t reclaim_buffered(slab_returns& returns) noexcept;

  // Retired nodes not yet listed, each tagged with its block class in the low bits that block
  // alignment leaves free. Enough that with up to 24 threads every scan finds them all here.
  static constexpr std::size_t kRetireBuffer = 256;
  static constexpr std::uintptr_t kClassMask = 15;
  static_assert(kBlockClassCount <= kClassMask + 1 && kClassMask < cache_line_size);

  alignas(cache_line_size) std::size_t depth_ = 0;  // slots in use
  std::size_t retired_total_ = 0;                   // buffered and listed
  std::size_t scan_threshold_ = 0;
  std::array<std::uintptr_t, kRetireBuffer> retire_buffer_;
  std::size_t buffered_ = 0;
  std::array<class_cache, kBlockClassCount> caches_{};
  std::unique_ptr<const void*[]> hazards_;  // scan()'s sorted snapshot of published hazards
  std::size_t hazard_count_ = 0;
  std::size_t hazard_capacity_ = 0;
};

/// The calling thread's record: null before its first operation and after it has exited.
inline constinit thread_local hazard_record* tls_record = nullptr;

/// Claims a record for the calling thread: the slow path of local_record(). Calls std::terminate
/// if a new record (about 3 KB, once per thread) cannot be allocated.
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

  /// Publishes `node` for a caller that reads it only after a successful CAS on the location
  /// whose next change unlinks it (a queue's head, when `node` is the first element). Whoever
  /// then unlinks, retires and scans the node is ordered after that CAS, so a plain release
  /// store suffices: no locked instruction.
  template <typename Node>
  void publish_before_cas(Node* node) noexcept {
    // release: the caller's successful CAS carries this store to the thread whose later CAS
    // unlinks the node, and on to the scan that loads this slot.
    slot_.store(static_cast<reclaimable*>(node), std::memory_order_release);
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
