#include "cyan/dispatch/async.h"

#include <cstdlib>
#include <utility>

namespace cyan::dispatch {
namespace {

thread_pool* global_pool = nullptr;  // set once, by the first global_concurrent_pool() call

// Registered with atexit() right after the pool is created, so it runs before the destructors
// of every static object that existed when the pool was first used. On one of the pool's own
// workers (exit() called from a task) it cannot join: the process ends around it.
void drain_global_pool() {
  global_pool->stop(stop_mode::drain);
  if (!global_pool->is_current()) {
    global_pool->join();
  }
}

thread_pool* create_global_pool() {
  thread_pool_options options;
  options.name = "cyan-global";
  global_pool = new thread_pool(thread_pool::default_size(), std::move(options));
  std::atexit(&drain_global_pool);
  return global_pool;
}

}  // namespace

thread_pool& global_concurrent_pool() {
  static thread_pool* const pool = create_global_pool();
  return *pool;
}

}  // namespace cyan::dispatch
