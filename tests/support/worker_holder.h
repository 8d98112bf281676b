#pragma once

#include <latch>

#include "cyan/dispatch/thread_pool.h"

namespace cyan::test {

/// Holds one worker of `pool` in a task posted from outside until release() (or destruction):
/// on a one-worker pool tasks posted meanwhile queue behind it; on a larger pool that worker is
/// busy (it neither runs nor steals anything else) while the others work.
class worker_holder {
 public:
  explicit worker_holder(cyan::dispatch::thread_pool& pool) {
    pool.post([this] {
      holding_.count_down();
      release_.wait();
    });
    holding_.wait();
  }
  worker_holder(const worker_holder&) = delete;
  worker_holder& operator=(const worker_holder&) = delete;
  ~worker_holder() { release(); }

  /// Lets the held task return. [the thread that made the holder]
  void release() {
    if (!released_) {
      released_ = true;
      release_.count_down();
    }
  }

 private:
  std::latch holding_{ 1 };
  std::latch release_{ 1 };
  bool released_ = false;
};

}  // namespace cyan::test
