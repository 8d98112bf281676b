#pragma once

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace cyan::lockfree::detail {

/// Debug check for one side of a single-producer or single-consumer structure: remembers the
/// first thread that called `check()` and, when NDEBUG is not defined, aborts with a message if
/// another thread calls it later. With NDEBUG, `check()` does nothing. The member exists in both
/// builds so that the owning class has the same layout either way.
class thread_owner {
 public:
  /// `structure` and `role` name the side in the abort message, e.g. "spsc_ring", "producer".
  void check([[maybe_unused]] const char* structure, [[maybe_unused]] const char* role) noexcept {
#ifndef NDEBUG
    const std::thread::id self = std::this_thread::get_id();
    // relaxed: the id guards no other data; it is only compared with the caller's own id.
    std::thread::id owner = owner_.load(std::memory_order_relaxed);
    if (owner == self) {
      return;
    }
    if (owner == std::thread::id{} &&
        owner_.compare_exchange_strong(owner, self, std::memory_order_relaxed)) {
      return;
    }
    abort_second_thread(structure, role);
#endif
  }

 private:
  [[noreturn]] static void abort_second_thread(const char* structure, const char* role) noexcept {
    std::fprintf(stderr,
                 "cyan::lockfree::%s: called from a second %s thread; only one thread may act "
                 "as the %s (the first thread that did stays the %s)\n",
                 structure, role, role, role);
    std::abort();
  }

  std::atomic<std::thread::id> owner_{};
};

}  // namespace cyan::lockfree::detail
