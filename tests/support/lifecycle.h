#pragma once

#include <atomic>
#include <cstdint>
#include <stdexcept>

namespace cyan::test {

/// An element that counts its own constructions and destructions, so a test can prove that a
/// container created and destroyed every element exactly once. Safe to use from many threads.
/// `value` survives a move; the moved-from object keeps value -1 so a double move shows up.
class lifecycle {
 public:
  static inline std::atomic<std::int64_t> constructed{ 0 };
  static inline std::atomic<std::int64_t> destroyed{ 0 };
  /// When > 0, the n-th construction from now (counting down to zero) throws.
  static inline std::atomic<std::int64_t> throw_countdown{ 0 };

  static std::int64_t live() { return constructed.load() - destroyed.load(); }
  static void reset() {
    constructed = 0;
    destroyed = 0;
    throw_countdown = 0;
  }

  explicit lifecycle(std::int64_t v = 0) : value(v) { count_construction(); }
  lifecycle(const lifecycle& other) : value(other.value) { count_construction(); }
  lifecycle(lifecycle&& other) : value(other.value) {
    count_construction();
    other.value = -1;
  }
  lifecycle& operator=(const lifecycle&) = default;
  lifecycle& operator=(lifecycle&& other) noexcept {
    value = other.value;
    other.value = -1;
    return *this;
  }
  ~lifecycle() { destroyed.fetch_add(1, std::memory_order_relaxed); }

  std::int64_t value;

 private:
  static void count_construction() {
    if (throw_countdown.load() > 0 && throw_countdown.fetch_sub(1) == 1) {
      throw std::runtime_error("lifecycle: construction failed on purpose");
    }
    constructed.fetch_add(1, std::memory_order_relaxed);
  }
};

}  // namespace cyan::test
