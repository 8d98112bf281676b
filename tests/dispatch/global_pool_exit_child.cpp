// Helper program for global_pool_exit_test: posts work on the global pool and returns from
// main while much of it is still queued. Expect exit status 0 and "ran N of N" on stdout,
// printed by an atexit handler that runs after the pool's drain (it was registered first).

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "cyan/dispatch.h"

namespace {

constexpr int kPlainTasks = 10000;
constexpr int kTokenTasks = 500;
constexpr int kAwaitableTasks = 500;
constexpr int kExpected = kPlainTasks + kTokenTasks + kAwaitableTasks;

std::atomic<int> ran{ 0 };

// About 20 µs of work, so that most tasks are still queued when main returns.
void work() {
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
  while (std::chrono::steady_clock::now() < until) {
  }
  ran.fetch_add(1, std::memory_order_relaxed);
}

void report() {
  std::printf("ran %d of %d\n", ran.load(), kExpected);
  std::fflush(stdout);
}

}  // namespace

int main() {
  std::atexit(&report);
  cyan::dispatch::serial_token token;
  for (int i = 0; i < kPlainTasks; ++i) {
    cyan::dispatch::async(&work);
  }
  for (int i = 0; i < kTokenTasks; ++i) {
    cyan::dispatch::async(token, &work);
  }
  for (int i = 0; i < kAwaitableTasks; ++i) {
    (void)cyan::dispatch::async_awaitable(&work);  // the future is dropped at once
  }
  cyan::dispatch::async(&work, std::chrono::hours(1));  // cancelled at exit, not waited for
  return 0;
}
