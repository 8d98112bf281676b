#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <iterator>
#include <limits>
#include <memory>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace cyan::lockfree::detail {

/// `requested` rounded up to a power of two. Throws std::invalid_argument for 0 and
/// std::length_error when that many slots of `slot_size` bytes cannot be addressed.
inline std::size_t ring_capacity(std::size_t requested, std::size_t slot_size) {
  if (requested == 0) {
    throw std::invalid_argument("cyan::lockfree::spsc_ring: capacity must be at least 1");
  }
  const std::size_t largest = std::bit_floor(std::numeric_limits<std::size_t>::max() / slot_size);
  if (requested > largest) {
    throw std::length_error("cyan::lockfree::spsc_ring: capacity too large");
  }
  return std::bit_ceil(requested);
}

/// `bytes` rounded up to a multiple of `alignment` (a power of two).
constexpr std::size_t round_up(std::size_t bytes, std::size_t alignment) noexcept {
  return (bytes + alignment - 1) & ~(alignment - 1);
}

/// Stores `value` into `index` when the scope ends, also by an exception: a batch call publishes
/// exactly the elements it finished. release: pairs with the other side's acquire load of
/// `index` (spsc_ring::ready() for tail, spsc_ring::free_slots() for head).
class publish_index_on_exit {
 public:
  publish_index_on_exit(std::atomic<std::size_t>& index, const std::size_t& value) noexcept
      : index_(index), value_(value) {}
  publish_index_on_exit(const publish_index_on_exit&) = delete;
  publish_index_on_exit& operator=(const publish_index_on_exit&) = delete;
  ~publish_index_on_exit() { index_.store(value_, std::memory_order_release); }

 private:
  std::atomic<std::size_t>& index_;
  const std::size_t& value_;
};

/// Destroys `item` when the scope ends, also when the consumer's callback throws.
template <typename T>
struct destroy_element_on_exit {
  explicit destroy_element_on_exit(T* element) noexcept : item(element) {}
  destroy_element_on_exit(const destroy_element_on_exit&) = delete;
  destroy_element_on_exit& operator=(const destroy_element_on_exit&) = delete;
  ~destroy_element_on_exit() { std::destroy_at(item); }

  T* const item;
};

/// Whether try_push_n() from an `It` can throw: constructing a T from *it, or stepping it.
template <typename T, typename It>
inline constexpr bool nothrow_push_from =
    std::is_nothrow_constructible_v<T, std::iter_reference_t<It>>&& noexcept(
        *std::declval<It&>()) && noexcept(++std::declval<It&>());

/// Whether pop_n() into an `Out` can throw: assigning a T&& through it, or stepping it.
template <typename T, typename Out>
inline constexpr bool nothrow_pop_into =
    noexcept(*std::declval<Out&>() = std::declval<T&&>()) && noexcept(++std::declval<Out&>());

}  // namespace cyan::lockfree::detail
