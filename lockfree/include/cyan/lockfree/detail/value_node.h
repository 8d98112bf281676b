#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

#include "cyan/common/noncopyable.h"
#include "cyan/lockfree/detail/hazard_record.h"

namespace cyan::lockfree::detail {

/// Raw storage for one T: constructed by the producer before the node is published, moved out and
/// destroyed only by the consumer that unlinked the node, so a consumer that lost the race never
/// touches the value.
template <typename T>
class value_storage {
 public:
  template <typename... Args>
  void construct(Args&&... args) noexcept(std::is_nothrow_constructible_v<T, Args...>) {
    ::new (static_cast<void*>(bytes_)) T(std::forward<Args>(args)...);
  }
  T& get() noexcept { return *std::launder(reinterpret_cast<T*>(bytes_)); }
  void destroy() noexcept { std::destroy_at(&get()); }

 private:
  alignas(T) std::byte bytes_[sizeof(T)];
};

/// Destroys a stored value when the scope ends, even by an exception from the code that moves it.
template <typename T>
class destroy_on_exit : noncopyable {
 public:
  explicit destroy_on_exit(value_storage<T>& value) noexcept : value_(value) {}
  ~destroy_on_exit() { value_.destroy(); }

 private:
  value_storage<T>& value_;
};

/// A Michael–Scott queue node. The first node of a queue is a dummy whose value was already taken
/// (or never existed); `next_` never changes once it is non-null.
template <typename T>
struct queue_node : reclaimable {
  std::atomic<queue_node*> next_{ nullptr };
  value_storage<T> value_;
};

/// A Treiber stack node. `next_` is written only before the node is published.
template <typename T>
struct stack_node : reclaimable {
  stack_node* next_ = nullptr;
  value_storage<T> value_;
};

}  // namespace cyan::lockfree::detail
