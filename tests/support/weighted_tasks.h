#pragma once

#include <atomic>
#include <latch>
#include <memory>

namespace cyan::test {

/// Closures that return a value, for tests of the executors' post forms (which ignore it): each
/// adds its weight to the sum and counts the latch down once. Distinct weights make the final
/// sum show a lost or doubled task. `sum` may be touched from any thread.
class weighted_tasks {
 public:
  explicit weighted_tasks(std::ptrdiff_t count) : done_(count) {}

  /// A copyable closure that returns an int.
  auto returning_int(int weight) {
    return [this, weight] {
      add(weight);
      return weight;
    };
  }

  /// A move-only closure (it owns a unique_ptr) that returns that unique_ptr.
  auto move_only(int weight) {
    return [this, owned = std::make_unique<int>(weight)]() mutable {
      add(*owned);
      return std::move(owned);
    };
  }

  /// Waits until every task ran, then returns the sum of their weights.
  int wait_for_sum() {
    done_.wait();
    return sum_.load();
  }

 private:
  void add(int weight) {
    sum_.fetch_add(weight);
    done_.count_down();
  }

  std::atomic<int> sum_{ 0 };
  std::latch done_;
};

}  // namespace cyan::test
