#pragma once

// A ring of tasks busy handing items to each other through channels, for the tests of
// stop(discard) (thread_pool_test, handler_thread_test): the stop comes while they wait on and
// wake each other, and each must be destroyed at its next resumption without running more of
// it — no catch block runs, and its future reports task_cancelled.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <exception>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "cyan/dispatch/channel.h"
#include "cyan/dispatch/co_spawn.h"
#include "cyan/dispatch/future.h"
#include "cyan/dispatch/task.h"

namespace cyan::test {

class discard_ring {
 public:
  /// `tasks` tasks and as many channels of capacity 1, half of them holding an item.
  explicit discard_ring(std::size_t tasks) {
    for (std::size_t i = 0; i < tasks; ++i) {
      channels_.push_back(std::make_unique<cyan::dispatch::channel<int>>(1));
    }
    for (std::size_t i = 0; i < tasks; i += 2) {
      (void)channels_[i]->try_send(0);
    }
  }

  /// Spawns task `i` of the ring on `executor`: it receives from channel i, sends to i + 1.
  template <typename Executor>
  void spawn(Executor& executor, std::size_t i) {
    cyan::dispatch::channel<int>& in = *channels_[i];
    cyan::dispatch::channel<int>& out = *channels_[(i + 1) % channels_.size()];
    results_.push_back(cyan::dispatch::co_spawn(
        executor, [this, &in, &out] { return pass_on(in, out, caught_, passes_); }));
  }

  /// Returns once the ring has passed `passes` items on (or 10 s went by: a bound for a loaded
  /// machine, not a deadline), so that a stop comes while it is busy.
  void wait_until_busy(long passes) const {
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (passes_.load() < passes && std::chrono::steady_clock::now() < limit) {
      std::this_thread::yield();
    }
  }

  /// After the executors stopped and joined: how many tasks ran a catch block (must be 0),
  /// and how many futures reported something else than task_cancelled (must be 0).
  [[nodiscard]] int caught() const noexcept { return caught_.load(); }
  [[nodiscard]] int not_task_cancelled() {
    int wrong = 0;
    for (auto& result : results_) {
      try {
        result.get();
        ++wrong;
      } catch (const cyan::dispatch::task_cancelled&) {
      } catch (...) {
        ++wrong;
      }
    }
    return wrong;
  }

 private:
  // Bounded: far more passes than a round makes before its stop.
  static constexpr int kMaxPasses = 100'000'000;

  static cyan::dispatch::task<> pass_on(cyan::dispatch::channel<int>& in,
                                        cyan::dispatch::channel<int>& out, std::atomic<int>& caught,
                                        std::atomic<long>& passes) {
    try {
      for (int i = 0; i < kMaxPasses; ++i) {
        const std::optional<int> item = co_await in.receive();
        passes.fetch_add(1, std::memory_order_relaxed);
        co_await out.send(*item + 1);
      }
    } catch (...) {
      caught.fetch_add(1);  // runs only if the task went on after the discard
      throw;
    }
  }

  std::vector<std::unique_ptr<cyan::dispatch::channel<int>>> channels_;
  std::vector<cyan::dispatch::future<void>> results_;
  std::atomic<int> caught_{ 0 };
  std::atomic<long> passes_{ 0 };
};

}  // namespace cyan::test
