#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "cyan/common/noncopyable.h"
#include "cyan/lockfree/detail/block_class.h"
#include "cyan/lockfree/detail/hazard_record.h"

namespace cyan::lockfree::detail {

/// Node blocks of `block_class` in slabs currently taken from the system allocator: holding
/// nodes, retired, or free in a slab that is being carved, partly returned or pooled. [any thread]
[[nodiscard]] std::int64_t system_blocks(std::size_t block_class) noexcept;

/// Reclaims the calling thread's retired nodes (and orphans of exited threads) that no hazard
/// slot holds, gives back the rest of the slabs it is carving, and returns the pooled free slabs
/// that no live container reserved to the system. Once every other thread that used a container
/// has exited, system_blocks() then counts only reservations and the slabs holding nodes of live
/// containers. For tests and for programs trimming memory. [any thread]
void release_cached_nodes() noexcept;

/// Adds to the process-wide pool of `block_class` room for, and free slabs holding, at least
/// `nodes` more nodes, kept until release_reservation(). Returns the slabs reserved. Throws
/// std::bad_alloc (and then reserves nothing). [any thread]
std::size_t reserve_nodes(std::size_t block_class, std::size_t nodes);

/// Takes back `slabs` reserved by reserve_nodes(); pooled slabs beyond what is still reserved go
/// back to the system. [any thread]
void release_reservation(std::size_t block_class, std::size_t slabs) noexcept;

/// Retired nodes at which a thread scans the hazard slots: 64 + 2 × the hazard slots in the
/// process (4 per thread alive, more only while operations nest). [any thread]
[[nodiscard]] std::size_t scan_threshold() noexcept;

/// The most node blocks of `block_class` that a container's traffic leaves allocated once the
/// container is drained and the `threads` that used it are idle, beyond the slabs holding its
/// own nodes (a queue's dummy) and beyond reservations (reserve_nodes()): per thread, the slab it
/// is carving and at most scan_threshold() - 1 slabs pinned by its retired nodes; plus
/// kSharedSlabs pooled slabs. A
/// slab holds usable_blocks() nodes (63 for nodes up to 1 KiB). The bound assumes every retired
/// node in its own slab; a FIFO drain leaves its few retired nodes in one or two. [any thread]
[[nodiscard]] inline std::size_t retention_bound(std::size_t block_class,
                                                 std::size_t threads) noexcept {
  return usable_blocks(block_class) * (threads * scan_threshold() + kSharedSlabs);
}

/// Node allocation and reclamation for one node type, through the calling thread's record.
template <typename Node>
struct node_pool {
  static_assert(std::is_base_of_v<reclaimable, Node>);
  static_assert(std::is_trivially_destructible_v<Node>, "values are destroyed explicitly");
  static constexpr std::size_t kBlockClass = block_class_for(sizeof(Node), alignof(Node));
  static_assert(kBlockClass < kBlockClassCount, "element type too large for a lock-free node");

  /// A node with an unconstructed value. Throws std::bad_alloc.
  static Node* create(hazard_record& record) { return ::new (record.allocate(kBlockClass)) Node; }

  /// A node holding a value constructed from `args`. Throws std::bad_alloc or what that
  /// constructor throws, and then has allocated nothing.
  template <typename... Args>
  static Node* create_with_value(hazard_record& record, Args&&... args) {
    Node* fresh = create(record);
    try {
      fresh->value_.construct(std::forward<Args>(args)...);
    } catch (...) {
      destroy(record, fresh);  // never published
      throw;
    }
    return fresh;
  }

  /// Gives back a node that no other thread can reach (never published, or its container is
  /// being destroyed).
  static void destroy(hazard_record& record, Node* node) noexcept {
    record.deallocate(kBlockClass, node);
  }

  /// Gives back an unlinked node once no other thread can be reading it.
  static void retire(hazard_record& record, Node* node) noexcept {
    record.retire(kBlockClass, node);
  }
};

/// Retires the node a pop unlinked (if any) when the pop ends, however it ends. Declared before
/// the pop's hazard guards, so it runs after they are cleared and the node can be reclaimed in
/// the same scan.
template <typename Node>
class retire_on_exit : noncopyable {
 public:
  explicit retire_on_exit(hazard_record& record) noexcept : record_(record) {}
  ~retire_on_exit() {
    if (unlinked_ != nullptr) {
      node_pool<Node>::retire(record_, unlinked_);
    }
  }

  Node* unlinked_ = nullptr;

 private:
  hazard_record& record_;
};

}  // namespace cyan::lockfree::detail
