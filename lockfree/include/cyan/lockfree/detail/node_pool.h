#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "cyan/common/noncopyable.h"
#include "cyan/lockfree/detail/block_class.h"
#include "cyan/lockfree/detail/hazard_record.h"

namespace cyan::lockfree::detail {

/// Blocks of `block_class` currently taken from the system allocator: in containers, retired,
/// cached by threads or pooled. [any thread]
[[nodiscard]] std::int64_t system_blocks(std::size_t block_class) noexcept;

/// Reclaims the calling thread's retired nodes (and orphans of exited threads) that no hazard
/// slot holds, and returns its cached blocks and the shared pool to the system. Once every other
/// thread that used a container has exited, system_blocks() then counts exactly the nodes still
/// linked in live containers. For tests and for programs trimming memory. [any thread]
void release_cached_nodes() noexcept;

/// Retired nodes at which a thread scans the hazard slots: 64 + 2 × the hazard slots in the
/// process (4 per thread alive, more only while operations nest). [any thread]
[[nodiscard]] std::size_t scan_threshold() noexcept;

/// The most blocks of `block_class` that a container's traffic leaves allocated once it is
/// drained and the threads using it are idle, beyond the nodes it holds: per thread, fewer than
/// scan_threshold() retired nodes and kCachedBatches batches of free blocks; plus kSharedBatches
/// batches in the shared pool. With a 64-block batch, 1 thread and 17 records that is at most
/// 1 × (199 + 128) + 512 = 839 blocks. [any thread]
[[nodiscard]] inline std::size_t retention_bound(std::size_t block_class,
                                                 std::size_t threads) noexcept {
  const std::size_t per_thread = scan_threshold() - 1 + kCachedBatches * batch_blocks(block_class);
  return threads * per_thread + kSharedBatches * batch_blocks(block_class);
}

/// Node allocation and reclamation for one node type, through the calling thread's record.
template <typename Node>
struct node_pool {
  static_assert(std::is_base_of_v<reclaimable, Node>);
  static_assert(std::is_trivially_destructible_v<Node>, "values are destroyed explicitly");
  static constexpr std::size_t kBlockClass = block_class_for(sizeof(Node), alignof(Node));
  static_assert(kBlockClass < kBlockClassCount, "element type too large for a lock-free node");
  static_assert(alignof(Node) <= kMaxBlockAlign, "element type over-aligned for a lock-free node");

  /// A node with an unconstructed value. Throws std::bad_alloc.
  static Node* create(hazard_record& record) { return ::new (record.allocate(kBlockClass)) Node; }

  /// Frees a node that no other thread can reach (never published, or its container is dying).
  static void destroy(hazard_record& record, Node* node) noexcept {
    record.deallocate(kBlockClass, node);
  }

  /// Frees an unlinked node once no other thread can be reading it.
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
